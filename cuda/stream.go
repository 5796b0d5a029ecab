package cuda

import (
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/sim"
)

// StreamFlags are cuStreamCreate's flags.
type StreamFlags uint32

// StreamNonBlocking is CU_STREAM_NON_BLOCKING: no implicit
// synchronisation with the legacy default stream.
const StreamNonBlocking StreamFlags = 0x1

// Stream is a CUstream of a context: the GPU model's stream
// (gpu.Stream: in-order work, the legacy default stream's implicit
// synchronisation) with the context it belongs to. A nil *Stream given
// to a call means the legacy default stream (CUstream 0).
type Stream struct {
	ctx   *Context
	s     *gpu.Stream
	flags StreamFlags
}

// StreamCreate is cuStreamCreate.
func (c *Context) StreamCreate(flags StreamFlags) (*Stream, error) {
	const call = "cuStreamCreate"
	if err := c.check(call); err != nil {
		return nil, err
	}
	if flags&^StreamNonBlocking != 0 {
		return nil, failf(call, ErrorInvalidValue, "flags %#x", flags)
	}
	var gf gpu.StreamFlags
	if flags&StreamNonBlocking != 0 {
		gf = gpu.StreamNonBlocking
	}
	s := &Stream{ctx: c, s: c.dev.NewStream(gf), flags: flags}
	c.d.streams[c.dev.Index] = append(c.d.streams[c.dev.Index], s)
	return s, nil
}

// DefaultStream is the legacy default stream of the context's GPU.
func (c *Context) DefaultStream() *Stream { return c.legacy }

// stream is s, or the legacy default stream for nil; a stream of another
// context's GPU, or of a destroyed context, is CUDA_ERROR_INVALID_HANDLE.
func (c *Context) stream(call string, s *Stream) (*Stream, error) {
	if err := c.check(call); err != nil {
		return nil, err
	}
	if s == nil {
		return c.legacy, nil
	}
	if s.ctx.gone || s.ctx.dev != c.dev {
		return nil, failf(call, ErrorInvalidHandle, "stream of another GPU or a destroyed context")
	}
	return s, nil
}

// GPU is the GPU model's stream.
func (s *Stream) GPU() *gpu.Stream { return s.s }

// Synchronize is cuStreamSynchronize.
func (s *Stream) Synchronize(p *sim.Proc) error {
	if err := s.ctx.check("cuStreamSynchronize"); err != nil {
		return err
	}
	s.s.Synchronize(p)
	s.ctx.d.synced(s.ctx.dev.Index)
	return nil
}

// Query is cuStreamQuery: nil when the work enqueued so far is done,
// else CUDA_ERROR_NOT_READY.
func (s *Stream) Query() error {
	if s.s.Query() {
		return nil
	}
	return failf("cuStreamQuery", ErrorNotReady, "%s has work in flight", s.s.Name())
}

// Destroy is cuStreamDestroy.
func (s *Stream) Destroy() error {
	const call = "cuStreamDestroy"
	if err := s.ctx.check(call); err != nil {
		return err
	}
	if err := s.s.Destroy(); err != nil {
		return wrap(call, err)
	}
	l := s.ctx.d.streams[s.ctx.dev.Index]
	for i, x := range l {
		if x == s {
			s.ctx.d.streams[s.ctx.dev.Index] = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	return nil
}

// WaitEvent is cuStreamWaitEvent.
func (s *Stream) WaitEvent(p *sim.Proc, e *Event) error {
	const call = "cuStreamWaitEvent"
	if err := s.ctx.check(call); err != nil {
		return err
	}
	if e == nil {
		return failf(call, ErrorInvalidHandle, "nil event")
	}
	return wrap(call, s.s.WaitEvent(p, e.e))
}

// LaunchHostFunc is cuLaunchHostFunc (gpu.Stream.LaunchHostFunc).
func (s *Stream) LaunchHostFunc(p *sim.Proc, name string, fn func(p *sim.Proc)) error {
	const call = "cuLaunchHostFunc"
	if err := s.ctx.check(call); err != nil {
		return err
	}
	return wrap(call, s.s.LaunchHostFunc(p, name, fn))
}

// EventFlags are cuEventCreate's flags (CU_EVENT_*).
type EventFlags uint32

const (
	EventBlockingSync  EventFlags = 0x1 // CU_EVENT_BLOCKING_SYNC
	EventDisableTiming EventFlags = 0x2 // CU_EVENT_DISABLE_TIMING
)

// Event is a CUevent (gpu.Event).
type Event struct {
	ctx *Context
	e   *gpu.Event
}

// EventCreate is cuEventCreate.
func (c *Context) EventCreate(flags EventFlags) (*Event, error) {
	const call = "cuEventCreate"
	if err := c.check(call); err != nil {
		return nil, err
	}
	if flags&^(EventBlockingSync|EventDisableTiming) != 0 {
		return nil, failf(call, ErrorInvalidValue, "flags %#x (CU_EVENT_INTERPROCESS is not modelled)", flags)
	}
	return &Event{ctx: c, e: c.d.sys.NewEvent(gpu.EventFlags(flags))}, nil
}

// Record is cuEventRecord on stream s (nil: the legacy default stream).
func (e *Event) Record(p *sim.Proc, s *Stream) error {
	const call = "cuEventRecord"
	st, err := e.ctx.stream(call, s)
	if err != nil {
		return err
	}
	return wrap(call, e.e.Record(p, st.s))
}

// Synchronize is cuEventSynchronize.
func (e *Event) Synchronize(p *sim.Proc) error {
	if err := e.ctx.check("cuEventSynchronize"); err != nil {
		return err
	}
	e.e.Synchronize(p)
	e.ctx.d.synced(e.ctx.dev.Index)
	return nil
}

// Query is cuEventQuery: nil when the event's last record has
// completed, else CUDA_ERROR_NOT_READY.
func (e *Event) Query() error {
	if e.e.Query() {
		return nil
	}
	return failf("cuEventQuery", ErrorNotReady, "event not completed")
}

// EventElapsedTime is cuEventElapsedTime: milliseconds between two
// completed events, as a float32 as CUDA gives it (the model's exact
// time is gpu.ElapsedTime's).
func EventElapsedTime(start, end *Event) (float32, error) {
	const call = "cuEventElapsedTime"
	if start == nil || end == nil {
		return 0, failf(call, ErrorInvalidHandle, "nil event")
	}
	t, err := gpu.ElapsedTime(start.e, end.e)
	if err != nil {
		return 0, wrap(call, err)
	}
	return float32(t.Seconds() * 1e3), nil
}

package gpu

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// EnqueueCost is the host time of one asynchronous driver call
// (cuLaunchKernel, cuMemcpyAsync, cuEventRecord, cuStreamWaitEvent,
// cuLaunchHostFunc): building the push-buffer entry and ringing the
// doorbell. Assumed: 1 µs, so that with KernelLaunchLatency a launch
// and its completion add up to the 3.2 µs empty kernel launch measured
// on the H200 machine (2026-11-21). A trivial call through the binding
// measured 0.232 µs there (probe call_overhead), a floor. A
// back-to-back launch loop measures this part alone; nobody has yet.
const EnqueueCost = 1 * sim.Microsecond

// StreamFlags are cuStreamCreate's flags.
type StreamFlags uint8

// StreamNonBlocking (CU_STREAM_NON_BLOCKING): work in the stream does
// not synchronise with the legacy default stream.
const StreamNonBlocking StreamFlags = 1

// Stream is a CUDA stream: work items (copies, kernels, event records,
// event waits, host functions) that run on the GPU in the order they
// were enqueued, asynchronously to the host; work in different streams
// runs concurrently, competing for copy engines, SMs and links.
//
// Each stream's work runs on a worker process (named after the stream)
// that exists while the stream has work: it starts when work is
// enqueued into an idle stream and ends when the queue is empty, so an
// idle stream never shows as blocked at the end of a run.
//
// The default stream (ID 0) has the legacy semantics
// (CU_STREAM_LEGACY, what nvcc builds without --default-stream
// per-thread): work enqueued into it first waits for all work already
// enqueued into the device's blocking streams, and work enqueued into a
// blocking stream afterwards waits for it. Streams created with
// StreamNonBlocking are exempt both ways. The per-thread default stream
// (CU_STREAM_PER_THREAD) is not modelled: it is an ordinary blocking
// stream per host thread, which a program gets with NewStream.
type Stream struct {
	dev   *Device
	id    int
	flags StreamFlags
	name  string

	queue     []*op
	tail      *sim.Completion // done of the last work enqueued
	running   bool            // a worker is alive
	destroyed bool
}

// op is one work item of a stream.
type op struct {
	deps []*sim.Completion
	done *sim.Completion
	run  func(p *sim.Proc)
	act  Activity
}

// DefaultStream is the legacy default stream (the NULL stream).
func (d *Device) DefaultStream() *Stream { return d.legacy }

// NewStream is cuStreamCreate.
func (d *Device) NewStream(flags StreamFlags) *Stream {
	d.nextStream++
	s := &Stream{dev: d, id: d.nextStream, flags: flags, name: fmt.Sprintf("%s.stream%d", d.Name, d.nextStream)}
	d.streams = append(d.streams, s)
	return s
}

// ID is the stream's number on its device: 0 for the default stream,
// then 1, 2, ... in creation order.
func (s *Stream) ID() int { return s.id }

// Device is the stream's GPU.
func (s *Stream) Device() *Device { return s.dev }

// Name is the stream's name, as its worker process and trace track
// have it ("gpu0.stream1").
func (s *Stream) Name() string { return s.name }

// Destroy is cuStreamDestroy: it returns at once; work already enqueued
// still runs. Destroying the default stream, or twice, is
// ErrInvalidHandle.
func (s *Stream) Destroy() error {
	if s == s.dev.legacy || s.destroyed {
		return fmt.Errorf("gpu: destroy %s: %w", s.name, ErrInvalidHandle)
	}
	s.destroyed = true
	if !s.running {
		s.dev.drop(s)
	}
	return nil
}

func (d *Device) drop(s *Stream) {
	if i := slices.Index(d.streams, s); i >= 0 {
		d.streams = slices.Delete(d.streams, i, i+1)
	}
}

// Query is cuStreamQuery: whether all work enqueued so far is done.
func (s *Stream) Query() bool { return s.tail == nil || s.tail.Done() }

// Synchronize is cuStreamSynchronize: p blocks until the work enqueued
// so far is done. The host thread sleeps meanwhile
// (CU_CTX_SCHED_BLOCKING_SYNC): no CPU time is charged. Spinning, the
// driver's default while there are fewer contexts than cores, would
// burn CPU for the whole wait; the model does not charge it.
func (s *Stream) Synchronize(p *sim.Proc) {
	if s.tail != nil {
		p.Wait(s.tail)
	}
}

// Synchronize is cuCtxSynchronize: p blocks until all work enqueued so
// far on the device's streams is done.
func (d *Device) Synchronize(p *sim.Proc) {
	var tails []*sim.Completion
	if d.legacy.tail != nil {
		tails = append(tails, d.legacy.tail)
	}
	for _, s := range d.streams {
		if s.tail != nil {
			tails = append(tails, s.tail)
		}
	}
	for _, c := range tails {
		p.Wait(c)
	}
}

// check is the common start of an enqueueing call: the host pays
// EnqueueCost, failed or not, and a destroyed stream takes no work.
func (s *Stream) check(p *sim.Proc, call string) error {
	p.Sleep(EnqueueCost)
	if s.destroyed {
		return fmt.Errorf("gpu: %s on %s: stream destroyed: %w", call, s.name, ErrInvalidHandle)
	}
	return nil
}

// enqueue appends o, with the legacy default stream's implicit
// dependencies, and wakes the stream's worker.
func (s *Stream) enqueue(p *sim.Proc, o *op) {
	d := s.dev
	e := p.Engine()
	switch {
	case s == d.legacy:
		for _, t := range d.streams {
			if t.flags&StreamNonBlocking == 0 && t.tail != nil && !t.tail.Done() {
				o.deps = append(o.deps, t.tail)
			}
		}
	case s.flags&StreamNonBlocking == 0:
		if l := d.legacy.tail; l != nil && !l.Done() {
			o.deps = append(o.deps, l)
		}
	}
	o.done = e.NewNamedCompletion(s.name + " " + o.act.Name)
	o.act.Device, o.act.Stream, o.act.Queued = d.Index, s.id, p.Now()
	s.queue = append(s.queue, o)
	s.tail = o.done
	if !s.running {
		s.running = true
		e.Spawn(s.name, s.work)
	}
}

// work is the stream's worker: it runs the queue in order, each item
// once its dependencies are done, and ends when the queue is empty.
func (s *Stream) work(p *sim.Proc) {
	for len(s.queue) > 0 {
		o := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		for _, c := range o.deps {
			p.Wait(c)
		}
		o.act.Start = p.Now()
		if o.run != nil {
			o.run(p)
		}
		o.act.End = p.Now()
		o.done.Complete()
		s.dev.sys.emit(o.act)
	}
	s.running = false
	if s.destroyed {
		s.dev.drop(s)
	}
}

// LaunchHostFunc is cuLaunchHostFunc: fn runs when the stream's earlier
// work is done, and later work waits for it to return. It runs on the
// stream's worker process (the driver's callback thread); like the real
// callback it must not call into the driver. The host pays EnqueueCost.
func (s *Stream) LaunchHostFunc(p *sim.Proc, name string, fn func(p *sim.Proc)) error {
	if err := s.check(p, "cuLaunchHostFunc"); err != nil {
		return err
	}
	s.enqueue(p, &op{run: fn, act: Activity{Kind: ActivityHostFunc, Name: name}})
	return nil
}

// EventFlags are cuEventCreate's flags.
type EventFlags uint8

const (
	// EventBlockingSync (CU_EVENT_BLOCKING_SYNC): Synchronize sleeps. The
	// model always does; the flag is kept for the façade.
	EventBlockingSync EventFlags = 0x1
	// EventDisableTiming (CU_EVENT_DISABLE_TIMING): ElapsedTime refuses
	// the event.
	EventDisableTiming EventFlags = 0x2
)

// Event is a CUDA event: a marker that Record puts in a stream and that
// completes when the stream reaches it. Its time is the virtual time at
// which it completed, exactly (CUDA's events have about 0.5 µs of
// resolution; the model's have a picosecond).
type Event struct {
	sys   *System
	id    int
	flags EventFlags
	// rec is the completion of the most recent Record; nil before the
	// first.
	rec *sim.Completion
}

// NewEvent is cuEventCreate.
func (s *System) NewEvent(flags EventFlags) *Event {
	s.nextEvent++
	return &Event{sys: s, id: s.nextEvent, flags: flags}
}

// Record is cuEventRecord: the event is reset and completes when the
// stream's work enqueued so far is done (and, on the legacy stream, the
// work it waits for). The host pays EnqueueCost.
func (e *Event) Record(p *sim.Proc, s *Stream) error {
	if err := s.check(p, "cuEventRecord"); err != nil {
		return err
	}
	o := &op{act: Activity{Kind: ActivityEventRecord, Name: fmt.Sprintf("event%d", e.id)}}
	s.enqueue(p, o)
	e.rec = o.done
	return nil
}

// Query is cuEventQuery: whether the most recent Record has completed
// (true for an event never recorded, as CUDA says CUDA_SUCCESS).
func (e *Event) Query() bool { return e.rec == nil || e.rec.Done() }

// Synchronize is cuEventSynchronize: p blocks until the most recent
// Record has completed; at once for an event never recorded.
func (e *Event) Synchronize(p *sim.Proc) {
	if e.rec != nil {
		p.Wait(e.rec)
	}
}

// Time is when the event's most recent Record completed; false before
// that.
func (e *Event) Time() (sim.Time, bool) {
	if e.rec == nil || !e.rec.Done() {
		return 0, false
	}
	return e.rec.At(), true
}

// ElapsedTime is cuEventElapsedTime: end's time minus start's, exactly
// (the façade converts to CUDA's float milliseconds). An event never
// recorded or created with EventDisableTiming is ErrInvalidHandle; one
// whose Record has not completed is ErrNotReady.
func ElapsedTime(start, end *Event) (sim.Time, error) {
	for _, e := range []*Event{start, end} {
		if e == nil || e.rec == nil || e.flags&EventDisableTiming != 0 {
			return 0, fmt.Errorf("gpu: cuEventElapsedTime: event not recorded or without timing: %w", ErrInvalidHandle)
		}
		if !e.rec.Done() {
			return 0, fmt.Errorf("gpu: cuEventElapsedTime: event%d not completed: %w", e.id, ErrNotReady)
		}
	}
	return end.rec.At() - start.rec.At(), nil
}

// WaitEvent is cuStreamWaitEvent: work enqueued into s from now on waits
// until e's most recent Record (at the time of this call) has
// completed. An event never recorded makes no wait. The host pays
// EnqueueCost.
func (s *Stream) WaitEvent(p *sim.Proc, e *Event) error {
	if err := s.check(p, "cuStreamWaitEvent"); err != nil {
		return err
	}
	o := &op{act: Activity{Kind: ActivityWaitEvent, Name: fmt.Sprintf("wait event%d", e.id)}}
	if e.rec != nil && !e.rec.Done() {
		o.deps = append(o.deps, e.rec)
	}
	s.enqueue(p, o)
	return nil
}

package dmabuf

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/sim"
)

// MaxScheduleTimeout is a wait without a timeout (MAX_SCHEDULE_TIMEOUT).
const MaxScheduleTimeout = sim.Forever

// ErrTimedOut is wrapped by a wait that ran out of time before the
// fences signalled: ETIME, what libsync's sync_wait and the DRM syncobj
// wait give user space (dma_fence_wait_timeout itself returns 0).
var ErrTimedOut = fmt.Errorf("fence wait timed out: %w", syscall.ETIME)

// ErrAlreadySignaled is wrapped by a second Signal (dma_fence_signal
// returns -EINVAL) and by AddCallback on a signalled fence (-ENOENT).
var ErrAlreadySignaled = fmt.Errorf("fence already signalled: %w", syscall.EINVAL)

// Fence is struct dma_fence: the completion of one piece of work on a
// timeline (a context), with a sequence number that orders it among
// that context's fences. It signals once; its callbacks run then, in
// the order they were added; processes wait for it in virtual time. An
// error set before the signal says the work failed (dma_fence_set_error).
type Fence struct {
	l *Layer
	// id is unique in the layer (events name fences by it).
	id               uint64
	context, seqno   uint64
	driver, timeline string
	signaled         bool
	at               sim.Time
	// errno is the error status, 0 for none.
	errno syscall.Errno
	cbs   []*Callback
	// parts are the fences of a fence array (dma_fence_array), nil for
	// a plain fence.
	parts []*Fence
}

// Callback is struct dma_fence_cb: a function to run when the fence
// signals.
type Callback struct {
	fn      func(*Fence)
	removed bool
}

// ContextAlloc is dma_fence_context_alloc(num): the first of num new
// fence contexts (timelines). Context 0 is the stub fence's.
func (l *Layer) ContextAlloc(num int) uint64 {
	first := l.ctx + 1
	l.ctx += uint64(max(num, 0))
	return first
}

// NewFence is dma_fence_init: an unsignalled fence of context with
// seqno; driver and timeline name it in messages (get_driver_name,
// get_timeline_name).
//
// The checker counts a device's or process's accesses to a buffer as
// the work of a fence in its reservation object, not a race with it,
// when the fence's timeline or driver is that device's or process's
// name: name the timeline after what does the work ("cam0", "isp0").
func (l *Layer) NewFence(driver, timeline string, context, seqno uint64) *Fence {
	l.fences++
	f := &Fence{l: l, id: l.fences, context: context, seqno: seqno, driver: driver, timeline: timeline}
	l.emit(nil, Event{Op: OpFenceInit, Fence: f.String(), FenceIDs: []uint64{f.id}, Context: context, Seqno: seqno})
	return f
}

// Stub is dma_fence_get_stub: a fence that is always signalled.
func (l *Layer) Stub() *Fence {
	l.fences++
	return &Fence{l: l, id: l.fences, driver: "stub", timeline: "stub", signaled: true}
}

// ID is the fence's number in its layer, unique where names
// (context:seqno) may not be: what events name it by.
func (f *Fence) ID() uint64 { return f.id }

// Driver and Timeline are the names the fence was made with
// (get_driver_name, get_timeline_name).
func (f *Fence) Driver() string { return f.driver }

// Timeline is the fence's timeline name.
func (f *Fence) Timeline() string { return f.timeline }

// NewArray is dma_fence_array_create (signal_on_any false): a fence of
// a new context that signals when every one of fences has, with the
// first error among them. No fences gives a signalled one.
func (l *Layer) NewArray(fences []*Fence) *Fence {
	a := l.NewFence("dma_fence_array", "unbound", l.ContextAlloc(1), 1)
	a.parts = append([]*Fence(nil), fences...)
	pending := 0
	for _, f := range fences {
		if !f.signaled {
			pending++
		}
	}
	done := func() {
		for _, f := range a.parts {
			if f.errno != 0 {
				a.errno = f.errno
				break
			}
		}
		a.signal(nil)
	}
	if pending == 0 {
		done()
		return a
	}
	for _, f := range fences {
		if !f.signaled {
			f.cbs = append(f.cbs, &Callback{fn: func(*Fence) {
				pending--
				if pending == 0 {
					done()
				}
			}})
		}
	}
	return a
}

// Context and Seqno place the fence on its timeline.
func (f *Fence) Context() uint64 { return f.context }

// Seqno is the fence's sequence number in its context.
func (f *Fence) Seqno() uint64 { return f.seqno }

// Parts are the fences of a fence array (dma_fence_unwrap), or the
// fence itself.
func (f *Fence) Parts() []*Fence {
	if f.parts == nil {
		return []*Fence{f}
	}
	return append([]*Fence(nil), f.parts...)
}

// String names the fence: "driver:timeline ctx:seq".
func (f *Fence) String() string {
	return fmt.Sprintf("%s:%s %d:%d", f.driver, f.timeline, f.context, f.seqno)
}

// IsLater is dma_fence_is_later: f comes after g on the same timeline.
func (f *Fence) IsLater(g *Fence) bool { return f.context == g.context && f.seqno > g.seqno }

// Signaled is dma_fence_is_signaled.
func (f *Fence) Signaled() bool { return f.signaled }

// SignaledAt is when the fence signalled; meaningful once Signaled.
func (f *Fence) SignaledAt() sim.Time { return f.at }

// SetError is dma_fence_set_error: the work failed with errno (a
// negative value in Linux; here the Errno). It must come before the
// signal (EINVAL after, where Linux WARNs) and be an error (EINVAL for
// 0).
func (f *Fence) SetError(errno syscall.Errno) error {
	switch {
	case f.signaled:
		return fmt.Errorf("dma_fence_set_error(%v, %v): %w", f, errno, ErrAlreadySignaled)
	case errno == 0:
		return fmt.Errorf("dma_fence_set_error(%v, 0): %w", f, syscall.EINVAL)
	}
	f.errno = errno
	return nil
}

// Status is dma_fence_get_status: 0 while pending, 1 once signalled
// without error, the negated errno once signalled with one.
func (f *Fence) Status() int {
	switch {
	case !f.signaled:
		return 0
	case f.errno != 0:
		return -int(f.errno)
	}
	return 1
}

// Err is the fence's error status as an error, nil without one.
func (f *Fence) Err() error {
	if f.errno == 0 {
		return nil
	}
	return f.errno
}

// Signal is dma_fence_signal, by thread p (nil for hardware: an
// interrupt handler): the fence is done, its waiters wake and its
// callbacks run now, in the order they were added. A second signal is
// an error (EINVAL) and changes nothing.
func (f *Fence) Signal(p *sim.Proc) error {
	if f.signaled {
		err := fmt.Errorf("dma_fence_signal(%v): %w", f, ErrAlreadySignaled)
		f.l.emit(p, Event{Op: OpFenceSignal, Fence: f.String(), FenceIDs: []uint64{f.id}}.fail(err))
		return err
	}
	f.signal(p)
	return nil
}

func (f *Fence) signal(p *sim.Proc) {
	f.signaled, f.at = true, f.l.eng.Now()
	cbs := f.cbs
	f.cbs = nil
	f.l.emit(p, Event{Op: OpFenceSignal, Fence: f.String(), FenceIDs: []uint64{f.id}})
	for _, cb := range cbs {
		if !cb.removed {
			cb.fn(f)
		}
	}
}

// AddCallback is dma_fence_add_callback: fn runs when f signals. On a
// signalled fence it is not added, and the error wraps
// ErrAlreadySignaled (Linux: -ENOENT).
func (f *Fence) AddCallback(fn func(*Fence)) (*Callback, error) {
	if f.signaled {
		return nil, fmt.Errorf("dma_fence_add_callback(%v): %w", f, syscall.ENOENT)
	}
	cb := &Callback{fn: fn}
	f.cbs = append(f.cbs, cb)
	return cb, nil
}

// RemoveCallback is dma_fence_remove_callback: false if cb already ran
// (or was removed).
func (f *Fence) RemoveCallback(cb *Callback) bool {
	if cb == nil || cb.removed || f.signaled {
		return false
	}
	cb.removed = true
	return true
}

// Wait is dma_fence_wait without a timeout.
func (f *Fence) Wait(p *sim.Proc) error {
	_, err := f.WaitTimeout(p, MaxScheduleTimeout)
	return err
}

// WaitTimeout is dma_fence_wait_timeout: process p blocks, in virtual
// time, until f signals or timeout passes. It returns the time left; a
// timeout is an error wrapping ErrTimedOut (ETIME). A timeout of 0
// only tests the fence.
func (f *Fence) WaitTimeout(p *sim.Proc, timeout sim.Time) (sim.Time, error) {
	start := p.Now()
	if !f.signaled && timeout > 0 {
		f.l.emit(p, Event{Header: sim.Header{Cause: sim.CauseQueue}, Op: OpFenceWaitBegin, Fence: f.String(), FenceIDs: []uint64{f.id}})
	}
	left, err := f.wait(p, timeout)
	if err != nil {
		err = fmt.Errorf("dma_fence_wait_timeout(%v, %v): %w", f, timeout, err)
	}
	f.l.emit(p, Event{Header: sim.Header{Cause: sim.CauseQueue}, Op: OpFenceWait, Fence: f.String(), FenceIDs: []uint64{f.id}, Waited: p.Now() - start}.fail(err))
	return left, err
}

// wait blocks p on f for at most timeout, without an event.
func (f *Fence) wait(p *sim.Proc, timeout sim.Time) (sim.Time, error) {
	if f.signaled {
		return timeout, nil
	}
	if timeout <= 0 {
		return 0, ErrTimedOut
	}
	eng := f.l.eng
	woken := eng.NewNamedCompletion("fence " + f.String())
	cb, _ := f.AddCallback(func(*Fence) {
		if !woken.Done() {
			woken.Complete()
		}
	})
	var timer sim.Handle
	// A timeout past the end of time is none (the engine cannot
	// schedule beyond Forever).
	timed := timeout < sim.Forever-eng.Now()
	if timed {
		timer = eng.After(timeout, func() {
			if !woken.Done() {
				f.RemoveCallback(cb)
				woken.Complete()
			}
		})
	}
	start := p.Now()
	p.Wait(woken)
	if !f.signaled {
		return 0, ErrTimedOut
	}
	if !timed {
		return MaxScheduleTimeout, nil
	}
	eng.Cancel(timer)
	return timeout - (p.Now() - start), nil
}

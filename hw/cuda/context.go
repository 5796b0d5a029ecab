package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// ErrClosed is returned by Do on a closed Context.
var ErrClosed = errors.New("cuda: context closed")

// Context is a device's primary context (cuDevicePrimaryCtxRetain) made
// current on one OS thread that belongs to it. All context-bound work runs on
// that thread through Do.
//
// Lock order: mu is taken only around handing work to the thread; the work
// itself runs without it.
type Context struct {
	dev Device
	ctx context // written before NewContext returns, then read-only

	mu     sync.RWMutex
	closed bool          // protected by mu
	work   chan func()   // closed under mu.Lock by Close
	done   chan struct{} // closed by the thread when it has released the context
}

// NewContext retains dev's primary context on a new locked OS thread.
func NewContext(dev Device) (*Context, error) {
	l, err := initialized()
	if err != nil {
		return nil, err
	}
	c := &Context{dev: dev, work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go c.run(l, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return c, nil
}

// run is the Context's thread. The goroutine stays locked to its thread until
// it exits, so the runtime discards the thread, and its CUDA state, with it.
func (c *Context) run(l *library, ready chan<- error) {
	runtime.LockOSThread()
	if err := check("cuDevicePrimaryCtxRetain", l.cuDevicePrimaryCtxRetain(&c.ctx, c.dev)); err != nil {
		ready <- err
		close(c.done)
		return
	}
	if err := check("cuCtxSetCurrent", l.cuCtxSetCurrent(c.ctx)); err != nil {
		l.cuDevicePrimaryCtxRelease(c.dev)
		ready <- err
		close(c.done)
		return
	}
	ready <- nil
	for f := range c.work {
		f()
	}
	l.cuDevicePrimaryCtxRelease(c.dev)
	close(c.done)
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// Do runs fn on the context's thread and returns its error. Calls from several
// goroutines are serialised. fn must not call Do on the same Context (it
// would wait for itself). A panic in fn is re-raised in the caller.
func (c *Context) Do(fn func(t *Thread) error) error {
	type outcome struct {
		err   error
		panic any
	}
	res := make(chan outcome, 1)
	job := func() {
		t := &Thread{c: c, l: loader.Loaded(), active: true}
		defer func() {
			t.active = false
			if p := recover(); p != nil {
				res <- outcome{panic: p}
			}
		}()
		res <- outcome{err: fn(t)}
	}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	c.work <- job
	c.mu.RUnlock()
	o := <-res
	if o.panic != nil {
		panic(fmt.Sprintf("cuda: panic on context thread: %v", o.panic))
	}
	return o.err
}

// Close releases the primary context and ends the thread, after the work
// already handed to it. Later Do calls return ErrClosed.
func (c *Context) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.work)
	}
	c.mu.Unlock()
	<-c.done
	return nil
}

// Thread carries the operations that need the context current. It is valid
// only inside the Do call that passed it; using it afterwards panics.
type Thread struct {
	c      *Context
	l      *library
	active bool
}

// lib returns the library after checking that t is still valid.
func (t *Thread) lib() *library {
	if !t.active {
		panic("cuda: Thread used outside Context.Do")
	}
	return t.l
}

// Context returns the Context the thread belongs to.
func (t *Thread) Context() *Context { return t.c }

// Synchronize waits for all work of the context (cuCtxSynchronize).
func (t *Thread) Synchronize() error {
	return check("cuCtxSynchronize", t.lib().cuCtxSynchronize())
}

// EnablePeerAccess lets this context access peer's memory
// (cuCtxEnablePeerAccess). Already enabled is not an error.
func (t *Thread) EnablePeerAccess(peer *Context) error {
	r := t.lib().cuCtxEnablePeerAccess(peer.ctx, 0)
	if r == ErrorPeerAlreadyEnabled {
		return nil
	}
	return check("cuCtxEnablePeerAccess", r)
}

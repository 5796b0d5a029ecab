package sim

import (
	"iter"
	"runtime"
)

// coro is the coroutine a Proc runs on. When a process returns, its
// coroutine does not end: the engine keeps it (coroPool) and runs the
// next process that starts on it, so that a model spawning a short
// process per event (a driver's bottom half per fault interrupt) pays
// for neither a new goroutine nor the growth of its stack each time. A
// process cannot tell: its identity, its events and its order are the
// Proc's, and only one process runs on a coroutine at a time.
type coro struct {
	next  func() (struct{}, bool)
	stop  func()
	yield func(struct{}) bool
	// p is the process running on it, nil while it is idle in the pool;
	// returned is set when p's body has returned.
	p        *Proc
	returned bool
}

// coroPool holds the idle coroutines of an engine, at most maxIdleCoros.
// It is an object apart from the Engine, and an idle coroutine holds no
// process, so that an engine dropped without Close can be collected and
// its idle coroutines then ended (the cleanup New registers).
type coroPool struct{ idle []*coro }

// maxIdleCoros bounds the idle coroutines an engine keeps: processes
// that return one after another need one; a few cover short overlaps.
const maxIdleCoros = 4

// close ends the idle coroutines.
func (pl *coroPool) close() {
	for _, c := range pl.idle {
		c.stop()
	}
	pl.idle = nil
}

// newPool makes e's pool of idle coroutines and the cleanup that ends
// them if e is collected without Close.
func newPool(e *Engine) *coroPool {
	pl := new(coroPool)
	runtime.AddCleanup(e, (*coroPool).close, pl)
	return pl
}

// take returns an idle coroutine, or a new one, to run p.
func (pl *coroPool) take(p *Proc) *coro {
	var c *coro
	if n := len(pl.idle); n > 0 {
		c = pl.idle[n-1]
		pl.idle[n-1] = nil
		pl.idle = pl.idle[:n-1]
	} else {
		c = new(coro)
		c.next, c.stop = iter.Pull(c.loop)
	}
	c.p, c.returned = p, false
	return c
}

// give takes back c, whose process has returned, or ends it when the
// pool is full.
func (pl *coroPool) give(c *coro) {
	c.p = nil
	if len(pl.idle) >= maxIdleCoros {
		c.stop()
		return
	}
	pl.idle = append(pl.idle, c)
}

// loop is the coroutine's body: it runs the process it is given until
// the process returns, reports that (returned, and a yield), and waits
// for the next one. It ends when stopped (Close, a full pool), or when a
// process panics, the panic going on to the caller of next.
func (c *coro) loop(yield func(struct{}) bool) {
	c.yield = yield
	for c.run() {
		c.returned = true
		if !yield(struct{}{}) {
			return
		}
	}
}

// run runs c.p's body; it reports false when the process was unwound
// because its coroutine is being stopped (killed).
func (c *coro) run() (ok bool) {
	p := c.p
	body := p.body
	p.body = nil
	defer func() {
		if r := recover(); r != nil {
			if _, k := r.(killed); !k {
				panic(r)
			}
			ok = false
		}
	}()
	body(p)
	return true
}

package sim

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestCoroutineReuse: processes that start after others returned run on
// their coroutines (no new goroutine), at most maxIdleCoros of which are
// kept; each process keeps its own identity, order, CPU time and exit;
// Close ends the kept coroutines, and so does collecting an engine that
// was never closed.
func TestCoroutineReuse(t *testing.T) {
	base := settledGoroutines()
	e := New(1)
	var cos []*coro
	var log []string
	var chain func(i int) func(*Proc)
	chain = func(i int) func(*Proc) {
		return func(p *Proc) {
			cos = append(cos, p.co)
			p.Sleep(Time(i + 1))
			log = append(log, p.Name())
			if i < 5 {
				// The next starts after this one has returned.
				e.Spawn("chain", chain(i+1))
			}
		}
	}
	first := e.Spawn("chain", chain(0))
	e.Run()
	if len(cos) != 6 || slices.ContainsFunc(cos, func(c *coro) bool { return c != cos[0] }) {
		t.Fatalf("a chain of processes ran on coroutines %p, want one", cos)
	}
	if !first.Exited().Done() || first.Exited().At() != 1 || first.CPUTime() != 1 || e.Now() != 21 {
		t.Fatalf("first exit %v at %v, CPU %v, end %v", first.Exited().Done(), first.Exited().At(), first.CPUTime(), e.Now())
	}
	if n := runtime.NumGoroutine() - base; n != 1 {
		t.Fatalf("%d goroutines after a chain, want the one kept", n)
	}

	// Ten at once: the first on the chain's coroutine, ten in all,
	// four kept when they have all returned.
	chainCo := cos[0]
	cos = nil
	for range 10 {
		e.Spawn("wide", func(p *Proc) { cos = append(cos, p.co); p.Sleep(Nanosecond) })
	}
	e.Run()
	if cos[0] != chainCo || len(distinct(cos)) != 10 {
		t.Fatalf("ten processes at once ran on %p, the chain's %p", cos, chainCo)
	}
	if len(e.pool.idle) != maxIdleCoros || runtime.NumGoroutine()-base != maxIdleCoros {
		t.Fatalf("%d idle coroutines, %d goroutines, want %d", len(e.pool.idle), runtime.NumGoroutine()-base, maxIdleCoros)
	}

	// A process blocked for good and the idle ones end at Close.
	e.Spawn("stuck", func(p *Proc) { p.Wait(e.NewCompletion()) })
	e.Run()
	e.Close()
	if n := runtime.NumGoroutine() - base; n != 0 {
		t.Fatalf("%d goroutines after Close", n)
	}

	// An engine dropped without Close: its idle coroutines end once it
	// is collected.
	func() {
		e := New(1)
		for range 3 {
			e.Spawn("dropped", func(p *Proc) { p.Sleep(Nanosecond) })
		}
		e.Run()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine() - base; n != 0 {
		t.Fatalf("%d goroutines left by an engine collected without Close", n)
	}
}

// TestCoroutineAfterPanic: a process that panics takes its coroutine
// down with it (the panic reaches the caller of Run); the next process
// runs on a coroutine of its own.
func TestCoroutineAfterPanic(t *testing.T) {
	e := New(1)
	var bad *coro
	e.Spawn("bad", func(p *Proc) { bad = p.co; panic("model bug") })
	func() {
		defer func() {
			if r := recover(); r != "model bug" {
				t.Fatalf("recovered %v", r)
			}
		}()
		e.Run()
	}()
	ran := false
	e.Spawn("next", func(p *Proc) { ran = p.co != bad; p.Sleep(1) })
	e.Run()
	if !ran || len(e.pool.idle) != 1 || e.pool.idle[0] == bad {
		t.Fatalf("after a panic: new coroutine %v, idle %v", ran, e.pool.idle)
	}
	e.Close()
}

// distinct is the set of coroutines in cos.
func distinct(cos []*coro) map[*coro]bool {
	m := map[*coro]bool{}
	for _, c := range cos {
		m[c] = true
	}
	return m
}

// settledGoroutines is the count of goroutines once the idle coroutines
// of engines that earlier tests dropped have been ended (their cleanups
// run after a collection), so that counting from it sees only this
// test's.
func settledGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for same < 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

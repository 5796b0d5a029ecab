package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// scheduler is what heapProgram drives: the engine, or refQueue.
type scheduler interface {
	Now() Time
	After(d Time, fn func()) int
	Cancel(h int) bool
	Pending(h int) bool
	Run()
}

// engineSched is the engine behind scheduler, its handles by index.
type engineSched struct {
	e       *Engine
	handles []Handle
}

func (s *engineSched) Now() Time { return s.e.Now() }
func (s *engineSched) After(d Time, fn func()) int {
	s.handles = append(s.handles, s.e.After(d, fn))
	return len(s.handles) - 1
}
func (s *engineSched) Cancel(h int) bool  { return s.e.Cancel(s.handles[h]) }
func (s *engineSched) Pending(h int) bool { return s.e.Pending(s.handles[h]) }
func (s *engineSched) Run()               { s.e.Run() }

// refQueue is the reference: a list of pending events, the next found by
// a linear search for the least (time, sequence number), cancellation by
// removal.
type refQueue struct {
	now     Time
	pending []refEvent
	done    []bool // by handle: ran or cancelled
}

type refEvent struct {
	at Time
	h  int // also the sequence number
	fn func()
}

func (q *refQueue) Now() Time { return q.now }
func (q *refQueue) After(d Time, fn func()) int {
	h := len(q.done)
	q.done = append(q.done, false)
	q.pending = append(q.pending, refEvent{q.now + d, h, fn})
	return h
}
func (q *refQueue) Cancel(h int) bool {
	for i, ev := range q.pending {
		if ev.h == h {
			q.pending = append(q.pending[:i], q.pending[i+1:]...)
			q.done[h] = true
			return true
		}
	}
	return false
}
func (q *refQueue) Pending(h int) bool { return !q.done[h] }
func (q *refQueue) Run() {
	for len(q.pending) > 0 {
		m := 0
		for i, ev := range q.pending {
			if b := q.pending[m]; ev.at < b.at || ev.at == b.at && ev.h < b.h {
				m = i
			}
		}
		ev := q.pending[m]
		q.pending = append(q.pending[:m], q.pending[m+1:]...)
		q.done[ev.h] = true
		q.now = ev.at
		ev.fn()
	}
}

// heapProgram runs a random model on s: events at random delays (the
// same instant, near, far, many at one time) that schedule others and
// cancel pending or finished ones, some in bursts, and returns its log.
func heapProgram(seed uint64, s scheduler) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	n, budget := 0, 400+int(seed%7)*300
	delay := func() Time {
		switch rng.IntN(5) {
		case 0:
			return 0
		case 1:
			return Time(rng.IntN(3))
		case 2:
			return Time(rng.IntN(100))
		case 3:
			return 50 // many at one instant
		default:
			return Time(rng.IntN(1_000_000))
		}
	}
	var sched func()
	sched = func() {
		id := n
		n++
		s.After(delay(), func() {
			fmt.Fprintf(&b, "%v:%d ", s.Now(), id)
			for budget > 0 && rng.IntN(5) < 2+int(seed%3) {
				budget--
				sched()
			}
			switch k := rng.IntN(8); {
			case k == 0 && n > 0:
				// A burst of cancels: most of the handles given out.
				for range rng.IntN(100) {
					h := rng.IntN(n)
					fmt.Fprintf(&b, "c%d=%v ", h, s.Cancel(h))
				}
			case k < 4 && n > 0:
				h := rng.IntN(n)
				fmt.Fprintf(&b, "p%d=%v c%d=%v ", h, s.Pending(h), h, s.Cancel(h))
			}
		})
	}
	for range 1 + rng.IntN(200) {
		sched()
	}
	s.Run()
	fmt.Fprintf(&b, "| now %v", s.Now())
	return b.String()
}

// TestHeapMatchesReference: the engine's heap runs random programs in
// the order of a plain list searched for the least (time, sequence
// number), with the same answers to Cancel and Pending, with and without
// the lane.
func TestHeapMatchesReference(t *testing.T) {
	defer func() { sameInstantLane = true }()
	for seed := range uint64(400) {
		want := heapProgram(seed, &refQueue{})
		for _, lane := range []bool{true, false} {
			sameInstantLane = lane
			s := &engineSched{e: New(seed)}
			got := heapProgram(seed, s)
			if got != want {
				t.Fatalf("seed %d, lane %v: the engine's run differs from the reference\n%s", seed, lane, firstDiff(want, got))
			}
		}
	}
}

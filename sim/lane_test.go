package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// laneRun runs a random model of events that schedule others at the
// same instant or later, cancel pending ones and check Pending, under
// Run, RunUntil in steps, Step and Guard with a budget, and returns its
// log: what ran, when, and every answer of Cancel and Pending.
func laneRun(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 3))
	e := New(seed)
	var b strings.Builder
	var handles []Handle
	n := 0
	var sched func(depth int)
	sched = func(depth int) {
		id := n
		n++
		d := Time(0)
		if rng.IntN(3) == 0 {
			d = Time(rng.IntN(4))
		}
		handles = append(handles, e.After(d, func() {
			fmt.Fprintf(&b, "%v:%d ", e.Now(), id)
			if depth < 6 {
				for range rng.IntN(4) {
					sched(depth + 1)
				}
			}
			if len(handles) > 0 && rng.IntN(3) == 0 {
				h := handles[rng.IntN(len(handles))]
				fmt.Fprintf(&b, "p%v ", e.Pending(h))
				fmt.Fprintf(&b, "c%v ", e.Cancel(h))
			}
		}))
	}
	for range 1 + rng.IntN(4) {
		sched(0)
	}
	switch seed % 4 {
	case 0:
		e.Run()
	case 1:
		for _, t := range []Time{0, 1, 1, 3, 7} {
			e.RunUntil(t)
			fmt.Fprintf(&b, "| until %v now %v ", t, e.Now())
		}
		e.Run()
	case 2:
		for e.Step() {
		}
	case 3:
		err := e.Guard(Limits{Events: 1 + seed%30})
		fmt.Fprintf(&b, "| %v ", err)
		e.Run()
	}
	fmt.Fprintf(&b, "| now %v fired %d", e.Now(), e.Fired())
	return b.String()
}

// TestLaneMatchesHeap: the lane of events due at the instant they were
// scheduled gives the order of the heap alone, (time, sequence number),
// with cancellations and Pending, under every loop; and the differential
// process programs (TestSleepShortcut's drives, run-ahead on) give the
// same runs with and without it.
func TestLaneMatchesHeap(t *testing.T) {
	defer func() { sameInstantLane = true }()
	for seed := range uint64(2000) {
		sameInstantLane = false
		want := laneRun(seed)
		sameInstantLane = true
		if got := laneRun(seed); got != want {
			t.Fatalf("seed %d: the run with the lane differs\n%s", seed, firstDiff(want, got))
		}
	}
	defer func() { diffAhead = false }()
	for seed := range uint64(300) {
		for _, ahead := range []bool{false, true} {
			drive := func(e *Engine, logf func(string)) string {
				err := e.Guard(Limits{Events: 3 + seed%40})
				if !ahead {
					// An event that runs one itself (no run-ahead then).
					e.At(e.Now()+Time(seed%3), func() { e.Step(); logf("stepped") })
				}
				var b strings.Builder
				for _, t := range []Time{Time(seed % 5), 6, Time(7 + seed%9)} {
					e.RunUntil(t)
					fmt.Fprintf(&b, "until %v: now %v, %d events; ", t, e.Now(), e.Fired())
				}
				return fmt.Sprintf("budget: %v; %s then %v", err, b.String(), e.Guard(Limits{}))
			}
			mix := func(i int) bool { return (uint64(i)*5+seed)%3 == 0 }
			diffAhead, sameInstantLane = ahead, false
			want := runDiffBy(seed, mix, drive)
			sameInstantLane = true
			if got := runDiffBy(seed, mix, drive); got != want {
				t.Fatalf("programs, seed %d, ahead %v: the run with the lane differs\n%s", seed, ahead, firstDiff(want, got))
			}
		}
	}
}

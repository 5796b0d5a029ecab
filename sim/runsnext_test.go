package sim

import (
	"fmt"
	"strings"
	"testing"
)

// runsNextModel is a chain of events, each of which does the next link's
// work at once where RunsNext or TakeNext allow it (inline) or schedules
// it as an event, with events of others at the same instants, before and
// after; it returns the log of what ran, when, and the count of events
// fired at each step. run runs the engine (Run, Guard with a budget, or
// Step by Step).
func runsNextModel(inline bool, run func(e *Engine, logf func(string))) string {
	e := New(1)
	var b strings.Builder
	logf := func(s string) { fmt.Fprintf(&b, "%v %s %d;", e.Now(), s, e.Fired()) }
	var link func(i int)
	link = func(i int) {
		logf(fmt.Sprint("link", i))
		if i == 12 {
			return
		}
		if i%4 == 1 {
			// Another event at this instant, before the next link's.
			e.At(e.Now(), func() { logf("other") })
		}
		next := func() { link(i + 1) }
		switch {
		case i%3 == 0:
			// The next link later: as its own event, and at its instant
			// taken at once by the event before it when that is next.
			var h Handle
			e.After(Time(i%2), func() {
				logf("before")
				if inline && e.TakeNext(h) {
					inlinedLinks++
					next()
				}
			})
			if i%6 == 0 {
				e.After(Time(i%2), func() { logf("between") })
			}
			h = e.After(Time(i%2), next)
		case i%3 == 1:
			// The next link later: done at once where
			// it would be the loop's next event.
			d := Time(1)
			if inline && e.RunsNext(e.Now()+d) {
				inlinedLinks++
				next()
			} else {
				e.At(e.Now()+d, next)
			}
		case i%6 == 2:
			// The next link later, as its own event, taken at once by
			// an event at this instant when it is next.
			h := e.After(1, next)
			e.At(e.Now(), func() {
				logf("now")
				if inline && e.TakeNext(h) {
					inlinedLinks++
					next()
				}
			})
		case inline && e.RunsNext(e.Now()):
			inlinedLinks++
			next()
		default:
			e.At(e.Now(), next)
		}
	}
	e.At(0, func() { link(0) })
	e.At(0, func() { logf("late") })
	e.At(5, func() { logf("at5") })
	run(e, logf)
	return b.String()
}

var inlinedLinks int

// TestRunsNextSameRun: doing the work of the next event at once where
// RunsNext and TakeNext report true gives the run it would have as
// events: the same steps, at the same instants, in the same order, with
// the same counts of events fired; under Step (no loop) and at a guarded
// run's event budget they report false, so each event still stops there.
func TestRunsNextSameRun(t *testing.T) {
	runs := map[string]func(e *Engine, logf func(string)){
		"run": func(e *Engine, _ func(string)) { e.Run() },
		"until": func(e *Engine, logf func(string)) {
			for t := Time(0); e.Fired() < 40 && t < 10; t++ {
				e.RunUntil(t)
				logf("until")
			}
		},
		"guard": func(e *Engine, logf func(string)) {
			for e.Guard(Limits{Events: 3}) != nil {
				logf("guard")
			}
		},
		"step": func(e *Engine, logf func(string)) {
			for e.Step() {
				logf("step")
			}
		},
	}
	for _, name := range []string{"run", "until", "guard", "step"} {
		want := runsNextModel(false, runs[name])
		if got := runsNextModel(true, runs[name]); got != want {
			t.Errorf("%s: inline\n%s\nas events\n%s", name, got, want)
		}
	}
	if inlinedLinks == 0 {
		t.Error("no link done at once")
	}
	// Something was done at once under Run.
	var taken int
	e := New(1)
	e.At(0, func() {
		if e.RunsNext(e.Now()) {
			taken++
		}
		h := e.At(0, func() {})
		if e.TakeNext(h) {
			taken++
		}
	})
	e.Run()
	if taken != 2 || e.Fired() != 3 {
		t.Errorf("%d done at once, %d fired; want 2, 3", taken, e.Fired())
	}
	// Not from a process.
	e.Spawn("p", func(p *Proc) {
		if e.RunsNext(e.Now()) {
			t.Error("RunsNext true in a process")
		}
	})
	e.Run()
}

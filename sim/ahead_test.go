package sim

import (
	"fmt"
	"strings"
	"testing"
)

// diffAhead makes every Proc of the differential programs (runDiffBy)
// run ahead (Proc.RunAhead).
var diffAhead bool

// TestRunAhead: with every process running ahead, the differential
// programs of TestStepProcMatchesProc (sleeps, charges, completions,
// conditions, spawns and joins, processes of both forms), run by Guard
// with and without event budgets and horizons, by RunUntil in steps and
// by Run, give the same runs (logs, CPU spans, times, event counts,
// deadlock reports) as with every resume through the event loop, and
// sleeps do run ahead.
func TestRunAhead(t *testing.T) {
	drives := []struct {
		name  string
		drive func(seed uint64) func(*Engine, func(string)) string
	}{
		{"guard", func(uint64) func(*Engine, func(string)) string {
			return func(e *Engine, logf func(string)) string {
				return fmt.Sprintf("guard: %v", e.Guard(Limits{Events: 100_000}))
			}
		}},
		{"budget", func(seed uint64) func(*Engine, func(string)) string {
			return func(e *Engine, logf func(string)) string {
				err := e.Guard(Limits{Events: 3 + seed%40})
				return fmt.Sprintf("budget: %v; then %v", err, e.Guard(Limits{Events: 1 + seed%7}))
			}
		}},
		{"horizon", func(seed uint64) func(*Engine, func(string)) string {
			return func(e *Engine, logf func(string)) string {
				return fmt.Sprintf("horizon: %v", e.Guard(Limits{Horizon: Time(1 + seed%20)}))
			}
		}},
		{"until", func(seed uint64) func(*Engine, func(string)) string {
			return func(e *Engine, logf func(string)) string {
				var b strings.Builder
				for _, t := range []Time{Time(seed % 5), 6, 6, Time(7 + seed%9)} {
					e.RunUntil(t)
					fmt.Fprintf(&b, "until %v: now %v, %d events; ", t, e.Now(), e.Fired())
				}
				e.Step()
				fmt.Fprintf(&b, "step: now %v, %d events; ", e.Now(), e.Fired())
				e.Run()
				return b.String()
			}
		}},
	}
	defer func() { diffAhead, sleepShortcut = false, true }()
	var aheads, skips uint64
	for _, d := range drives {
		for seed := range uint64(300) {
			mix := func(i int) bool { return (uint64(i)*7+seed)%3 == 0 }
			for _, stepped := range []func(int) bool{func(int) bool { return false }, mix} {
				diffAhead, sleepShortcut = false, false
				want := runDiffBy(seed, stepped, d.drive(seed))
				diffAhead, sleepShortcut = true, true
				var e *Engine
				got := runDiffBy(seed, stepped, func(x *Engine, logf func(string)) string { e = x; return d.drive(seed)(x, logf) })
				if got != want {
					t.Fatalf("%s, seed %d: the run with run-ahead differs\n%s", d.name, seed, firstDiff(want, got))
				}
				aheads += e.aheads
				skips += e.shortcuts
			}
		}
	}
	if aheads == 0 {
		t.Fatal("no sleep ran ahead")
	}
	t.Logf("%d sleeps ran ahead, %d skipped ahead", aheads, skips)
}

// TestRunAheadLoopPanics: an event that runs the engine while a process
// runs it ahead panics, rather than resuming the running coroutine.
func TestRunAheadLoopPanics(t *testing.T) {
	for _, loop := range []func(*Engine){
		func(e *Engine) { e.Step() }, func(e *Engine) { e.Run() },
		func(e *Engine) { e.RunUntil(100) }, func(e *Engine) { _ = e.Guard(Limits{}) },
	} {
		e := New(1)
		e.Spawn("a", func(p *Proc) {
			p.RunAhead()
			p.Sleep(10)
		})
		e.At(5, func() { loop(e) })
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "RunAhead") {
					t.Errorf("recovered %v, want the run-ahead panic", r)
				}
			}()
			e.Run()
		}()
	}
}

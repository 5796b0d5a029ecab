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
// sleeps and waits on completions do run ahead.
func TestRunAhead(t *testing.T) {
	defer func() { diffAhead = false }()
	var skips, waits uint64
	aheads := diffDrives(t, loopDrives(false), "run-ahead",
		func(on bool) { diffAhead, sleepShortcut = on, on },
		func(e *Engine) uint64 { skips += e.shortcuts; waits += e.waitAheads; return e.aheads })
	if aheads == 0 || waits == 0 {
		t.Fatalf("%d sleeps and %d waits ran ahead, want some of each", aheads, waits)
	}
	t.Logf("%d sleeps and %d waits ran ahead, %d sleeps skipped ahead", aheads, waits, skips)
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

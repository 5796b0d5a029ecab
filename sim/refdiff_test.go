package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// dEngine is what refModel drives: the engine, or the reference (the
// engine of an earlier commit, refengine_test.go), each behind an
// adapter, so that one random model runs on both.
type dEngine interface {
	Now() Time
	Fired() uint64
	At(t Time, fn func()) any
	Cancel(h any) bool
	Pending(h any) bool
	RunsNext(t Time) bool
	TakeNext(h any) bool
	Spawn(name string, ahead bool, body func(dProc))
	NewCompletion() dCompletion
	Run()
	RunUntil(t Time)
	Step() bool
	Guard(l Limits) string
	Blocked() []string
	Close()
}

type dProc interface {
	Now() Time
	Sleep(d Time)
	SleepAlone(n uint64, d Time) bool
	Wait(c dCompletion)
	CPUTime() Time
}

type dCompletion interface {
	Complete()
	Done() bool
	OnComplete(fn func())
}

// newEngine adapts the engine. (A handle of nil, work done at once,
// is the zero Handle.)
type newEngine struct{ e *Engine }

func (a newEngine) Now() Time                { return a.e.Now() }
func (a newEngine) Fired() uint64            { return a.e.Fired() }
func (a newEngine) At(t Time, fn func()) any { return a.e.At(t, fn) }
func (a newEngine) Cancel(h any) bool        { hh, _ := h.(Handle); return a.e.Cancel(hh) }
func (a newEngine) Pending(h any) bool       { hh, _ := h.(Handle); return a.e.Pending(hh) }
func (a newEngine) RunsNext(t Time) bool     { return a.e.RunsNext(t) }
func (a newEngine) TakeNext(h any) bool      { hh, _ := h.(Handle); return a.e.TakeNext(hh) }
func (a newEngine) Spawn(name string, ahead bool, body func(dProc)) {
	p := a.e.Spawn(name, func(p *Proc) { body(newProc{p}) })
	if ahead {
		p.RunAhead()
	}
}
func (a newEngine) NewCompletion() dCompletion { return a.e.NewCompletion() }
func (a newEngine) Run()                       { a.e.Run() }
func (a newEngine) RunUntil(t Time)            { a.e.RunUntil(t) }
func (a newEngine) Step() bool                 { return a.e.Step() }
func (a newEngine) Guard(l Limits) string      { return fmt.Sprint(a.e.Guard(l)) }
func (a newEngine) Blocked() []string          { return a.e.Blocked() }
func (a newEngine) Close()                     { a.e.Close() }

type newProc struct{ *Proc }

func (p newProc) Wait(c dCompletion) { p.Proc.Wait(c.(*Completion)) }

// refEngineAdapter adapts the reference.
type refEngineAdapter struct{ e *refEngine }

func (a refEngineAdapter) Now() Time                { return a.e.Now() }
func (a refEngineAdapter) Fired() uint64            { return a.e.Fired() }
func (a refEngineAdapter) At(t Time, fn func()) any { return a.e.At(t, fn) }
func (a refEngineAdapter) Cancel(h any) bool        { hh, _ := h.(refHandle); return a.e.Cancel(hh) }
func (a refEngineAdapter) Pending(h any) bool       { hh, _ := h.(refHandle); return a.e.Pending(hh) }
func (a refEngineAdapter) RunsNext(t Time) bool     { return a.e.RunsNext(t) }
func (a refEngineAdapter) TakeNext(h any) bool      { hh, _ := h.(refHandle); return a.e.TakeNext(hh) }
func (a refEngineAdapter) Spawn(name string, ahead bool, body func(dProc)) {
	p := a.e.Spawn(name, func(p *refProc) { body(refProcAdapter{p}) })
	if ahead {
		p.RunAhead()
	}
}
func (a refEngineAdapter) NewCompletion() dCompletion { return a.e.NewCompletion() }
func (a refEngineAdapter) Run()                       { a.e.Run() }
func (a refEngineAdapter) RunUntil(t Time)            { a.e.RunUntil(t) }
func (a refEngineAdapter) Step() bool                 { return a.e.Step() }
func (a refEngineAdapter) Guard(l Limits) string {
	err := a.e.Guard(refLimits{Horizon: l.Horizon, Events: l.Events})
	if err == nil {
		return fmt.Sprint(nil)
	}
	// The reference's errors print as the engine's do.
	return err.Error()
}
func (a refEngineAdapter) Blocked() []string { return a.e.Blocked() }
func (a refEngineAdapter) Close()            { a.e.Close() }

type refProcAdapter struct{ *refProc }

func (p refProcAdapter) Wait(c dCompletion) { p.refProc.Wait(c.(*refCompletion)) }

// refModel runs a random model on e and returns its trace: every event,
// inline work, process step, completion callback and answer of the
// engine, each with the clock and the count of fired events. Events
// schedule others at random delays (the same instant, near, far, many at
// one instant), cancel and ask about pending or finished ones, complete
// completions and hang callbacks on them, and end, as their last act,
// by doing a next event's work at once where RunsNext or TakeNext allow
// it; processes, some running ahead (RunAhead), sleep (zero, short,
// long, SleepAlone), wait on completions, complete them and schedule
// events. The driver runs the engine with RunUntil, Step, Guard (a
// horizon, an event budget) and Run.
func refModel(seed uint64, e dEngine) string {
	rng := rand.New(rand.NewPCG(seed, 11))
	var b strings.Builder
	logf := func(format string, args ...any) {
		fmt.Fprintf(&b, "%v/%d ", e.Now(), e.Fired())
		fmt.Fprintf(&b, format, args...)
		b.WriteByte(' ')
	}
	mode := seed % 4 // how busy: more processes, fewer events, or the reverse
	delay := func() Time {
		switch rng.IntN(6) {
		case 0:
			return 0
		case 1:
			return Time(1 + rng.IntN(3))
		case 2:
			return Time(rng.IntN(100))
		case 3:
			return 50 // many at one instant
		case 4:
			return Time(rng.IntN(10_000))
		default:
			return Time(rng.IntN(1_000_000))
		}
	}
	var comps []dCompletion
	for range 8 + rng.IntN(24) {
		comps = append(comps, e.NewCompletion())
	}
	var handles []any
	var fns []func()
	budget := 300 + int(mode)*200
	procs := 0
	var event func(id int) func()
	var procBody func(name string) func(dProc)
	schedule := func(t Time) {
		id := len(handles)
		fn := event(id)
		handles = append(handles, e.At(t, fn))
		fns = append(fns, fn)
	}
	complete := func(who string) {
		c := rng.IntN(len(comps))
		if !comps[c].Done() {
			logf("%s completes %d", who, c)
			comps[c].Complete()
		}
	}
	event = func(id int) func() {
		return func() {
			logf("ev%d", id)
			for budget > 0 && rng.IntN(6) < 3 {
				budget--
				switch k := rng.IntN(12); {
				case k < 4:
					schedule(e.Now() + delay())
				case k == 4 && len(handles) > 0:
					h := rng.IntN(len(handles))
					logf("c%d=%v", h, e.Cancel(handles[h]))
				case k == 5 && len(handles) > 0:
					h := rng.IntN(len(handles))
					logf("p%d=%v", h, e.Pending(handles[h]))
				case k == 6:
					complete(fmt.Sprint("ev", id))
				case k == 7:
					c := rng.IntN(len(comps))
					comps[c].OnComplete(func() {
						logf("cb%d of ev%d", c, id)
						if budget > 0 && rng.IntN(2) == 0 {
							// An event at once, ordered against the
							// resumes of the completion's waiters.
							budget--
							schedule(e.Now() + delay()/8)
						}
					})
				case k == 8 && procs < 4+int(mode)*6:
					procs++
					name := fmt.Sprint("p", procs)
					e.Spawn(name, rng.IntN(2) == 0, procBody(name))
				case k == 9:
					comps = append(comps, e.NewCompletion())
				}
			}
			// The last act: a next event's work at once where the
			// engine allows it.
			switch rng.IntN(4) {
			case 0:
				t := e.Now() + delay()/8
				if e.RunsNext(t) {
					logf("runs next at %v", t)
					id := len(handles)
					handles = append(handles, nil)
					fns = append(fns, nil)
					event(id)()
				} else if budget > 0 {
					budget--
					schedule(t)
				}
			case 1:
				if len(handles) > 0 {
					h := len(handles) - 1 - rng.IntN(min(len(handles), 4))
					if handles[h] != nil && e.TakeNext(handles[h]) {
						logf("takes %d", h)
						fns[h]()
					}
				}
			}
		}
	}
	procBody = func(name string) func(dProc) {
		return func(p dProc) {
			for i := range 5 + rng.IntN(40) {
				switch k := rng.IntN(10); {
				case k < 5:
					d := delay() / Time(1+rng.IntN(4))
					p.Sleep(d)
					logf("%s slept %v", name, d)
				case k == 5:
					n, d := uint64(1+rng.IntN(5)), Time(rng.IntN(300))
					logf("%s sleeps alone %d %v: %v", name, n, d, p.SleepAlone(n, d))
				case k == 6 || k == 7:
					c := rng.IntN(len(comps))
					p.Wait(comps[c])
					logf("%s waited %d", name, c)
				case k == 8:
					complete(name)
				default:
					if budget > 0 {
						budget--
						schedule(p.Now() + delay())
					}
				}
				_ = i
			}
			logf("%s ends, cpu %v", name, p.CPUTime())
		}
	}
	for range 1 + rng.IntN(30) {
		schedule(delay())
	}
	for range 1 + rng.IntN(3+int(mode)*3) {
		procs++
		name := fmt.Sprint("p", procs)
		e.Spawn(name, rng.IntN(2) == 0, procBody(name))
	}
	for range rng.IntN(6) {
		switch rng.IntN(4) {
		case 0:
			t := e.Now() + delay()
			e.RunUntil(t)
			logf("until %v", t)
		case 1:
			for range rng.IntN(20) {
				logf("step %v", e.Step())
			}
		case 2:
			l := Limits{Events: uint64(1 + rng.IntN(50))}
			logf("guard events %d: %s", l.Events, e.Guard(l))
		case 3:
			l := Limits{Horizon: e.Now() + delay()}
			logf("guard horizon %v: %s", l.Horizon, e.Guard(l))
		}
	}
	e.Run()
	logf("end, blocked %q", e.Blocked())
	e.Close()
	return b.String()
}

// TestEngineMatchesRef: random models (refModel) give the same trace,
// every event, process step and answer with the clock and the count of
// fired events, on the engine and on the reference, the engine of an
// earlier commit (refengine_test.go), whose firing order is the one the
// engine must keep.
func TestEngineMatchesRef(t *testing.T) {
	seeds := uint64(600)
	if testing.Short() {
		seeds = 100
	}
	inlined, chars := 0, 0
	var shortcuts, aheads, waits uint64
	for seed := range seeds {
		want := refModel(seed, refEngineAdapter{refNew(seed)})
		e := New(seed)
		got := refModel(seed, newEngine{e})
		shortcuts, aheads, waits = shortcuts+e.shortcuts, aheads+e.aheads, waits+e.waitAheads
		chars += len(got)
		if got != want {
			t.Fatalf("seed %d: the engine's trace differs from the reference's\n%s", seed, firstDiff(want, got))
		}
		inlined += strings.Count(got, "runs next") + strings.Count(got, "takes")
	}
	if inlined == 0 || shortcuts == 0 || aheads == 0 || waits == 0 {
		t.Fatalf("%d events' work done at once, %d sleeps skipped ahead, %d sleeps and %d waits ran ahead: want some of each",
			inlined, shortcuts, aheads, waits)
	}
	t.Logf("%d events' work done at once, %d sleeps skipped ahead, %d sleeps and %d waits ran ahead; %d bytes of traces",
		inlined, shortcuts, aheads, waits, chars)
}

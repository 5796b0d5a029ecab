package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The differential test: random programs of sleeps, CPU charges, waits
// on completions, completions, spawns and joins of children, waits on
// conditions and their signals, each run as a Proc (a straight-line
// body) or as a StepProc (the same program as a state machine). Whatever
// mix of the two forms runs them, every event, its time and its order,
// the CPU spans the hooks see, the deadlock report and the final times
// must be the same.

type diffKind uint8

const (
	opSleep diffKind = iota
	opCharge
	opWait      // wait on completion k
	opComplete  // complete completion k, if not yet done
	opSpawn     // spawn program k, a child
	opJoin      // join the child program k, spawned before
	opCondWait  // wait until token k is available, take it
	opPost      // make token k available, Signal
	opBroadcast // make token k available, Broadcast
	nDiffKinds
)

type diffOp struct {
	kind diffKind
	d    Time
	k    int
}

type diffProg struct {
	name string
	ops  []diffOp
}

const (
	diffCompletions = 6
	diffConds       = 3
)

// genDiffProg appends a random program, and the programs of the children
// it spawns, to progs, and returns its index.
func genDiffProg(rng *rand.Rand, progs *[]diffProg, depth int) int {
	i := len(*progs)
	*progs = append(*progs, diffProg{name: fmt.Sprint("p", i)})
	var ops []diffOp
	var children []int
	for range 2 + rng.IntN(11) {
		op := diffOp{kind: diffKind(rng.IntN(int(nDiffKinds)))}
		switch op.kind {
		case opSleep, opCharge:
			op.d = Time(rng.IntN(4))
		case opWait, opComplete:
			op.k = rng.IntN(diffCompletions)
		case opSpawn:
			if depth >= 3 || len(*progs) > 40 {
				op = diffOp{kind: opSleep, d: 1}
				break
			}
			op.k = genDiffProg(rng, progs, depth+1)
			children = append(children, op.k)
		case opJoin:
			if len(children) == 0 {
				op = diffOp{kind: opSleep}
				break
			}
			op.k = children[rng.IntN(len(children))]
		case opCondWait, opPost, opBroadcast:
			op.k = rng.IntN(diffConds)
		}
		ops = append(ops, op)
	}
	(*progs)[i].ops = ops
	return i
}

// diffProcess is what the test reads of a process of either form.
type diffProcess interface {
	Name() string
	CPUTime() Time
	Exited() *Completion
}

// diffSpawner is what both forms spawn children with.
type diffSpawner interface {
	Spawn(string, func(*Proc)) *Proc
	SpawnStep(string, func(*StepProc) Next) *StepProc
}

type diffRun struct {
	e       *Engine
	progs   []diffProg
	stepped func(prog int) bool // the form program prog runs as
	comps   []*Completion
	conds   []*Cond
	tokens  []int
	procs   map[int]diffProcess
	log     []string
}

func (r *diffRun) logf(format string, a ...any) {
	r.log = append(r.log, fmt.Sprintf("%v ", r.e.Now())+fmt.Sprintf(format, a...))
}

func (r *diffRun) complete(k int) {
	if !r.comps[k].Done() {
		r.comps[k].Complete()
	}
}

func (r *diffRun) spawn(by diffSpawner, prog int) diffProcess {
	var p diffProcess
	if r.stepped(prog) {
		p = by.SpawnStep(r.progs[prog].name, r.stepper(prog))
	} else {
		p = by.Spawn(r.progs[prog].name, r.body(prog))
	}
	r.procs[prog] = p
	return p
}

// body is program i as straight-line code.
func (r *diffRun) body(i int) func(*Proc) {
	prog := r.progs[i]
	return func(p *Proc) {
		if diffAhead {
			p.RunAhead()
		}
		children := map[int]diffProcess{}
		for pc, op := range prog.ops {
			r.logf("%s %d op %d/%d/%d", prog.name, pc, op.kind, op.d, op.k)
			switch op.kind {
			case opSleep:
				p.Sleep(op.d)
			case opCharge:
				p.Charge(op.d)
			case opWait:
				p.Wait(r.comps[op.k])
			case opComplete:
				r.complete(op.k)
			case opSpawn:
				children[op.k] = r.spawn(p, op.k)
			case opJoin:
				if c, ok := children[op.k].(*Proc); ok {
					p.Join(c)
				} else {
					p.Wait(children[op.k].Exited())
				}
			case opCondWait:
				p.WaitUntil(r.conds[op.k], func() bool { return r.tokens[op.k] > 0 })
				r.tokens[op.k]--
				r.logf("%s %d took token %d", prog.name, pc, op.k)
			case opPost:
				r.tokens[op.k]++
				r.conds[op.k].Signal()
			case opBroadcast:
				r.tokens[op.k]++
				r.conds[op.k].Broadcast()
			}
		}
		r.logf("%s returns", prog.name)
	}
}

// stepper is program i as a state machine: pc is the next operation, and
// inCond says the process is in the middle of a condition wait, already
// logged.
func (r *diffRun) stepper(i int) func(*StepProc) Next {
	prog := r.progs[i]
	pc, inCond := 0, false
	children := map[int]diffProcess{}
	return func(s *StepProc) Next {
		for pc < len(prog.ops) {
			op := prog.ops[pc]
			if !inCond {
				r.logf("%s %d op %d/%d/%d", prog.name, pc, op.kind, op.d, op.k)
			}
			switch op.kind {
			case opSleep:
				pc++
				return SleepFor(op.d)
			case opCharge:
				s.Charge(op.d)
			case opWait:
				pc++
				return WaitFor(r.comps[op.k])
			case opComplete:
				r.complete(op.k)
			case opSpawn:
				children[op.k] = r.spawn(s, op.k)
			case opJoin:
				pc++
				return WaitFor(children[op.k].Exited())
			case opCondWait:
				if r.tokens[op.k] == 0 {
					inCond = true
					return WaitOn(r.conds[op.k])
				}
				inCond = false
				r.tokens[op.k]--
				r.logf("%s %d took token %d", prog.name, pc, op.k)
			case opPost:
				r.tokens[op.k]++
				r.conds[op.k].Signal()
			case opBroadcast:
				r.tokens[op.k]++
				r.conds[op.k].Broadcast()
			}
			pc++
		}
		r.logf("%s returns", prog.name)
		return Exit()
	}
}

// runDiff runs the model of seed with each program's form chosen by
// stepped and returns everything observable of the run.
func runDiff(seed uint64, stepped func(int) bool) string {
	return runDiffBy(seed, stepped, func(e *Engine, _ func(string)) string {
		return fmt.Sprintf("guard: %v", e.Guard(Limits{Events: 100_000}))
	})
}

// runDiffBy is runDiff with the events run by drive, which says how the
// run ended and may add to the run's log with logf.
func runDiffBy(seed uint64, stepped func(int) bool, drive func(e *Engine, logf func(string)) string) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	var roots []int
	var all []diffProg
	for range 1 + rng.IntN(5) {
		roots = append(roots, genDiffProg(rng, &all, 0))
	}
	e := New(seed)
	r := &diffRun{e: e, progs: all, stepped: stepped, tokens: make([]int, diffConds), procs: map[int]diffProcess{}}
	e.CPU.Hook(func(w *CPUWork) { r.logf("cpu %s %v-%v charged %v", w.Proc, w.Time, w.End, w.Charged) })
	for k := range diffCompletions {
		c := e.NewNamedCompletion(fmt.Sprint("c", k))
		c.OnComplete(func() { r.logf("c%d completes", k) })
		r.comps = append(r.comps, c)
	}
	for k := range diffConds {
		r.conds = append(r.conds, NewCond(fmt.Sprint("cond", k)))
	}
	// Roots start at time 0 or later, from events; completions and
	// tokens also come from events, as a device's would.
	for _, root := range roots {
		at := Time(rng.IntN(3))
		e.At(at, func() { r.spawn(e, root) })
	}
	for k := range diffCompletions {
		if rng.IntN(4) > 0 {
			at := Time(rng.IntN(16))
			e.At(at, func() { r.logf("event completes c%d", k); r.complete(k) })
		}
	}
	for range rng.IntN(8) {
		at, k := Time(rng.IntN(16)), rng.IntN(diffConds)
		e.At(at, func() { r.logf("event posts token %d", k); r.tokens[k]++; r.conds[k].Signal() })
	}
	end := drive(e, func(s string) { r.logf("%s", s) })
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%s\nnow %v, %d events\nblocked: %q\n", strings.Join(r.log, "\n"), end, e.Now(), e.Fired(), e.Blocked())
	for i := range all {
		p, ok := r.procs[i]
		if !ok {
			continue
		}
		x := p.Exited()
		fmt.Fprintf(&b, "%s cpu %v exited %v at %v\n", p.Name(), p.CPUTime(), x.Done(), x.At())
	}
	e.Close()
	return b.String()
}

func TestStepProcMatchesProc(t *testing.T) {
	var stalls, clean, stepWaits int
	for seed := range uint64(400) {
		want := runDiff(seed, func(int) bool { return false })
		mix := rand.New(rand.NewPCG(seed, 2))
		forms := map[string]func(int) bool{
			"all stackless":  func(int) bool { return true },
			"even stackless": func(i int) bool { return i%2 == 0 },
			"random mix":     func(int) bool { return mix.IntN(2) == 0 },
		}
		for name, stepped := range forms {
			if got := runDiff(seed, stepped); got != want {
				t.Fatalf("seed %d, %s: the run differs from the coroutines'\n%s", seed, name, firstDiff(want, got))
			}
		}
		if strings.Contains(want, "guard: model stalled") {
			stalls++
		} else if strings.Contains(want, "guard: <nil>") {
			clean++
		}
		stepWaits += strings.Count(want, "took token")
	}
	// The programs must exercise what they claim to: runs that end with
	// processes blocked forever, runs that finish, condition waits.
	if stalls == 0 || clean == 0 || stepWaits == 0 {
		t.Errorf("%d stalled runs, %d clean ones, %d tokens taken: the programs do not exercise every case", stalls, clean, stepWaits)
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range min(len(w), len(g)) {
		if w[i] != g[i] {
			return fmt.Sprintf("line %d:\n coroutines: %s\n  this form: %s", i+1, w[i], g[i])
		}
	}
	return fmt.Sprintf("%d lines against %d", len(w), len(g))
}

// TestStepProcExitAndClose: a StepProc's exit completes when its step
// returns Exit, also for an Exited asked for only afterwards; Close ends
// a blocked one without calling its step, and its exit never completes.
func TestStepProcExitAndClose(t *testing.T) {
	e := New(1)
	calls := 0
	s := e.SpawnStep("sleeper", func(s *StepProc) Next {
		calls++
		if calls == 1 {
			return SleepFor(5)
		}
		return Exit()
	})
	var joined Time
	e.Spawn("joiner", func(p *Proc) {
		p.Wait(s.Exited())
		joined = p.Now()
	})
	e.Run()
	if calls != 2 || joined != 5 || !s.Exited().Done() || s.Exited().At() != 5 || s.CPUTime() != 5 {
		t.Fatalf("step called %d times, joined at %v, exit %v at %v, CPU %v", calls, joined, s.Exited().Done(), s.Exited().At(), s.CPUTime())
	}
	late := e.SpawnStep("quick", func(*StepProc) Next { return Exit() })
	e.RunUntil(9)
	if x := late.Exited(); !x.Done() || x.At() != 5 {
		t.Fatalf("exit asked for after the end: done %v at %v, want done at 5", x.Done(), x.At())
	}

	never := e.NewNamedCompletion("irq")
	stuck := e.SpawnStep("stuck", func(s *StepProc) Next {
		calls++
		return WaitFor(never)
	})
	if err := e.Guard(Limits{}); !errors.Is(err, ErrStalled) || !slices.Equal(e.Blocked(), []string{"stuck (waiting on completion irq)"}) {
		t.Fatalf("Guard() = %v, Blocked() = %q", err, e.Blocked())
	}
	calls = 0
	e.Close()
	if calls != 0 || stuck.Exited().Done() || len(e.live) != 0 {
		t.Fatalf("Close called the step %d times, exit done %v, %d live", calls, stuck.Exited().Done(), len(e.live))
	}
}

// ExampleEngine_SpawnStep: a doorbell poller as a state machine. It
// checks a ring every 100 ns until a descriptor is posted, then waits
// for the device's completion and returns; a thread joins it.
func ExampleEngine_SpawnStep() {
	e := New(1)
	defer e.Close()
	posted := false
	done := e.NewNamedCompletion("dma")
	e.At(250*Nanosecond, func() { posted = true })
	e.At(1*Microsecond, done.Complete)

	polls := 0
	poller := e.SpawnStep("poller", func(s *StepProc) Next {
		switch {
		case done.Done():
			fmt.Printf("%v: %s sees the completion after %d polls\n", s.Now(), s.Name(), polls)
			return Exit()
		case posted:
			return WaitFor(done)
		default:
			polls++
			return SleepFor(100 * Nanosecond)
		}
	})
	e.Spawn("app", func(p *Proc) {
		p.Wait(poller.Exited())
		fmt.Printf("%v: app joined the poller, which computed for %v\n", p.Now(), poller.CPUTime())
	})
	fmt.Println(e.Guard(Limits{}))
	// Output:
	// 1us: poller sees the completion after 3 polls
	// 1us: app joined the poller, which computed for 300ns
	// <nil>
}

// TestSleepShortcut: a Proc whose resume is the next event goes on
// without leaving its coroutine (skipAhead), and no one can tell: the
// differential programs, run by Guard with and without event budgets and
// horizons, by RunUntil and by Run, give the same runs as with every
// resume through the event loop, and the shortcut is taken.
func TestSleepShortcut(t *testing.T) {
	taken := diffDrives(t, loopDrives(true), "the shortcut",
		func(on bool) { sleepShortcut = on },
		func(e *Engine) uint64 { return e.shortcuts })
	if taken == 0 {
		t.Fatal("no sleep took the shortcut")
	}
	t.Logf("%d shortcuts", taken)
}

// loopDrive runs a differential program's engine one way (drive, made
// per seed) and describes how it stopped.
type loopDrive struct {
	name  string
	drive func(seed uint64) func(*Engine, func(string)) string
}

// loopDrives are the ways to run an engine that a shortcut of the event
// loop must be invisible under: Guard with a generous budget, with a
// small budget (then again), with a horizon, and RunUntil in steps, then
// Step, then Run. With stepEvent, an event there runs Step itself (no
// loop then; not allowed while a process runs ahead).
func loopDrives(stepEvent bool) []loopDrive {
	return []loopDrive{
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
				if stepEvent {
					e.At(Time(seed%4), func() { e.Step(); logf("stepped") })
				}
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
}

// diffDrives runs the differential programs of 300 seeds under each
// drive, every resume through the loop or a mix of stepped processes,
// with a shortcut off (set(false)) and on (set(true)), fails on the
// first difference, and returns the sum of count over the runs with it
// on. It leaves the shortcut on.
func diffDrives(t *testing.T, drives []loopDrive, name string, set func(on bool), count func(*Engine) uint64) uint64 {
	t.Helper()
	defer set(true)
	var total uint64
	for _, d := range drives {
		for seed := range uint64(300) {
			mix := func(i int) bool { return (uint64(i)*7+seed)%3 == 0 }
			for _, stepped := range []func(int) bool{func(int) bool { return false }, mix} {
				set(false)
				want := runDiffBy(seed, stepped, d.drive(seed))
				set(true)
				var e *Engine
				got := runDiffBy(seed, stepped, func(x *Engine, logf func(string)) string { e = x; return d.drive(seed)(x, logf) })
				if got != want {
					t.Fatalf("%s, seed %d: the run with %s differs\n%s", d.name, seed, name, firstDiff(want, got))
				}
				total += count(e)
			}
		}
	}
	return total
}

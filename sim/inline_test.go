package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// inlineWorld is a random model of processes that sleep (often for
// zero or a short time), wait on completions others complete, wait on
// a condition others signal, and schedule bare events; it logs every
// step with the time, the process's CPU time and the engine's count of
// fired events.
func inlineWorld(e *Engine, seed uint64, log *[]string, alone *int) {
	r := rand.New(rand.NewPCG(seed, 1))
	nproc := 1 + r.IntN(5)
	comps := make([]*Completion, 8)
	for i := range comps {
		comps[i] = e.NewNamedCompletion(fmt.Sprint("c", i))
	}
	cond := NewCond("cond")
	flag := 0
	type op struct {
		kind int
		d    Time
		i    int
	}
	for pi := range nproc {
		var ops []op
		for range 5 + r.IntN(40) {
			ops = append(ops, op{kind: r.IntN(7), d: Time(r.IntN(4) * r.IntN(50)), i: r.IntN(len(comps))})
		}
		name := fmt.Sprint("p", pi)
		e.Spawn(name, func(p *Proc) {
			for k, o := range ops {
				switch o.kind {
				case 0, 1, 2:
					p.Sleep(o.d)
				case 3:
					if c := comps[o.i]; !c.Done() {
						c.Complete()
					}
				case 4:
					// Wait only on completions some later op of a
					// process completes, or for a bounded time.
					c := e.NewNamedCompletion("t")
					e.After(o.d, c.Complete)
					p.Wait(c)
				case 6:
					// Sleeps of d, d+1, ... made at once when they
					// can be, else one by one.
					n := 1 + o.i%4
					var sum Time
					for j := range n {
						sum += o.d + Time(j)
					}
					if !p.SleepAlone(uint64(n), sum) {
						for j := range n {
							p.Sleep(o.d + Time(j))
						}
					} else {
						*alone++
					}
				case 5:
					flag++
					cond.Broadcast()
					e.After(o.d, func() { *log = append(*log, fmt.Sprintf("%v event of %s", e.Now(), name)) })
				}
				*log = append(*log, fmt.Sprintf("%v %s op %d cpu %v fired %d", e.Now(), name, k, p.CPUTime(), e.Fired()))
			}
		})
	}
	e.Spawn("waiter", func(p *Proc) {
		p.WaitUntil(cond, func() bool { return flag > 0 })
		*log = append(*log, fmt.Sprintf("%v waiter woke fired %d", e.Now(), e.Fired()))
	})
	if seed%2 == 0 {
		e.CPU.Hook(func(w *CPUWork) { *log = append(*log, fmt.Sprintf("cpu %s %v-%v", w.Proc, w.Time, w.End)) })
	}
}

// TestSleepInlineSameRun: a run under Run, RunUntil or Guard, where
// sleeps with nothing else due before their end continue without
// leaving the coroutine (skipAhead) and groups of sleeps go at once
// (SleepAlone), logs exactly what the same model logs stepped one event
// at a time (Step, which never inlines): every time, CPU time, CPU hook
// and count of fired events.
func TestSleepInlineSameRun(t *testing.T) {
	inlined, alone := 0, 0
	for seed := range uint64(300) {
		var ref, got []string
		e := New(seed)
		stepAlone := 0
		inlineWorld(e, seed, &ref, &stepAlone)
		for e.Step() {
		}
		refFired := e.Fired()
		e.Close()

		e = New(seed)
		inlineWorld(e, seed, &got, &alone)
		var err error
		switch seed % 3 {
		case 0:
			e.Run()
		case 1:
			e.RunUntil(Forever)
		case 2:
			err = e.Guard(Limits{})
		}
		if _, ok := err.(*StallError); err != nil && !ok {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !slices.Equal(ref, got) {
			for i := range min(len(ref), len(got)) {
				if ref[i] != got[i] {
					t.Fatalf("seed %d: line %d: stepped %q, run %q", seed, i, ref[i], got[i])
				}
			}
			t.Fatalf("seed %d: stepped %d lines, run %d", seed, len(ref), len(got))
		}
		if e.Fired() != refFired {
			t.Fatalf("seed %d: fired %d, stepped %d", seed, e.Fired(), refFired)
		}
		inlined += int(e.shortcuts)
		e.Close()
	}
	if inlined == 0 || alone == 0 {
		t.Fatalf("%d sleeps ran inline, %d groups at once: the test tests too little", inlined, alone)
	}
}

// TestSleepInlineLimits: a guarded run stops at the same event budget
// and horizon with and without the shortcut.
func TestSleepInlineLimits(t *testing.T) {
	sleeps := func(p *Proc) {
		for range 100 {
			p.Sleep(10)
		}
	}
	groups := func(p *Proc) {
		for range 34 {
			if !p.SleepAlone(3, 30) {
				p.Sleep(10)
				p.Sleep(10)
				p.Sleep(10)
			}
		}
	}
	for i, l := range []Limits{{Events: 7}, {Horizon: 355}, {Horizon: 350}, {Events: 7}, {Events: 9}, {Horizon: 355}, {Horizon: 360}} {
		body := sleeps
		if i >= 3 {
			body = groups
		}
		e := New(1)
		e.Spawn("a", body)
		err := e.Guard(l)
		le, ok := err.(*LimitError)
		if !ok {
			t.Fatalf("%+v: %v, want a LimitError", l, err)
		}
		ref := New(1)
		ref.Spawn("a", body)
		var fired uint64
		for ref.next().at <= max(l.Horizon, 0) || l.Horizon == 0 {
			if l.Events > 0 && fired >= l.Events {
				break
			}
			ref.Step()
			fired++
		}
		if e.Now() != ref.Now() || e.Fired() != ref.Fired() || le.Next != ref.next().at {
			t.Errorf("%+v: stopped at %v after %d events (next %v), stepped %v after %d (next %v)",
				l, e.Now(), e.Fired(), le.Next, ref.Now(), ref.Fired(), ref.next().at)
		}
		e.Close()
		ref.Close()
	}
}

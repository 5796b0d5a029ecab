package fabric

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

const (
	us = sim.Microsecond
	ms = sim.Millisecond
	s  = sim.Second
)

// pair is a fabric with two nodes, "a" and "b".
type pair struct {
	eng  *sim.Engine
	fab  *Fabric
	a, b *Node
}

func newPair(f Factors) pair {
	eng := sim.New(1)
	fab := New(eng, f)
	return pair{eng, fab, fab.Node("a"), fab.Node("b")}
}

// route is the route over l in direction d with weight 1.
func route(l *Link, d Dir) Route { return Route{Hops: []Hop{{Link: l, Dir: d}}} }

// checked makes every rate change verify max-min optimality.
func checked(t *testing.T, fab *Fabric) {
	t.Helper()
	fab.Hooks.Hook(func(ev *Event) {
		if ev.Kind != FlowRate {
			return
		}
		if err := fab.checkShare(); err != nil {
			t.Errorf("at %v: %v", ev.Time, err)
		}
	})
}

func TestOneFlow(t *testing.T) {
	// 1 GB over 10 GB/s: 1e9/1e10 = 0.1 s = 100 ms, after 1 µs of latency.
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 1*us, FullDuplex)
	fl := p.fab.Start("f", route(l, AtoB), 1e9)
	if got := fl.Remaining(); got != 1e9 {
		t.Errorf("remaining before start = %v, want 1e9", got)
	}
	p.eng.RunUntil(50 * ms)
	if got, want := fl.Rate(), 10e9; got != want {
		t.Errorf("rate = %v, want %v", got, want)
	}
	// After 50 ms - 1 µs at 10 GB/s, 1e9 - 1e10×0.049999 = 500010000 B remain.
	if got, want := fl.Remaining(), 500010000.0; math.Abs(got-want) > 1e-3 {
		t.Errorf("remaining at 50 ms = %v, want %v", got, want)
	}
	p.eng.Run()
	if want := 1*us + 100*ms; fl.End() != want || fl.Done().At() != want {
		t.Errorf("end = %v (done at %v), want %v", fl.End(), fl.Done().At(), want)
	}
	if fl.ActiveAt() != 1*us || fl.Start() != 0 {
		t.Errorf("start %v, active at %v; want 0, 1us", fl.Start(), fl.ActiveAt())
	}
}

func TestTwoFlowsOneBottleneck(t *testing.T) {
	// A (1 GB) and B (2 GB) share 10 GB/s: 5 GB/s each. A ends at
	// 1e9/5e9 = 0.2 s, when B has 2e9 - 5e9×0.2 = 1e9 left, which it
	// moves alone at 10 GB/s in 0.1 s: B ends at 0.3 s.
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 0, FullDuplex)
	checked(t, p.fab)
	a := p.fab.Start("A", route(l, AtoB), 1e9)
	b := p.fab.Start("B", route(l, AtoB), 2e9)
	p.eng.RunUntil(100 * ms)
	for _, fl := range []*Flow{a, b} {
		if fl.Rate() != 5e9 {
			t.Errorf("%s rate = %v, want 5e9", fl.Name(), fl.Rate())
		}
	}
	p.eng.RunUntil(250 * ms)
	if b.Rate() != 10e9 {
		t.Errorf("B rate after A ended = %v, want 1e10", b.Rate())
	}
	p.eng.Run()
	if a.End() != 200*ms || b.End() != 300*ms {
		t.Errorf("ends = %v, %v; want 200ms, 300ms", a.End(), b.End())
	}
	// The link carried 3 GB one way in 0.3 s, saturated throughout.
	st := l.Stats()
	want := LinkStats{Bytes: [2]float64{3e9, 0}, Busy: [2]sim.Time{300 * ms, 0}, PeakUtil: [2]float64{1, 0}}
	if st != want {
		t.Errorf("stats = %+v, want %+v", st, want)
	}
	if p.fab.Stats(l) != st {
		t.Errorf("Fabric.Stats and Link.Stats differ")
	}
}

func TestMaxMinTextbook(t *testing.T) {
	// L1 (10 GB/s) carries f1, f2, f3; f1 also crosses L2 (2 GB/s).
	// Filling: L2 saturates first at 2/1 = 2 (L1 would at 10/3): f1 = 2.
	// L1 then has 10-2 = 8 left for two flows: f2 = f3 = 4.
	eng := sim.New(1)
	fab := New(eng, Factors{})
	x, y, z := fab.Node("x"), fab.Node("y"), fab.Node("z")
	l1 := fab.Connect("L1", x, y, 10e9, 0, FullDuplex)
	l2 := fab.Connect("L2", y, z, 2e9, 0, FullDuplex)
	checked(t, fab)
	r1, err := fab.Route(x, z)
	if err != nil {
		t.Fatal(err)
	}
	f1 := fab.Start("f1", r1, 1e12)
	f2 := fab.Start("f2", route(l1, AtoB), 1e12)
	f3 := fab.Start("f3", route(l1, AtoB), 1e12)
	eng.RunUntil(1 * ms)
	for _, c := range []struct {
		fl   *Flow
		want float64
	}{{f1, 2e9}, {f2, 4e9}, {f3, 4e9}} {
		if c.fl.Rate() != c.want {
			t.Errorf("%s rate = %v, want %v", c.fl.Name(), c.fl.Rate(), c.want)
		}
	}
	if got := l2.Stats().PeakUtil[AtoB]; got != 1 {
		t.Errorf("L2 peak utilisation = %v, want 1", got)
	}
	eng.Close()
}

func TestLV08(t *testing.T) {
	// SimGrid's worked example: 100 kB over a Shared 1 Mbps (125000 B/s)
	// link with 10 ms latency.
	for _, c := range []struct {
		name  string
		f     Factors
		want  float64 // seconds
		tol   float64
		exact sim.Time
	}{
		// 0.01 + 100000/125000 = 0.81 s exactly.
		{"no factors", Factors{}, 0.81, 0, 810 * ms},
		// 13.01×0.01 + 100000/(0.97×125000/1.05) = 0.1301 + 0.865979... =
		// 0.996080 s: the link sees the flow (1+0.05)× (cross traffic on
		// the same Shared resource).
		{"LV08 factors", Factors{Bandwidth: 0.97, Latency: 13.01, Cross: 0.05}, 0.996, 0.0005, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(c.f)
			l := p.fab.Connect("1Mbps", p.a, p.b, 125000, 10*ms, Shared)
			fl := p.fab.Start("100kB", route(l, AtoB), 100000)
			p.eng.Run()
			got := fl.End()
			t.Logf("100 kB over 1 Mbps/10 ms with %+v: %v (%.9f s)", c.f, got, got.Seconds())
			if c.exact >= 0 && got != c.exact {
				t.Errorf("end = %v, want %v", got, c.exact)
			}
			if math.Abs(got.Seconds()-c.want) > c.tol {
				t.Errorf("end = %.9f s, want %v ± %v", got.Seconds(), c.want, c.tol)
			}
		})
	}
}

func TestBothDirections(t *testing.T) {
	// 1 GB each way over 10 GB/s. Full duplex: each direction has the
	// whole 10 GB/s, so both end at 0.1 s. Shared: one 10 GB/s for both,
	// 5 GB/s each, both end at 0.2 s. Full duplex with cross traffic 0.05:
	// each direction carries one flow and the other's ACKs, 1.05 r = 1e10
	// (r is a hair under 1e10/1.05, as float64(1.05) is a hair over 1.05).
	cross := 0.05
	for _, c := range []struct {
		name     string
		sharing  Sharing
		f        Factors
		wantRate float64
		wantEnd  sim.Time
	}{
		{"full duplex", FullDuplex, Factors{}, 10e9, 100 * ms},
		{"shared", Shared, Factors{}, 5e9, 200 * ms},
		{"full duplex with cross traffic", FullDuplex, Factors{Cross: cross}, 10e9 / (1 + cross), sim.TransferTime(1e9, 10e9/(1+cross))},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(c.f)
			l := p.fab.Connect("l", p.a, p.b, 10e9, 0, c.sharing)
			checked(t, p.fab)
			fwd := p.fab.Start("fwd", route(l, AtoB), 1e9)
			back := p.fab.Start("back", route(l, BtoA), 1e9)
			p.eng.RunUntil(1 * ms)
			for _, fl := range []*Flow{fwd, back} {
				if fl.Rate() != c.wantRate {
					t.Errorf("%s rate = %v, want %v", fl.Name(), fl.Rate(), c.wantRate)
				}
			}
			p.eng.Run()
			for _, fl := range []*Flow{fwd, back} {
				if fl.End() != c.wantEnd {
					t.Errorf("%s end = %v, want %v", fl.Name(), fl.End(), c.wantEnd)
				}
			}
			// The end rounds up to a whole ps, so the counters may hold a
			// fraction of a byte more.
			for d, b := range l.Stats().Bytes {
				if math.Abs(b-1e9) > 0.1 {
					t.Errorf("%v carried %v, want 1e9", Dir(d), b)
				}
			}
		})
	}
}

func TestMaxRate(t *testing.T) {
	// A is capped at 2 GB/s, B takes the other 8. A (1 GB) ends at 0.5 s;
	// B (8 GB) has moved 4 GB by then and moves the other 4 alone at
	// 10 GB/s: it ends at 0.9 s.
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 0, FullDuplex)
	checked(t, p.fab)
	a := p.fab.Start("A", route(l, AtoB), 1e9, MaxRate(2e9), Tag("memcpy"))
	b := p.fab.Start("B", route(l, AtoB), 8e9)
	p.eng.RunUntil(1 * ms)
	if a.Rate() != 2e9 || b.Rate() != 8e9 {
		t.Errorf("rates = %v, %v; want 2e9, 8e9", a.Rate(), b.Rate())
	}
	p.eng.Run()
	if a.End() != 500*ms || b.End() != 900*ms {
		t.Errorf("ends = %v, %v; want 500ms, 900ms", a.End(), b.End())
	}
	if a.Tag() != "memcpy" || a.MaxRate() != 2e9 {
		t.Errorf("tag %v, max rate %v", a.Tag(), a.MaxRate())
	}
}

func TestMaxRateOnly(t *testing.T) {
	// No hops, a 1 GB/s cap: 1 MB takes 1 ms. No hops, no cap: nothing
	// limits it, it ends at once.
	eng := sim.New(1)
	fab := New(eng, Factors{})
	capped := fab.Start("cpu-copy", Route{}, 1e6, MaxRate(1e9))
	free := fab.Start("free", Route{}, 1e6)
	eng.Run()
	if capped.End() != 1*ms || free.End() != 0 || !free.Done().Done() {
		t.Errorf("ends = %v, %v; want 1ms, 0", capped.End(), free.End())
	}
}

func TestWeights(t *testing.T) {
	// Alone, a weight-2 hop (a copy reading and writing one HBM) gets
	// 10/2 = 5 GB/s: 1 GB in 0.2 s. Beside a weight-1 flow both rise
	// together until 2r + r = 10: r = 10/3 GB/s each.
	t.Run("alone", func(t *testing.T) {
		p := newPair(Factors{})
		hbm := p.fab.Connect("hbm", p.a, p.b, 10e9, 0, Shared)
		fl := p.fab.Start("copy", Route{Hops: []Hop{{Link: hbm, Weight: 2}}}, 1e9)
		p.eng.Run()
		if fl.End() != 200*ms {
			t.Errorf("end = %v, want 200ms", fl.End())
		}
		if got := hbm.Stats().Bytes[AtoB]; got != 2e9 {
			t.Errorf("hbm carried %v, want 2e9", got)
		}
	})
	t.Run("beside a weight-1 flow", func(t *testing.T) {
		p := newPair(Factors{})
		hbm := p.fab.Connect("hbm", p.a, p.b, 10e9, 0, Shared)
		checked(t, p.fab)
		cp := p.fab.Start("copy", Route{Hops: []Hop{{Link: hbm, Weight: 2}}}, 1e12)
		rd := p.fab.Start("read", route(hbm, BtoA), 1e12)
		p.eng.RunUntil(1 * ms)
		if cp.Rate() != 10e9/3 || rd.Rate() != 10e9/3 {
			t.Errorf("rates = %v, %v; want %v each", cp.Rate(), rd.Rate(), 10e9/3)
		}
		p.eng.Close()
	})
}

func TestStartMidway(t *testing.T) {
	// A (2 GB) runs alone at 10 GB/s; at 0.1 s it has 1 GB left and B
	// (0.5 GB) starts: 5 GB/s each. B ends at 0.1 + 0.5/5 = 0.2 s, when A
	// has 1 - 0.5 = 0.5 GB left, alone again: 0.05 s more, 0.25 s.
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 0, FullDuplex)
	checked(t, p.fab)
	a := p.fab.Start("A", route(l, AtoB), 2e9)
	var b *Flow
	p.eng.Spawn("late", func(pr *sim.Proc) {
		pr.Sleep(100 * ms)
		b = p.fab.Start("B", route(l, AtoB), 5e8)
		pr.Wait(b.Done())
		if pr.Now() != 200*ms {
			t.Errorf("woke at %v, want 200ms", pr.Now())
		}
	})
	p.eng.Run()
	if a.End() != 250*ms || b.End() != 200*ms {
		t.Errorf("ends = A %v, B %v; want 250ms, 200ms", a.End(), b.End())
	}
}

func TestZeroBytes(t *testing.T) {
	// A 0-byte flow ends when its 1 µs latency is over, with no rate.
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 1*us, FullDuplex)
	var log []string
	p.fab.Hooks.Hook(func(ev *Event) { log = append(log, ev.String()) })
	fl := p.fab.Start("doorbell", route(l, AtoB), 0)
	p.eng.Run()
	if fl.End() != 1*us {
		t.Errorf("end = %v, want 1us", fl.End())
	}
	want := []string{"0s start doorbell", "1us active doorbell", "1us end doorbell"}
	if !slices.Equal(log, want) {
		t.Errorf("events = %q, want %q", log, want)
	}
}

func TestBurstCoalesces(t *testing.T) {
	// 1000 flows of 1 MB start at one instant on one 10 GB/s link: one
	// recompute gives each 10 MB/s; they all end at 1e6/1e7 = 0.1 s, which
	// is one more recompute.
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 1*us, FullDuplex)
	var flows []*Flow
	for i := range 1000 {
		flows = append(flows, p.fab.Start(fmt.Sprint("f", i), route(l, AtoB), 1e6))
	}
	p.eng.RunUntil(2 * us)
	if got := p.fab.Recomputes(); got != 1 {
		t.Errorf("recomputes after the burst = %d, want 1", got)
	}
	if p.fab.Active() != 1000 {
		t.Errorf("active = %d, want 1000", p.fab.Active())
	}
	p.eng.Run()
	if got := p.fab.Recomputes(); got != 2 {
		t.Errorf("recomputes in all = %d, want 2", got)
	}
	for _, fl := range flows {
		if fl.End() != 1*us+100*ms {
			t.Fatalf("%s end = %v, want 100.001ms", fl.Name(), fl.End())
		}
	}
}

// tree builds root – n switches – m leaves per switch, full duplex:
// leaf links 16 GB/s and 100 ns, switch links 64 GB/s and 200 ns.
func tree(eng *sim.Engine, n, m int) (*Fabric, []*Node) {
	fab := New(eng, Factors{})
	root := fab.Node("root")
	var leaves []*Node
	for i := range n {
		sw := fab.Node(fmt.Sprint("sw", i))
		fab.Connect(fmt.Sprintf("root-sw%d", i), root, sw, 64e9, 200*sim.Nanosecond, FullDuplex)
		for j := range m {
			leaf := fab.Node(fmt.Sprintf("leaf%d.%d", i, j))
			fab.Connect(fmt.Sprintf("sw%d-leaf%d.%d", i, i, j), sw, leaf, 16e9, 100*sim.Nanosecond, FullDuplex)
			leaves = append(leaves, leaf)
		}
	}
	return fab, leaves
}

func TestRoute(t *testing.T) {
	fab, leaves := tree(sim.New(1), 2, 2)
	n := fab.Node
	island := n("island")

	r, err := fab.Route(leaves[0], leaves[3])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.String(), "leaf0.0 -sw0-leaf0.0-> sw0 -root-sw0-> root -root-sw1-> sw1 -sw1-leaf1.1-> leaf1.1"; got != want {
		t.Errorf("through the root: %s, want %s", got, want)
	}
	if r.Latency() != 600*sim.Nanosecond {
		t.Errorf("latency = %v, want 600ns", r.Latency())
	}

	// Connecting clears the cache: new links win where they are shorter
	// or, at equal hops, faster, or, at equal latency, older.
	fab.Connect("shortcut", n("sw0"), n("sw1"), 1e9, 5*us, FullDuplex)
	fab.Connect("slow", n("leaf0.0"), n("x"), 1e9, 2*us, FullDuplex)
	fab.Connect("fast", n("leaf0.0"), n("x"), 1e9, 1*us, FullDuplex)
	fab.Connect("first", n("x"), n("y"), 1e9, 1*us, FullDuplex)
	fab.Connect("second", n("x"), n("y"), 1e9, 1*us, Shared)
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"fewer hops beats lower latency", "leaf0.0", "leaf1.1", "leaf0.0 -sw0-leaf0.0-> sw0 -shortcut-> sw1 -sw1-leaf1.1-> leaf1.1"},
		{"lower latency breaks a hop tie", "leaf0.0", "x", "leaf0.0 -fast-> x"},
		{"creation order breaks a latency tie", "x", "y", "x -first-> y"},
		{"direction follows travel", "sw1", "sw0", "sw1 -shortcut-> sw0"},
		{"a node to itself", "root", "root", "(empty)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := fab.Route(n(c.from), n(c.to))
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != c.want {
				t.Errorf("route = %s, want %s", r, c.want)
			}
			again, _ := fab.Route(n(c.from), n(c.to))
			if !slices.Equal(again.Hops, r.Hops) {
				t.Errorf("cached route differs: %s", again)
			}
		})
	}
	r, _ = fab.Route(n("sw1"), n("sw0"))
	if r.Hops[0].Dir != BtoA {
		t.Errorf("sw1→sw0 over shortcut(sw0, sw1) is %v, want B→A", r.Hops[0].Dir)
	}

	t.Run("unreachable", func(t *testing.T) {
		_, err := fab.Route(leaves[0], island)
		if !errors.Is(err, ErrNoRoute) || !strings.Contains(err.Error(), `"leaf0.0"`) || !strings.Contains(err.Error(), `"island"`) {
			t.Errorf("err = %v, want ErrNoRoute naming leaf0.0 and island", err)
		}
	})
	t.Run("the caller owns the hops", func(t *testing.T) {
		r, _ := fab.Route(leaves[0], leaves[1])
		r.Hops[0].Weight = 7
		again, _ := fab.Route(leaves[0], leaves[1])
		if again.Hops[0].Weight != 1 {
			t.Errorf("cached route was changed through a returned one")
		}
	})
}

// scenario runs flows between random leaves of a tree, started at random
// times by two processes, and returns the observer's log and the ends.
func scenario(t *testing.T, seed uint64) ([]string, []sim.Time) {
	eng := sim.New(seed)
	fab, leaves := tree(eng, 3, 3)
	checked(t, fab)
	var log []string
	fab.Hooks.Hook(func(ev *Event) { log = append(log, ev.String()) })
	var flows []*Flow
	for w := range 2 {
		eng.Spawn(fmt.Sprint("worker", w), func(p *sim.Proc) {
			rng := eng.Rand()
			for i := range 20 {
				from, to := leaves[rng.IntN(len(leaves))], leaves[rng.IntN(len(leaves))]
				r, err := fab.Route(from, to)
				if err != nil {
					t.Error(err)
					return
				}
				var opt []Option
				if i%5 == 0 {
					opt = append(opt, MaxRate(3e9))
				}
				fl := fab.Start(fmt.Sprintf("w%d.%d", w, i), r, rng.Int64N(1e8), opt...)
				flows = append(flows, fl)
				if i%3 == 0 {
					p.Wait(fl.Done())
				}
				p.Sleep(sim.Time(rng.Int64N(int64(2 * ms))))
			}
		})
	}
	eng.Run()
	var ends []sim.Time
	for _, fl := range flows {
		if !fl.Done().Done() {
			t.Errorf("%s never ended", fl.Name())
		}
		ends = append(ends, fl.End())
	}
	return log, ends
}

func TestDeterminism(t *testing.T) {
	log1, ends1 := scenario(t, 7)
	log2, ends2 := scenario(t, 7)
	if !slices.Equal(log1, log2) {
		t.Errorf("event logs differ between identical runs")
	}
	if !slices.Equal(ends1, ends2) {
		t.Errorf("end times differ: %v vs %v", ends1, ends2)
	}
	if len(log1) < 40*3 {
		t.Errorf("only %d events", len(log1))
	}
}

func TestModelBugsPanic(t *testing.T) {
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 1e9, 0, FullDuplex)
	other := newPair(Factors{})
	ol := other.fab.Connect("ol", other.a, other.b, 1e9, 0, FullDuplex)
	for _, c := range []struct {
		name, want string
		fn         func()
	}{
		{"zero capacity", `link "dead"`, func() { p.fab.Connect("dead", p.a, p.b, 0, 0, FullDuplex) }},
		{"negative capacity", `link "neg"`, func() { p.fab.Connect("neg", p.a, p.b, -1, 0, Shared) }},
		{"duplicate link", `link "l"`, func() { p.fab.Connect("l", p.a, p.b, 1, 0, Shared) }},
		{"negative bytes", `flow "f"`, func() { p.fab.Start("f", route(l, AtoB), -1) }},
		{"nil link", `flow "f"`, func() { p.fab.Start("f", Route{Hops: []Hop{{}}}, 1) }},
		{"foreign link", `flow "f"`, func() { p.fab.Start("f", route(ol, AtoB), 1) }},
		{"negative weight", `flow "f"`, func() { p.fab.Start("f", Route{Hops: []Hop{{Link: l, Weight: -1}}}, 1) }},
		{"zero MaxRate", "MaxRate", func() { MaxRate(0) }},
		{"negative factor", "bandwidth factor", func() { New(p.eng, Factors{Bandwidth: -1}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, c.want) {
					t.Errorf("panic %v, want one naming %s", r, c.want)
				}
			}()
			c.fn()
		})
	}
}

func TestBeyondTimeRange(t *testing.T) {
	// 1e18 B at 1 kB/s would take 1e15 s, past sim.Time's ~106 days: the
	// flow runs without wrapping its end into the past.
	p := newPair(Factors{})
	l := p.fab.Connect("slow", p.a, p.b, 1e3, 0, FullDuplex)
	fl := p.fab.Start("huge", route(l, AtoB), 1e18)
	p.eng.RunUntil(1 * s)
	if fl.Rate() != 1e3 || fl.Done().Done() {
		t.Errorf("rate %v, done %v; want 1e3, not done", fl.Rate(), fl.Done().Done())
	}
	p.eng.Close()
}

func TestAccessors(t *testing.T) {
	// Effective capacity is nominal × bandwidth factor: 10 GB/s × 0.5.
	p := newPair(Factors{Bandwidth: 0.5})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 2*us, Shared)
	m := p.fab.Connect("m", p.b, p.a, 1e9, 0, FullDuplex)
	if l.Effective() != 5e9 || l.Capacity() != 10e9 || l.Latency() != 2*us || l.Sharing() != Shared {
		t.Errorf("link l: %v %v %v %v", l.Effective(), l.Capacity(), l.Latency(), l.Sharing())
	}
	if l.A() != p.a || l.B() != p.b || l.From(BtoA) != p.b || l.To(BtoA) != p.a {
		t.Errorf("link ends wrong")
	}
	if !slices.Equal(p.fab.Links(), []*Link{l, m}) || !slices.Equal(p.a.Links(), []*Link{l, m}) || p.fab.Link("m") != m || p.fab.Link("x") != nil {
		t.Errorf("link lists or lookup wrong")
	}
	if !slices.Equal(p.fab.Nodes(), []*Node{p.a, p.b}) || p.fab.Node("a") != p.a {
		t.Errorf("node list or lookup wrong")
	}
	if f := p.fab.Factors(); f != (Factors{Bandwidth: 0.5, Latency: 1}) {
		t.Errorf("factors = %+v", f)
	}
	r := route(l, AtoB)
	fl := p.fab.Start("f", r, 5e9)
	if fl.Bytes() != 5e9 || !slices.Equal(fl.Route().Hops, r.Hops) || fl.End() != 0 {
		t.Errorf("flow: %v %v %v", fl.Bytes(), fl.Route(), fl.End())
	}
	p.eng.Run()
	// 5 GB at 5 GB/s after 2 µs.
	if fl.End() != 2*us+1*s || fl.Remaining() != 0 || fl.Rate() != 0 {
		t.Errorf("end %v, remaining %v, rate %v", fl.End(), fl.Remaining(), fl.Rate())
	}
	if fmt.Sprint(AtoB, BtoA, FullDuplex, Shared, FlowStart, FlowActive, FlowRate, FlowEnd) != "A→B B→A full-duplex shared start active rate end" {
		t.Errorf("names: %v", fmt.Sprint(AtoB, BtoA, FullDuplex, Shared, FlowStart, FlowActive, FlowRate, FlowEnd))
	}
}

// TestSimultaneousEndsInActivationOrder: flows that end at one instant
// end in the order they became active, also after an earlier flow left
// the middle of the active set.
func TestSimultaneousEndsInActivationOrder(t *testing.T) {
	p := newPair(Factors{})
	mk := func(name string) *Link { return p.fab.Connect(name, p.a, p.b, 1e9, 0, FullDuplex) }
	la, lx, lb := mk("la"), mk("lx"), mk("lb")
	var ends []string
	p.fab.Hooks.Hook(func(ev *Event) {
		if ev.Kind == FlowEnd {
			ends = append(ends, ev.Flow.Name())
		}
	})
	p.fab.Start("A", route(la, AtoB), 1e6) // ends first: the front of the active set leaves
	p.fab.Start("X", route(lx, AtoB), 3e6)
	p.fab.Start("B", route(lb, AtoB), 3e6) // X and B end together
	p.eng.Run()
	if !slices.Equal(ends, []string{"A", "X", "B"}) {
		t.Fatalf("end order %v, want A X B", ends)
	}
}

// TestUnending: a flow that would end past sim.Time's range never ends,
// and Unending says so.
func TestUnending(t *testing.T) {
	p := newPair(Factors{})
	l := p.fab.Connect("slow", p.a, p.b, 1, 0, FullDuplex) // 1 B/s
	fl := p.fab.Start("long", route(l, AtoB), 1<<62)
	p.eng.Run()
	if fl.Done().Done() || p.fab.Unending() != 1 {
		t.Fatalf("done %v, unending %d", fl.Done().Done(), p.fab.Unending())
	}
}

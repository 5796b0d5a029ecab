package fabric

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestActivationAtTimerInstant: a flow whose latency ends at the instant
// another flow ends, its activation event queued before the completion
// timer, still moves all its bytes (before groups, it had no end yet and
// the timer ended it at once, with nothing moved).
func TestActivationAtTimerInstant(t *testing.T) {
	eng := sim.New(1)
	fab := New(eng, Factors{})
	a, b, c := fab.Node("a"), fab.Node("b"), fab.Node("c")
	fast := fab.Connect("fast", a, b, 1e9, 0, FullDuplex)
	slow := fab.Connect("slow", a, c, 1e9, sim.Millisecond, FullDuplex)
	// Started first: its activation at 1 ms is queued before the timer
	// that the recompute for the other flow arms at 1 ms.
	late := fab.Start("late", Route{Hops: []Hop{{Link: slow, Dir: AtoB}}}, 1e6)
	early := fab.Start("early", Route{Hops: []Hop{{Link: fast, Dir: AtoB}}}, 1e6)
	eng.Run()
	if got := early.End(); got != sim.Millisecond {
		t.Fatalf("early ends at %v, want 1ms", got)
	}
	if got, want := late.End(), 2*sim.Millisecond; got != want {
		t.Errorf("late: active at %v, ends at %v, want %v", late.ActiveAt(), got, want)
	}
}

// TestGroupedEndsMatchUngrouped runs a closed loop of many flows over a
// few routes with every flow grouped and with none, and checks that every
// flow ends at the same instant to within a nanosecond per thousand
// flows ended (the grouped progress rounds differently) and that groups
// did form.
func TestGroupedEndsMatchUngrouped(t *testing.T) {
	def := groupMin
	defer func() { groupMin = def }()
	run := func(gm int) ([]sim.Time, int) {
		groupMin = gm
		eng := sim.New(1)
		fab, eps := starTopo(eng, 2, 2)
		c := newClosedLoop(fab, eps)
		var ends []sim.Time
		maxGroup := 0
		fab.Hooks.Hook(func(ev *Event) {
			if ev.Kind == FlowEnd {
				ends = append(ends, ev.Time)
			}
			if ev.Kind == FlowRate {
				maxGroup = max(maxGroup, ev.Flow.g.n)
			}
		})
		c.run(200, 2000)
		return ends, maxGroup
	}
	grouped, gmax := run(0)
	alone, amax := run(1 << 30)
	if gmax < 10 || amax != 1 {
		t.Fatalf("largest group %d grouped, %d ungrouped", gmax, amax)
	}
	if len(grouped) != len(alone) {
		t.Fatalf("%d ends grouped, %d not", len(grouped), len(alone))
	}
	for i := range grouped {
		if d := grouped[i] - alone[i]; d > 2 || d < -2 {
			t.Fatalf("end %d: %v grouped, %v not", i, grouped[i], alone[i])
		}
	}
}

// TestLatencyEndsInEngineOrder: the latency queue hands each activation
// event the flow it was scheduled for, whatever the order of starts,
// latencies and starts made from inside events.
func TestLatencyEndsInEngineOrder(t *testing.T) {
	eng := sim.New(1)
	fab := New(eng, Factors{})
	a := fab.Node("a")
	var links []*Link
	for i, lat := range []sim.Time{3, 1, 2, 1, 0, 3} {
		links = append(links, fab.Connect(string(rune('p'+i)), a, fab.Node(string(rune('A'+i))), 1e9, lat*sim.Microsecond, FullDuplex))
	}
	var got []string
	fab.Hooks.Hook(func(ev *Event) {
		if ev.Kind == FlowActive {
			got = append(got, ev.Flow.Name())
		}
	})
	start := func(name string, l *Link) {
		fl := fab.Start(name, Route{Hops: []Hop{{Link: l, Dir: AtoB}}}, 1000)
		if fl.Start() != eng.Now() {
			t.Fatalf("%s started at %v", name, fl.Start())
		}
	}
	for i, l := range links {
		start(string(rune('0'+i)), l)
	}
	// At 1 µs, from an event: a flow whose latency ends with the ones
	// started at 0 with 3 µs, after them (scheduled later).
	eng.At(sim.Microsecond, func() { start("x", links[2]) })
	eng.Run()
	want := []string{"4", "1", "3", "2", "0", "5", "x"}
	if len(got) != len(want) {
		t.Fatalf("activations %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("activations %v, want %v", got, want)
		}
	}
}

// checkHashed verifies what join's lookups rely on: while f.hashed, the
// chain of each hash lists exactly the groups with flows that have it,
// newest first (as registering every group at its creation would), and
// otherwise no group is registered.
func (f *Fabric) checkHashed() error {
	if !f.hashed {
		if len(f.groupByHash) != 0 {
			return fmt.Errorf("%d hashes registered while not hashed", len(f.groupByHash))
		}
		for _, g := range f.groups {
			if g.hashed {
				return fmt.Errorf("group %d registered while not hashed", g.seq)
			}
		}
		return nil
	}
	want := make(map[uint64][]*group)
	for _, g := range slices.Backward(f.groups) {
		if g.n > 0 {
			if h := groupHash(g.hops, g.cap, g.share); g.hash != h {
				return fmt.Errorf("group %d: hash %#x, want %#x", g.seq, g.hash, h)
			}
			want[g.hash] = append(want[g.hash], g)
		}
	}
	if len(want) != len(f.groupByHash) {
		return fmt.Errorf("%d hashes registered, want %d", len(f.groupByHash), len(want))
	}
	for h, gs := range want {
		i := 0
		for g := f.groupByHash[h]; g != nil; g = g.sameHash {
			if i >= len(gs) || g != gs[i] || !g.hashed {
				return fmt.Errorf("hash %#x: chain differs at %d", h, i)
			}
			i++
		}
		if i != len(gs) {
			return fmt.Errorf("hash %#x: chain of %d groups, want %d", h, i, len(gs))
		}
	}
	return nil
}

// TestLazyHashing: groups are registered for lookup only while some flow
// may join one (above groupMin), and then every chain is the one that
// registering each group at its creation gives, so the grouping is the
// same. Closed loops of 40 flows over 4 routes cross a groupMin of 30 on
// the way up and down, twice.
func TestLazyHashing(t *testing.T) {
	def := groupMin
	defer func() { groupMin = def }()
	groupMin = 30
	eng := sim.New(1)
	fab, eps := starTopo(eng, 1, 2)
	c := newClosedLoop(fab, eps)
	var on, off, checks, joined int
	was := false
	fab.Hooks.Hook(func(ev *Event) {
		if ev.Kind != FlowEnd && ev.Kind != FlowRate {
			return
		}
		if err := fab.checkHashed(); err != nil {
			t.Fatalf("at %v after %s: %v", ev.Time, ev.Kind, err)
		}
		checks++
		if ev.Kind == FlowRate && ev.Flow.g.n > 1 {
			joined++
		}
		if fab.hashed != was {
			if was = fab.hashed; was {
				on++
			} else {
				off++
			}
		}
	})
	for range 2 {
		c.ended = 0
		c.run(40, 2000)
		if c.ended != 2000 {
			t.Fatalf("%d flows ended, want 2000", c.ended)
		}
	}
	if on != 2 || off != 2 || joined == 0 {
		t.Fatalf("hashing turned on %d and off %d times (want 2 each), %d flows joined a group", on, off, joined)
	}
	t.Logf("%d checks", checks)
}

package fabric

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// loneRun drives a random fabric (a sparse forest of links, so that many
// flows run alone on their resources, with shared links, routes that
// cross a link both ways or twice, weights, Load hops and caps) through
// random flows, some restarted over their route from their completion
// as a NIC's wire is, and returns a log of everything a run shows: every
// flow's end and rate changes (when hooked), samples of every active
// flow's rate and remaining bytes and of every link's counters at random
// instants, and the counters at the end, floats as their bits. It also
// returns how many recomputes took shareLone.
func loneRun(t *testing.T, seed uint64, hooked bool) (string, uint64, uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fac := Factors{}
	switch seed % 5 {
	case 1:
		fac.Cross = 0.05
	case 2:
		fac.WeightS = 20537
	case 3:
		fac.Latency, fac.Bandwidth = 1.5, 0.9
	}
	eng := sim.New(seed)
	fab := New(eng, fac)
	nn := 6 + rng.IntN(30)
	nodes := make([]*Node, nn)
	for i := range nodes {
		nodes[i] = fab.Node(fmt.Sprint("n", i))
	}
	var links []*Link
	for i := 1; i < nn; i++ {
		if rng.IntN(3) == 0 {
			// A new tree of the forest.
			continue
		}
		sh := FullDuplex
		if rng.IntN(4) == 0 {
			sh = Shared
		}
		links = append(links, fab.Connect(fmt.Sprint("l", len(links)), nodes[i], nodes[rng.IntN(i)],
			float64(1+rng.IntN(50))*1e9, sim.Time(rng.IntN(3))*100*sim.Nanosecond, sh))
	}
	if len(links) == 0 {
		links = append(links, fab.Connect("l", nodes[0], nodes[1], 1e9, 0, FullDuplex))
	}
	log := fnv.New64a()
	logf := func(format string, args ...any) { fmt.Fprintf(log, format, args...) }
	bits := math.Float64bits
	if hooked {
		fab.Hooks.Hook(func(ev *Event) {
			logf("%v %v %s %x\n", ev.Time, ev.Kind, ev.Flow.name, bits(ev.Rate))
		})
	}
	route := func() Route {
		var r Route
		for range 10 {
			if rr, err := fab.Route(nodes[rng.IntN(nn)], nodes[rng.IntN(nn)]); err == nil && len(rr.Hops) > 0 {
				r = rr
				break
			}
		}
		if rng.IntN(4) == 0 {
			// A hand-built hop: a weight (2 or a fraction, as a DMA's
			// route carries its TLP overheads), a Load hop, maybe back
			// over a link the route crosses.
			l := links[rng.IntN(len(links))]
			if len(r.Hops) > 0 && rng.IntN(2) == 0 {
				l = r.Hops[0].Link
			}
			w := []float64{0, 2, 0.02857142857142857}[rng.IntN(3)]
			r.Hops = append(r.Hops, Hop{Link: l, Dir: Dir(rng.IntN(2)), Weight: w, Load: rng.IntN(2) == 0})
		}
		return r
	}
	var active []*Flow
	n := 0
	// ended logs fl's end, takes it out of active and gives it back.
	// (With the count of events fired, and the rates that the flows
	// still active have at the end, which tell whether the recompute of
	// this instant has run yet.)
	ended := func(fl *Flow) {
		logf("end %s %v %v %d\n", fl.name, fl.End(), fl.ActiveAt(), eng.Fired())
		active = slices.DeleteFunc(active, func(a *Flow) bool { return a == fl })
		for _, a := range active {
			logf(" %x", bits(a.Rate()))
		}
		fab.Release(fl)
	}
	drawSize := func() int64 {
		if rng.IntN(20) == 0 {
			return 0
		}
		return int64(rng.IntN(50000))
	}
	var probe func() // set below
	var start func(r Route, again int, size int64, capped bool)
	start = func(r Route, again int, size int64, capped bool) {
		var opts []Option
		if capped {
			opts = append(opts, MaxRate(float64(1+rng.IntN(40))*1e9))
		}
		name := fmt.Sprint("f", n)
		n++
		fl := fab.Start(name, r, size, opts...)
		active = append(active, fl)
		fl.Done().OnComplete(func() {
			ended(fl)
			probe()
			if again > 0 {
				// Restarted over the same route, as a NIC's wire is.
				start(r, again-1, drawSize(), rng.IntN(5) == 0)
			}
		})
	}
	for range 40 + rng.IntN(60) {
		at := sim.Time(rng.IntN(2000)) * 100 * sim.Nanosecond
		r, again := route(), 0
		if rng.IntN(3) == 0 {
			again = rng.IntN(50)
		}
		burst := 1
		if rng.IntN(4) == 0 {
			// Flows over one route at once: a group of several when
			// grouped.
			burst += rng.IntN(4)
		}
		size, capped := drawSize(), rng.IntN(5) == 0
		eng.At(at, func() {
			// A burst's flows alike, as a DMA engine's writes of one
			// batch: one group (a batch) when below groupMin.
			for range burst {
				start(r, again, size, capped)
			}
		})
	}
	// Bursts that start again, all at once, when their last flow ends,
	// as a DMA engine's batches of writes over one route.
	var burst func(r Route, size int64, k, again int)
	burst = func(r Route, size int64, k, again int) {
		left := k
		for range k {
			name := fmt.Sprint("b", n)
			n++
			fl := fab.Start(name, r, size)
			active = append(active, fl)
			fl.Done().OnComplete(func() {
				ended(fl)
				if left--; left == 0 && again > 0 {
					burst(r, size, k, again-1)
				}
			})
		}
	}
	for range rng.IntN(4) {
		r, size, k, again := route(), int64(1+rng.IntN(20000)), 2+rng.IntN(8), rng.IntN(40)
		eng.At(sim.Time(rng.IntN(2000))*100*sim.Nanosecond, func() { burst(r, size, k, again) })
	}
	sample := func() {
		logf("%v fired %d\n", eng.Now(), eng.Fired())
		for _, fl := range active {
			logf("%v %s rate %x left %x\n", eng.Now(), fl.name, bits(fl.Rate()), bits(fl.Remaining()))
		}
		for _, l := range links {
			s := l.Stats()
			logf("%v %s %x %x %v %v %x %x\n", eng.Now(), l.name, bits(s.Bytes[0]), bits(s.Bytes[1]),
				s.Busy[0], s.Busy[1], bits(s.PeakUtil[0]), bits(s.PeakUtil[1]))
		}
	}
	for range 30 {
		eng.At(sim.Time(rng.IntN(4000))*100*sim.Nanosecond, sample)
	}
	// Events at the instants of flows' ends and activations, scheduled
	// from a completion at that instant or before it: they must run
	// where they always did among the fabric's own events.
	probes := 0
	probe = func() {
		if probes < 200 && rng.IntN(4) == 0 {
			probes++
			eng.After(sim.Time(rng.IntN(3))*100*sim.Nanosecond, sample)
		}
	}
	eng.Run()
	sample()
	if fab.Active() != 0 {
		t.Fatalf("seed %d: %d flows active at the end", seed, fab.Active())
	}
	totalRecomputes += fab.Recomputes()
	lastInlined, lastInRun = fab.inlined, fab.latent.inRun
	return fmt.Sprintf("%x %d", log.Sum64(), fab.Recomputes()), fab.lones, fab.batched
}

// TestLoneSameRun: taking shareLone for recomputes whose changes are
// all flows alone on their resources changes nothing a run shows (every
// end, rate, remaining byte count and link counter, bit for bit, and the
// count of recomputes), over random fabrics and flows, with and without
// hooks, with flows one per group and grouped.
var totalRecomputes uint64

func TestLoneSameRun(t *testing.T) {
	lones := toggledRuns(t, &loneShortcut, 0, "shareLone", func(lones, _ uint64) uint64 { return lones })
	if lones < 20000 {
		t.Errorf("only %d recomputes took shareLone", lones)
	}
	t.Logf("%d recomputes took shareLone, of %d", lones, totalRecomputes/2)
}

// TestBatchSameRun: making one group of the flows alike that become
// active at one instant (batchJoin) changes nothing a run shows, bit
// for bit, over random fabrics and bursts of flows alike, with and
// without hooks; with a low groupMin, the batches are split into their
// groups when the fabric starts grouping by hash.
func TestBatchSameRun(t *testing.T) {
	batched := toggledRuns(t, &batchJoins, 3, "batchJoin", func(_, batched uint64) uint64 { return batched })
	if batched < 1000 {
		t.Errorf("only %d flows joined a batch", batched)
	}
	t.Logf("%d flows joined a batch", batched)
}

// toggledRuns runs loneRun for 120 seeds (every other one hooked, every
// third with groupMin at lowGroupMin) with the shortcut *on off, then
// on, and fails unless both runs show the same; it returns the sum over
// the runs with it on of what count picks from loneRun's counts
// (recomputes by shareLone, flows batched), which must be 0 with it off.
func toggledRuns(t *testing.T, on *bool, lowGroupMin int, name string, count func(lones, batched uint64) uint64) uint64 {
	t.Helper()
	defOn, defGroup := *on, groupMin
	defer func() { *on, groupMin = defOn, defGroup }()
	var total uint64
	for seed := range uint64(120) {
		hooked := seed%2 == 1
		groupMin = defGroup
		if seed%3 == 2 {
			groupMin = lowGroupMin
		}
		*on = false
		want, l, b := loneRun(t, seed, hooked)
		if n := count(l, b); n != 0 {
			t.Fatalf("seed %d: %d uses of %s with it off", seed, n, name)
		}
		*on = true
		got, l, b := loneRun(t, seed, hooked)
		if got != want {
			t.Fatalf("seed %d (hooked %v, groupMin %d): with %s %s, without %s", seed, hooked, groupMin, name, got, want)
		}
		total += count(l, b)
	}
	return total
}

// TestOptionsPlainValues: an option is a plain value, made without
// allocating (a DMA transfer makes a MaxRate per flow), and options
// apply in order, the last of a kind winning.
func TestOptionsPlainValues(t *testing.T) {
	var o Option
	if n := testing.AllocsPerRun(100, func() { o = MaxRate(3e9) }); n != 0 {
		t.Errorf("MaxRate allocates %v times", n)
	}
	tag := &struct{ x int }{}
	if n := testing.AllocsPerRun(100, func() { o = Tag(tag) }); n != 0 {
		t.Errorf("Tag of a pointer allocates %v times", n)
	}
	_ = o
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 0, FullDuplex)
	fl := p.fab.Start("f", route(l, AtoB), 1e6, MaxRate(1e9), Tag("a"), MaxRate(2e9), Option{}, Tag(tag))
	if fl.MaxRate() != 2e9 || fl.Tag() != tag {
		t.Errorf("max rate %v, tag %v: want the last of each", fl.MaxRate(), fl.Tag())
	}
}

// TestInfoByContent: a route's info is found by its hops' content, so a
// route built afresh per flow (equal hops in a new slice) shares the info
// already derived, however many other routes came in between, and hops
// that differ in link, direction, weight or load mark do not. Each
// derivation past the first of five routes is counted by the routeInfo
// pointers seen.
func TestInfoByContent(t *testing.T) {
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 10e9, 1*us, FullDuplex)
	m := p.fab.Connect("m", p.a, p.b, 10e9, 1*us, FullDuplex)
	variants := []func() []Hop{
		func() []Hop { return []Hop{{Link: l, Dir: AtoB}, {Link: m, Dir: BtoA}} },
		func() []Hop { return []Hop{{Link: l, Dir: AtoB}, {Link: m, Dir: AtoB}} },
		func() []Hop { return []Hop{{Link: m, Dir: AtoB}, {Link: m, Dir: BtoA}} },
		func() []Hop { return []Hop{{Link: l, Dir: AtoB}, {Link: m, Dir: BtoA, Weight: 2}} },
		func() []Hop { return []Hop{{Link: l, Dir: AtoB}, {Link: m, Dir: BtoA, Load: true}} },
	}
	first := make([]*routeInfo, len(variants))
	for round := range 3 {
		for i, v := range variants {
			ri := p.fab.info("f", Route{Hops: v()})
			if round == 0 {
				for j, o := range first[:i] {
					if o == ri {
						t.Fatalf("variant %d got variant %d's info", i, j)
					}
				}
				first[i] = ri
			} else if ri != first[i] {
				t.Errorf("round %d: variant %d derived again, want the kept info", round, i)
			}
		}
	}
	// The key tells the variants apart (a clash is allowed but would
	// make one of them derive each time).
	keys := map[uint64]int{}
	for i, v := range variants {
		k := hopsKey(v())
		if j, ok := keys[k]; ok {
			t.Errorf("variants %d and %d share key %#x", j, i, k)
		}
		keys[k] = i
	}
}

// lastInlined is the count of events run at once (Fabric.inlined) of
// loneRun's last run, lastInRun that of flows that waited their latency
// in the latency queue's run (latentQueue.inRun).
var lastInlined, lastInRun uint64

// TestInlineEventsSameRun: running the fabric's own events at once at the
// end of the event before them, where the run loop would run them next
// (tail), changes nothing a run shows, bit for bit, the count of events
// fired included, over the random runs of TestLoneSameRun (hooked and
// not, grouped and not), with events of the test's own at the instants
// of the fabric's.
func TestInlineEventsSameRun(t *testing.T) {
	n := toggledRuns(t, &inlineEvents, 3, "inlined events", func(_, _ uint64) uint64 { return lastInlined })
	if n < 20000 {
		t.Errorf("only %d events run at once", n)
	}
	t.Logf("%d events run at once", n)
}

// TestLatentRunsSameRun: the flows whose activations come in order
// waiting in the latency queue's run rather than its heap changes
// nothing a run shows, bit for bit, over the random runs of
// TestLoneSameRun.
func TestLatentRunsSameRun(t *testing.T) {
	n := toggledRuns(t, &latentRuns, 3, "the run", func(_, _ uint64) uint64 { return lastInRun })
	if n < 20000 {
		t.Errorf("only %d flows waited in the run", n)
	}
	t.Logf("%d flows waited in the run", n)
}

// TestLatentRunBounded: a run of flows waiting their latency that never
// empties (a flow started every 100 ns, each waiting 1 µs) keeps its
// storage within a small multiple of the flows waiting, not of all the
// flows ever started.
func TestLatentRunBounded(t *testing.T) {
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 100e9, sim.Microsecond, FullDuplex)
	r := route(l, AtoB)
	n := 0
	var tick func()
	tick = func() {
		if n++; n > 20000 {
			return
		}
		fl := p.fab.Start("f", r, 100)
		fl.Done().OnComplete(func() { p.fab.Release(fl) })
		p.eng.After(100*sim.Nanosecond, tick)
	}
	p.eng.At(0, tick)
	p.eng.Run()
	if c := cap(p.fab.latent.run); c > 256 {
		t.Errorf("the run's storage holds %d flows, for at most 11 waiting", c)
	}
	if p.fab.latent.inRun < 19000 {
		t.Errorf("only %d flows waited in the run", p.fab.latent.inRun)
	}
}

// TestDropAtEndSameRun: dropping the list of members of a resource that
// an end leaves with no loads, at the end rather than at the next
// recompute's purge, changes nothing a run shows, bit for bit, over the
// random runs of TestLoneSameRun.
func TestDropAtEndSameRun(t *testing.T) {
	toggledRuns(t, &dropAtEnd, 3, "drops at ends", func(_, _ uint64) uint64 { return 0 })
}

package fabric

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// refRates is the progressive filling the fabric used before it shared
// by components with a heap of levels, kept as the reference: every
// active flow at once, and each filling step scans every resource still
// loaded by an unfrozen flow for the lowest level. It returns each active
// flow's rate, in activation order.
func refRates(f *Fabric) []float64 {
	active := f.activeFlows()
	type rs struct {
		rem, w float64
		n      int
		flows  []int
	}
	res := make(map[int32]*rs)
	var live []int32
	rate := make([]float64, len(active))
	frozen := make([]bool, len(active))
	var capped []int
	for i, fl := range active {
		if fl.cap > 0 {
			capped = append(capped, i)
		}
		for _, ld := range fl.loads {
			r := res[ld.r]
			if r == nil {
				r = &rs{rem: f.res[ld.r].cap}
				res[ld.r] = r
				live = append(live, ld.r)
			}
			r.w += ld.w * fl.share
			r.n++
			r.flows = append(r.flows, i)
		}
	}
	slices.SortStableFunc(capped, func(a, b int) int {
		return cmp.Compare(active[a].cap/active[a].share, active[b].cap/active[b].share)
	})
	freeze := func(i int, x float64) {
		frozen[i], rate[i] = true, x
		fl := active[i]
		for _, ld := range fl.loads {
			r := res[ld.r]
			r.rem -= ld.w * x
			r.w -= ld.w * fl.share
			r.n--
		}
	}
	unfrozen, level, ci := len(active), 0.0, 0
	for unfrozen > 0 {
		best, bestLevel := int32(-1), math.Inf(1)
		for i := 0; i < len(live); {
			r := res[live[i]]
			if r.n == 0 {
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				continue
			}
			if l := r.rem / r.w; l < bestLevel {
				best, bestLevel = live[i], l
			}
			i++
		}
		for ci < len(capped) && frozen[capped[ci]] {
			ci++
		}
		if ci < len(capped) && active[capped[ci]].cap/active[capped[ci]].share <= bestLevel {
			freeze(capped[ci], active[capped[ci]].cap)
			unfrozen--
			ci++
			continue
		}
		level = max(level, bestLevel)
		for _, i := range res[best].flows {
			if !frozen[i] {
				freeze(i, level*active[i].share)
				unfrozen--
			}
		}
	}
	return rate
}

// TestRatesMatchReference drives random topologies (trees and random
// graphs, full-duplex and shared links, cross traffic, caps, plain and
// weighted sharing) through random starts and ends, and after every
// recompute compares every active flow's rate with the reference
// computation of all flows at once: equal to 1e-9 relative. It also
// checks max-min optimality and that the link counters carry the
// reference rates. Every seed runs four times: small components
// scanned, every component through the heap, every flow grouped with
// the active flows of its route, cap and share, its routes drawn from a
// few so that groups have many flows, and grouped again with no caps, so
// that the filling starts from the kept sums (resource.wAll) whenever the
// factors and weights make every term an integer. Whenever no flow is
// outside the kept sums, they must equal, bit for bit, the sums over the
// groups in creation order.
func TestRatesMatchReference(t *testing.T) {
	def, defGroup := scanMax, groupMin
	defer func() { scanMax, groupMin = def, defGroup }()
	keptChecks := 0
	for run := range 48 {
		seed, heap, grouped, uncapped := uint64(run/4), run%4 == 1, run%4 >= 2, run%4 == 3
		t.Run(fmt.Sprint("seed=", seed, "/heap=", heap, "/grouped=", grouped, "/uncapped=", uncapped), func(t *testing.T) {
			scanMax, groupMin = def, defGroup
			if heap {
				scanMax = 0
			}
			if grouped {
				groupMin = 0
			}
			rng := rand.New(rand.NewPCG(seed, 99))
			fac := Factors{}
			if seed%3 == 1 {
				fac.Cross = 0.05
			}
			if seed%4 == 2 {
				fac.WeightS = 20537
			}
			eng := sim.New(seed)
			fab := New(eng, fac)
			nn := 5 + rng.IntN(40)
			nodes := make([]*Node, nn)
			for i := range nodes {
				nodes[i] = fab.Node(fmt.Sprint("n", i))
			}
			var links []*Link
			connect := func(a, b *Node) {
				sh := FullDuplex
				if rng.IntN(4) == 0 {
					sh = Shared
				}
				links = append(links, fab.Connect(fmt.Sprint("l", len(links)), a, b,
					float64(1+rng.IntN(50))*1e9, sim.Time(rng.IntN(3))*sim.Microsecond, sh))
			}
			// A forest: several components, then a few extra edges.
			for i := 1; i < nn; i++ {
				if rng.IntN(6) != 0 {
					connect(nodes[i], nodes[rng.IntN(i)])
				}
			}
			for range rng.IntN(nn / 2) {
				connect(nodes[rng.IntN(nn)], nodes[rng.IntN(nn)])
			}
			checks, maxGroup := 0, 0
			fab.Hooks.Hook(func(ev *Event) {
				if ev.Kind != FlowRate {
					return
				}
				checks++
				want := refRates(fab)
				for i, fl := range fab.activeFlows() {
					if d := math.Abs(fl.Rate() - want[i]); d > 1e-9*want[i] {
						t.Fatalf("%v: flow %s: rate %g, reference %g", eng.Now(), fl.name, fl.Rate(), want[i])
					}
					maxGroup = max(maxGroup, fl.g.n)
				}
				if err := fab.checkShare(); err != nil {
					t.Fatal(err)
				}
				w := make([]float64, len(fab.res))
				n := make([]int32, len(fab.res))
				for _, g := range fab.groups {
					k := float64(g.n)
					for _, ld := range g.loads {
						w[ld.r] += ld.w * g.share * k
						n[ld.r]++
					}
				}
				if fab.unsummed == 0 {
					keptChecks++
				}
				for r := range fab.res {
					res := &fab.res[r]
					if res.nAll != n[r] || fab.unsummed == 0 && res.wAll != w[r] {
						t.Fatalf("%v: %s: kept sums %g over %d loads, %g over %d summed",
							eng.Now(), res.link.name, res.wAll, res.nAll, w[r], n[r])
					}
				}
			})
			// The grouped runs draw every route from a pool of 4.
			var pool []Route
			var start func(i int)
			start = func(i int) {
				var r Route
				if grouped && len(pool) == 4 {
					r = pool[rng.IntN(4)]
				}
				for range 10 {
					if len(r.Hops) > 0 {
						break
					}
					a, b := nodes[rng.IntN(nn)], nodes[rng.IntN(nn)]
					if rr, err := fab.Route(a, b); err == nil && len(rr.Hops) > 0 {
						r = rr
						break
					}
				}
				if rng.IntN(5) == 0 && len(links) > 0 {
					// A hand-built hop: a weight, or a Load hop.
					r.Hops = append(r.Hops, Hop{Link: links[rng.IntN(len(links))], Dir: Dir(rng.IntN(2)),
						Weight: float64(1 + rng.IntN(2)), Load: rng.IntN(2) == 0})
				}
				if grouped && len(pool) < 4 {
					pool = append(pool, r)
				}
				var opts []Option
				if rng.IntN(4) == 0 && (!grouped || i%2 == 0) && !uncapped {
					opts = append(opts, MaxRate(float64(1+rng.IntN(20))*1e9))
				}
				fl := fab.Start(fmt.Sprint("f", i), r, int64(1+rng.IntN(1e7)), opts...)
				if i < 150 {
					fl.Done().OnComplete(func() { start(i + 100) })
				}
			}
			for i := range 100 {
				eng.At(sim.Time(rng.IntN(20))*sim.Microsecond, func() { start(i) })
			}
			eng.Run()
			if checks < 100 {
				t.Errorf("%d checks", checks)
			}
			if grouped && maxGroup < 5 {
				t.Errorf("groups of at most %d flows", maxGroup)
			}
			if !grouped && maxGroup != 1 {
				t.Errorf("groups of up to %d flows below groupMin", maxGroup)
			}
			for _, l := range links {
				for d := range 2 {
					if st := l.dir[d]; st.n != 0 || st.rate != 0 {
						t.Errorf("%s %v: %d flows at %g B/s after the run", l.name, Dir(d), st.n, st.rate)
					}
				}
			}
			for _, res := range fab.res {
				if res.wAll != 0 || res.nAll != 0 {
					t.Errorf("%s: kept sums %g over %d loads after the run", res.link.name, res.wAll, res.nAll)
				}
			}
		})
	}
	if keptChecks < 500 {
		t.Errorf("rates checked with every flow in the kept sums %d times", keptChecks)
	}
}

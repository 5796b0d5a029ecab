package fabric

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// leafRoutes draws n routes between distinct random leaves, fixed seed.
func leafRoutes(b *testing.B, fab *Fabric, leaves []*Node, rng *rand.Rand, n int) []Route {
	routes := make([]Route, n)
	for i := range routes {
		from := rng.IntN(len(leaves))
		to := (from + 1 + rng.IntN(len(leaves)-1)) % len(leaves)
		r, err := fab.Route(leaves[from], leaves[to])
		if err != nil {
			b.Fatal(err)
		}
		routes[i] = r
	}
	return routes
}

// BenchmarkStartEnd measures one flow start plus its end (two recomputes)
// with n long flows active between random leaves of a three-level tree
// (root, 10 switches, 100 leaves). One recompute is O(F·H + R·S): the
// cost per flow change must grow at most linearly with the active flows,
// so ns/change/active-flow must not rise from 100 to 1000.
func BenchmarkStartEnd(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint("active=", n), func(b *testing.B) {
			eng := sim.New(1)
			fab, leaves := tree(eng, 10, 10)
			rng := rand.New(rand.NewPCG(1, 2))
			for i, r := range leafRoutes(b, fab, leaves, rng, n) {
				fab.Start(fmt.Sprint("bg", i), r, 1e15)
			}
			eng.RunUntil(1 * us)
			if fab.Active() != n {
				b.Fatalf("%d active, want %d", fab.Active(), n)
			}
			probes := leafRoutes(b, fab, leaves, rng, 1024)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				fl := fab.Start("probe", probes[i%len(probes)], 1e6)
				i++
				for !fl.Done().Done() {
					eng.Step()
				}
			}
			perChange := float64(b.Elapsed().Nanoseconds()) / float64(2*i)
			b.ReportMetric(perChange, "ns/flow-change")
			b.ReportMetric(perChange/float64(n), "ns/change/active-flow")
			eng.Close()
		})
	}
}

// BenchmarkBurst starts 1000 flows between random leaves at one instant
// and runs them all to their ends: the starts cost one recompute per
// distinct route latency (two here), the ends one per distinct end time.
func BenchmarkBurst(b *testing.B) {
	eng := sim.New(1)
	fab, leaves := tree(eng, 10, 10)
	routes := leafRoutes(b, fab, leaves, rand.New(rand.NewPCG(1, 2)), 1000)
	b.ReportAllocs()
	var recomputes uint64
	for b.Loop() {
		before := fab.Recomputes()
		for i, r := range routes {
			fab.Start("burst", r, int64(1e6+i*1000))
		}
		eng.Run()
		recomputes += fab.Recomputes() - before
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(routes)), "ns/flow")
	b.ReportMetric(float64(recomputes)/float64(b.N), "recomputes/op")
}

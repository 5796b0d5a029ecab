package fabric_test

import (
	"fmt"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/sim"
)

// LV08's weighted sharing (SimGrid's network/weight-S = 20537 B): two
// flows meet on a 1.25 GB/s link, one from next door, one over a 1 GB/s
// link with 500 µs of latency. Plain max-min would give each half of it;
// weighted, each flow's share is inversely proportional to its route's
// latency plus weight-S over each link's bandwidth, and the near flow
// takes most of the link, as TCP's RTT unfairness does.
func ExampleFactors_weightS() {
	for _, w := range []float64{0, 20537} {
		eng := sim.New(1)
		fab := fabric.New(eng, fabric.Factors{WeightS: w})
		near, far, sw, dst := fab.Node("near"), fab.Node("far"), fab.Node("switch"), fab.Node("dst")
		fab.Connect("near-sw", near, sw, 10e9, 1*sim.Microsecond, fabric.FullDuplex)
		fab.Connect("far-sw", far, sw, 1e9, 500*sim.Microsecond, fabric.FullDuplex)
		fab.Connect("sw-dst", sw, dst, 1.25e9, 1*sim.Microsecond, fabric.FullDuplex)
		r1, _ := fab.Route(near, dst)
		r2, _ := fab.Route(far, dst)
		a, b := fab.Start("near", r1, 1e9), fab.Start("far", r2, 1e9)
		eng.RunUntil(600 * sim.Microsecond) // both transferring
		fmt.Printf("weight-S %g: near %.3f GB/s, far %.3f GB/s\n", w, a.Rate()/1e9, b.Rate()/1e9)
	}
	// Output:
	// weight-S 0: near 0.625 GB/s, far 0.625 GB/s
	// weight-S 20537: near 1.204 GB/s, far 0.046 GB/s
}

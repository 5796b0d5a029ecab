package fabric

import (
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestClosedLoopOneRecomputePerInstant ends a flow whose completion
// callback starts the next one without latency: the end and the start
// share one recompute, not two.
func TestClosedLoopOneRecomputePerInstant(t *testing.T) {
	p := newPair(Factors{})
	l := p.fab.Connect("l", p.a, p.b, 1e9, 0, FullDuplex)
	left := 10
	var next func()
	next = func() {
		if left == 0 {
			return
		}
		left--
		p.fab.Start("f", route(l, AtoB), 1e6).Done().OnComplete(next)
	}
	next()
	p.eng.Run()
	// One recompute at the first start, then one per end (the last end
	// starts nothing, and still needs its recompute).
	if got := p.fab.Recomputes(); got != 11 {
		t.Errorf("%d recomputes for 10 flows in a closed loop, want 11", got)
	}
	if got, want := p.eng.Now(), 10*ms; got != want {
		t.Errorf("ended at %v, want %v", got, want)
	}
}

// TestRouteCacheBounded asks for routes to more destinations than the
// distance cache holds, twice over, and for more pairs than the route
// cache holds: every route stays the one a fresh fabric computes, and the
// caches stay within their bounds.
func TestRouteCacheBounded(t *testing.T) {
	eng := sim.New(1)
	fab, leaves := tree(eng, 10, 20) // 200 leaves
	if len(leaves) <= towardCacheMax {
		t.Fatalf("%d leaves: the test needs more than %d destinations", len(leaves), towardCacheMax)
	}
	fresh := func(i, j int) string {
		f2, l2 := tree(sim.New(1), 10, 20)
		r, err := f2.Route(l2[i], l2[j])
		if err != nil {
			t.Fatal(err)
		}
		return r.String()
	}
	want := map[[2]int]string{{3, 150}: fresh(3, 150), {199, 0}: fresh(199, 0), {42, 43}: fresh(42, 43)}
	for pass := range 2 {
		for j := range leaves {
			for i := range leaves {
				if i == j {
					continue
				}
				r, err := fab.Route(leaves[i], leaves[j])
				if err != nil {
					t.Fatal(err)
				}
				if w, ok := want[[2]int{i, j}]; ok && r.String() != w {
					t.Errorf("pass %d: route %d→%d = %s, want %s", pass, i, j, r, w)
				}
			}
		}
		if len(fab.toward) > towardCacheMax || len(fab.routes) > routeCacheMax {
			t.Errorf("pass %d: caches hold %d distance arrays and %d routes; bounds %d and %d",
				pass, len(fab.toward), len(fab.routes), towardCacheMax, routeCacheMax)
		}
	}
}

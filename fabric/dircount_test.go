package fabric

import (
	"fmt"
	"testing"
)

// dirCounts checks that every link direction's count of flows
// (dirState.n, what Busy is counted from) is, after a recompute, the
// number of hops over it of the active flows, counted afresh from their
// routes; it returns the first direction that differs, or nil.
func dirCounts(f *Fabric) error {
	want := make(map[*dirState]int32)
	for _, fl := range f.activeFlows() {
		for _, h := range fl.ri.hops {
			want[&h.Link.dir[h.Dir]]++
		}
	}
	for _, l := range f.links {
		for d := range 2 {
			if st := &l.dir[d]; st.n != want[st] {
				return fmt.Errorf("%v: link %s %v: %d flows counted, %d crossing it", f.eng.Now(), l.name, Dir(d), st.n, want[st])
			}
		}
	}
	return nil
}

// TestLinkFlowCounts: after every recompute each link direction counts
// as many flows as the active flows' hops over it, however the
// recompute counted them: the filling (countStats, countBatch), a lone
// group's own count (shareAlone), or a lone batch's counters replayed
// from the route's last batch of its size (routeInfo.countRates). Only
// whether a count is 0 shows in a run (Busy), so the random runs that
// compare outputs do not see a count that is wrong but positive (a
// replayed batch's flows counted once rather than each). Over the
// random runs of TestLoneSameRun (with shareLone and without) and
// those of TestBatchCountsBySize.
func TestLinkFlowCounts(t *testing.T) {
	defer func(g int, on bool) { recomputeCheck, groupMin, loneShortcut = nil, g, on }(groupMin, loneShortcut)
	var checks int
	var failed error
	recomputeCheck = func(f *Fabric) {
		checks++
		if err := dirCounts(f); err != nil && failed == nil {
			failed = err
		}
	}
	for seed := range uint64(60) {
		groupMin = 256
		if seed%3 == 2 {
			groupMin = 3
		}
		loneShortcut = seed%2 == 0
		loneRun(t, seed, seed%4 == 1)
		if failed != nil {
			t.Fatalf("loneRun seed %d (shareLone %v): %v", seed, loneShortcut, failed)
		}
	}
	groupMin, loneShortcut = 256, true
	for seed := range uint64(10) {
		batchSizesRun(seed)
		if failed != nil {
			t.Fatalf("batchSizesRun seed %d: %v", seed, failed)
		}
	}
	if checks < 50000 {
		t.Errorf("only %d recomputes checked", checks)
	}
	t.Logf("%d recomputes checked", checks)
}

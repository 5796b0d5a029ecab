package scenario

import (
	"testing"

	"github.com/dmalab/dmalab/report"
)

func TestNUMAPolicies(t *testing.T) {
	s, err := Lookup("numa-policies")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(s, Options{Sets: []string{"size=4MiB", "threads=4"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]report.Row{}
	for _, r := range out.Result.Results {
		rows[r.Path+"/"+r.Direction] = r
		// STREAM's counting: three arrays of the thread's part.
		if r.Bytes != 3*(4<<20)/r.Ops {
			t.Errorf("%s %s: %d B a thread, want 3 x %d", r.Path, r.Direction, r.Bytes, (4<<20)/r.Ops)
		}
	}
	if len(rows) != len(npPolicies)*len(npPlacements) {
		t.Fatalf("%d rows, want %d", len(rows), len(npPolicies)*len(npPlacements))
	}
	gbps := func(pol, pl string) float64 { return rows[pol+"/threads on "+pl].GBps }
	local := func(pol, pl string) float64 { return rows[pol+"/threads on "+pl].LocalFraction() }
	for _, tc := range []struct {
		what      string
		ok        bool
		got, want float64
	}{
		{"node-0 threads: bind0 beats bind1", gbps("bind0", "node0") > gbps("bind1", "node0"), gbps("bind0", "node0"), gbps("bind1", "node0")},
		{"node-0 threads: interleave between", gbps("bind1", "node0") < gbps("interleave", "node0") && gbps("interleave", "node0") < gbps("bind0", "node0"), gbps("interleave", "node0"), 0},
		{"node-1 threads: bind1 beats bind0", gbps("bind1", "node1") > gbps("bind0", "node1"), gbps("bind1", "node1"), gbps("bind0", "node1")},
		{"default is local", local("default", "both") == 1 && local("default", "node1") == 1, local("default", "both"), 1},
		{"bind0 local share on node 0", local("bind0", "node0") == 1, local("bind0", "node0"), 1},
		{"bind1 remote for node-0 threads", local("bind1", "node0") == 0, local("bind1", "node0"), 0},
		{"preferred1 as bind1 (room on node 1)", local("preferred1", "node0") == 0, local("preferred1", "node0"), 0},
		{"interleave half local", local("interleave", "node0") == 0.5, local("interleave", "node0"), 0.5},
		{"weighted 3:1 on node 0", local("weighted", "node0") == 0.75, local("weighted", "node0"), 0.75},
		{"weighted 3:1 on node 1", local("weighted", "node1") == 0.25, local("weighted", "node1"), 0.25},
		{"weighted beats interleave on node 0", gbps("weighted", "node0") > gbps("interleave", "node0"), gbps("weighted", "node0"), gbps("interleave", "node0")},
		{"both nodes: local beats interleave beats bind0", gbps("default", "both") > gbps("interleave", "both") && gbps("interleave", "both") > gbps("bind0", "both"), gbps("interleave", "both"), 0},
	} {
		if !tc.ok {
			t.Errorf("%s: got %.3f (against %.3f)", tc.what, tc.got, tc.want)
		}
	}
	// numastat per row: interleave puts exactly half of the 3 x 1024
	// pages on each node.
	st := rows["interleave/threads on both"].NUMAStat
	if st[0].InterleaveHit != 1536 || st[1].InterleaveHit != 1536 {
		t.Errorf("interleave numastat %+v, want 1536 interleave hits per node", st)
	}
}

// 56 threads on one node (every core of an 8480+) get no more than the
// node's DRAM bandwidth together: local accesses share the DRAM bus.
// With 8 threads (80 GB/s of demand) the bus is not the limit.
func TestNUMAPoliciesDRAMShared(t *testing.T) {
	s, _ := Lookup("numa-policies")
	for _, tc := range []struct {
		threads string
		want    float64 // GB/s
	}{{"56", 307.2}, {"8", 80}} {
		out, err := Run(s, Options{Sets: []string{"threads=" + tc.threads, "placements=node0", "policies=default"}})
		if err != nil {
			t.Fatal(err)
		}
		r := out.Result.Results[0]
		if r.GBps > 307.2*(1+1e-9) || r.GBps < tc.want*0.999 {
			t.Errorf("%s threads on node 0, local: %.1f GB/s, want %.1f (node 0's DRAM is 307.2)", tc.threads, r.GBps, tc.want)
		}
	}
}

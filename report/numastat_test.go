package report

import (
	"strings"
	"testing"
)

// TestWriteTableNUMA: rows of threads get their per-thread rate and
// local share; numastat follows the table in numastat's layout, the
// run's as a block and the rows' as a line per row and node.
func TestWriteTableNUMA(t *testing.T) {
	r := &Result{Scenario: "s", Platform: "p", Params: map[string]string{"seed": "1"},
		Results: []Row{
			{Path: "pit", Direction: "node1 workers", Bytes: 1 << 20, Ops: 2, Seconds: 1e-3, GBps: 2.1, ThreadGBps: 1.05, RemoteBytes: 4 << 20},
			{Path: "fix", Direction: "node1 workers", Bytes: 1 << 20, Ops: 2, Seconds: 1e-3, GBps: 4.2, ThreadGBps: 2.1, LocalBytes: 3 << 20, RemoteBytes: 1 << 20,
				NUMAStat: []NUMANode{{Node: 0, NumaHit: 7, LocalNode: 7}, {Node: 1, NumaHit: 9, InterleaveHit: 9, OtherNode: 9}}},
			{Path: "copy", Direction: "h2d", Bytes: 1 << 20, Seconds: 1e-3, GBps: 1},
		},
		NUMAStat: []NUMANode{{Node: 0, NumaHit: 12, NumaMiss: 1, LocalNode: 13}, {Node: 1, NumaHit: 3, NumaForeign: 1, OtherNode: 3}},
	}
	var sb strings.Builder
	if err := WriteTable(&sb, r); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	fields := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		lines = append(lines, fields(l))
	}
	for _, want := range []string{
		"path direction size ops time GB/s GB/s/thread local",
		"pit node1 workers 1 MiB 2 1 ms 2.10 1.05 0.0 %",
		"fix node1 workers 1 MiB 2 1 ms 4.20 2.10 75.0 %",
		"copy h2d 1 MiB 0 1 ms 1.00 - -",
		"numastat (pages):",
		"node0 node1",
		"numa_hit 12 3",
		"numa_miss 1 0",
		"numa_foreign 0 1",
		"interleave_hit 0 0",
		"local_node 13 0",
		"other_node 0 3",
		"numastat by row (pages):",
		"row node numa_hit numa_miss numa_foreign interleave_hit local_node other_node",
		"fix node1 workers 0 7 0 0 0 7 0",
		"1 9 0 0 9 0 9",
	} {
		found := false
		for _, l := range lines {
			found = found || l == want
		}
		if !found {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	if strings.Index(out, "numastat (pages)") > strings.Index(out, "numastat by row") {
		t.Error("the run's numastat comes after the rows'")
	}
}

package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNumactlFlag: --numactl changes where the scenario's pages go, is
// recorded in the JSON's params, and the text output carries numastat.
func TestNumactlFlag(t *testing.T) {
	args := []string{"run", "numa-first-touch", "--set", "size=4MiB", "--set", "threads=2", "--set", "variants=first-touch"}
	code, out, errs := dmalab(t, append(args, "--numactl", "--membind=1", "--json")...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Params   map[string]string `json:"params"`
		NUMAStat []struct {
			Node    int    `json:"node"`
			NumaHit uint64 `json:"numa_hit"`
		} `json:"numastat"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Params["numactl"] != "--membind=1" {
		t.Errorf("params numactl = %q", doc.Params["numactl"])
	}
	if len(doc.NUMAStat) != 2 || doc.NUMAStat[0].NumaHit != 0 || doc.NUMAStat[1].NumaHit != 1024 {
		t.Errorf("numastat %+v, want the 1024 pages on node 1", doc.NUMAStat)
	}
	code, out, errs = dmalab(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"\nnumastat (pages):\n", "\nnumastat by row (pages):\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	// numastat's layout: a column per node, a line per counter.
	_, block, _ := strings.Cut(out, "numastat (pages):\n")
	lines := strings.Split(block, "\n")
	if len(lines) < 3 || strings.Join(strings.Fields(lines[0]), " ") != "node0 node1" ||
		strings.Join(strings.Fields(lines[1]), " ") != "numa_hit 1024 0" {
		t.Errorf("numastat block:\n%s", block)
	}
	// By row: the variant's row, node 0 holding the 1024 pages.
	_, byRow, _ := strings.Cut(out, "numastat by row (pages):\n")
	if !strings.Contains(byRow, "first-touch all workers") ||
		!strings.Contains(strings.Join(strings.Fields(byRow), " "), "first-touch all workers 0 1024 0 0 0 1024 0 1 0 0 0 0 0 0") {
		t.Errorf("numastat by row:\n%s", byRow)
	}
	code, out, errs = dmalab(t, "check", "numa-first-touch", "--set", "size=4MiB", "--set", "threads=2", "--numactl", "-N 1 -l")
	if code != exitOK || !strings.Contains(out, "no diagnostics") {
		t.Errorf("check with --numactl: exit %d, %q %q", code, out, errs)
	}
}

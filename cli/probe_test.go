package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeNUMA runs probe --numa on this machine with a small buffer: it
// needs no GPU, prints one row and column per node, and --json has the
// same measurements, which --input prints again.
func TestProbeNUMA(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/node"); err != nil {
		t.Skipf("no NUMA nodes in sysfs here: %v", err)
	}
	code, out, errs := dmalab(t, "probe", "--numa", "--numa-buffer", "8MiB", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Nodes []struct {
			ID int `json:"id"`
		} `json:"numa_nodes"`
		Latency []struct {
			Median float64 `json:"median"`
		} `json:"latency"`
		Bandwidth []struct {
			Median float64 `json:"median"`
		} `json:"bandwidth"`
		FirstTouch []struct {
			Pages int `json:"pages"`
		} `json:"first_touch"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	n := len(doc.Nodes)
	if n == 0 || len(doc.Latency) != n*n || len(doc.Bandwidth) != n*n || len(doc.FirstTouch) != n {
		t.Fatalf("%d nodes: %d latencies, %d bandwidths, %d first touches", n, len(doc.Latency), len(doc.Bandwidth), len(doc.FirstTouch))
	}
	for i := range doc.Latency {
		if doc.Latency[i].Median <= 0 || doc.Bandwidth[i].Median <= 0 {
			t.Errorf("pair %d: latency %v ns, bandwidth %v MB/s", i, doc.Latency[i].Median, doc.Bandwidth[i].Median)
		}
	}
	saved := filepath.Join(t.TempDir(), "numa.json")
	if err := os.WriteFile(saved, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = dmalab(t, "probe", "--numa", "--input", saved)
	if code != exitOK {
		t.Fatalf("--input: exit %d: %s", code, errs)
	}
	for _, s := range []string{"available: ", "Idle latency (ns per load, pointer chase)", "Read bandwidth (MB/s", "First touch", "buffer 8MiB per memory node"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}

func TestProbeNUMAUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--numa", "--gpu", "0"}, "--numa measures no GPU: --gpu do not apply"},
		{[]string{"--numa", "--format", "nvbandwidth"}, `--numa --format "nvbandwidth": want table or json`},
		{[]string{"--numa-buffer", "1GiB"}, "--numa-buffer and --numa-nodes go with --numa"},
		{[]string{"--numa", "--numa-buffer", "4KiB"}, "buffer 4096 bytes"},
		{[]string{"--numa", "--numa-nodes", "x"}, `--numa-nodes: "x" is not a node ID`},
		{[]string{"--numa", "--numa-nodes", "4095"}, "node 4095: the machine has nodes"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errs := dmalab(t, append([]string{"probe"}, tt.args...)...)
			if code != exitUsage || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d with %q", code, errs, exitUsage, tt.want)
			}
		})
	}
}

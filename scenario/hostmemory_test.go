package scenario

import (
	"errors"
	"testing"

	"github.com/dmalab/dmalab/platform"
)

func TestHostMemory(t *testing.T) {
	s, err := Lookup("host-memory")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(s, Options{Sets: []string{"size=64MiB"}, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Check.Diagnostics); n != 0 {
		t.Fatalf("a correct program drew %d diagnostics: %v", n, out.Check.Diagnostics)
	}
	rows := map[string]float64{}
	for _, r := range out.Result.Results {
		rows[r.Path] = r.Seconds
		switch r.Path {
		case "managed-fault":
			if r.Faults == 0 || r.MigratedBytes < 2*r.Bytes {
				t.Errorf("on-demand managed memory: %d faults, %d B migrated, want faults both ways", r.Faults, r.MigratedBytes)
			}
		case "managed-prefetch":
			if r.Faults != 0 || r.MigratedBytes < 2*r.Bytes {
				t.Errorf("prefetched managed memory: %d faults, %d B migrated, want none and both buffers moved", r.Faults, r.MigratedBytes)
			}
		}
	}
	if len(rows) != len(hostTypes) {
		t.Fatalf("rows for %v, want every type", rows)
	}
	// On-demand managed memory is slower than prefetched; pinned beats
	// pageable. On the measured VM write-combining is not in effect for
	// the CPU (docs/measurements/2026-11-21-h200-writecombined.md):
	// write-combined memory costs what pinned memory does.
	if !(rows["managed-fault"] > rows["managed-prefetch"] && rows["pageable"] > rows["pinned"]) {
		t.Errorf("times %v", rows)
	}
	if rows["writecombined"] != rows["pinned"] {
		t.Errorf("write-combined %g s, pinned %g s: want equal on h200-pcie", rows["writecombined"], rows["pinned"])
	}
	// On bare metal the CPU reading back from write-combined memory is
	// the slowest of all, by far.
	bare, err := Run(s, Options{Platform: "2s-4gpu-pcie", Sets: []string{"size=64MiB", "types=pinned,writecombined"}})
	if err != nil {
		t.Fatal(err)
	}
	if wc, pin := bare.Result.Results[1].Seconds, bare.Result.Results[0].Seconds; wc < 10*pin {
		t.Errorf("2s-4gpu-pcie: write-combined %g s, pinned %g s: want the uncached reads to dominate", wc, pin)
	}
}

// TestHostMemoryTegra: a Jetson TX2 has neither host registration (no
// I/O coherence) nor prefetch: left out by default, bad input when asked.
func TestHostMemoryTegra(t *testing.T) {
	s, _ := Lookup("host-memory")
	out, err := Run(s, Options{Platform: "jetson-tx2", Sets: []string{"size=16MiB"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Result.Results {
		if r.Path == "registered" || r.Path == "managed-prefetch" {
			t.Errorf("jetson-tx2 ran %s", r.Path)
		}
	}
	for _, ty := range []string{"registered", "managed-prefetch"} {
		if _, err := Run(s, Options{Platform: "jetson-tx2", Sets: []string{"size=16MiB", "types=" + ty}}); !errors.Is(err, ErrUsage) {
			t.Errorf("types=%s on jetson-tx2: %v, want a usage error", ty, err)
		}
	}
	if _, err := Run(s, Options{Sets: []string{"size=1TiB"}}); !errors.Is(err, ErrUsage) {
		t.Errorf("a workload larger than memory: %v, want a usage error", err)
	}
}

// TestEveryScenarioOnEveryPreset: each scenario on each preset either
// runs or says, as bad input, why it cannot; never a model error.
func TestEveryScenarioOnEveryPreset(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario on every platform")
	}
	small := map[string][]string{
		"gpudirect":        {"sizes=4KiB,1MiB"},
		"transfers":        {"sizes=64KiB,4MiB"},
		"host-memory":      {"size=4MiB"},
		"dma-streaming":    {"packets=100"},
		"dma-vs-memcpy":    {"sizes=1KiB,64KiB"},
		"um-prefetch":      {"size=8MiB", "kernels=2"},
		"um-oversubscribe": {"vram=64MiB", "ratios=0.5,1.5"},
		"iommu-attack":     {"dmas=500"},
		"iommu-modes":      {"packets=200", "rates=100"},
	}
	for _, s := range All() {
		for _, p := range platform.Presets() {
			t.Run(s.Name+"/"+p, func(t *testing.T) {
				_, err := Run(s, Options{Platform: p, Sets: small[s.Name]})
				if err != nil && !errors.Is(err, ErrUsage) {
					t.Errorf("%v", err)
				}
			})
		}
	}
}

package calib

import (
	"math"
	"testing"

	"github.com/dmalab/dmalab/machine"
)

// TestFromTopoNVSwitch: on the four-H200 partition of an HGX board
// (2026-11-29, nvidia-h200-x4), NVML's links of every GPU end at
// NVSwitches, and from-topo makes them one crossbar with each GPU's 18
// links to it. So gpu0's copies to 1, 2 and 3 peers at once share gpu0's
// links: measured 388.3, 390.7 and 392.5 GB/s in all
// (2026-11-29-h200x4-concurrent-copies.txt); a bundle per pair, as
// from-topo wrote before, would give 2 and 3 peers 2 and 3 times the
// rate. The model's totals must be flat in the peers and within 5 % of
// the measured ones.
func TestFromTopoNVSwitch(t *testing.T) {
	spec, _, err := FromTopo(readTopo(t, "../docs/measurements/2026-11-29-h200x4-topo.json"), "h200x4", "2026-11-29", preset(t, "h200-pcie"))
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.NVSwitches) != 1 || len(spec.NVLinks) != 4 {
		t.Fatalf("%d NVSwitches and %d NVLink bundles, want 1 and 4 (a GPU's to the crossbar)", len(spec.NVSwitches), len(spec.NVLinks))
	}
	const n = 256 << 20
	for k, measured := range map[int]float64{1: 388.3, 2: 390.7, 3: 392.5} {
		m, err := machine.NewWithOptions(spec, 1, machine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		g0 := m.GPUs[0]
		start := m.Engine.Now()
		for j := 1; j <= k; j++ {
			r, err := m.DMARoute(g0.Memory(), m.GPUs[j].Memory(), g0.CE())
			if err != nil {
				t.Fatal(err)
			}
			m.Fabric.Start("copy", r, n)
		}
		m.Engine.Run()
		total := float64(k*n) / (m.Engine.Now() - start).Seconds() / 1e9
		m.Close()
		t.Logf("gpu0 to %d peers: model %.1f GB/s", k, total)
		if e := total/measured - 1; math.Abs(e) > 0.05 {
			t.Errorf("gpu0 to %d peers at once: model %.1f GB/s in all, measured %.1f (%+.1f %%)", k, total, measured, 100*e)
		}
	}
}

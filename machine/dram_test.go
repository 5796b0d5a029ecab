package machine

import (
	"math"
	"testing"
)

// TestJetsonCopyDRAMEfficiency: on Orin a copy engine's copy reads and
// writes the one LPDDR5 bus, each byte twice, at the bus's copy
// efficiency: 204.8 GB/s × 0.53 / 2 = 54.3 GB/s; the SMs' accesses
// (a kernel's separate reads and writes) and a discrete GPU's copies are
// not limited by it.
func TestJetsonCopyDRAMEfficiency(t *testing.T) {
	m := build(t, "jetson-orin")
	g := m.GPUs[0]
	host, _ := m.HostMemory(g.Node)
	share := m.Spec.Nodes[g.Node].CopyEfficiency.V
	if share != 0.53 {
		t.Fatalf("jetson-orin copy_efficiency %v, want 0.53", share)
	}
	for _, c := range []struct {
		name     string
		src, dst Endpoint
	}{{"h2d", host, g.Memory()}, {"d2h", g.Memory(), host}, {"d2d", g.Memory(), g.Memory()}} {
		r, err := m.DMARoute(c.src, c.dst, g.CE())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := m.CopyRate(r, g.CE()), 204.8e9*share/2; math.Abs(got/want-1) > 1e-12 {
			t.Errorf("%s: copy engine at %.4g B/s, want 204.8 GB/s × %v / 2", c.name, got, share)
		}
		if got := m.CopyRate(r, g.SMs()); got != 0 {
			t.Errorf("%s: SMs limited to %v, want no copy limit", c.name, got)
		}
	}
	d := build(t, "h200-pcie")
	dg := d.GPUs[0]
	dh, _ := d.HostMemory(0)
	r, _ := d.DMARoute(dh, dg.Memory(), dg.CE())
	if got := d.CopyRate(r, dg.CE()); got != 0 {
		t.Errorf("h200-pcie h2d limited to %v by DRAM copy efficiency, want none (one DRAM crossing)", got)
	}
}

package machine

import (
	"math"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestJetsonCopyDRAMEfficiency: on Orin a copy engine's copy reads and
// writes the one LPDDR5 bus, each byte twice, at the bus's copy
// efficiency: 204.8 GB/s × 0.53 / 2 = 54.3 GB/s; the SMs' accesses,
// which read or write it, are not scaled.
func TestJetsonCopyDRAMEfficiency(t *testing.T) {
	m := build(t, "jetson-orin")
	g := m.GPUs[0]
	host, _ := m.HostMemory(g.Node)
	dram := m.Nodes[g.Node].DRAM
	weight := func(by Master) float64 {
		r, err := m.DMARoute(host, g.Memory(), by)
		if err != nil {
			t.Fatal(err)
		}
		var w float64
		for _, h := range r.Hops {
			if h.Link == dram && !h.Load {
				w += weightOf(h)
			}
		}
		return w
	}
	share := m.Spec.Nodes[g.Node].CopyEfficiency.V
	if share != 0.53 {
		t.Fatalf("jetson-orin copy_efficiency %v, want 0.53", share)
	}
	if got := weight(g.CE()); math.Abs(got-2/share) > 1e-12 {
		t.Errorf("copy engine's DRAM weight %v, want 2/%v", got, share)
	}
	if got := weight(g.SMs()); got != 2 {
		t.Errorf("SMs' DRAM weight %v, want 2 (unscaled)", got)
	}
	r, _ := m.DMARoute(host, g.Memory(), g.CE())
	const n = 256 << 20
	var took sim.Time
	m.Engine.Spawn("copy", func(p *sim.Proc) {
		fl := m.Fabric.Start("copy", r, n)
		p.Wait(fl.Done())
		took = p.Now() - r.Latency()
	})
	m.Engine.Run()
	want := 204.8e9 * share / 2
	if got := float64(n) / took.Seconds(); math.Abs(got/want-1) > 1e-6 {
		t.Errorf("copy at %.4g B/s, want 204.8 GB/s × %v / 2 = %.4g", got, share, want)
	}
}

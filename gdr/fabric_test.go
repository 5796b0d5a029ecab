package gdr

import (
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// WC stores share the GPU's PCIe link with a copy engine's DMA: with a
// store rate above the link's, a store that overlaps a long cuMemcpy H2D
// gets about half the link, as max-min fairness gives it.
func TestStoresShareTheLink(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	link := r.m.Fabric.Link(r.m.GPUs[0].Name + ".pcie")
	old := WCStoreRate
	WCStoreRate = 10 * link.Effective()
	t.Cleanup(func() { WCStoreRate = old })
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 64<<20)
		dst := r.alloc(p, 256<<20)
		host, err := r.ctx.MemAllocHost(p, 256<<20)
		if err != nil {
			t.Fatal(err)
		}
		h, _, mp := r.mapped(p, a, 16<<20)
		copier := p.Spawn("copier", func(q *sim.Proc) {
			if err := r.ctx.Memcpy(q, dst, mem.GPUAddr(host), 256<<20); err != nil {
				t.Error(err)
			}
		})
		p.Sleep(20 * sim.Microsecond) // the copy is flowing
		d, err := timed(p, func() error { return h.CopyToMapping(p, mp, 0, make([]byte, 16<<20)) })
		if err != nil {
			t.Fatal(err)
		}
		alone := sim.TransferTime(16<<20, link.Effective())
		if !near(d, StoreOverhead+2*alone, 0.02) {
			t.Errorf("16 MiB store beside a copy: %v, want about twice the link-only %v", d, alone)
		}
		p.Join(copier)
	})
}

// A thread on the other socket reaches the GPU across the socket link:
// its loads' round trip is longer, so its reads are slower.
func TestRemoteNodeLoadsSlower(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 1<<20)
		h, _, mp := r.mapped(p, a, 1<<20)
		local, err := h.RoundTrip(mp)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.app.KernelProcess().SetAffinity(1); err != nil {
			t.Fatal(err)
		}
		if r.app.KernelProcess().Node() != 1 {
			t.Skip("SetAffinity does not move the process's node")
		}
		remote, err := h.RoundTrip(mp)
		if err != nil {
			t.Fatal(err)
		}
		if remote <= local {
			t.Errorf("round trip from node 1 %v, from node 0 %v: want longer", remote, local)
		}
	})
}

// A process that exits with pins left: closing its descriptors releases
// them, and no page table is left.
func TestExitReleasesPins(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 1<<20)
		_, _, mp := r.mapped(p, a, 1<<20)
		if err := r.app.KernelProcess().Exit(p); err != nil {
			t.Fatal(err)
		}
		if mp.Live() || len(r.p2p.Tables()) != 0 {
			t.Errorf("after exit: mapping live %v, %d tables", mp.Live(), len(r.p2p.Tables()))
		}
	})
}

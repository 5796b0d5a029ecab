package dma

import (
	"testing"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// discard is a hook that keeps nothing, as a cheap subscriber would.
func discard(*Event) {}

// benchPairs measures dma_map_single + dma_unmap_single pairs of a
// 1500-byte buffer per second of wall time, with every event built and
// delivered to an observer that drops it.
func benchPairs(b *testing.B, spec *platform.Spec, dev string, high bool) {
	m, mm, x := benchRig(b, spec)
	d, err := x.Device(dev)
	if err != nil {
		b.Fatal(err)
	}
	var va mem.VirtAddr
	if high {
		pa, err := mm.AllocPages(0, mem.PageSize, mem.ZoneNormal)
		if err != nil {
			b.Fatal(err)
		}
		va = mm.PhysToVirt(pa)
	} else if va, err = mm.Kmalloc(0, 1500); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	m.Engine.Spawn("bench", func(p *sim.Proc) {
		for b.Loop() {
			h := d.MapSingle(p, va, 1500, Bidirectional)
			d.UnmapSingle(p, h, 1500, Bidirectional)
		}
	})
	m.Engine.Run()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

func benchRig(b *testing.B, spec *platform.Spec) (*machine.Machine, *mem.Memory, *DMA) {
	r := newRig(b, spec, false)
	r.dma.Hooks = sim.Hooks[Event]{}
	r.dma.Hooks.Hook(discard)
	return r.m, r.mem, r.dma
}

// BenchmarkMapUnmapCoherent: the hot path on a coherent x86 NIC, no
// cache maintenance. The goal is at least 1 million pairs per second.
func BenchmarkMapUnmapCoherent(b *testing.B) { benchPairs(b, server(b), "nic0", false) }

// BenchmarkMapUnmapNonCoherent: 1500-byte buffers on the Zynq's GEM:
// a flush at map and an invalidate at unmap, 47 lines each.
func BenchmarkMapUnmapNonCoherent(b *testing.B) { benchPairs(b, zynq(b), "gem0", false) }

// BenchmarkMapUnmapBounce: a 32-bit NIC and memory above 4 GiB: slot
// allocation and two copies per pair.
func BenchmarkMapUnmapBounce(b *testing.B) { benchPairs(b, server(b), "nic2", true) }

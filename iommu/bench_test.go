package iommu

import (
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/sim"
)

// BenchmarkMapUnmapLazy measures dma_map_page + dma_unmap_page pairs of
// a 1500-byte buffer through an IOMMU domain in lazy mode, per second of
// wall time: IOVA from the rcache, a 4 KiB leaf set and cleared, the
// flush queue flushed every 256 unmaps. The goal is at least 1 million
// pairs per second.
func BenchmarkMapUnmapLazy(b *testing.B) {
	r := newRig(b, Lazy, DefaultParams())
	r.unit.Hooks = sim.Hooks[Event]{}
	dev, _ := r.attach("nic0", AttachOptions{PCI: true})
	pa := r.pages(4096)
	b.ReportAllocs()
	r.m.Engine.Spawn("bench", func(p *sim.Proc) {
		for b.Loop() {
			a := dev.MapPage(p, pa, 0, 1500, dma.FromDevice)
			if a == dma.MappingErrorAddr {
				b.Fatal("mapping failed")
			}
			dev.UnmapPage(p, a, 1500, dma.FromDevice)
		}
	})
	r.m.Engine.Run()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

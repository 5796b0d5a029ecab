package dmadebug_test

import (
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// BenchmarkCheckedMapUnmap is issue 4's speed goal measured end to end:
// dma_map_single + dma_mapping_error + dma_unmap_single through the real
// DMA layer with the checker attached to it and to memory, as "dmalab
// check" runs them. Goal: at least 1 million pairs per second.
func BenchmarkCheckedMapUnmap(b *testing.B) {
	for _, c := range []struct{ preset, dev string }{{"2s-4gpu-pcie", "nic0"}, {"zynq-7000", "gem0"}} {
		b.Run(c.preset, func(b *testing.B) {
			spec, err := platform.Preset(c.preset)
			if err != nil {
				b.Fatal(err)
			}
			m, err := machine.New(spec, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			d, err := dma.New(m, m.Mem)
			if err != nil {
				b.Fatal(err)
			}
			chk := check.New(check.Options{})
			dmadebug.Attach(chk, d, m.Mem, dmadebug.Options{})
			dev, err := d.Device(c.dev)
			if err != nil {
				b.Fatal(err)
			}
			va, err := m.Mem.Kmalloc(dev.Node(), 1500)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			m.Engine.Spawn("bench", func(p *sim.Proc) {
				for b.Loop() {
					h := dev.MapSingle(p, va, 1500, dma.ToDevice)
					if dev.MappingError(h) {
						b.Fatal("mapping failed")
					}
					dev.UnmapSingle(p, h, 1500, dma.ToDevice)
				}
			})
			m.Engine.Run()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			if n := len(chk.Diagnostics()); n != 0 {
				b.Fatalf("%d diagnostics: %v", n, chk.Diagnostics()[0])
			}
		})
	}
}

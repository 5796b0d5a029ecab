package dmadebug

import (
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
)

// ring is n receive buffers of size bytes, each mapped DMA_FROM_DEVICE
// in turn.
func ring(n int, size uint64) (maps, checks, unmaps []dma.Event) {
	for i := range uint64(n) {
		a := mem.DMAAddr(0x1_0000_0000 + i*size)
		pa := mem.PhysAddr(0x10_0000_0000 + i*size)
		maps = append(maps, mapSingle(a, pa, size, dma.FromDevice))
		checks = append(checks, checked(a))
		unmaps = append(unmaps, unmapSingle(a, size, dma.FromDevice))
	}
	return
}

// BenchmarkMapUnmap is a NIC's receive path through the checker:
// dma_map_single, dma_mapping_error, and the unmap of the buffer mapped
// `active` maps earlier, with that many mappings active throughout. The
// DMA layer's goal is ≥ 1M map+unmap pairs/s with the checker attached;
// the checker alone must be well above it, and flat in the number of
// active mappings. 2 MiB buffers are longer than a bucket's chunk and
// take the interval tree.
func BenchmarkMapUnmap(b *testing.B) {
	for _, bc := range []struct {
		active int
		size   uint64
	}{{1, 2048}, {256, 2048}, {65536, 2048}, {256, 2 << 20}} {
		b.Run(fmt.Sprintf("active=%d/size=%d", bc.active, bc.size), func(b *testing.B) {
			active := bc.active
			maps, checks, unmaps := ring(active, bc.size)
			c := newRig(Options{})
			for i := range active - 1 {
				c.observe(maps[i])
				c.observe(checks[i])
			}
			b.ReportAllocs()
			i, pairs := active-1, 0
			for b.Loop() {
				c.observe(maps[i])
				c.observe(checks[i])
				i = (i + 1) % active
				c.observe(unmaps[i])
				pairs++
			}
			if n := len(c.Diagnostics()); n != 0 {
				b.Fatalf("%d diagnostics: %v", n, c.Diagnostics()[0])
			}
			b.ReportMetric(float64(pairs)/b.Elapsed().Seconds(), "pairs/s")
		})
	}
}

// BenchmarkCPUAccess is a CPU access checked against 4096 active
// streaming mappings (a hit on a synced buffer, the common case).
func BenchmarkCPUAccess(b *testing.B) {
	const active = 4096
	maps, checks, _ := ring(active, 2048)
	c := newRig(Options{})
	for i := range active {
		c.observe(maps[i])
		c.observe(checks[i])
		c.observe(syncOf(true, maps[i].Addr, 2048, dma.FromDevice))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.access(cpuRead(maps[i%active].Phys+64, 64))
		i++
	}
	if n := len(c.Diagnostics()); n != 0 {
		b.Fatalf("%d diagnostics: %v", n, c.Diagnostics()[0])
	}
	b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "accesses/s")
}

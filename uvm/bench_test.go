package uvm

import (
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// BenchmarkGPUFaults: 512 warps of 32 threads touch every 4 KiB page of
// 64 MiB of host-resident managed memory at once (the probe's
// many-thread fault migration): 16384 faults in batches of 256. The
// metric is faults serviced per second of wall time.
func BenchmarkGPUFaults(b *testing.B) {
	const size = 64 << 20
	var faults int64
	b.ReportAllocs()
	for b.Loop() {
		d, env := h200Driver(b)
		a := mustAlloc(b, d, size)
		run(b, env, func(p *sim.Proc) { must(b, d.Prefetch(p, a.Base, size, CPU)) })
		for w := range size / PageSize / 32 {
			env.e.Spawn(fmt.Sprintf("warp%d", w), func(p *sim.Proc) {
				ok(b)(d.GPUAccess(p, 0, a.Base+Addr(w*32*PageSize), 32*PageSize, false))
			})
		}
		env.e.Run()
		faults += d.Stats().GPUFaults
	}
	b.ReportMetric(float64(faults)/b.Elapsed().Seconds(), "faults/s")
}

// BenchmarkGPUAccess: one thread reads 32 MiB at 4 KiB stride: 8192
// accesses of which 96 fault. The metric is accesses per second.
func BenchmarkGPUAccess(b *testing.B) {
	const size = 32 << 20
	var n int
	b.ReportAllocs()
	for b.Loop() {
		d, env := h200Driver(b)
		a := mustAlloc(b, d, size)
		run(b, env, func(p *sim.Proc) {
			must(b, d.Prefetch(p, a.Base, size, CPU))
			for off := int64(0); off < size; off += PageSize {
				ok(b)(d.GPUAccess(p, 0, a.Base+Addr(off), 4, false))
				n++
			}
		})
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "accesses/s")
}

// BenchmarkCPUFaults: the CPU reads 64 MiB of GPU-resident memory back at
// 4 KiB stride: 16384 accesses, 192 faults. The metrics are faults and
// accesses per second.
func BenchmarkCPUFaults(b *testing.B) {
	const size = 64 << 20
	var faults int64
	b.ReportAllocs()
	for b.Loop() {
		d, env := h200Driver(b)
		a := mustAlloc(b, d, size)
		run(b, env, func(p *sim.Proc) {
			must(b, d.Prefetch(p, a.Base, size, GPU(0)))
			for off := int64(0); off < size; off += PageSize {
				ok(b)(d.CPUAccess(p, a.Base+Addr(off), 1, false))
			}
		})
		faults += d.Stats().CPUFaults
	}
	b.ReportMetric(float64(faults)/b.Elapsed().Seconds(), "faults/s")
	b.ReportMetric(float64(faults)/192*size/PageSize/b.Elapsed().Seconds(), "accesses/s")
}

// BenchmarkPrefetchPages: one decision of the tree prefetcher.
func BenchmarkPrefetchPages(b *testing.B) {
	in := PrefetchInput{Pages: PagesPerBlock, Resident: mask(pagesOf(0, 255)), Faulted: mask([]int{256, 300, 301}), Threshold: 51}
	b.ReportAllocs()
	for b.Loop() {
		_ = PrefetchPages(in)
	}
}

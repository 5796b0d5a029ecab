package machine

import (
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// BenchmarkLocalAccess is 8 threads making b.N local reads of size
// bytes each, as sleeps (below LocalFlowMin) or as flows on the DRAM
// bus: what LocalFlowMin saves (docs/measurements/2026-11-25-numa-dram-sharing.md).
func BenchmarkLocalAccess(b *testing.B) {
	for _, size := range []uint64{4 << 10, 64 << 10} {
		for _, flow := range []bool{false, true} {
			b.Run(fmt.Sprintf("%dKiB flow=%v", size>>10, flow), func(b *testing.B) {
				old := LocalFlowMin
				defer func() { LocalFlowMin = old }()
				LocalFlowMin = int64(size) + 1
				if flow {
					LocalFlowMin = 0
				}
				spec, err := platform.Preset("2s-4gpu-pcie")
				if err != nil {
					b.Fatal(err)
				}
				m, err := New(spec, 1)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				const threads = 8
				per := b.N/threads + 1
				for i := range threads {
					pa, err := m.Mem.AllocPages(0, size, mem.ZoneNormal)
					if err != nil {
						b.Fatal(err)
					}
					va := m.Mem.PhysToVirt(pa)
					m.Engine.Spawn(fmt.Sprintf("t%d", i), func(p *sim.Proc) {
						for range per {
							m.Mem.Read(p, 0, va, size)
						}
					})
				}
				b.ResetTimer()
				m.Engine.Run()
			})
		}
	}
}

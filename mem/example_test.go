package mem_test

import (
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A non-coherent device writes a buffer the CPU has cached: the CPU reads
// its stale copy until it invalidates (what dma_unmap_single does for
// DMA_FROM_DEVICE), and the Access proves it by versions.
func Example() {
	spec := &platform.Spec{Nodes: []platform.Node{{
		DRAM:       platform.P[platform.Bytes](1<<30, "example"),
		MemcpyRate: platform.P[platform.Rate](10e9, "example"),
		Cache: platform.CPUCache{
			InvalidateCost: platform.P(5*sim.Nanosecond, "example"),
		},
	}}}
	eng := sim.New(1)
	m, err := mem.New(spec, eng, mem.Options{Payload: true})
	if err != nil {
		panic(err)
	}
	va, _ := m.Kmalloc(0, 64)
	pa, _ := m.VirtToPhys(va)
	eng.Spawn("driver", func(p *sim.Proc) {
		m.Read(p, 0, va, 64) // the CPU caches the buffer
		m.DeviceWriteBytes("cam0", false, pa, []byte("frame 1"))

		buf := make([]byte, 7)
		a := m.ReadBytes(p, 0, va, buf)
		fmt.Printf("%q stale=%v got v%d want v%d\n", buf, a.Stale, a.Got, a.Want)

		m.Invalidate(p, pa, 64)
		a = m.ReadBytes(p, 0, va, buf)
		fmt.Printf("%q stale=%v at %v\n", buf, a.Stale, p.Now())
	})
	eng.Run()
	// Output:
	// "\x00\x00\x00\x00\x00\x00\x00" stale=true got v0 want v1
	// "frame 1" stale=false at 12.8ns
}

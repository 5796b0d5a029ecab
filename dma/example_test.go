package dma_test

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A driver receives a frame on the Zynq's non-coherent Ethernet MAC:
// map the buffer for the device, let it write, unmap, read. The events
// are what the checker sees.
func Example() {
	spec, _ := platform.Preset("zynq-7000")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{Payload: true})
	defer m.Close()
	memory := m.Mem
	x, _ := dma.New(m, memory)
	x.Hooks.Hook(func(e *dma.Event) { fmt.Printf("%v %s\n", e.Time, e.Call) })
	gem, _ := x.Device("gem0")

	m.Engine.Spawn("rx", func(p *sim.Proc) {
		buf, _ := memory.Kmalloc(0, 2048)
		h := gem.MapSingle(p, buf, 1500, dma.FromDevice)
		if gem.MappingError(h) {
			return
		}
		gem.WriteBytes(h, []byte("hello from the wire"))
		gem.UnmapSingle(p, h, 1500, dma.FromDevice)
		got := make([]byte, 19)
		a := memory.ReadBytes(p, 0, buf, got)
		fmt.Printf("%q stale=%v\n", got, a.Stale)
	})
	m.Engine.Run()
	// Output:
	// 2.82us dma_map_single(gem0, va:0xffff888000100000, 1500, DMA_FROM_DEVICE)
	// 2.82us dma_mapping_error(gem0, dma:0x100000)
	// 2.82us device_write(gem0, dma:0x100000, 19)
	// 2.82us dma_unmap_single(gem0, dma:0x100000, 1500, DMA_FROM_DEVICE)
	// "hello from the wire" stale=false
}

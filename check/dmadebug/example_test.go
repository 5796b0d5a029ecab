package dmadebug_test

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A receive buffer mapped with the wrong direction on the Zynq's
// non-coherent Ethernet MAC. DMA_TO_DEVICE tells the kernel that the
// device only reads, so unmapping invalidates nothing: the CPU, which
// peeked at the buffer while the device owned it, then reads its own
// old cache line instead of the frame. The checker reports the peek,
// and proves by versions that the read is stale.
func Example() {
	spec, _ := platform.Preset("zynq-7000")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	memory := m.Mem
	x, _ := dma.New(m, memory)
	chk := check.New(check.Options{})
	dmadebug.Attach(chk, x, memory, dmadebug.Options{})
	gem, _ := x.Device("gem0")

	m.Engine.Spawn("rx", func(p *sim.Proc) {
		buf, _ := memory.Kmalloc(0, 2048)
		h := gem.MapSingle(p, buf, 1500, dma.ToDevice) // the device will write: FROM_DEVICE
		if gem.MappingError(h) {
			return
		}
		memory.Read(p, 0, buf, 64) // the CPU must not touch it now
		gem.Write(h, 1500)         // the frame lands in DRAM
		gem.UnmapSingle(p, h, 1500, dma.ToDevice)
		memory.Read(p, 0, buf, 64)
	})
	m.Engine.Run()
	for _, d := range chk.Diagnostics() {
		fmt.Printf("%s %s %s\n  %s\n  mapped by %s\n", d.Time, d.Severity, d.Class, d.Message, d.Origin)
	}
	// Output:
	// 3.525us error cpu-access-device-owned
	//   CPU reads pa:0x100000 +64 while gem0 owns it: DMA_TO_DEVICE mapping dma:0x100000 +1500, mapped and not synced for the CPU
	//   mapped by dma_map_single(gem0, va:0xffff888000100000, 1500, DMA_TO_DEVICE) at 3.525us by rx
	// 3.631667us error stale-read
	//   CPU read of pa:0x100000 +64 obtained version 0 at pa:0x100000, but the latest write there is version 1 (gem0's DMA_TO_DEVICE single mapping dma:0x100000 +1500 of it was unmapped at 3.631667us by rx)
	//   mapped by dma_map_single(gem0, va:0xffff888000100000, 1500, DMA_TO_DEVICE) at 3.525us by rx
}

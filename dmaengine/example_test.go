package dmaengine_test

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Copy 1 MiB on a Zynq-7000 three ways, the dma-vs-memcpy comparison:
// the AXI DMA engine completing by interrupt, the same engine busy-polled,
// and a CPU memcpy. Cores accounts each path's CPU time to its core. On
// this non-coherent SoC the streaming mappings' cache maintenance, line
// by line, costs the CPU more than copying the megabyte itself.
func ExampleChan_Copy() {
	spec, _ := platform.Preset("zynq-7000")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	memory := m.Mem
	d, _ := dma.New(m, memory)
	ctl, _ := dmaengine.New(m, memory, d, "axidma0")
	dev, node := ctl.Device(), ctl.Node()
	cores := dmaengine.NewCores(spec.Nodes[node].Cores.V)
	const size = 1 << 20

	driver := m.Engine.Spawn("driver", func(p *sim.Proc) {
		ch, _ := ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem})
		cores.Attach(ch.RequestIRQ(nil), 1)
		src, _ := memory.Kmalloc(node, size)
		dst, _ := memory.Kmalloc(node, size)
		memory.Write(p, node, src, size)
		for _, mode := range []dmaengine.Mode{dmaengine.Interrupt, dmaengine.Polling} {
			c0 := cores.Busy(0)
			s := dev.MapSingle(p, src, size, dma.ToDevice)
			t := dev.MapSingle(p, dst, size, dma.FromDevice)
			t0, c1, i0 := p.Now(), cores.Busy(0), cores.Busy(1)
			ch.Copy(p, t, s, size, mode)
			t1, c2, i1 := p.Now(), cores.Busy(0), cores.Busy(1)
			dev.UnmapSingle(p, s, size, dma.ToDevice)
			dev.UnmapSingle(p, t, size, dma.FromDevice)
			fmt.Printf("dma %-9s copy %v, CPU %v + handler %v; cache maintenance %v\n",
				mode, t1-t0, c2-c1, i1-i0, cores.Busy(0)-c0-(c2-c1))
		}
		t0, c0 := p.Now(), cores.Busy(0)
		dmaengine.CPUCopy(p, memory, node, dst, src, size)
		fmt.Printf("cpu memcpy    copy %v, CPU %v\n", p.Now()-t0, cores.Busy(0)-c0)
		ch.FreeIRQ(p)
		ch.Close(p)
	})
	cores.Attach(driver, 0)
	m.Engine.Run()
	// Output:
	// dma interrupt copy 876.663639us, CPU 390.91ns + handler 672.728ns; cache maintenance 6.38976ms
	// dma polling   copy 875.330958us, CPU 875.330958us + handler 0s; cache maintenance 6.38976ms
	// cpu memcpy    copy 1.747746667ms, CPU 1.747746667ms
}

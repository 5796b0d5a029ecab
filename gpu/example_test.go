package gpu_test

import (
	"fmt"
	"github.com/dmalab/dmalab/dma"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A program on the measured H200 copies 256 MiB of pinned host memory to
// the GPU and runs a kernel that reads it, on one stream, timing both
// with events; then it maps the buffer through BAR1 for a NIC.
func Example() {
	spec, _ := platform.Preset("h200-pcie")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	d := sys.Devices[0]

	const size = 256 << 20
	pa, _ := m.Mem.AllocPages(0, size, mem.ZoneNormal)
	host, _ := sys.RegisterHost(nil, m.Mem.PhysToVirt(pa), size, gpu.HostPortable)

	m.Engine.Spawn("app", func(p *sim.Proc) {
		buf, _ := d.Alloc(p, size)
		s := d.NewStream(0)
		e0, e1, e2 := sys.NewEvent(0), sys.NewEvent(0), sys.NewEvent(0)
		_ = e0.Record(p, s)
		_ = s.Memcpy(p, buf.Addr, host.Addr, size)
		_ = e1.Record(p, s)
		_ = s.Launch(p, gpu.Kernel{Name: "sum", Accesses: []gpu.Access{{Addr: buf.Addr, Size: size}}})
		_ = e2.Record(p, s)
		s.Synchronize(p)
		cp, _ := gpu.ElapsedTime(e0, e1)
		k, _ := gpu.ElapsedTime(e1, e2)
		fmt.Printf("copy %v (%.1f GB/s), kernel %v\n", cp, float64(size)/cp.Seconds()/1e9, k)

		bar, _ := d.BAR1().Map(buf.Addr, 1<<20)
		info := d.BAR1().Info()
		fmt.Printf("BAR1: %d pages of 64 KiB mapped; used %d KiB of %d GiB\n", len(bar.Pages), info.Used>>10, info.Total>>30)
	})
	m.Engine.Run()
	// Output:
	// copy 4.840249883ms (55.5 GB/s), kernel 63.572616us
	// BAR1: 16 pages of 64 KiB mapped; used 6080 KiB of 256 GiB
}

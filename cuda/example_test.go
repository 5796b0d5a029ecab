package cuda_test

import (
	"fmt"
	"github.com/dmalab/dmalab/dma"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A program on the model: pinned and device buffers, a synchronous copy,
// a kernel, and a copy back, on the H200 machine.
func Example() {
	spec, _ := platform.Preset("h200-pcie")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	drv, _ := cuda.New(sys)
	proc, _ := drv.NewProcess("app", 0)
	ctx, _ := proc.PrimaryContext(0)

	m.Engine.Spawn("main", func(p *sim.Proc) {
		const size = 256 << 20
		host, _ := ctx.MemAllocHost(p, size)
		dev, _ := ctx.MemAlloc(p, size)

		t0 := p.Now()
		ctx.Memcpy(p, dev, mem.GPUAddr(host), size)
		fmt.Printf("h2d 256 MiB: %.1f GB/s\n", float64(size)/(p.Now()-t0).Seconds()/1e9)

		t0 = p.Now()
		ctx.Memcpy(p, dev, mem.GPUAddr(host), 8)
		fmt.Printf("h2d 8 B: %.2f µs\n", (p.Now()-t0).Seconds()*1e6)

		ctx.LaunchKernel(p, gpu.Kernel{Name: "scale", Accesses: []gpu.Access{
			{Addr: dev, Size: size}, {Addr: dev, Size: size, Write: true},
		}}, nil)
		ctx.Memcpy(p, mem.GPUAddr(host), dev, size) // waits for the kernel

		err := ctx.CPUAccess(p, dev, 8, false)
		fmt.Println("CPU load of a device pointer:", err != nil)
	})
	m.Engine.Run()
	// Output:
	// h2d 256 MiB: 55.4 GB/s
	// h2d 8 B: 6.60 µs
	// CPU load of a device pointer: true
}

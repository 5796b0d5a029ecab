package cuda_test

import (
	"fmt"
	"github.com/dmalab/dmalab/dma"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/kernel"
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
	// h2d 8 B: 7.42 µs
	// CPU load of a device pointer: true
}

// A process exports device memory as a dma-buf, passes the descriptor to
// another process (SCM_RIGHTS) and exits: the driver reclaims its
// contexts and memory, except what the dma-buf still exports, which
// goes when the importer closes its descriptor.
func ExampleContext_MemGetHandleForAddressRange() {
	spec, _ := platform.Preset("h200-pcie")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	k := kernel.New(m.Engine, m.Mem.Nodes())
	drv, _ := cuda.New(sys, cuda.WithKernel(k))
	exporter, _ := drv.NewProcess("exporter", 0)
	importer, _ := k.NewProcess("importer", 0) // needs no CUDA
	ctx, _ := exporter.PrimaryContext(0)
	free0, _ := ctx.MemGetInfo()
	used := func() uint64 { free, _ := ctx.MemGetInfo(); return (free0 - free) >> 20 }

	m.Engine.Spawn("main", func(p *sim.Proc) {
		dev, _ := ctx.MemAlloc(p, 64<<20)
		ctx.MemAlloc(p, 32<<20)
		fd, _ := ctx.MemGetHandleForAddressRange(p, dev, 64<<20, cuda.MemRangeHandleTypeDMABufFD, 0)
		buf, _ := exporter.DMABuf(fd)
		ifd, _ := exporter.KernelProcess().SendFD(importer, fd)
		fmt.Printf("%s: %d references, %d MiB used\n", buf.FileName(), buf.Refs(), used())

		exporter.KernelProcess().Exit(p)
		fmt.Printf("exporter exited: %d reference, %d MiB used\n", buf.Refs(), used())

		importer.Close(p, ifd)
		fmt.Printf("importer closed: released %v, %d MiB used\n", buf.Released(), used())
	})
	m.Engine.Run()
	// Output:
	// dmabuf:1: 2 references, 96 MiB used
	// exporter exited: 1 reference, 64 MiB used
	// importer closed: released true, 0 MiB used
}

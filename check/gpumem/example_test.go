package gpumem_test

import (
	"fmt"
	"github.com/dmalab/dmalab/dma"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/gpumem"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A program copies into device memory it already gave back with
// cuMemFree. CUDA returns CUDA_ERROR_INVALID_VALUE; the pack names the
// allocation and the free.
func Example() {
	spec, _ := platform.Preset("h200-pcie")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	drv, _ := cuda.New(sys)
	chk := check.New(check.Options{})
	gpumem.Attach(chk, drv)

	pr, _ := drv.NewProcess("app", 0)
	ctx, _ := pr.PrimaryContext(0)
	m.Engine.Spawn("main", func(p *sim.Proc) {
		host, _ := ctx.MemAllocHost(p, 4096)
		dev, _ := ctx.MemAlloc(p, 4096)
		ctx.MemFree(p, dev)
		err := ctx.Memcpy(p, dev, mem.GPUAddr(host), 4096)
		fmt.Println("cuMemcpy failed:", err != nil)
	})
	m.Engine.Run()
	for _, d := range chk.Diagnostics() {
		fmt.Printf("%s %s\n  %s\n  allocated by %s\n", d.Severity, d.Class, d.Message, d.Origin)
	}
	// Output:
	// cuMemcpy failed: true
	// error use-after-free
	//   cuMemcpy (copy-write) uses memory [gpu:0x1000000000 +4096] freed by cuMemFree at 159.7335us by main
	//   allocated by cuMemAlloc(gpu0, 0x1000) at 131.2335us by main
}

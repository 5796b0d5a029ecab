package cuda_test

import (
	"fmt"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A camera frame in a dma-buf reaches the GPU without a copy on Jetson
// Orin: imported as external memory and mapped, the kernel reads the
// buffer's own pages, after the stream waited for the capture's
// NvSciSync fence. On the H200 machine the same import is refused.
func ExampleContext_ImportExternalMemory() {
	for _, preset := range []string{"jetson-orin", "h200-pcie"} {
		spec, _ := platform.Preset(preset)
		m, _ := machine.New(spec, 1)
		x, _ := dma.New(m, m.Mem)
		sys, _ := gpu.New(x)
		bufs := dmabuf.New(m.Engine)
		heap, _ := bufs.AddSystemHeap(m.Mem)
		drv, _ := cuda.New(sys, cuda.WithDMABuf(bufs))
		proc, _ := drv.NewProcess("app", 0)
		ctx, _ := proc.PrimaryContext(0)

		m.Engine.Spawn("main", func(p *sim.Proc) {
			const size = 1920 * 1080 * 3 / 2 // one NV12 1080p frame
			const alloc = (size + 4095) &^ 4095
			fd, _ := heap.Allocate(p, proc.KernelProcess(), alloc, 0)
			em, err := ctx.ImportExternalMemory(p, cuda.ExternalMemoryHandleDesc{Type: cuda.ExternalMemoryHandleTypeOpaqueFD, FD: fd, Size: alloc})
			if err != nil {
				fmt.Printf("%s: %v\n", preset, cuda.ResultOf(err))
				return
			}
			frame, _ := ctx.ExternalMemoryGetMappedBuffer(p, em, cuda.ExternalMemoryBufferDesc{Size: size})

			obj := cuda.NewNvSciSyncObj(bufs, "capture")
			sem, _ := ctx.ImportExternalSemaphore(p, cuda.ExternalSemaphoreHandleDesc{Type: cuda.ExternalSemaphoreHandleTypeNvSciSync, NvSciSyncObj: obj})
			captured := obj.Next()
			p.Spawn("camera", func(q *sim.Proc) { q.Sleep(33 * sim.Millisecond); captured.Fence.Signal(q) })

			ctx.WaitExternalSemaphoresAsync(p, []*cuda.ExternalSemaphore{sem}, []cuda.ExternalSemaphoreWaitParams{{Fence: captured}}, nil)
			ctx.LaunchKernel(p, gpu.Kernel{Name: "infer", Accesses: []gpu.Access{{Addr: frame, Size: size}}}, nil)
			ctx.Synchronize(p)
			fmt.Printf("%s: frame read by the GPU in place at %v\n", preset, p.Now())
			ctx.MemFree(p, frame)
			ctx.DestroyExternalMemory(p, em)
		})
		m.Engine.Run()
		m.Close()
	}
	// Output:
	// jetson-orin: frame read by the GPU in place at 33.3318135ms
	// h200-pcie: CUDA_ERROR_INVALID_VALUE (1)
}

package scenario

import (
	"fmt"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/check/gpumem"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// A gpuBug is one misuse of GPU memory through the CUDA driver API, as a
// program would commit it, named by the diagnostic class it triggers.
// run returns the result of the faulty call (what the program sees: a
// segmentation fault, a CUresult, or nil where the platform allows it)
// apart from errors of the correct calls around it, which stop the
// scenario. Each cleans up after itself, so that one bug does not cause
// another's diagnostics.
type gpuBug struct {
	class string
	doc   string
	run   func(b *gpuBugRun) (misuse, err error)
}

// gpuBugRun is what a bug works with: the program's thread, its process
// and its context on the GPU.
type gpuBugRun struct {
	p   *sim.Proc
	d   *cuda.Driver
	pr  *cuda.Process
	ctx *cuda.Context
}

// other runs fn on a thread of the process "other" and waits for it.
func (b *gpuBugRun) other(fn func(q *sim.Proc)) {
	b.p.Wait(b.p.Spawn("other", fn).Exited())
}

// gpuBugSize is the buffer each bug misuses.
const gpuBugSize = 64 << 10

// readKernel reads size bytes at addr.
func readKernel(addr mem.GPUAddr, size uint64) gpu.Kernel {
	return gpu.Kernel{Name: "read", Accesses: []gpu.Access{{Addr: addr, Size: size}}}
}

var gpuBugs = []gpuBug{
	{gpumem.CPUDerefDevicePointer, "the CPU stores through a cuMemAlloc pointer (VRAM is not mapped on the CPU)", func(b *gpuBugRun) (error, error) {
		dv, err := b.ctx.MemAlloc(b.p, gpuBugSize)
		if err != nil {
			return nil, err
		}
		misuse := b.ctx.CPUAccess(b.p, dv, 8, true)
		return misuse, b.ctx.MemFree(b.p, dv)
	}},
	{gpumem.ManagedAccessRule, "the CPU reads managed memory after a kernel launch, before synchronising (a fault on pre-Pascal and Tegra GPUs; allowed on Pascal and later, where it reports nothing)", func(b *gpuBugRun) (error, error) {
		a, err := b.ctx.MemAllocManaged(b.p, gpuBugSize, cuda.MemAttachGlobal)
		if err != nil {
			return nil, err
		}
		if err := b.ctx.CPUAccess(b.p, a, gpuBugSize, true); err != nil {
			return nil, err
		}
		if err := b.ctx.LaunchKernel(b.p, readKernel(a, gpuBugSize), nil); err != nil {
			return nil, err
		}
		misuse := b.ctx.CPUAccess(b.p, a, 8, false)
		if err := b.ctx.Synchronize(b.p); err != nil {
			return misuse, err
		}
		return misuse, b.ctx.MemFree(b.p, a)
	}},
	{gpumem.UseAfterFree, "cuMemcpy into device memory already given back with cuMemFree", func(b *gpuBugRun) (error, error) {
		host, err := b.ctx.MemAllocHost(b.p, gpuBugSize)
		if err != nil {
			return nil, err
		}
		if err := b.ctx.CPUAccess(b.p, mem.GPUAddr(host), gpuBugSize, true); err != nil {
			return nil, err
		}
		dv, err := b.ctx.MemAlloc(b.p, gpuBugSize)
		if err != nil {
			return nil, err
		}
		if err := b.ctx.MemFree(b.p, dv); err != nil {
			return nil, err
		}
		misuse := b.ctx.Memcpy(b.p, dv, mem.GPUAddr(host), gpuBugSize)
		return misuse, b.ctx.MemFreeHost(b.p, host)
	}},
	{gpumem.KernelUnpinnedHostMemory, "a kernel given malloc'd host memory (neither pinned nor mapped for the GPU)", func(b *gpuBugRun) (error, error) {
		va, err := b.pr.Malloc(gpuBugSize)
		if err != nil {
			return nil, err
		}
		if err := b.ctx.CPUAccess(b.p, mem.GPUAddr(va), gpuBugSize, true); err != nil {
			return nil, err
		}
		misuse := b.ctx.LaunchKernel(b.p, readKernel(mem.GPUAddr(va), gpuBugSize), nil)
		return misuse, b.pr.FreePageable(va)
	}},
	{gpumem.ForeignContextPointer, "a kernel given a device pointer of another process, passed as a number instead of an IPC handle", func(b *gpuBugRun) (error, error) {
		other, err := b.d.NewProcess("other", b.pr.Node())
		if err != nil {
			return nil, err
		}
		octx, err := other.PrimaryContext(b.ctx.Device())
		if err != nil {
			return nil, err
		}
		// The other process's own thread allocates, so that the
		// provenance names it.
		var dv mem.GPUAddr
		b.other(func(q *sim.Proc) { dv, err = octx.MemAlloc(q, gpuBugSize) })
		if err != nil {
			return nil, err
		}
		misuse := b.ctx.LaunchKernel(b.p, readKernel(dv, gpuBugSize), nil)
		b.other(func(q *sim.Proc) { err = octx.Destroy(q) })
		return misuse, err
	}},
}

func gpuBugNames() []string {
	var n []string
	for _, b := range gpuBugs {
		n = append(n, b.class)
	}
	return n
}

func init() {
	var doc strings.Builder
	doc.WriteString(`Misuses GPU memory through the CUDA driver model, one misuse per
GPU-memory diagnostic class. Run it under the checker: "dmalab check
gpu-bugs" reports each class; --set bug=NAME runs one. The program sees
what a real one would: a segmentation fault for a CPU access the CPU
cannot make, CUDA_ERROR_ILLEGAL_ADDRESS for a kernel's bad access (the
model refuses the launch instead of losing the context later),
CUDA_ERROR_INVALID_VALUE for a copy into freed memory.

managed-access-rule is a rule of GPUs without concurrent managed access
(pre-Pascal and Tegra: NVIDIA's "How does NVIDIA implement unified
memory on PCIe GPUs and Tegra platforms?"). On the default h200-pcie (Hopper) the
same access is allowed and nothing is reported; run it on such a GPU:

  dmalab check gpu-bugs --set platform.gpus.gpu0.arch=maxwell

Bugs:
`)
	for _, b := range gpuBugs {
		fmt.Fprintf(&doc, "  %-28s %s\n", b.class, b.doc)
	}
	register(&Scenario{
		Name:     "gpu-bugs",
		Summary:  "GPU memory misuses, one per GPU-memory diagnostic class (run it with dmalab check)",
		Platform: "h200-pcie",
		Doc:      strings.TrimRight(doc.String(), "\n"),
		Params: []Param{
			{Name: "bug", Kind: dmalab.ParamEnum, Item: "bug", Values: append([]string{"all"}, gpuBugNames()...), Default: "all", Help: "the misuse to commit: all, or one of " + strings.Join(gpuBugNames(), ", ")},
			{Name: "gpu", Kind: dmalab.ParamInt, Default: "0", Help: "index of the GPU"},
		},
		Run: runGPUBugs,
	})
}

func runGPUBugs(c *Context) error { return commitGPUBugs(c, nil) }

// commitGPUBugs commits the bugs the parameter bug names, telling seen
// (when not nil) what each faulty call returned.
func commitGPUBugs(c *Context, seen func(class string, misuse error)) error {
	dev := c.Int("gpu")
	if dev >= len(c.Machine.GPUs) {
		return noGPU(c, dev)
	}
	d, err := c.CUDA()
	if err != nil {
		return err
	}
	pr, err := d.NewProcess("app", c.Machine.GPUs[dev].Node)
	if err != nil {
		return err
	}
	ctx, err := pr.PrimaryContext(dev)
	if err != nil {
		return err
	}
	which := c.Value("bug")
	var runErr error
	c.Machine.Engine.Spawn("app", func(p *sim.Proc) {
		b := &gpuBugRun{p: p, d: d, pr: pr, ctx: ctx}
		for _, bg := range gpuBugs {
			if which != "all" && which != bg.class {
				continue
			}
			misuse, err := bg.run(b)
			if err != nil {
				runErr = fmt.Errorf("bug %s: %w", bg.class, err)
				return
			}
			if seen != nil {
				seen(bg.class, misuse)
			}
		}
	})
	guardErr := c.RunEngine()
	if runErr != nil {
		return runErr
	}
	return guardErr
}

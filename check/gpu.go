package check

import (
	"fmt"

	"github.com/dmalab/dmalab/cuda"
)

// GPU memory: the cuda façade reports every use of memory a program
// makes through it (a CPU access, each end of a copy, each access of a
// kernel, a prefetch, an advice, a free, an export) as a
// cuda.Observation, with what the address resolved to: the
// allocation, the context and process that made it, the call that made
// it (the provenance), the call that freed it. CUDA has no debug layer
// for these; the real outcomes are a SIGSEGV in the program, a
// CUDA_ERROR_ILLEGAL_ADDRESS that kills the context, or silent
// corruption. The checker reports five classes:
//
//   - cpu-deref-device-pointer: the CPU loads or stores through a
//     device pointer. VRAM of a PCIe GPU is not mapped on the CPU (UVA
//     keeps the address distinct, not accessible; seed 004: "there is no
//     pinned memory equivalent that is mapped on the GPU and accessible
//     from the host").
//   - managed-access-rule: the CPU touches managed memory while a GPU
//     without concurrent managed access (pre-Pascal, Tegra) is active,
//     from a kernel launch until the synchronisation after it, whether
//     or not the kernel still runs (seed 004; the CUDA Programming
//     Guide's rules for devices without concurrentManagedAccess).
//   - use-after-free: memory freed by cuMemFree or cuMemFreeHost (or
//     with its context) is used again: by a
//     copy, a kernel, the CPU, a prefetch, an advice, an export, or a
//     second free. The façade remembers the last cuda.FreedRemembered
//     frees; the diagnostic names the allocation and the free.
//   - kernel-unpinned-host-memory: a kernel is given host memory that
//     is not pinned and mapped: pageable memory, or memory registered
//     without CU_MEMHOSTREGISTER_DEVICEMAP.
//   - foreign-context-pointer: a pointer of another process (meaningless
//     here), or, given to a kernel, memory of another context that the
//     kernel's context may not use: device memory of another context on
//     the same GPU, non-portable registered memory of another context.
//
// Each diagnostic's origin is the allocation call, with its time and
// thread. Correct use reports nothing.

// CUDA observes one use of memory through the cuda façade
// (cuda.Driver.Observe(c.CUDA)).
func (c *Checker) CUDA(o cuda.Observation) {
	t := o.Target
	buf := fmt.Sprintf("%v +%d", o.Addr, o.Size)
	what := o.Call
	if o.Op == cuda.OpCopyRead || o.Op == cuda.OpCopyWrite || o.Op == cuda.OpKernel {
		what = fmt.Sprintf("%s (%s)", o.Call, o.Op)
	}
	switch {
	case t.Kind == cuda.MemFreed:
		c.diag(cUseAfterFree, o.Time, o.Proc, o.DeviceName, buf,
			fmt.Sprintf("%s uses memory [%v +%d] freed by %s", what, t.Base, t.Size, t.Freed), t.Origin)
	case t.Process != "" && t.Process != o.Process:
		c.diag(cForeignContextPointer, o.Time, o.Proc, o.DeviceName, buf,
			fmt.Sprintf("%s in process %s uses a pointer of process %s (context %d)", what, o.Process, t.Process, t.Context), t.Origin)
	case o.Op == cuda.OpCPUAccess && t.Kind == cuda.MemDevice:
		c.diag(cCPUDerefDevicePointer, o.Time, o.Proc, o.DeviceName, buf,
			fmt.Sprintf("CPU %s of device memory of gpu%d: not mapped on the CPU", loadStore(o.Write), t.Device), t.Origin)
	case o.Op == cuda.OpCPUAccess && t.Kind == cuda.MemManaged && !t.ConcurrentManaged && t.GPUActive:
		c.diag(cManagedAccessRule, o.Time, o.Proc, o.DeviceName, buf,
			fmt.Sprintf("CPU %s of managed memory while the GPU is active (a kernel launched and not synchronised) on GPUs without concurrent managed access", loadStore(o.Write)), t.Origin)
	case o.Op == cuda.OpKernel && t.Kind == cuda.MemPageable:
		c.diag(cKernelUnpinnedHostMemory, o.Time, o.Proc, o.DeviceName, buf,
			"kernel access to pageable host memory: not pinned, not mapped for the GPU", "")
	case o.Op == cuda.OpKernel && t.Kind == cuda.MemPinned && !t.Mapped:
		c.diag(cKernelUnpinnedHostMemory, o.Time, o.Proc, o.DeviceName, buf,
			"kernel access to host memory registered without CU_MEMHOSTREGISTER_DEVICEMAP: pinned but not mapped for the GPU", t.Origin)
	case o.Op == cuda.OpKernel && t.Context != 0 && t.Context != o.Context &&
		(t.Kind == cuda.MemDevice && t.Device == o.Device || t.Kind == cuda.MemPinned && !t.Portable):
		c.diag(cForeignContextPointer, o.Time, o.Proc, o.DeviceName, buf,
			fmt.Sprintf("kernel of context %d uses %v memory of context %d", o.Context, t.Kind, t.Context), t.Origin)
	}
}

func loadStore(write bool) string {
	if write {
		return "store"
	}
	return "load"
}

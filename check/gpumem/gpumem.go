package gpumem

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/cuda"
)

// GPU-memory class codes: misuse of the CUDA driver API's memory. They
// are dmalab's: CUDA has no debug layer that makes these checks.
const (
	CPUDerefDevicePointer    = "cpu-deref-device-pointer"
	ManagedAccessRule        = "managed-access-rule"
	UseAfterFree             = "use-after-free"
	KernelUnpinnedHostMemory = "kernel-unpinned-host-memory"
	ForeignContextPointer    = "foreign-context-pointer"
)

// cls indexes classes.
type cls uint8

const (
	cCPUDerefDevicePointer cls = iota
	cManagedAccessRule
	cUseAfterFree
	cKernelUnpinnedHostMemory
	cForeignContextPointer
	nClasses
)

// infos is indexed by cls.
var infos = [nClasses]check.ClassInfo{
	cCPUDerefDevicePointer: {Code: CPUDerefDevicePointer, Severity: check.Error,
		Summary: "CPU load or store through a device pointer: VRAM of a PCIe GPU is not mapped on the CPU (SIGSEGV)",
		Source:  "dmalab"},
	cManagedAccessRule: {Code: ManagedAccessRule, Severity: check.Error,
		Summary: "CPU access to managed memory while a GPU without concurrent managed access (pre-Pascal, Tegra) is active: launched and not synchronised (SIGSEGV)",
		Source:  "dmalab"},
	cUseAfterFree: {Code: UseAfterFree, Severity: check.Error,
		Summary: "a copy, kernel, CPU access, prefetch, advice, export or free of GPU or pinned host memory after cuMemFree or cuMemFreeHost",
		Source:  "dmalab"},
	cKernelUnpinnedHostMemory: {Code: KernelUnpinnedHostMemory, Severity: check.Error,
		Summary: "a kernel given host memory that is not pinned and mapped: pageable, or registered without CU_MEMHOSTREGISTER_DEVICEMAP (CUDA_ERROR_ILLEGAL_ADDRESS)",
		Source:  "dmalab"},
	cForeignContextPointer: {Code: ForeignContextPointer, Severity: check.Error,
		Summary: "a pointer of another process, or given to a kernel from another context: its device memory on the same GPU, its non-portable registered memory",
		Source:  "dmalab"},
}

// classes are the registered handles, indexed by cls. GPU memory ranks
// after the DMA API's classes (100).
var classes = check.Register("gpu-memory", 200, infos[:]...)

// Classes lists the pack's classes.
func Classes() []check.ClassInfo { return check.Infos(classes[:]) }

// Pack checks the uses of GPU memory one CUDA driver reports. It keeps
// no state: every observation carries what the address resolved to.
type Pack struct {
	chk *check.Checker
}

// New returns a Pack that records on c, hooked to nothing:
// observations reach it through its CUDA method.
func New(c *check.Checker) *Pack { return &Pack{chk: c} }

// Attach makes a Pack on c and hooks it to drv's observations.
func Attach(c *check.Checker, drv *cuda.Driver) *Pack {
	x := New(c)
	drv.Hooks.Hook(x.CUDA)
	return x
}

func (x *Pack) diag(k cls, o *cuda.Observation, buf, msg, orig string) {
	x.chk.Record(classes[k], check.Diagnostic{
		Time: o.Time, Proc: o.Proc, Device: o.DeviceName, Buffer: buf, Message: msg, Origin: orig,
	})
}

// CUDA checks one use of memory through the cuda façade.
func (x *Pack) CUDA(o *cuda.Observation) {
	t := o.Target
	buf := fmt.Sprintf("%v +%d", o.Addr, o.Size)
	what := o.Call
	if o.Op == cuda.OpCopyRead || o.Op == cuda.OpCopyWrite || o.Op == cuda.OpKernel {
		what = fmt.Sprintf("%s (%s)", o.Call, o.Op)
	}
	switch {
	case t.Kind == cuda.MemFreed:
		x.diag(cUseAfterFree, o, buf,
			fmt.Sprintf("%s uses memory [%v +%d] freed by %s", what, t.Base, t.Size, t.Freed), t.Origin)
	case t.Process != "" && t.Process != o.Process:
		x.diag(cForeignContextPointer, o, buf,
			fmt.Sprintf("%s in process %s uses a pointer of process %s (context %d)", what, o.Process, t.Process, t.Context), t.Origin)
	case o.Op == cuda.OpCPUAccess && t.Kind == cuda.MemDevice:
		x.diag(cCPUDerefDevicePointer, o, buf,
			fmt.Sprintf("CPU %s of device memory of gpu%d: not mapped on the CPU", loadStore(o.Write), t.Device), t.Origin)
	case o.Op == cuda.OpCPUAccess && t.Kind == cuda.MemManaged && !t.ConcurrentManaged && t.GPUActive:
		x.diag(cManagedAccessRule, o, buf,
			fmt.Sprintf("CPU %s of managed memory while the GPU is active (a kernel launched and not synchronised) on GPUs without concurrent managed access", loadStore(o.Write)), t.Origin)
	case o.Op == cuda.OpKernel && t.Kind == cuda.MemPageable:
		x.diag(cKernelUnpinnedHostMemory, o, buf,
			"kernel access to pageable host memory: not pinned, not mapped for the GPU", "")
	case o.Op == cuda.OpKernel && t.Kind == cuda.MemPinned && !t.Mapped:
		x.diag(cKernelUnpinnedHostMemory, o, buf,
			"kernel access to host memory registered without CU_MEMHOSTREGISTER_DEVICEMAP: pinned but not mapped for the GPU", t.Origin)
	case o.Op == cuda.OpKernel && t.Context != 0 && t.Context != o.Context &&
		(t.Kind == cuda.MemDevice && t.Device == o.Device || t.Kind == cuda.MemPinned && !t.Portable):
		x.diag(cForeignContextPointer, o, buf,
			fmt.Sprintf("kernel of context %d uses %v memory of context %d", o.Context, t.Kind, t.Context), t.Origin)
	}
}

func loadStore(write bool) string {
	if write {
		return "store"
	}
	return "load"
}

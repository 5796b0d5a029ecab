package cuda

import (
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Op is what a program did with memory, as an Observation reports it.
type Op uint8

const (
	// OpCPUAccess: a CPU load or store through Context.CPUAccess.
	OpCPUAccess Op = iota + 1
	// OpCopyRead and OpCopyWrite: the source and the destination of a
	// cuMemcpy* call, synchronous or not.
	OpCopyRead
	OpCopyWrite
	// OpKernel: one memory access of a kernel given to cuLaunchKernel.
	OpKernel
	// OpPrefetch and OpAdvise: cuMemPrefetchAsync and cuMemAdvise.
	OpPrefetch
	OpAdvise
	// OpFree: cuMemFree or cuMemFreeHost of the address.
	OpFree
	// OpExport: cuMemGetHandleForAddressRange of the range.
	OpExport
	// OpCopyUnflushed: a synchronous copy into device memory without
	// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS returned before its writes are
	// visible to third-party readers; Visible says for how long after
	// Time they are not (SetMemopsWindow).
	OpCopyUnflushed
)

var opNames = [...]string{"", "cpu-access", "copy-read", "copy-write", "kernel", "prefetch", "advise", "free", "export", "copy-unflushed"}

func (o Op) String() string {
	if int(o) < len(opNames) && o > 0 {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// MemKind is what an address resolved to when the program used it: the
// driver's view of the pointer (cuPointerGetAttributes), plus what the
// model remembers of memory freed recently.
type MemKind uint8

const (
	// MemInvalid: nothing is mapped there.
	MemInvalid MemKind = iota
	// MemPageable: host memory the driver does not know (malloc'd).
	MemPageable
	// MemPinned: page-locked host memory (cuMemHostAlloc,
	// cuMemAllocHost, cuMemHostRegister).
	MemPinned
	// MemDevice: a GPU's memory (cuMemAlloc).
	MemDevice
	// MemManaged: managed memory (cuMemAllocManaged).
	MemManaged
	// MemFreed: an allocation freed by the program (cuMemFree,
	// cuMemFreeHost, or with its context), among the last
	// FreedRemembered. Unregistered memory is pageable again, not freed.
	MemFreed
)

var kindNames = [...]string{"invalid", "pageable", "pinned", "device", "managed", "freed"}

func (k MemKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("MemKind(%d)", int(k))
}

// Target is what the used range resolved to, with the allocation's
// provenance.
type Target struct {
	Kind MemKind
	// Base and Size are the allocation (or the freed one).
	Base mem.GPUAddr
	Size uint64
	// Device is the GPU of device memory; -1 otherwise.
	Device int
	// Mapped: GPU kernels may access the range (device and managed
	// memory; host memory allocated, or registered with DEVICEMAP).
	Mapped bool
	// Portable: pinned host memory that counts as pinned in every
	// context (CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTREGISTER_PORTABLE).
	Portable bool
	// Context and Process are the context that allocated the memory and
	// its process (0 and "" for pageable memory).
	Context int
	Process string
	// Origin is the call that allocated or registered the memory, with
	// its time and thread: "cuMemAlloc(gpu0, 0x1000) at 12us by app".
	Origin string
	// Freed is the call that freed it, for MemFreed.
	Freed string
	// ConcurrentManaged: the GPUs allow CPU access to managed memory
	// while a kernel runs (CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS;
	// Pascal and later discrete GPUs). GPUActive: some GPU has had a
	// kernel launched and not yet synchronised, which is when the CPU
	// may not touch managed memory without it (the CUDA Programming
	// Guide's "GPU exclusive access to managed memory").
	ConcurrentManaged bool
	GPUActive         bool
}

// Observation is one use of memory by a program through the façade, as
// the checker sees it: the call, who made it, the range and what it
// resolved to, and the error the call returned (nil when it went
// ahead). The façade decides what the real driver does; observers
// decide what is misuse (package check).
type Observation struct {
	// Header's Proc is the thread (sim.Proc); its Component is "cuda",
	// its Cause sim.CauseCall.
	sim.Header
	Op   Op
	Call string
	// Process and Context are the process and context it called
	// through, Device that context's GPU.
	Process string
	Context int
	Device  int
	// DeviceName is Device's name ("gpu0").
	DeviceName string
	Addr       mem.GPUAddr
	Size       uint64
	Write      bool
	Target     Target
	Err        error
	// Visible is OpCopyUnflushed's window.
	Visible sim.Time
}

func (o Observation) String() string {
	s := fmt.Sprintf("%v %s %s ctx%d %v +%d → %s", o.Time, o.Call, o.Op, o.Context, o.Addr, o.Size, o.Target.Kind)
	if o.Err != nil {
		s += ": " + o.Err.Error()
	}
	return s
}

// origin is a call with its time and thread, as provenance.
func origin(call string, t sim.Time, p *sim.Proc) string {
	s := call + " at " + t.String()
	if p != nil {
		s += " by " + p.Name()
	}
	return s
}

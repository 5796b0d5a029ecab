package uvm

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// Sentinel errors, matched with errors.Is. Each names what the real API
// returns.
var (
	// ErrInvalidValue: a bad argument (CUDA_ERROR_INVALID_VALUE).
	ErrInvalidValue = errors.New("invalid value")
	// ErrInvalidAddress: the range is not (all) managed memory of one
	// allocation; a GPU access there is a fatal MMU fault, a CPU access a
	// segmentation fault.
	ErrInvalidAddress = errors.New("not managed memory")
	// ErrOutOfMemory: a pre-Pascal GPU cannot hold the allocation
	// (CUDA_ERROR_OUT_OF_MEMORY; managed memory lives in its VRAM).
	ErrOutOfMemory = errors.New("out of memory")
	// ErrNotSupported: the call needs concurrent managed access, which
	// pre-Pascal and Tegra GPUs lack (cuMemPrefetchAsync returns
	// CUDA_ERROR_INVALID_DEVICE there).
	ErrNotSupported = errors.New("not supported without concurrent managed access")
	// ErrConcurrentAccess: the CPU touched managed memory while a kernel
	// ran on a GPU without concurrent managed access (pre-Pascal, Tegra):
	// on the real system a segmentation fault (NVIDIA's "How does NVIDIA
	// implement unified memory on PCIe GPUs and Tegra platforms?").
	ErrConcurrentAccess = errors.New("CPU access to managed memory while a kernel runs")
	// ErrNoKernel: a pre-Pascal or Tegra GPU accessed managed memory
	// outside a kernel (between KernelLaunch and KernelComplete).
	ErrNoKernel = errors.New("GPU access outside a kernel")
)

// Kind is what an Event reports.
type Kind int

const (
	// KindFault: a GPU fault-buffer entry was posted, or the CPU took a
	// page fault, at Addr by Processor.
	KindFault Kind = iota + 1
	// KindBatch: the bottom half serviced a batch of Count entries of
	// GPU Processor, Coalesced of them duplicates of another entry's
	// page, Blocks VA blocks.
	KindBatch
	// KindMigration: Bytes of a block moved (or were copied, Duplicate)
	// From one processor To another, for Cause. From is NoProcessor when
	// the pages were populated (zero-filled) rather than copied.
	KindMigration
	// KindEviction: GPU From evicted the 2 MiB chunk backing the block
	// at Addr; Bytes went back to system memory.
	KindEviction
	// KindThrashing: the page at Addr thrashes between Processors.
	KindThrashing
	// KindPin: the page at Addr is pinned To a processor until Until;
	// the thrashing Processors map it remotely.
	KindPin
	// KindUnpin: the pin of the page at Addr expired; remote mappings
	// are gone and the next access migrates again.
	KindUnpin
	// KindThrottle: Processor may not work on the page at Addr until
	// Until.
	KindThrottle
	// KindRemoteMap: Processor maps Bytes at Addr resident on To
	// (remote access: zero-copy, peer access) for Cause.
	KindRemoteMap
	// KindRevoke: Bytes of read-duplicated copies at Addr were
	// invalidated so that Processor may write.
	KindRevoke
	// KindCacheMaintenance: Bytes of managed memory were cleaned or
	// invalidated in the CPU caches (Tegra, at launch and completion).
	KindCacheMaintenance
	// KindLaunch and KindComplete: a kernel began or ended on GPU
	// Processor (pre-Pascal and Tegra act on them).
	KindLaunch
	KindComplete
	// KindError: misuse, Err says which (ErrConcurrentAccess,
	// ErrInvalidAddress, ...). The checker turns it into a diagnostic.
	KindError
	// KindStall: an access by Processor to Bytes at Addr waited Stall
	// for its faults to be serviced (the fault service time statistics
	// attribute).
	KindStall
)

var kindNames = [...]string{"", "fault", "batch", "migration", "eviction", "thrashing", "pin", "unpin",
	"throttle", "remote-map", "revoke", "cache-maintenance", "launch", "complete", "error", "stall"}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Cause is why data moved or got mapped (UVM's uvm_make_resident_cause_t
// and UvmEventMapRemoteCause, regrouped).
type Cause int

const (
	// CauseFault: pages that faulted (replayable GPU faults, CPU faults).
	CauseFault Cause = iota + 1
	// CausePrefetcher: pages the tree prefetcher added to a fault's
	// migration (UVM_MAKE_RESIDENT_CAUSE_PREFETCH).
	CausePrefetcher
	// CausePrefetch: cuMemPrefetchAsync (UVM_MAKE_RESIDENT_CAUSE_API_MIGRATE).
	CausePrefetch
	// CauseEviction: VRAM was full (UVM_MAKE_RESIDENT_CAUSE_EVICTION).
	CauseEviction
	// CauseThrashing: a thrashing page moved to, or got mapped at, the
	// processor it is pinned to.
	CauseThrashing
	// CauseAdvice: cuMemAdvise made the choice (a preferred location
	// that is not the faulting processor, AccessedBy mappings,
	// duplicates collapsed by UnsetReadMostly).
	CauseAdvice
	// CauseLaunch: a pre-Pascal kernel launch moved what the CPU dirtied.
	CauseLaunch
)

var causeNames = [...]string{"", "fault", "prefetcher", "prefetch", "eviction", "thrashing", "advice", "launch"}

func (c Cause) String() string {
	if c > 0 && int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("Cause(%d)", int(c))
}

// numCauses sizes per-cause counters.
const numCauses = int(CauseLaunch) + 1

// Event is one thing the driver did, as the checker, the tracer and
// statistics see it. Fields that do not apply to a Kind are zero.
type Event struct {
	// Header's Proc is the simulated process that did it (a faulting
	// thread, the bottom half "uvm-bh-gpu0", a prefetching thread),
	// empty for timers; its Component is "uvm" and its Cause
	// sim.CauseFault (reached as Header.Cause: Cause below is the
	// driver's reason for a migration).
	sim.Header
	Kind Kind
	// Processor is the processor concerned: the faulting, throttled or
	// mapping one, the GPU of a batch or launch.
	Processor Processor
	// From and To: a migration's source and destination, an eviction's
	// GPU (From), a pin's or remote mapping's location (To).
	From, To Processor
	// Addr and Bytes: the memory concerned (a page, a block's start).
	Addr  Addr
	Bytes int64
	Cause Cause
	// Write: the faulting access was a write.
	Write bool
	// Duplicate: a read-duplicating copy (ReadMostly); the source keeps
	// its copy.
	Duplicate bool
	// Count, Coalesced, Blocks: a batch's entries, duplicates and blocks.
	Count, Coalesced, Blocks int
	// Processors: the processors thrashing on a page.
	Processors ProcSet
	// Until: a throttle's or pin's end.
	Until sim.Time
	// Stall: how long a KindStall access waited.
	Stall sim.Time
	// Err: a KindError's error.
	Err error
}

func (e Event) String() string {
	switch e.Kind {
	case KindMigration:
		return fmt.Sprintf("%v %v %v %v->%v %d B (%v)", e.Time, e.Kind, e.Addr, e.From, e.To, e.Bytes, e.Cause)
	case KindError:
		return fmt.Sprintf("%v %v %v: %v", e.Time, e.Kind, e.Processor, e.Err)
	}
	return fmt.Sprintf("%v %v %v %v", e.Time, e.Kind, e.Processor, e.Addr)
}

// Stats counts what the driver did.
type Stats struct {
	// GPUFaults counts fault-buffer entries posted; CoalescedFaults those
	// a batch found duplicating another entry's page; StaleFaults those
	// whose page was already accessible when serviced (a prefetch or an
	// earlier batch resolved them).
	GPUFaults, CoalescedFaults, StaleFaults int64
	// CPUFaults counts CPU page faults on managed memory.
	CPUFaults int64
	// Batches and ServicePasses: batches serviced, and runs of the
	// bottom half (each at most MaxBatchesPerService batches).
	Batches, ServicePasses int64
	// Migrations and MigratedBytes by Cause (index Cause); DuplicatedBytes
	// counts read-duplicating copies among them; PopulatedBytes pages
	// zero-filled rather than copied.
	Migrations      [numCauses]int64
	MigratedBytes   [numCauses]int64
	DuplicatedBytes int64
	PopulatedBytes  int64
	// Evictions and EvictedBytes: chunks evicted, bytes written back.
	Evictions, EvictedBytes int64
	// Thrashing: pages detected thrashing; Pins, Unpins, Throttles the
	// responses.
	Thrashing, Pins, Unpins, Throttles int64
	// RemoteMaps counts remote mappings made (pages).
	RemoteMaps int64
	// Revocations counts read-duplicated pages invalidated by writes.
	Revocations int64
	// Errors counts misuse reported.
	Errors int64
	// FaultStall is the total time accesses waited on faults.
	FaultStall sim.Time
}

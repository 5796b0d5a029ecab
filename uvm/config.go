package uvm

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// GPUConfig is one GPU as the unified-memory driver sees it.
type GPUConfig struct {
	// Name is for events and errors ("gpu0").
	Name string
	// Generation picks the unified-memory model (GenerationOf).
	Generation Generation
	// ManagedMemory is how much of the GPU's memory managed memory may
	// occupy, in whole 2 MiB root chunks (the rest is rounded away).
	// When it is full the driver evicts; a GPU with none holds no
	// managed pages, and what would migrate to it stays in system memory
	// and is mapped remotely (uvm_va_block_select_residency falls back
	// to the CPU when the chosen processor has no memory).
	ManagedMemory int64
	// CPULink is how this GPU and the CPU reach each other's memory. A
	// GPU always maps system memory; with LinkPCIe (x86) the CPU cannot
	// map GPU memory, so CPU access to GPU-resident pages migrates them;
	// with LinkNVLink (POWER9, Grace: NVLink, NVLink-C2C) the CPU maps
	// GPU memory and accesses have native atomics. Zero means LinkPCIe.
	CPULink Link
}

// Config describes the processors of one VA space.
type Config struct {
	// GPUs are GPU(0), GPU(1), ... All must be of one Generation: the
	// model does not mix unified-memory models in one process.
	GPUs []GPUConfig
	// Peers[i][j] is the link over which GPU i can map GPU j's memory
	// once peer access is enabled (cuCtxEnablePeerAccess); nil, or
	// LinkNone, means no peer access. The integrator derives it from the
	// topology (NVLink, a common PCIe switch or root complex).
	Peers [][]Link
	// Params are the driver's tunables and costs; the zero value means
	// DefaultParams.
	Params Params
}

// Params are the nvidia_uvm module parameters and the costs of the
// driver's work. Every default says where it comes from.
type Params struct {
	// FaultBatchCount is how many fault-buffer entries one batch fetches
	// and services (uvm_perf_fault_batch_count).
	FaultBatchCount int
	// MaxBatchesPerService is how many batches one run of the bottom
	// half services before it returns (uvm_perf_fault_max_batches_per_service).
	MaxBatchesPerService int
	// MaxThrottlePerService is how many batches with throttled faults
	// one run services (uvm_perf_fault_max_throttle_per_service).
	MaxThrottlePerService int

	// DisablePrefetch turns the tree prefetcher off
	// (uvm_perf_prefetch_enable=0).
	DisablePrefetch bool
	// PrefetchThreshold is the percentage of a subtree that must be
	// resident or faulted for the prefetcher to migrate all of it
	// (uvm_perf_prefetch_threshold).
	PrefetchThreshold int

	// DisableThrashing turns thrashing detection off
	// (uvm_perf_thrashing_enable=0).
	DisableThrashing bool
	// ThrashingThreshold is the number of consecutive migrations of a
	// page, each within ThrashingLapse of the previous one, that is
	// thrashing (uvm_perf_thrashing_threshold).
	ThrashingThreshold int
	// ThrashingPinThreshold is the number of throttling periods before a
	// page is pinned (uvm_perf_thrashing_pin_threshold).
	ThrashingPinThreshold int
	// ThrashingLapse is the window (uvm_perf_thrashing_lapse_usec).
	ThrashingLapse sim.Time
	// ThrashingNap is how long, in lapses, a throttled processor may not
	// work on the page (uvm_perf_thrashing_nap).
	ThrashingNap int
	// ThrashingEpoch is how long, in lapses, without thrashing before a
	// block's thrashing state is dropped (uvm_perf_thrashing_epoch).
	ThrashingEpoch int
	// ThrashingPin is how long, in lapses, a page stays pinned
	// (uvm_perf_thrashing_pin).
	ThrashingPin int
	// ThrashingMaxResets is how many times a block's thrashing state may
	// be dropped at the end of an epoch (uvm_perf_thrashing_max_resets).
	ThrashingMaxResets int
	// UnpinGranularity is the slack of the unpinning timer: a page whose
	// deadline is that close counts as due (TIMER_GRANULARITY_NS in
	// uvm_perf_thrashing.c); a timer that finds the block busy retries
	// after it.
	UnpinGranularity sim.Time

	// FaultBatchOverhead is the fixed cost of one batch: the fault
	// interrupt and the wake-up of the bottom half, fetching the entries,
	// flushing the fault buffer and pushing the replay and waiting for it.
	FaultBatchOverhead sim.Time
	// FaultEntryCost is the cost per fault-buffer entry fetched: decoding
	// it, finding its VA space and block, its share of the sort.
	FaultEntryCost sim.Time
	// BlockServiceCost is the cost of servicing one VA block: its lock,
	// the residency, thrashing and prefetch policies, chunk allocation,
	// unmapping the old location and mapping the new one (PTE writes and
	// a TLB invalidate on the GPU). Data movement is extra (Env.Move).
	BlockServiceCost sim.Time
	// FaultPageCost is the fault service's cost per page it makes
	// resident on the faulting GPU (faulted and prefetched pages alike):
	// uvm_va_block_service_locked walks the service context page by
	// page (residency selection, the CPU PTE revoked one page at a time
	// by unmap_mapping_range in block_unmap_cpu, the copy pushed per
	// contiguous run of CPU pages, which are not physically contiguous),
	// work that cuMemPrefetchAsync's uvm_migrate does per block instead.
	// Data movement is extra.
	FaultPageCost sim.Time
	// CPUFaultCost is the cost of one CPU page fault on managed memory
	// (uvm_vm_fault: the trap, the same block service), data movement
	// extra.
	CPUFaultCost sim.Time
	// PrefetchBlockCost is the cost per VA block of cuMemPrefetchAsync
	// (uvm_migrate), data movement extra.
	PrefetchBlockCost sim.Time
	// CPUZeroPageCost is what clearing one fresh 4 KiB page costs when
	// managed memory is populated in system memory.
	CPUZeroPageCost sim.Time
	// CPUMapPageCost is what mapping one 4 KiB page into the process
	// costs once it is resident in system memory: UVM maps CPU pages one
	// at a time (block_map_cpu_page_to: vm_insert_page under the VMA
	// wrapper's lock, the chunk lookup, the dirty bit), after a
	// prefetch to the CPU and for the whole region a CPU fault migrates.
	CPUMapPageCost sim.Time
}

// Defaults: the nvidia_uvm module's own (open-gpu-kernel-modules,
// kernel-open/nvidia-uvm), which the H200 machine measured here runs
// with: every module parameter below read the same in
// /sys/module/nvidia_uvm/parameters on 2026-11-21
// (docs/measurements/2026-11-21-h200-mechanisms/system.txt). Then the
// costs.
const (
	// DefaultFaultBatchCount: UVM_PERF_FAULT_BATCH_COUNT_DEFAULT
	// (uvm_gpu_replayable_faults.c).
	DefaultFaultBatchCount = 256
	// DefaultMaxBatchesPerService:
	// UVM_PERF_FAULT_MAX_BATCHES_PER_SERVICE_DEFAULT
	// (uvm_gpu_replayable_faults.c).
	DefaultMaxBatchesPerService = 20
	// DefaultMaxThrottlePerService:
	// UVM_PERF_FAULT_MAX_THROTTLE_PER_SERVICE_DEFAULT
	// (uvm_gpu_replayable_faults.c).
	DefaultMaxThrottlePerService = 5
	// DefaultPrefetchThreshold: UVM_PREFETCH_THRESHOLD_DEFAULT, percent
	// (uvm_perf_prefetch.c).
	DefaultPrefetchThreshold = 51
	// DefaultThrashingThreshold: UVM_PERF_THRASHING_THRESHOLD_DEFAULT
	// (uvm_perf_thrashing.c).
	DefaultThrashingThreshold = 3
	// DefaultThrashingPinThreshold: UVM_PERF_THRASHING_PIN_THRESHOLD_DEFAULT
	// (uvm_perf_thrashing.c).
	DefaultThrashingPinThreshold = 10
	// DefaultThrashingLapse: UVM_PERF_THRASHING_LAPSE_USEC_DEFAULT
	// (uvm_perf_thrashing.c).
	DefaultThrashingLapse = 500 * sim.Microsecond
	// DefaultThrashingNap: UVM_PERF_THRASHING_NAP_DEFAULT, lapses
	// (uvm_perf_thrashing.c).
	DefaultThrashingNap = 1
	// DefaultThrashingEpoch: UVM_PERF_THRASHING_EPOCH_DEFAULT, lapses
	// (uvm_perf_thrashing.c).
	DefaultThrashingEpoch = 2000
	// DefaultThrashingPin: UVM_PERF_THRASHING_PIN_DEFAULT, lapses
	// (uvm_perf_thrashing.c).
	DefaultThrashingPin = 300
	// DefaultThrashingMaxResets: UVM_PERF_THRASHING_MAX_RESETS_DEFAULT
	// (uvm_perf_thrashing.c).
	DefaultThrashingMaxResets = 4
	// DefaultUnpinGranularity: TIMER_GRANULARITY_NS, 20 us
	// (uvm_perf_thrashing.c).
	DefaultUnpinGranularity = 20 * sim.Microsecond

	// IsolatedFaultLatency is the one measurement the costs are
	// calibrated from: one GPU thread reading host-resident managed
	// memory at 2 MiB stride, median round trip per fault, 21.92 us
	// (measured here 2026-11-21 by dmalab probe,
	// docs/measurements/2026-11-21-h200-cli-probe.txt; ~23 us in an
	// earlier run of the same measurement on the same machine).
	IsolatedFaultLatency = 21920 * sim.Nanosecond
	// CalibrationMove is what the H200 platform model charges for the
	// migration inside that round trip. The block was resident on the
	// host, so the fault at page 0 migrates its 64 KiB big page (the
	// prefetcher's tree gives 16 of 32 pages = 50 %, not more than 51 %,
	// for the next level): the h200-pcie route latency (DRAM 110 ns +
	// root complex 150 ns + link 100 ns) plus 65536 B at the link's
	// 55.5 GB/s = 1540.829 ns.
	CalibrationMove = 1541 * sim.Nanosecond

	// DefaultFaultEntryCost is assumed: decoding one 32-byte fault
	// entry, its VA-space and block lookup and its share of the sort,
	// some hundred CPU instructions.
	DefaultFaultEntryCost = 100 * sim.Nanosecond
	// DefaultBlockServiceCost is assumed: per VA block the driver takes
	// the block lock, runs its policies, allocates a chunk and rewrites
	// PTEs, ending with a TLB invalidate that is a GPU round trip of a
	// few microseconds (an empty kernel launch, also a GPU round trip,
	// measured 3.2 us here).
	DefaultBlockServiceCost = 4 * sim.Microsecond
	// DefaultFaultBatchOverhead is calibrated: IsolatedFaultLatency less
	// CalibrationMove, one FaultEntryCost, one BlockServiceCost and the
	// 16 pages' FaultPageCost (none by default): 21.920 - 1.541 - 0.100
	// - 4.000 = 16.279 us.
	DefaultFaultBatchOverhead = IsolatedFaultLatency - CalibrationMove - DefaultFaultEntryCost - DefaultBlockServiceCost - pagesPerBigPage*DefaultFaultPageCost
	// DefaultFaultPageCost is zero: the package's own cost model charges
	// a fault's pages their transfer only. An integrator calibrates it
	// (platform's uvm.fault_page_cost: 160 ns on the H200 machine, from
	// the probe's single-thread fault latency at 4 KiB against 2 MiB
	// stride; docs/measurements/2026-11-25-um-fidelity.md).
	DefaultFaultPageCost = 0
	// DefaultCPUFaultCost is assumed equal to the isolated GPU fault's
	// service (the round trip less its transfer, 20.379 us): a CPU fault
	// runs the same block service (uvm_va_block_service_locked), trading
	// the fault-buffer fetch and replay for the trap and a TLB shootdown.
	DefaultCPUFaultCost = DefaultFaultBatchOverhead + DefaultFaultEntryCost + DefaultBlockServiceCost
	// DefaultPrefetchBlockCost is assumed equal to DefaultBlockServiceCost:
	// uvm_migrate does the same per-block work without faults.
	DefaultPrefetchBlockCost = DefaultBlockServiceCost
	// DefaultCPUZeroPageCost is 4 KiB at the single-thread memcpy rate
	// measured here (10.93 GB/s, h200-pcie memcpy_rate), assumed for
	// clearing a page, a stream of stores: 4096 / 10.93e9 s = 375 ns.
	DefaultCPUZeroPageCost = 375 * sim.Nanosecond
	// DefaultCPUMapPageCost is assumed equal to pinning one page:
	// cuMemHostRegister costs 35 ms per GiB on the H200 machine
	// (measured 2026-11-21; h200-pcie pin_cost), 133 ns per 4 KiB page,
	// which is the same kind of per-page kernel work (a page-table
	// walk, a reference, a mapping under mmap_lock). An integrator
	// calibrates it (platform's uvm.cpu_map_cost, which dmalab calibrate
	// solves from the probe's device-to-host prefetch: 134 ns on the
	// H200 VM of 2026-11-21, 325 ns on that of 2026-11-29).
	DefaultCPUMapPageCost = 133 * sim.Nanosecond
)

// DefaultParams are the driver's defaults and the calibrated costs.
func DefaultParams() Params {
	return Params{
		FaultBatchCount:       DefaultFaultBatchCount,
		MaxBatchesPerService:  DefaultMaxBatchesPerService,
		MaxThrottlePerService: DefaultMaxThrottlePerService,
		PrefetchThreshold:     DefaultPrefetchThreshold,
		ThrashingThreshold:    DefaultThrashingThreshold,
		ThrashingPinThreshold: DefaultThrashingPinThreshold,
		ThrashingLapse:        DefaultThrashingLapse,
		ThrashingNap:          DefaultThrashingNap,
		ThrashingEpoch:        DefaultThrashingEpoch,
		ThrashingPin:          DefaultThrashingPin,
		ThrashingMaxResets:    DefaultThrashingMaxResets,
		UnpinGranularity:      DefaultUnpinGranularity,
		FaultBatchOverhead:    DefaultFaultBatchOverhead,
		FaultEntryCost:        DefaultFaultEntryCost,
		BlockServiceCost:      DefaultBlockServiceCost,
		FaultPageCost:         DefaultFaultPageCost,
		CPUFaultCost:          DefaultCPUFaultCost,
		PrefetchBlockCost:     DefaultPrefetchBlockCost,
		CPUZeroPageCost:       DefaultCPUZeroPageCost,
		CPUMapPageCost:        DefaultCPUMapPageCost,
	}
}

// CalibrateBatchOverhead is the FaultBatchOverhead that makes one
// isolated fault take faultLatency when the Env moves the fault's 64 KiB
// big page in move64K: the other per-fault costs of p (one entry, one
// block, the big page's 16 pages) stay as they are.
// An integrator whose Move differs from CalibrationMove, or a platform
// with its own measured FaultLatency, recalibrates with it.
func CalibrateBatchOverhead(p Params, faultLatency, move64K sim.Time) (sim.Time, error) {
	pages := pagesPerBigPage * p.FaultPageCost
	d := faultLatency - move64K - p.FaultEntryCost - p.BlockServiceCost - pages
	if d < 0 {
		return 0, fmt.Errorf("fault latency %v is less than its parts (move %v, entry %v, block %v, pages %v): %w",
			faultLatency, move64K, p.FaultEntryCost, p.BlockServiceCost, pages, ErrInvalidValue)
	}
	return d, nil
}

func (p *Params) validate() error {
	bad := func(what string, v any) error {
		return fmt.Errorf("params: %s = %v: %w", what, v, ErrInvalidValue)
	}
	switch {
	case p.FaultBatchCount < 1:
		return bad("FaultBatchCount", p.FaultBatchCount)
	case p.MaxBatchesPerService < 1:
		return bad("MaxBatchesPerService", p.MaxBatchesPerService)
	case p.MaxThrottlePerService < 1:
		return bad("MaxThrottlePerService", p.MaxThrottlePerService)
	case p.PrefetchThreshold < 1 || p.PrefetchThreshold > 100:
		return bad("PrefetchThreshold", p.PrefetchThreshold)
	case p.ThrashingThreshold < 1 || p.ThrashingThreshold > 7:
		// A 3-bit counter in the driver (UVM_PERF_THRASHING_THRESHOLD_MAX).
		return bad("ThrashingThreshold", p.ThrashingThreshold)
	case p.ThrashingPinThreshold < 1 || p.ThrashingPinThreshold > 255:
		return bad("ThrashingPinThreshold", p.ThrashingPinThreshold)
	case p.ThrashingLapse <= 0:
		return bad("ThrashingLapse", p.ThrashingLapse)
	case p.ThrashingNap < 1 || p.ThrashingNap > 100:
		return bad("ThrashingNap", p.ThrashingNap)
	case p.ThrashingEpoch < 1:
		return bad("ThrashingEpoch", p.ThrashingEpoch)
	case p.ThrashingPin < 0:
		return bad("ThrashingPin", p.ThrashingPin)
	case p.ThrashingMaxResets < 0:
		return bad("ThrashingMaxResets", p.ThrashingMaxResets)
	case p.UnpinGranularity <= 0:
		return bad("UnpinGranularity", p.UnpinGranularity)
	case p.FaultBatchOverhead < 0 || p.FaultEntryCost < 0 || p.BlockServiceCost < 0 || p.FaultPageCost < 0 ||
		p.CPUFaultCost < 0 || p.PrefetchBlockCost < 0 || p.CPUZeroPageCost < 0 || p.CPUMapPageCost < 0:
		return bad("a cost", "negative")
	}
	return nil
}

func (c *Config) validate() (Generation, error) {
	n := len(c.GPUs)
	if n == 0 || n > MaxGPUs {
		return 0, fmt.Errorf("config: %d GPUs: %w", n, ErrInvalidValue)
	}
	gen := c.GPUs[0].Generation
	for i, g := range c.GPUs {
		if g.Generation != gen {
			return 0, fmt.Errorf("config: GPU %d is %v, GPU 0 %v (mixed unified-memory models are not modelled): %w",
				i, g.Generation, gen, ErrInvalidValue)
		}
		if g.ManagedMemory < 0 {
			return 0, fmt.Errorf("config: GPU %d managed memory %d: %w", i, g.ManagedMemory, ErrInvalidValue)
		}
		if g.CPULink == LinkNone {
			c.GPUs[i].CPULink = LinkPCIe
		}
	}
	switch gen {
	case PascalPlus, PrePascal:
	case Tegra:
		if n != 1 {
			return 0, fmt.Errorf("config: %d integrated GPUs: %w", n, ErrInvalidValue)
		}
	default:
		return 0, fmt.Errorf("config: generation %v: %w", gen, ErrInvalidValue)
	}
	if c.Peers != nil {
		if len(c.Peers) != n {
			return 0, fmt.Errorf("config: %d rows of peers for %d GPUs: %w", len(c.Peers), n, ErrInvalidValue)
		}
		for i, row := range c.Peers {
			if len(row) != n {
				return 0, fmt.Errorf("config: peers row %d has %d entries: %w", i, len(row), ErrInvalidValue)
			}
		}
	}
	if c.Params == (Params{}) {
		c.Params = DefaultParams()
	}
	return gen, c.Params.validate()
}

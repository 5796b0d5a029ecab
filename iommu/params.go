package iommu

import "github.com/dmalab/dmalab/sim"

// Defaults of an IOMMU unit. Where Linux has a constant, it is the
// source; the IOTLB's geometry and costs are not published by the
// vendors, so they come from public measurements, or are assumed and
// say why.
const (
	// DefaultIOTLBEntries: pcie-bench measured the IOTLB of Intel Xeon
	// E5 at 64 entries of 4 KiB (latency rises past a 256 KiB working
	// set): Neugebauer et al., "Understanding PCIe performance for end
	// host networking", SIGCOMM 2018, section 6.3.
	DefaultIOTLBEntries = 64
	// DefaultIOTLBWays is assumed: vendors do not publish the
	// associativity; 4 ways keeps conflict misses rare at 64 entries.
	DefaultIOTLBWays = 4
	// DefaultHitCost is assumed: an IOTLB hit is a lookup in the root
	// complex, a few cycles, small against PCIe latencies.
	DefaultHitCost = 2 * sim.Nanosecond
	// DefaultWalkReadCost is one read of a table page during a walk by
	// a unit not placed on a machine (Unit.Place computes it from the
	// platform): assumed one DRAM load-to-use latency, so that a
	// 4-level walk (320 ns) is the ~330 ns pcie-bench measured for an
	// IOTLB miss (Neugebauer et al., SIGCOMM 2018).
	DefaultWalkReadCost = 80 * sim.Nanosecond
	// DefaultInvalidateCost is one synchronous IOTLB invalidation
	// (queued invalidation descriptor and wait descriptor on VT-d, CMD_TLBI
	// and CMD_SYNC on SMMUv3): assumed 1 µs, the order Peleg et al.,
	// "Utilizing the IOMMU scalably", USENIX ATC 2015, report for the
	// invalidation strict mode pays at every unmap.
	DefaultInvalidateCost = 1 * sim.Microsecond
	// DefaultFlushQueueSize is IOVA_FQ_SIZE (drivers/iommu/dma-iommu.c):
	// entries a flush queue holds before it must flush.
	DefaultFlushQueueSize = 256
	// DefaultFlushTimeout is IOVA_FQ_TIMEOUT (drivers/iommu/dma-iommu.c,
	// 10 ms): the flush queue's timer.
	DefaultFlushTimeout = 10 * sim.Millisecond
	// DefaultATCEntries is a device's ATS translation cache (its
	// Device-TLB): assumed 64 entries. The PCIe ATS specification
	// leaves the size to the device and vendors do not publish it; 64
	// is the IOTLB's own measured size, so a device with ATS caches as
	// much as the IOMMU would for it.
	DefaultATCEntries = 64
	// DefaultATSInvalidateCost is one ATS invalidation of a device's
	// ATC and the wait for its completion message (a Device-TLB
	// invalidation descriptor then a wait descriptor on VT-d, CMD_ATC_INV
	// then CMD_SYNC on SMMUv3), beyond the IOTLB's own: assumed 2 µs,
	// twice an IOTLB invalidation, since the request crosses the PCIe
	// link and the device answers (the ATS specification allows a
	// device up to a minute; Linux waits synchronously in
	// qi_flush_dev_iotlb).
	DefaultATSInvalidateCost = 2 * sim.Microsecond
	// DefaultATSRoundTrip is a translation request and its completion
	// over the link when the unit is not placed on a machine (Place
	// computes it from the device's PCIe path): assumed 430 ns, twice
	// one Gen5 link (100 ns), a switch (115 ns) and the root port's
	// link (100 ns) of 2s-4gpu-pcie.
	DefaultATSRoundTrip = 430 * sim.Nanosecond
	// DefaultWalkers is how many IOTLB misses a unit serves at once
	// (its page-table walkers, or the walk slots of an SMMU's TCU):
	// assumed 8. Intel and AMD publish no number; Arm's CoreLink
	// MMU-600 makes its TCU's concurrent walks a configuration option.
	// A device keeps many requests outstanding (PCIe tags), so the
	// misses of one long access overlap up to this count.
	DefaultWalkers = 8
)

// DefaultWalkCache is the entries of the paging-structure caches (VT-d)
// or walk caches (SMMU) of a unit, by the level of the non-leaf entry
// they hold: level 0 (an entry spanning 512 GiB), level 1 (1 GiB) and
// level 2 (2 MiB). A walk whose 2 MiB region's entry is cached reads only
// the leaf table. Assumed 4, 16 and 32: the VT-d specification (section
// 6.2) and the SMMUv3 architecture define these caches without sizes,
// and vendors do not publish them; the sizes are of the order of a CPU
// core's own paging-structure caches, a few upper entries and a few tens
// of 2 MiB-region entries.
var DefaultWalkCache = [levels - 1]int{4, 16, 32}

// Granule is the smallest page of the tables and of the IOVA allocator
// (4 KiB, the IOVA granule dma-iommu uses with 4 KiB CPU pages).
const Granule = 4096

// The IOVA allocator's constants (drivers/iommu/iova.c, include/linux/iova.h).
const (
	// rcacheOrders is IOVA_RANGE_CACHE_MAX_SIZE (6): ranges of 2^0 to
	// 2^5 granules (128 KiB) are cached per CPU.
	rcacheOrders = 6
	// magSize is IOVA_MAG_SIZE: ranges a magazine holds.
	magSize = 127
	// maxGlobalMags is MAX_GLOBAL_MAGS: full magazines in a depot.
	maxGlobalMags = 32
)

// Params are an IOMMU unit's numbers.
type Params struct {
	// IOTLBEntries and IOTLBWays are the IOTLB's size and
	// associativity (entries must be a multiple of ways).
	IOTLBEntries, IOTLBWays int
	// HitCost is the time of an IOTLB hit; WalkReadCost of one table
	// read in a walk (a miss pays one per level it reads) when the unit
	// is not placed on a machine: Unit.Place replaces it with the
	// machine's own latency from the root complex to the tables.
	HitCost, WalkReadCost sim.Time
	// InvalidateCost is one synchronous invalidation, paid by the
	// unmapping thread in strict mode and by whoever triggers a flush.
	InvalidateCost sim.Time
	// FlushQueueSize and FlushTimeout are the lazy mode's flush queue.
	FlushQueueSize int
	FlushTimeout   sim.Time
	// CPUs is the number of per-CPU IOVA caches.
	CPUs int
	// WalkCache is the entries of the paging-structure caches by level
	// (see DefaultWalkCache); zero entries disable a level's cache.
	WalkCache [levels - 1]int
	// ATCEntries is the ATC of a device attached with ATS;
	// ATSInvalidateCost one ATS invalidation round (see the defaults).
	ATCEntries        int
	ATSInvalidateCost sim.Time
	// Walkers is how many translations of one access the unit serves at
	// once (DefaultWalkers; zero means one: every miss in turn).
	Walkers int
	// Profile names the hardware family whose Linux driver's log lines
	// the unit's unhandled faults print (vtd, amd-vi, smmuv3); empty
	// prints VT-d's.
	Profile string
}

// DefaultParams are the constants above, with one CPU.
func DefaultParams() Params {
	return Params{
		IOTLBEntries: DefaultIOTLBEntries, IOTLBWays: DefaultIOTLBWays,
		HitCost: DefaultHitCost, WalkReadCost: DefaultWalkReadCost,
		InvalidateCost: DefaultInvalidateCost,
		FlushQueueSize: DefaultFlushQueueSize, FlushTimeout: DefaultFlushTimeout,
		CPUs:       1,
		WalkCache:  DefaultWalkCache,
		ATCEntries: DefaultATCEntries, ATSInvalidateCost: DefaultATSInvalidateCost,
		Walkers: DefaultWalkers,
		Profile: "vtd",
	}
}

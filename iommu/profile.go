package iommu

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Profile is one IOMMU hardware family as a parameter set: its page-table
// format and the IOTLB and invalidation numbers a Unit runs with. Where
// a number has no public source it says "assumed" and why.
type Profile struct {
	// Name is the platform format's name of the profile.
	Name string
	// Format is the page-table format the kernel driver uses.
	Format string
	// Levels is the depth of a walk from the root to a 4 KiB leaf. Every
	// profile's Linux driver uses 4 levels for 48-bit IOVAs, which is
	// the depth a Domain's tables have.
	Levels int
	// Params are the unit's numbers (CPUs 1; the caller sets them).
	Params Params
	// Sources says where each of Params' numbers comes from, by field
	// name.
	Sources map[string]string
}

// profiles are the known profiles, by name.
var profiles = map[string]Profile{
	"vtd": {
		Name:   "vtd",
		Format: "Intel VT-d second-level paging, 4 levels for 48-bit IOVAs (Intel VT-d specification, rev. 4, section 3.7; drivers/iommu/intel/iommu.c uses 4-level tables, agaw 48)",
		Levels: 4,
		Params: DefaultParams(),
		Sources: map[string]string{
			"Walkers":        "assumed: 8 concurrent page-table walks; no vendor publishes the number (Arm's CoreLink MMU-600 makes it a TCU configuration option)",
			"WalkCache":      "assumed: VT-d's paging-structure caches (PML4, PDPE, PDE caches; VT-d specification section 6.2.4) have no published sizes; 4, 16 and 32 entries",
			"ATC":            "assumed: a device's ATC of 64 entries and 2 us per ATS invalidation (Device-TLB invalidation descriptor and wait descriptor, qi_flush_dev_iotlb)",
			"IOTLBEntries":   "measured: 64 entries of 4 KiB on Intel Xeon E5 (Neugebauer et al., Understanding PCIe performance for end host networking, SIGCOMM 2018, section 6.3)",
			"IOTLBWays":      "assumed: Intel does not publish the associativity; 4 ways keeps conflict misses rare at 64 entries",
			"HitCost":        "assumed: a lookup in the root complex, a few cycles",
			"WalkReadCost":   "assumed one DRAM load per level, so that a 4-level walk is the ~330 ns IOTLB miss pcie-bench measured (Neugebauer et al., SIGCOMM 2018)",
			"InvalidateCost": "assumed 1 us: a queued invalidation descriptor and its wait descriptor, the order Peleg et al. report (Utilizing the IOMMU scalably, USENIX ATC 2015)",
			"FlushQueue":     "Linux: IOVA_FQ_SIZE 256 entries, IOVA_FQ_TIMEOUT 10 ms (drivers/iommu/dma-iommu.c)",
		},
	},
	"amd-vi": {
		Name:   "amd-vi",
		Format: "AMD I/O page tables (v1), 4 levels for 48-bit IOVAs (AMD I/O Virtualization Technology (IOMMU) Specification, 48882, section 2.2.3; drivers/iommu/amd/io_pgtable.c)",
		Levels: 4,
		Params: amdParams(),
		Sources: map[string]string{
			"Walkers":        "assumed: 8 concurrent page-table walks; no vendor publishes the number (Arm's CoreLink MMU-600 makes it a TCU configuration option)",
			"WalkCache":      "assumed: the AMD IOMMU's page-directory caches have no published sizes; as for VT-d",
			"ATC":            "assumed: as for VT-d; INVALIDATE_IOTLB_PAGES then COMPLETION_WAIT",
			"IOTLBEntries":   "assumed equal to VT-d's measured 64 entries: AMD does not publish the IOMMU's TLB size",
			"IOTLBWays":      "assumed: 4 ways, as for VT-d",
			"HitCost":        "assumed: a lookup in the IOMMU, a few cycles",
			"WalkReadCost":   "assumed one DRAM load per level (80 ns), as for VT-d",
			"InvalidateCost": "assumed 1 us: INVALIDATE_IOMMU_PAGES followed by COMPLETION_WAIT on the command buffer, the same order as VT-d's queued invalidation (Peleg et al., USENIX ATC 2015)",
			"FlushQueue":     "Linux: IOVA_FQ_SIZE 256 entries, IOVA_FQ_TIMEOUT 10 ms (drivers/iommu/dma-iommu.c)",
		},
	},
	"smmuv3": {
		Name:   "smmuv3",
		Format: "Arm VMSAv8-64 stage-1 tables, 4 KiB granule, 4 levels for 48-bit IOVAs (Arm SMMUv3 architecture specification, IHI 0070; drivers/iommu/io-pgtable-arm.c)",
		Levels: 4,
		Params: Params{
			IOTLBEntries: 128, IOTLBWays: 4,
			HitCost: DefaultHitCost, WalkReadCost: 100 * sim.Nanosecond,
			InvalidateCost: 2 * sim.Microsecond,
			FlushQueueSize: DefaultFlushQueueSize, FlushTimeout: DefaultFlushTimeout,
			CPUs:       1,
			WalkCache:  DefaultWalkCache,
			ATCEntries: DefaultATCEntries, ATSInvalidateCost: 3 * sim.Microsecond,
			Walkers: DefaultWalkers,
			Profile: "smmuv3",
		},
		Sources: map[string]string{
			"Walkers":        "assumed: 8 concurrent page-table walks; no vendor publishes the number (Arm's CoreLink MMU-600 makes it a TCU configuration option)",
			"WalkCache":      "assumed: the SMMUv3 architecture allows walk caches of any size and MMU-600 makes them a configuration option; 4, 16 and 32 entries",
			"ATC":            "assumed: a 64-entry ATC; 3 us per CMD_ATC_INV then CMD_SYNC, one more command-queue round than an IOTLB invalidation",
			"IOTLBEntries":   "assumed: the SMMUv3 architecture leaves TLB sizes to the implementation and Arm's CoreLink MMU-600 makes its TBU TLBs a configuration option; 128 entries assumed",
			"IOTLBWays":      "assumed: 4 ways",
			"HitCost":        "assumed: a lookup in the TBU, a few cycles",
			"WalkReadCost":   "assumed 100 ns: one LPDDR load per level on an SoC, slower than server DDR",
			"InvalidateCost": "assumed 2 us: CMD_TLBI_NH_VA then CMD_SYNC through the in-memory command queue, polled for completion (drivers/iommu/arm/arm-smmu-v3/arm-smmu-v3.c)",
			"FlushQueue":     "Linux: IOVA_FQ_SIZE 256 entries, IOVA_FQ_TIMEOUT 10 ms (drivers/iommu/dma-iommu.c)",
		},
	},
}

// amdParams are the defaults with AMD-Vi's log lines.
func amdParams() Params {
	p := DefaultParams()
	p.Profile = "amd-vi"
	return p
}

// Profiles names the known profiles, sorted.
func Profiles() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// LookupProfile is the profile named name (vtd, amd-vi, smmuv3).
func LookupProfile(name string) (Profile, error) {
	p, ok := profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("iommu: profile %q (known: %s): %w", name, strings.Join(Profiles(), ", "), mem.ErrInvalid)
	}
	p.Sources = maps.Clone(p.Sources)
	return p, nil
}

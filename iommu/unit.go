package iommu

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Errors of device accesses the IOMMU blocks.
var (
	// ErrFault is a translation fault: nothing is mapped at the IOVA
	// (DMAR "non-present entry", SMMU F_TRANSLATION).
	ErrFault = errors.New("iommu: translation fault")
	// ErrPermission is a permission fault: the mapping lacks the
	// access's permission (a write through a read-only mapping).
	ErrPermission = errors.New("iommu: permission fault")
	// ErrTranslatedRequest is an ATS translated request from a device
	// the unit does not trust with ATS (not attached with it): blocked,
	// as VT-d blocks translated requests whose context entry disables
	// Device-TLBs and an SMMU whose STE has EATS clear.
	ErrTranslatedRequest = errors.New("iommu: translated request from a device without ATS")
)

// Mode is how unmaps invalidate the IOTLB (iommu.strict=1 or 0).
type Mode uint8

const (
	// Strict invalidates synchronously at every unmap
	// (IOMMU_DOMAIN_DMA).
	Strict Mode = iota
	// Lazy queues unmapped IOVAs and invalidates in batches
	// (IOMMU_DOMAIN_DMA_FQ).
	Lazy
)

func (m Mode) String() string {
	if m == Lazy {
		return "lazy"
	}
	return "strict"
}

// Unit is one IOMMU (struct intel_iommu, struct arm_smmu_device): its
// IOTLB, its invalidation mode, and the memory its domains' tables live
// in.
type Unit struct {
	// Hooks receives every event of the unit and its domains.
	Hooks sim.Hooks[Event]

	name    string
	mem     *mem.Memory
	eng     *sim.Engine
	node    int
	mode    Mode
	params  Params
	tlb     *IOTLB
	psc     *walkCache
	domains int
	stats   UnitStats
	ev      Event
	// walkRead is one table read of a walk (Place: from the machine;
	// else Params.WalkReadCost); m is the machine the unit is placed
	// on, nil if none.
	walkRead sim.Time
	m        *machine.Machine
}

// UnitStats counts what the unit blocked or let through stale.
type UnitStats struct {
	// Faults are blocked accesses; StaleHits accesses translated by an
	// IOTLB or ATC entry whose mapping was gone.
	Faults, StaleHits uint64
	// Walks are the IOTLB misses that walked the tables, WalkReads the
	// table reads they made (each a 64-byte line of the tables' node's
	// DRAM), after the paging-structure caches.
	Walks, WalkReads uint64
	// ATSRequests are translation requests from devices' ATCs;
	// ATSInvalidations the ATS invalidation rounds sent to devices.
	ATSRequests, ATSInvalidations uint64
	// Translated are translated requests (ATS) the unit let through
	// unchecked.
	Translated uint64
}

// Stats are the unit's counts so far.
func (u *Unit) Stats() UnitStats { return u.stats }

// NewUnit is an IOMMU named name whose tables are allocated on NUMA
// node node of m.
func NewUnit(name string, m *mem.Memory, eng *sim.Engine, node int, mode Mode, p Params) (*Unit, error) {
	if p.IOTLBEntries <= 0 || p.IOTLBWays <= 0 || p.IOTLBEntries%p.IOTLBWays != 0 {
		return nil, fmt.Errorf("iommu: %s: IOTLB of %d entries in %d ways: %w", name, p.IOTLBEntries, p.IOTLBWays, mem.ErrInvalid)
	}
	if p.FlushQueueSize <= 0 || p.FlushTimeout <= 0 || p.CPUs <= 0 {
		return nil, fmt.Errorf("iommu: %s: flush queue %d, timeout %v, %d CPUs: %w", name, p.FlushQueueSize, p.FlushTimeout, p.CPUs, mem.ErrInvalid)
	}
	return &Unit{name: name, mem: m, eng: eng, node: node, mode: mode, params: p,
		tlb: newIOTLB(p.IOTLBEntries, p.IOTLBWays), psc: newWalkCache(p.WalkCache), walkRead: p.WalkReadCost}, nil
}

// Name is the unit's name.
func (u *Unit) Name() string { return u.name }

// Mode is the unit's invalidation mode.
func (u *Unit) Mode() Mode { return u.mode }

// IOTLB is the unit's IOTLB.
func (u *Unit) IOTLB() *IOTLB { return u.tlb }

// emit delivers e with its header filled.
func (u *Unit) emit(e Event, proc string, cause sim.Cause) {
	u.ev = e
	u.ev.Header = sim.Header{Time: u.eng.Now(), Proc: proc, Component: u.name, Cause: cause}
	u.Hooks.Emit(&u.ev)
}

// Params are the unit's parameters (costs, IOTLB geometry, flush
// queue).
func (u *Unit) Params() Params { return u.params }

package iommu

import (
	"errors"
	"fmt"

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
	domains int
	stats   UnitStats
	ev      Event
}

// UnitStats counts what the unit blocked or let through stale.
type UnitStats struct {
	// Faults are blocked accesses; StaleHits accesses translated by an
	// IOTLB entry whose mapping was gone.
	Faults, StaleHits uint64
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
	return &Unit{name: name, mem: m, eng: eng, node: node, mode: mode, params: p, tlb: newIOTLB(p.IOTLBEntries, p.IOTLBWays)}, nil
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

package iommu

import (
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Op is what an Event reports.
type Op uint8

const (
	// OpMap is iommu_map.
	OpMap Op = iota + 1
	// OpUnmap is iommu_unmap; Unmapped below Size means part of the
	// range was not mapped (Warn says so).
	OpUnmap
	// OpFault is a device access blocked by the IOMMU (Reason says
	// why); no byte of memory changed.
	OpFault
	// OpFlush is an IOTLB invalidation: one unmap's range in strict
	// mode, a flush queue's whole domain in lazy mode (Entries IOVAs
	// freed).
	OpFlush
	// OpStaleHit is a device access translated by an IOTLB entry whose
	// mapping was removed (lazy mode, before the flush): it reached
	// memory no longer mapped for the device.
	OpStaleHit
	// OpTranslated is an ATS translated request the unit let through
	// without looking at the tables: the device named a physical
	// address itself (Phys), mapped for it or not.
	OpTranslated
	// OpATSInvalidate is an ATS invalidation of a device's ATC (Device
	// names it), strict at an unmap or lazy at a flush.
	OpATSInvalidate
)

var opNames = [...]string{"", "map", "unmap", "fault", "flush", "stale-hit", "translated", "ats-invalidate"}

func (o Op) String() string {
	if int(o) < len(opNames) && o != 0 {
		return opNames[o]
	}
	return "op?"
}

// Event is one thing an IOMMU unit did, delivered through Unit.Hooks.
type Event struct {
	sim.Header
	Op Op
	// Domain is the domain's id; Device the device whose access it
	// was (faults and stale hits), or for which the DMA layer mapped or
	// unmapped (empty for iommu_map and iommu_unmap called directly).
	// The Header's Proc is the process that mapped or unmapped; empty
	// for a device's own access.
	Domain int
	Device string
	// IOVA and Size are the range; Phys where it maps (or mapped).
	IOVA mem.DMAAddr
	Size uint64
	Phys mem.PhysAddr
	Prot Prot
	// Write is an access's direction.
	Write bool
	// Unmapped is what an unmap removed.
	Unmapped uint64
	// Entries is how many queued IOVAs a flush freed.
	Entries int
	// Reason is a fault's cause: ErrFault, ErrPermission or
	// ErrTranslatedRequest.
	Reason error
	// Log is the line the IOMMU driver logs for a fault no handler
	// took (SetFaultHandler), in the profile's format: VT-d's "DMAR:
	// [DMA Write NO_PASID] Request device [nic0] fault addr 0x1000
	// [fault reason 0x05] PTE Write access is not set". Empty when a
	// handler took it.
	Log string
	// ATC marks a stale hit in a device's ATS translation cache rather
	// than the IOTLB; Translated an access the device sent as an ATS
	// translated request, which the unit let through unchecked.
	ATC, Translated bool
	// Warn is the kernel's complaint, if any.
	Warn string
}

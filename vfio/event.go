package vfio

import (
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Op is what an Event reports.
type Op uint8

const (
	// OpBind is a driver bound to a device (Driver).
	OpBind Op = iota + 1
	// OpUnbind is a device's driver unbound (Driver, the one it had).
	OpUnbind
	// OpOpen is a VFIO file opened: a container, a group, /dev/iommu,
	// a device (File names it).
	OpOpen
	// OpClaim is user space taking DMA ownership of a device
	// (iommu_group_claim_dma_owner, iommu_device_claim_dma_owner): from
	// here on it belongs to Space, and until it is attached to Space's
	// domain every access it makes faults in its group's blocking
	// domain (Domain).
	OpClaim
	// OpAttach is a device attached to Space's domain (Domain): its DMA
	// translates through what Space maps.
	OpAttach
	// OpMapDMA is VFIO_IOMMU_MAP_DMA or IOMMU_IOAS_MAP done: [IOVA,
	// IOVA+Size) maps VAddr's pinned pages in Space (and in Domain,
	// when Space has one).
	OpMapDMA
	// OpUnmapDMA is VFIO_IOMMU_UNMAP_DMA or IOMMU_IOAS_UNMAP done: Size
	// bytes from IOVA unmapped, invalidated and unpinned.
	OpUnmapDMA
	// OpRelease is user space's ownership of a device given back
	// (iommu_device_release_dma_owner): the device is in its default
	// domain again, still bound to vfio-pci.
	OpRelease
	// OpMmap is a BAR mapped into the process (VAddr, Size).
	OpMmap
	// OpIRQ is a device's MSI-X vector (Vector) signalling its eventfd.
	OpIRQ
	// OpReset is VFIO_DEVICE_RESET or the reset at the device file's
	// release.
	OpReset
	// OpFail is a call that failed (Err says why).
	OpFail
)

var opNames = [...]string{"", "bind", "unbind", "open", "claim", "attach", "map-dma", "unmap-dma", "release", "mmap", "irq", "reset", "fail"}

func (o Op) String() string {
	if int(o) < len(opNames) && o != 0 {
		return opNames[o]
	}
	return "op?"
}

// Event is one thing the VFIO layer did, delivered through VFIO.Hooks.
// The Header's Proc is the calling thread (empty for a device's
// interrupt).
type Event struct {
	sim.Header
	Op Op
	// Call is the call as a C programmer reads it
	// ("VFIO_IOMMU_MAP_DMA(/dev/vfio/vfio, vaddr va:0x..., iova dma:0x...,
	// size 0x200000, READ|WRITE)").
	Call string
	// Process and PID name the user process that made the call.
	Process string
	PID     int
	// Device is the device concerned; Driver its driver (bind, unbind).
	Device, Driver string
	// File names the file opened.
	File string
	// Space names the user's IO address space: "container1" (legacy,
	// type1) or "iommufd1/ioas2".
	Space string
	// Unit and Domain are the IOMMU domain concerned; Domain is 0 when
	// Space has none yet (an iommufd IOAS before any attach).
	Unit   string
	Domain int
	// IOVA, Size and VAddr are a mapping's range and the user memory it
	// maps (a BAR's mmap: VAddr and Size).
	IOVA  mem.DMAAddr
	Size  uint64
	VAddr mem.VirtAddr
	// Vector is an interrupt's MSI-X vector.
	Vector int
	// Err is a failed call's error.
	Err error
}

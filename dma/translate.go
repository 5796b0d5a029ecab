package dma

import (
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Translator is the translation between the bus addresses a device
// drives and physical memory: for dma-direct the identity (phys_to_dma
// and dma_to_phys without a dma_range_map), for a device behind an
// IOMMU its domain's page tables (iommu_map / iova_to_phys, with the
// IOTLB's cost and faults). Every mapping call asks it for the bus
// address of what it maps (ToBus), and every device access asks it where
// the addresses it drives land (ToPhys): it is the one place bus and
// physical addresses meet.
//
// swiotlb is not a Translator: it lives in the mapping path
// (kernel/dma/direct.h dma_direct_map_phys → swiotlb_map), which copies
// the caller's buffer into a bounce slot and maps the slot's physical
// address through the device's Translator like any other.
type Translator interface {
	// Name says which translation it is ("direct", an IOMMU domain).
	Name() string
	// ToBus is the bus address at which the device reaches
	// [pa, pa+size): what a mapping hands the driver.
	ToBus(pa mem.PhysAddr, size uint64) (mem.DMAAddr, error)
	// ToPhys appends to out the physical ranges the device's access of
	// [a, a+size) reaches, in order, and returns the translation's cost
	// in virtual time (an IOTLB miss walks tables in memory); an
	// untranslatable or forbidden access is an error (an IOMMU fault),
	// and write says which permission the access needs.
	ToPhys(out []mem.PhysRange, a mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, sim.Time, error)
}

// Pipeline is a Translator that serves several translations of one
// access at once, as an IOMMU's page-table walkers do while the device
// keeps many requests outstanding: the access's first page is
// translated before its first byte moves, and the translation of the
// rest overlaps the movement, Ways of them at a time. A Translator that
// is not one translates an access all before it moves.
type Pipeline interface {
	Translator
	Ways() int
}

// Mapper is a Translator that owns the bus address space it translates,
// as an IOMMU domain does: a mapping allocates a bus address (an IOVA)
// and maps it, an unmap removes it. The mapping calls use it instead of
// ToBus when the device's Translator is one (dma-iommu.c's
// iommu_dma_map_page, iommu_dma_unmap_page, iommu_dma_map_sg in place of
// dma-direct); ToBus is then not asked.
type Mapper interface {
	Translator
	// Granule is the mapping unit (the IOVA granule): MapSG's ranges
	// are multiples of it.
	Granule() uint64
	// Map maps [pa, pa+size) for dir and returns the bus address of
	// pa; p pays what it costs.
	Map(p *sim.Proc, pa mem.PhysAddr, size uint64, dir Direction) (mem.DMAAddr, error)
	// MapSG maps the granule-aligned ranges back to back in one
	// contiguous bus range and returns its start.
	MapSG(p *sim.Proc, ranges []mem.PhysRange, dir Direction) (mem.DMAAddr, error)
	// Unmap removes the mapping of [addr, addr+size) (addr and size as
	// Map returned and was given, or a MapSG range) and frees its bus
	// addresses; p pays the invalidation.
	Unmap(p *sim.Proc, addr mem.DMAAddr, size uint64, dir Direction)
	// Phys is the physical address at addr as the kernel's tables say
	// (iommu_iova_to_phys), with no device access: false when nothing
	// is mapped there.
	Phys(addr mem.DMAAddr) (mem.PhysAddr, bool)
}

// Direct is dma-direct's translation without a bus offset: the bus
// address is the physical address, at no cost.
type Direct struct{}

// Name is "direct".
func (Direct) Name() string { return "direct" }

// ToBus is phys_to_dma.
func (Direct) ToBus(pa mem.PhysAddr, size uint64) (mem.DMAAddr, error) { return mem.DMAAddr(pa), nil }

// ToPhys is dma_to_phys.
func (Direct) ToPhys(out []mem.PhysRange, a mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, sim.Time, error) {
	return append(out, mem.PhysRange{Start: mem.PhysAddr(a), Size: size}), 0, nil
}

// Translator is the device's translation.
func (d *Device) Translator() Translator { return d.tr }

// SetTranslator puts the device behind t (attaching it to an IOMMU
// domain, or back to dma-direct with Direct{}). Mappings made before
// keep the bus addresses they were given.
func (d *Device) SetTranslator(t Translator) {
	d.tr = t
	_, d.direct = t.(Direct)
	d.mapper, _ = t.(Mapper)
}

// bus is the bus address of [pa, pa+size) for a mapping: direct
// translation never fails; a translator that refuses gives
// MappingErrorAddr, which no mask accepts, so the mapping fails.
func (d *Device) bus(pa mem.PhysAddr, size uint64) mem.DMAAddr {
	if d.direct {
		return mem.DMAAddr(pa)
	}
	a, err := d.tr.ToBus(pa, size)
	if err != nil {
		return MappingErrorAddr
	}
	return a
}

// toPhys is the physical address at a for the CPU side of the API
// (unmap, sync, bounce copies), which the kernel knows from its own
// bookkeeping, never from a device access: the first byte's.
func (d *Device) toPhys(a mem.DMAAddr) mem.PhysAddr {
	if d.direct {
		return mem.PhysAddr(a)
	}
	if mp := d.mapper; mp != nil {
		if pa, ok := mp.Phys(a); ok {
			return pa
		}
		return mem.PhysAddr(a)
	}
	r, _, err := d.tr.ToPhys(nil, a, 1, false)
	if err != nil || len(r) == 0 {
		return mem.PhysAddr(a)
	}
	return r[0].Start
}

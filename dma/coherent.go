package dma

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

func pageAlign(size uint64) uint64 { return (size + mem.PageSize - 1) &^ (mem.PageSize - 1) }

// AllocCoherent is dma_alloc_coherent, as dma_direct_alloc does it: size
// is rounded up to whole pages, taken from the device's node, from
// ZONE_DMA32 when the mask needs it (or when a ZONE_NORMAL allocation
// turns out beyond the mask). A coherent device gets the pages' cached
// linear-map address. A non-coherent device gets them flushed once from
// the caches (arch_dma_prep_coherent) and remapped uncached
// (dma_common_contiguous_remap), so the CPU and the device always agree
// at the price of uncached CPU access. Either way the buffer is zeroed
// through the returned address, at the CPU's cost. The handle is the bus
// address of the pages. On failure (Linux returns NULL) the error wraps
// mem.ErrNoMemory, or syscall.EINVAL for size 0.
func (d *Device) AllocCoherent(p *sim.Proc, size uint64) (mem.VirtAddr, mem.DMAAddr, error) {
	va, handle, pa, err := d.allocCoherent(p, size)
	if d.dma.observed() {
		e := &d.dma.ev
		*e = Event{
			Op: OpAllocCoherent, Kind: KindCoherent, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: handle, Size: size, Failed: err != nil, CPUAddr: va, Phys: pa, Class: MemLinear,
			Call: d.dma.call.begin("dma_alloc_coherent", d.name).dec(size).end(),
		}
		if !d.coherent {
			e.Class = MemVmalloc
		}
		if err != nil {
			e.Addr, e.Warn = MappingErrorAddr, err.Error()
		}
		d.dma.fire()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("dma_alloc_coherent(%s, %d): %w", d.name, size, err)
	}
	return va, handle, nil
}

func (d *Device) allocCoherent(p *sim.Proc, size uint64) (mem.VirtAddr, mem.DMAAddr, mem.PhysAddr, error) {
	if size == 0 {
		return 0, 0, 0, syscall.EINVAL
	}
	m := d.dma.mem
	size = pageAlign(size)
	mp := d.mapper
	iommu := mp != nil
	zone := mem.ZoneNormal
	if d.mask <= 1<<32-1 && !iommu {
		zone = mem.ZoneDMA32
	}
	pa, err := m.AllocPages(d.node, size, zone)
	if err == nil && !iommu && !d.capable(d.bus(pa, size), size) {
		freeErr := m.FreePages(pa, size)
		if zone == mem.ZoneDMA32 {
			err = errors.Join(fmt.Errorf("pages at %v beyond the mask %#x: %w", pa, d.mask, mem.ErrNoMemory), freeErr)
		} else if freeErr != nil {
			err = freeErr
		} else {
			pa, err = m.AllocPages(d.node, size, mem.ZoneDMA32)
		}
	}
	if err != nil {
		return 0, 0, 0, err
	}
	var va mem.VirtAddr
	if d.coherent {
		va = m.PhysToVirt(pa)
	} else {
		m.Flush(p, pa, size)
		va, err = m.Remap(pa, size, mem.Uncached)
		if err != nil {
			return 0, 0, 0, errors.Join(err, m.FreePages(pa, size))
		}
	}
	m.Write(p, d.node, va, size)
	if !iommu {
		return va, d.bus(pa, size), pa, nil
	}
	// iommu_dma_alloc: the pages anywhere, an IOVA below the mask.
	handle, err := mp.Map(p, pa, size, Bidirectional)
	if err != nil {
		if cls, _, _ := m.Classify(va); cls == mem.ClassRemap {
			err = errors.Join(err, m.Unremap(va))
		}
		return 0, 0, 0, errors.Join(err, m.FreePages(pa, size))
	}
	return va, handle, pa, nil
}

// FreeCoherent is dma_free_coherent, as dma_direct_free does it: the
// uncached remapping at va (if va is one) is removed and the pages at
// handle are freed, size rounded up to pages. Like Linux it trusts its
// arguments: a wrong va or size frees what they name; what mem refuses
// is in the event's Warn (Linux warns and carries on).
func (d *Device) FreeCoherent(p *sim.Proc, size uint64, va mem.VirtAddr, handle mem.DMAAddr) {
	m := d.dma.mem
	cls, _, _ := m.Classify(va)
	pa := d.toPhys(handle)
	var errs []error
	if mp := d.mapper; mp != nil {
		mp.Unmap(p, handle, pageAlign(size), Bidirectional)
	}
	if cls == mem.ClassRemap {
		errs = append(errs, m.Unremap(va))
	}
	errs = append(errs, m.FreePages(pa, pageAlign(size)))
	if d.dma.observed() {
		e := &d.dma.ev
		*e = Event{
			Op: OpFreeCoherent, Kind: KindCoherent, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: handle, Size: size, CPUAddr: va, Phys: pa, Class: memClassOf(cls),
			Call: d.dma.call.begin("dma_free_coherent", d.name).dec(size).hex("va:", uint64(va)).hex("dma:", uint64(handle)).end(),
		}
		if err := errors.Join(errs...); err != nil {
			e.Warn = err.Error()
		}
		d.dma.fire()
	}
}

package dma

import (
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// memClassOf names a kernel address's class as dma-debug does.
func memClassOf(c mem.Class) MemClass {
	switch c {
	case mem.ClassLinear:
		return MemLinear
	case mem.ClassVmalloc, mem.ClassRemap:
		return MemVmalloc
	case mem.ClassStack:
		return MemStack
	case mem.ClassText:
		return MemText
	}
	return MemInvalid
}

// MapSingle is dma_map_single: it maps [va, va+size) for the device and
// returns the bus address, or MappingErrorAddr.
//
// As dma_map_single_attrs, it refuses vmalloc and vmap addresses (a
// VMAP_STACK kernel stack included: "rejecting DMA map of vmalloc
// memory"); it maps kernel text and rodata, which the kernel translates
// with virt_to_page as any linear address (dma-debug reports it); an
// address that maps no RAM fails. Otherwise it is MapPage of the
// buffer's physical address.
func (d *Device) MapSingle(p *sim.Proc, va mem.VirtAddr, size uint64, dir Direction) mem.DMAAddr {
	cls, pa, _ := d.dma.mem.Classify(va)
	class := memClassOf(cls)
	addr, bounced, warn := MappingErrorAddr, false, ""
	switch class {
	case MemLinear, MemText:
		addr, bounced, warn = d.mapPhys(p, pa, size, dir)
	case MemVmalloc, MemStack:
		warn = "rejecting DMA map of vmalloc memory"
	}
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpMap, Kind: KindSingle, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: addr, Size: size, Dir: dir, Failed: addr == MappingErrorAddr, Bounced: bounced, Warn: warn,
			CPUAddr: va, Phys: pa, Class: class,
			Call: d.dma.call.begin("dma_map_single", d.name).hex("va:", uint64(va)).dec(size).dir(dir).end(),
		}
		d.dma.fire()
	}
	return addr
}

// UnmapSingle is dma_unmap_single: the buffer returns to the CPU, with
// the for_cpu cache operation of dir on a non-coherent device and, for a
// bounced mapping, the copy back (FROM_DEVICE, BIDIRECTIONAL) and the
// release of its slots. Like Linux it trusts what it is given: an
// address never mapped gets the cache operation at the physical address
// it names (if that is RAM), a wrong size or direction is used as
// passed.
func (d *Device) UnmapSingle(p *sim.Proc, addr mem.DMAAddr, size uint64, dir Direction) {
	d.unmap(p, KindSingle, "dma_unmap_single", addr, size, dir)
}

// MapPage is dma_map_page: it maps size bytes at offset into the page
// at physical address page. A range that is not RAM fails.
func (d *Device) MapPage(p *sim.Proc, page mem.PhysAddr, offset, size uint64, dir Direction) mem.DMAAddr {
	pa := page + mem.PhysAddr(offset)
	addr, bounced, warn, class := MappingErrorAddr, false, "", MemInvalid
	if d.dma.isRAM(pa, size) {
		class = MemLinear
		addr, bounced, warn = d.mapPhys(p, pa, size, dir)
	}
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpMap, Kind: KindPage, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: addr, Size: size, Dir: dir, Failed: addr == MappingErrorAddr, Bounced: bounced, Warn: warn,
			Phys: pa, Class: class,
			Call: d.dma.call.begin("dma_map_page", d.name).hex("pa:", uint64(page)).dec(offset).dec(size).dir(dir).end(),
		}
		d.dma.fire()
	}
	return addr
}

// UnmapPage is dma_unmap_page; it behaves as UnmapSingle.
func (d *Device) UnmapPage(p *sim.Proc, addr mem.DMAAddr, size uint64, dir Direction) {
	d.unmap(p, KindPage, "dma_unmap_page", addr, size, dir)
}

// MapResource is dma_map_resource: it maps MMIO (a peer device's BAR)
// for the device. It never bounces and does no cache maintenance; an
// address beyond the mask fails ("DMA addr ... overflow"). Current Linux
// no longer refuses RAM here (the pfn_valid test was removed in 5.18):
// RAM is mapped, and the event's Class says so for the checker.
func (d *Device) MapResource(p *sim.Proc, phys mem.PhysAddr, size uint64, dir Direction) mem.DMAAddr {
	class := MemMMIO
	if d.dma.isRAM(phys, size) {
		class = MemLinear
	}
	addr, warn := MappingErrorAddr, ""
	mp := d.mapper
	iommu := mp != nil
	switch {
	case !dir.valid():
	case iommu:
		// iommu_dma_map_resource: an IOVA like any mapping.
		if a, err := mp.Map(p, phys, size, dir); err == nil {
			addr = a
		} else {
			warn = err.Error()
		}
	default:
		a := d.bus(phys, size)
		if d.capable(a, size) {
			addr = a
		} else {
			warn = d.overflowWarning("DMA addr", a, size)
		}
	}
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpMap, Kind: KindResource, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: addr, Size: size, Dir: dir, Failed: addr == MappingErrorAddr, Warn: warn,
			Phys: phys, Class: class,
			Call: d.dma.call.begin("dma_map_resource", d.name).hex("pa:", uint64(phys)).dec(size).dir(dir).end(),
		}
		d.dma.fire()
	}
	return addr
}

// UnmapResource is dma_unmap_resource: nothing to undo under direct
// mapping, so it only reports; through an IOMMU the IOVA is unmapped.
func (d *Device) UnmapResource(p *sim.Proc, addr mem.DMAAddr, size uint64, dir Direction) {
	if mp := d.mapper; mp != nil && dir.valid() {
		defer mp.Unmap(p, addr, size, dir)
	}
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpUnmap, Kind: KindResource, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: addr, Size: size, Dir: dir,
			Call: d.dma.call.begin("dma_unmap_resource", d.name).hex("dma:", uint64(addr)).dec(size).dir(dir).end(),
		}
		d.dma.fire()
	}
}

// SyncSingleForCPU is dma_sync_single_for_cpu: the CPU takes the buffer
// back while it stays mapped (the for_cpu cache operation, and the copy
// out of the bounce slot for FROM_DEVICE and BIDIRECTIONAL). addr may lie
// inside a mapping (dma_sync_single_range_for_cpu is addr+offset).
func (d *Device) SyncSingleForCPU(p *sim.Proc, addr mem.DMAAddr, size uint64, dir Direction) {
	pa := d.toPhys(addr)
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpSyncForCPU, Kind: KindSingle, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: addr, Size: size, Dir: dir, Bounced: d.dma.tlb.contains(pa),
			Call: d.dma.call.begin("dma_sync_single_for_cpu", d.name).hex("dma:", uint64(addr)).dec(size).dir(dir).end(),
		}
		d.dma.fire()
	}
	d.syncForCPU(p, pa, size, dir)
}

// SyncSingleForDevice is dma_sync_single_for_device: the buffer goes
// back to the device (the copy into the bounce slot for TO_DEVICE and
// BIDIRECTIONAL, then the for_device cache operation).
func (d *Device) SyncSingleForDevice(p *sim.Proc, addr mem.DMAAddr, size uint64, dir Direction) {
	pa := d.toPhys(addr)
	d.syncForDevice(p, pa, size, dir)
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpSyncForDevice, Kind: KindSingle, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: addr, Size: size, Dir: dir, Bounced: d.dma.tlb.contains(pa),
			Call: d.dma.call.begin("dma_sync_single_for_device", d.name).hex("dma:", uint64(addr)).dec(size).dir(dir).end(),
		}
		d.dma.fire()
	}
}

// unmap reports, then undoes a single or page mapping.
func (d *Device) unmap(p *sim.Proc, kind Kind, fn string, addr mem.DMAAddr, size uint64, dir Direction) {
	pa := d.toPhys(addr)
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpUnmap, Kind: kind, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Addr: addr, Size: size, Dir: dir, Bounced: d.dma.tlb.contains(pa),
			Call: d.dma.call.begin(fn, d.name).hex("dma:", uint64(addr)).dec(size).dir(dir).end(),
		}
		d.dma.fire()
	}
	if mp := d.mapper; mp != nil {
		d.iommuUnmap(p, mp, pa, addr, size, dir)
		return
	}
	d.unmapPhys(p, pa, size, dir, true)
}

// iommuMap is iommu_dma_map_page: an IOVA mapped for the buffer where it
// is (no bounce), then the for_device cache operation.
func (d *Device) iommuMap(p *sim.Proc, mp Mapper, pa mem.PhysAddr, size uint64, dir Direction) (mem.DMAAddr, bool, string) {
	addr, err := mp.Map(p, pa, size, dir)
	if err != nil {
		return MappingErrorAddr, false, err.Error()
	}
	if !d.coherent {
		opForDevice(dir).apply(d.dma.mem, p, pa, size)
	}
	return addr, false, ""
}

// iommuUnmap is iommu_dma_unmap_page: the for_cpu cache operation on
// the buffer at pa, then the IOVA unmapped and freed.
func (d *Device) iommuUnmap(p *sim.Proc, mp Mapper, pa mem.PhysAddr, addr mem.DMAAddr, size uint64, dir Direction) {
	if !dir.valid() {
		return
	}
	d.syncForCPU(p, pa, size, dir)
	mp.Unmap(p, addr, size, dir)
}

// mapPhys is dma_direct_map_phys for RAM: bounce when the device cannot
// reach the buffer or must bounce, else map it where it is; then the
// for_device cache operation on what the device will access. It returns
// the bus address (MappingErrorAddr on failure), whether it bounced, and
// the kernel's log line on failure.
func (d *Device) mapPhys(p *sim.Proc, pa mem.PhysAddr, size uint64, dir Direction) (mem.DMAAddr, bool, string) {
	if !dir.valid() {
		return MappingErrorAddr, false, ""
	}
	if mp := d.mapper; mp != nil {
		return d.iommuMap(p, mp, pa, size, dir)
	}
	addr := d.bus(pa, size)
	if !d.forceBounce && d.capable(addr, size) {
		if !d.coherent {
			opForDevice(dir).apply(d.dma.mem, p, pa, size)
		}
		return addr, false, ""
	}
	if d.dma.tlb == nil {
		return MappingErrorAddr, false, d.overflowWarning("DMA addr", addr, size)
	}
	return d.bounceMap(p, pa, size, dir)
}

// bounceMap is swiotlb_map: take slots, copy the buffer in (always,
// whatever the direction, since the 2022 fix of an information leak: a
// device that writes less than the whole buffer must not expose the
// slot's previous contents), check the slot is reachable, then the
// for_device cache operation on the slot.
func (d *Device) bounceMap(p *sim.Proc, pa mem.PhysAddr, size uint64, dir Direction) (mem.DMAAddr, bool, string) {
	// A mapping longer than MaxBounceSize fits no segment and fails as
	// a full pool does.
	t := d.dma.tlb
	slot, ok := t.alloc(pa, size, d.segBoundary)
	if !ok {
		return MappingErrorAddr, false, t.fullWarning(size)
	}
	d.dma.mem.CopyPhys(p, d.node, slot, pa, size)
	addr := d.bus(slot, size)
	if !d.capable(addr, size) {
		t.release(slot)
		return MappingErrorAddr, false, d.overflowWarning("swiotlb addr", addr, size)
	}
	if !d.coherent {
		opForDevice(dir).apply(d.dma.mem, p, slot, size)
	}
	return addr, true, ""
}

// unmapPhys is dma_direct_unmap_phys: sync for the CPU, then release the
// bounce slots (without a second copy). sync is false when a failed
// dma_map_sg undoes its work (DMA_ATTR_SKIP_CPU_SYNC).
func (d *Device) unmapPhys(p *sim.Proc, pa mem.PhysAddr, size uint64, dir Direction, sync bool) {
	if !dir.valid() {
		return
	}
	if sync {
		d.syncForCPU(p, pa, size, dir)
	}
	if d.dma.inTLB(pa) {
		d.dma.tlb.release(pa)
	}
}

// syncForCPU is dma_direct_sync_single_for_cpu: the for_cpu cache
// operation (non-coherent devices), then, for a bounce slot, the copy to
// the caller's buffer when the device may have written it.
func (d *Device) syncForCPU(p *sim.Proc, pa mem.PhysAddr, size uint64, dir Direction) {
	if !dir.valid() {
		return
	}
	if !d.coherent && d.dma.isRAM(pa, size) {
		opForCPU(dir).apply(d.dma.mem, p, pa, size)
	}
	if (dir == FromDevice || dir == Bidirectional) && d.dma.inTLB(pa) {
		d.bounce(p, pa, size, false)
	}
}

// syncForDevice is dma_direct_sync_single_for_device: for a bounce slot
// the copy from the caller's buffer when the device will read it, then
// the for_device cache operation (non-coherent devices).
func (d *Device) syncForDevice(p *sim.Proc, pa mem.PhysAddr, size uint64, dir Direction) {
	if !dir.valid() {
		return
	}
	if (dir == ToDevice || dir == Bidirectional) && d.dma.inTLB(pa) {
		d.bounce(p, pa, size, true)
	}
	if !d.coherent && d.dma.isRAM(pa, size) {
		opForDevice(dir).apply(d.dma.mem, p, pa, size)
	}
}

// bounce is swiotlb_bounce: copy between the slot at pa and the caller's
// buffer it stands for, toDevice meaning into the slot. The size is cut
// to the mapping's end ("Buffer overflow detected"); a free slot copies
// nothing.
func (d *Device) bounce(p *sim.Proc, pa mem.PhysAddr, size uint64, toDevice bool) {
	orig, remain, ok := d.dma.tlb.lookup(pa)
	if !ok {
		return
	}
	size = min(size, remain)
	if toDevice {
		d.dma.mem.CopyPhys(p, d.node, pa, orig, size)
	} else {
		d.dma.mem.CopyPhys(p, d.node, orig, pa, size)
	}
}

// overflowWarning is dma-direct's log line for an address beyond the
// mask.
func (d *Device) overflowWarning(what string, addr mem.DMAAddr, size uint64) string {
	return fmt.Sprintf("%s %#x+%d overflow (mask %#x, bus limit 0)", what, uint64(addr), size, d.mask)
}

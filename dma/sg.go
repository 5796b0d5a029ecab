package dma

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Scatterlist is one entry of a scatter-gather list (struct scatterlist):
// the CPU side (a page, an offset into it, a length) and, once mapped,
// the device side (sg_dma_address, sg_dma_len). A Go slice stands for
// Linux's chained array and its end marker: entries are sgl[0:nents].
type Scatterlist struct {
	// Page is the physical address of the page (page_link).
	Page   mem.PhysAddr
	Offset uint64
	Length uint64
	// DMAAddress and DMALength are set by MapSG.
	DMAAddress mem.DMAAddr
	DMALength  uint64
}

// Phys is sg_phys: the physical address of the entry's first byte.
func (sg *Scatterlist) Phys() mem.PhysAddr { return sg.Page + mem.PhysAddr(sg.Offset) }

// SetPage is sg_set_page(sg, page, len, offset).
func (sg *Scatterlist) SetPage(page mem.PhysAddr, length, offset uint64) {
	sg.Page, sg.Length, sg.Offset = page, length, offset
}

// SetBuf is sg_set_buf(sg, buf, buflen): buf must be in the linear map
// (virt_to_page), as CONFIG_DEBUG_SG insists; any other address is an
// error wrapping mem.ErrBadAddr.
func (sg *Scatterlist) SetBuf(m *mem.Memory, va mem.VirtAddr, length uint64) error {
	pa, err := m.VirtToPhys(va)
	if err != nil {
		return fmt.Errorf("sg_set_buf(%v, %d): %w", va, length, err)
	}
	sg.SetPage(pa&^(mem.PageSize-1), length, uint64(pa)&(mem.PageSize-1))
	return nil
}

// SGInitTable is sg_init_table: it clears every entry.
func SGInitTable(sgl []Scatterlist) { clear(sgl) }

// SGTable is struct sg_table: the list, the entries the CPU filled
// (OrigNents) and the entries the device sees once mapped (Nents).
type SGTable struct {
	SGL       []Scatterlist
	Nents     int
	OrigNents int
}

// SGAllocTable is sg_alloc_table: a table of n cleared entries.
func SGAllocTable(n int) *SGTable {
	return &SGTable{SGL: make([]Scatterlist, n), OrigNents: n}
}

// MapSG is dma_map_sg: it maps the first nents entries and returns how
// many segments the device sees, 0 on failure (then nothing stays
// mapped). dma-direct maps each entry as it is (only an IOMMU merges),
// so on success the count is nents; it neither splits nor checks entries
// against MaxSegmentSize and SegmentBoundary (dma-debug does, from the
// event). Each entry bounces or not as MapPage would; an entry that is not
// RAM fails the call.
func (d *Device) MapSG(p *sim.Proc, sgl []Scatterlist, nents int, dir Direction) int {
	n, _ := d.mapSG(p, "dma_map_sg", sgl, nents, dir)
	return n
}

// MapSGTable is dma_map_sgtable: MapSG of OrigNents entries, setting
// Nents. Errors are the kernel's: syscall.EINVAL (bad arguments),
// syscall.EIO (an entry could not be mapped).
func (d *Device) MapSGTable(p *sim.Proc, sgt *SGTable, dir Direction) error {
	n, err := d.mapSG(p, "dma_map_sgtable", sgt.SGL, sgt.OrigNents, dir)
	if err != nil {
		return fmt.Errorf("dma_map_sgtable(%s, %d entries, %v): %w", d.name, sgt.OrigNents, dir, err)
	}
	sgt.Nents = n
	return nil
}

func (d *Device) mapSG(p *sim.Proc, fn string, sgl []Scatterlist, nents int, dir Direction) (int, error) {
	var err error
	mapped, bounced, warn, class := 0, false, "", MemLinear
	switch {
	case nents <= 0 || nents > len(sgl) || !dir.valid():
		err = syscall.EINVAL
	case d.mapper != nil:
		// dma-iommu maps whatever the entries name; the event's class
		// says when that is not RAM, for the checker.
		for i := range sgl[:nents] {
			if !d.dma.isRAM(sgl[i].Phys(), sgl[i].Length) {
				class = MemInvalid
			}
		}
		if mapped, err = d.iommuMapSG(p, d.mapper, sgl[:nents], dir); err != nil {
			warn = err.Error()
		}
	default:
		for i := range sgl[:nents] {
			sg := &sgl[i]
			addr, b := MappingErrorAddr, false
			if d.dma.isRAM(sg.Phys(), sg.Length) {
				addr, b, warn = d.mapPhys(p, sg.Phys(), sg.Length, dir)
			} else {
				class = MemInvalid
			}
			if addr == MappingErrorAddr {
				// dma_direct_map_sg's out_unmap: undo with
				// DMA_ATTR_SKIP_CPU_SYNC.
				for j := range sgl[:i] {
					d.unmapPhys(p, d.toPhys(sgl[j].DMAAddress), sgl[j].DMALength, dir, false)
				}
				err = syscall.EIO
				break
			}
			sg.DMAAddress, sg.DMALength = addr, sg.Length
			bounced = bounced || b
		}
		if err == nil {
			mapped = nents
		}
	}
	if d.dma.observed() {
		e := Event{
			Op: OpMap, Kind: KindSG, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Dir: dir, Failed: mapped == 0, Bounced: bounced, Warn: warn, Class: class,
			NEnts: nents, Mapped: mapped,
			Call: d.dma.call.begin(fn, d.name).sgl(len(sgl)).int(nents).dir(dir).end(),
		}
		if mapped > 0 {
			e.SG = segments(sgl[:nents], true)
			e.Addr, e.Size, e.Phys = sgl[0].DMAAddress, sgl[0].DMALength, sgl[0].Phys()
		}
		d.dma.emit(&e)
	}
	return mapped, err
}

// iommuMapSG is iommu_dma_map_sg: every entry, its offset into the
// granule kept, in one contiguous IOVA range, then __finalise_sg merging
// entries that are contiguous in it into fewer DMA segments (within the
// device's max_segment_size and segment boundary); it returns their
// count. The entries past it have no DMA address and length 0, which is
// where iommu_dma_unmap_sg stops.
func (d *Device) iommuMapSG(p *sim.Proc, mp Mapper, list []Scatterlist, dir Direction) (int, error) {
	g := mp.Granule()
	ranges := make([]mem.PhysRange, len(list))
	for i := range list {
		pa := list[i].Phys()
		off := uint64(pa) & (g - 1)
		ranges[i] = mem.PhysRange{Start: pa - mem.PhysAddr(off), Size: (off + list[i].Length + g - 1) &^ (g - 1)}
	}
	base, err := mp.MapSG(p, ranges, dir)
	if err != nil {
		if errors.Is(err, syscall.ENOMEM) {
			return 0, syscall.ENOMEM
		}
		return 0, syscall.EIO
	}
	if !d.coherent {
		for i := range list {
			opForDevice(dir).apply(d.dma.mem, p, list[i].Phys(), list[i].Length)
		}
	}
	count, cur, curLen, addr := 0, -1, uint64(0), base
	for i := range list {
		off, length := uint64(list[i].Phys())&(g-1), list[i].Length
		list[i].DMAAddress, list[i].DMALength = MappingErrorAddr, 0
		if curLen != 0 && off == 0 && uint64(addr)&d.segBoundary != 0 && d.maxSeg-curLen >= length {
			curLen += length
		} else {
			cur++
			count++
			curLen = length
			list[cur].DMAAddress = addr + mem.DMAAddr(off)
		}
		list[cur].DMALength = curLen
		addr += mem.DMAAddr(ranges[i].Size)
		if off+length < ranges[i].Size {
			curLen = 0
		}
	}
	return count, nil
}

// iommuUnmapSG is iommu_dma_unmap_sg: the for_cpu cache operation on
// every entry, then one unmap from the first DMA segment to the end of
// the last (the first entry of length 0 ends them).
func (d *Device) iommuUnmapSG(p *sim.Proc, mp Mapper, list []Scatterlist, dir Direction) {
	if len(list) == 0 || !dir.valid() {
		return
	}
	for i := range list {
		d.syncForCPU(p, list[i].Phys(), list[i].Length, dir)
	}
	start, end := list[0].DMAAddress, list[0].DMAAddress
	for i := range list {
		if list[i].DMALength == 0 {
			break
		}
		end = list[i].DMAAddress + mem.DMAAddr(list[i].DMALength)
	}
	mp.Unmap(p, start, uint64(end-start), dir)
}

// sgPhys is the physical address a sync of entry sg works on: the
// entry's own under an IOMMU (iommu_dma_sync_sg_for_cpu uses sg_phys,
// since merged DMA segments do not say where each entry is), the
// translation of its DMA address under dma-direct (the bounce slot).
func (d *Device) sgPhys(sg *Scatterlist) mem.PhysAddr {
	if d.mapper != nil {
		return sg.Phys()
	}
	return d.toPhys(sg.DMAAddress)
}

// segments lists entries for an event: as mapped (device side) or as
// passed to a sync or unmap, where dma-debug takes each entry's
// sg_dma_len as the mapping did, and the CPU length of an entry that
// has none (debug_dma_sync_sg_for_cpu): the two differ only where an
// IOMMU merged entries.
func segments(sgl []Scatterlist, mapped bool) []Segment {
	out := make([]Segment, len(sgl))
	for i := range sgl {
		l := sgl[i].Length
		if mapped || sgl[i].DMALength != 0 {
			l = sgl[i].DMALength
		}
		out[i] = Segment{Phys: sgl[i].Phys(), Addr: sgl[i].DMAAddress, Len: l, CPULen: sgl[i].Length}
	}
	return out
}

// UnmapSG is dma_unmap_sg: each of the first nents entries is unmapped
// as UnmapPage would (at its DMAAddress, DMALength). nents must be what
// was passed to MapSG, not what it returned (dma-debug checks).
func (d *Device) UnmapSG(p *sim.Proc, sgl []Scatterlist, nents int, dir Direction) {
	d.sgForCPU(p, OpUnmap, "dma_unmap_sg", sgl, nents, dir)
}

// UnmapSGTable is dma_unmap_sgtable.
func (d *Device) UnmapSGTable(p *sim.Proc, sgt *SGTable, dir Direction) {
	d.sgForCPU(p, OpUnmap, "dma_unmap_sgtable", sgt.SGL, sgt.OrigNents, dir)
}

// SyncSGForCPU is dma_sync_sg_for_cpu: SyncSingleForCPU of each entry
// (at its DMAAddress, for its CPU Length, as Linux does).
func (d *Device) SyncSGForCPU(p *sim.Proc, sgl []Scatterlist, nents int, dir Direction) {
	d.sgForCPU(p, OpSyncForCPU, "dma_sync_sg_for_cpu", sgl, nents, dir)
}

// SyncSGTableForCPU is dma_sync_sgtable_for_cpu.
func (d *Device) SyncSGTableForCPU(p *sim.Proc, sgt *SGTable, dir Direction) {
	d.sgForCPU(p, OpSyncForCPU, "dma_sync_sgtable_for_cpu", sgt.SGL, sgt.OrigNents, dir)
}

// SyncSGForDevice is dma_sync_sg_for_device: SyncSingleForDevice of each
// entry.
func (d *Device) SyncSGForDevice(p *sim.Proc, sgl []Scatterlist, nents int, dir Direction) {
	d.syncSGForDevice(p, "dma_sync_sg_for_device", sgl, nents, dir)
}

// SyncSGTableForDevice is dma_sync_sgtable_for_device.
func (d *Device) SyncSGTableForDevice(p *sim.Proc, sgt *SGTable, dir Direction) {
	d.syncSGForDevice(p, "dma_sync_sgtable_for_device", sgt.SGL, sgt.OrigNents, dir)
}

// entries clamps nents to the list: the C loop would walk off the end.
func entries(sgl []Scatterlist, nents int) []Scatterlist {
	return sgl[:max(0, min(nents, len(sgl)))]
}

// sgForCPU reports, then unmaps or syncs for the CPU each entry.
func (d *Device) sgForCPU(p *sim.Proc, op Op, fn string, sgl []Scatterlist, nents int, dir Direction) {
	list := entries(sgl, nents)
	if d.dma.observed() {
		d.dma.emitSG(d.sgEvent(p, op, fn, sgl, list, nents, dir, op == OpUnmap))
	}
	if mp := d.mapper; mp != nil && op == OpUnmap {
		d.iommuUnmapSG(p, mp, list, dir)
		return
	}
	for i := range list {
		pa := d.sgPhys(&list[i])
		if op == OpUnmap {
			d.unmapPhys(p, pa, list[i].DMALength, dir, true)
		} else {
			d.syncForCPU(p, pa, list[i].Length, dir)
		}
	}
}

func (d *Device) syncSGForDevice(p *sim.Proc, fn string, sgl []Scatterlist, nents int, dir Direction) {
	list := entries(sgl, nents)
	for i := range list {
		d.syncForDevice(p, d.sgPhys(&list[i]), list[i].Length, dir)
	}
	if d.dma.observed() {
		d.dma.emitSG(d.sgEvent(p, OpSyncForDevice, fn, sgl, list, nents, dir, false))
	}
}

func (d *Device) sgEvent(p *sim.Proc, op Op, fn string, sgl, list []Scatterlist, nents int, dir Direction, mapped bool) Event {
	e := Event{
		Op: op, Kind: KindSG, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
		Dir: dir, NEnts: nents, SG: segments(list, mapped),
		Call: d.dma.call.begin(fn, d.name).sgl(len(sgl)).int(nents).dir(dir).end(),
	}
	for _, s := range e.SG {
		e.Bounced = e.Bounced || d.dma.tlb.contains(d.toPhys(s.Addr))
	}
	if len(e.SG) > 0 {
		e.Addr, e.Size = e.SG[0].Addr, e.SG[0].Len
	}
	return e
}

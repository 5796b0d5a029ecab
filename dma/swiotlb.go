package dma

import (
	"fmt"

	"github.com/dmalab/dmalab/mem"
)

// The swiotlb's geometry (include/linux/swiotlb.h).
const (
	// ioTLBShift and ioTLBSize: one slot is 2 KiB (IO_TLB_SHIFT,
	// IO_TLB_SIZE).
	ioTLBShift = 11
	ioTLBSize  = 1 << ioTLBShift
	// ioTLBSegSize is IO_TLB_SEGSIZE: a mapping takes contiguous slots
	// within one segment of 128, so none can exceed 256 KiB
	// (swiotlb_max_mapping_size).
	ioTLBSegSize = 128
	// MaxBounceSize is the longest mapping swiotlb can bounce.
	MaxBounceSize = ioTLBSize * ioTLBSegSize
)

// invalidPhys marks a free slot (INVALID_PHYS_ADDR).
const invalidPhys = ^mem.PhysAddr(0)

// tlbSlot is struct io_tlb_slot: what one 2 KiB slot holds.
type tlbSlot struct {
	// orig is the caller's buffer address that this slot's first byte
	// bounces (invalidPhys when free); allocSize the bytes of the mapping
	// from this slot's first byte to its end.
	orig      mem.PhysAddr
	allocSize uint64
	// list is the number of free slots from this one to the next used
	// slot or the end of its segment (0 when this one is used): Linux's
	// free-list encoding, which makes a fit test one comparison.
	list int
}

// swiotlb is the bounce-buffer pool, Linux's struct io_tlb_pool with one
// area (the model runs one process at a time, so Linux's per-CPU areas
// and their locks have nothing to spread). It keeps only slot metadata;
// the copies are done by the DMA that owns it.
type swiotlb struct {
	start mem.PhysAddr
	slots []tlbSlot
	// index is where the next search starts (area->index, next fit).
	index int
	// used and highWater count slots in use (area->used, the hiwater
	// debugfs counter).
	used, highWater int
}

func newSwiotlb(start mem.PhysAddr, nslabs int) *swiotlb {
	t := &swiotlb{start: start, slots: make([]tlbSlot, nslabs)}
	for i := range t.slots {
		t.slots[i] = tlbSlot{orig: invalidPhys, list: ioTLBSegSize - i%ioTLBSegSize}
	}
	return t
}

func (t *swiotlb) size() uint64 { return uint64(len(t.slots)) << ioTLBShift }

// contains is is_swiotlb_buffer: pa lies in the pool.
func (t *swiotlb) contains(pa mem.PhysAddr) bool {
	return t != nil && pa >= t.start && uint64(pa-t.start) < t.size()
}

func nrSlots(size uint64) int { return int((size + ioTLBSize - 1) >> ioTLBShift) }

// alloc is swiotlb_search_pool_area plus the bookkeeping of
// swiotlb_tbl_map_single: it takes nr_slots(size) contiguous free slots
// within one segment, page-aligned when size is at least a page, not
// crossing the device's segment boundary (boundaryMask, as
// iommu_is_span_boundary), and records orig for each. It returns the
// slot address, or false when no run fits ("swiotlb buffer is full").
func (t *swiotlb) alloc(orig mem.PhysAddr, size, boundaryMask uint64) (mem.PhysAddr, bool) {
	nslots := nrSlots(size)
	if nslots == 0 || nslots > ioTLBSegSize || nslots > len(t.slots)-t.used {
		return 0, false
	}
	alignMask := uint64(ioTLBSize - 1)
	if size >= mem.PageSize {
		alignMask = mem.PageSize - 1
	}
	// stride is get_max_slots(alloc_align_mask): once an aligned slot
	// is found, only aligned slots are tried.
	stride := int((alignMask + 1) >> ioTLBShift)
	maxSlots := maxSlotsOf(boundaryMask)
	base := uint64(t.start) & boundaryMask >> ioTLBShift
	n := len(t.slots)
	index := t.index
	for checked := 0; checked < n; {
		addr := uint64(t.start) + uint64(index)<<ioTLBShift
		if addr&alignMask != 0 {
			index = (index + 1) % n
			checked++
			continue
		}
		if !spansBoundary(base+uint64(index), uint64(nslots), maxSlots) && t.slots[index].list >= nslots {
			t.take(index, nslots, orig, size)
			if index+nslots < n {
				t.index = index + nslots
			} else {
				t.index = 0
			}
			return mem.PhysAddr(addr), true
		}
		index = (index + stride) % n
		checked += stride
	}
	return 0, false
}

// maxSlotsOf is get_max_slots: the boundary in slots, 0 meaning none
// smaller than the address space.
func maxSlotsOf(boundaryMask uint64) uint64 {
	if boundaryMask == ^uint64(0) {
		return 0
	}
	return (boundaryMask + 1) >> ioTLBShift
}

// spansBoundary is iommu_is_span_boundary: slots [index, index+n) cross
// a multiple of boundary (in slots).
func spansBoundary(index, n, boundary uint64) bool {
	if boundary == 0 {
		return false
	}
	offset := index & (boundary - 1)
	return offset+n > boundary
}

// take marks slots [index, index+n) used and shortens the free runs
// before them in the same segment.
func (t *swiotlb) take(index, n int, orig mem.PhysAddr, size uint64) {
	for i := range n {
		t.slots[index+i] = tlbSlot{
			orig:      orig + mem.PhysAddr(i<<ioTLBShift),
			allocSize: size - uint64(i<<ioTLBShift),
		}
	}
	count := 0
	for i := index - 1; i >= 0 && i%ioTLBSegSize != ioTLBSegSize-1 && t.slots[i].list != 0; i-- {
		count++
		t.slots[i].list = count
	}
	t.used += n
	t.highWater = max(t.highWater, t.used)
}

// lookup returns the caller's address bounced by pool address pa and
// the bytes of the mapping from pa on; false if pa's slot is free.
func (t *swiotlb) lookup(pa mem.PhysAddr) (orig mem.PhysAddr, remain uint64, ok bool) {
	off := uint64(pa - t.start)
	s := &t.slots[off>>ioTLBShift]
	if s.orig == invalidPhys {
		return 0, 0, false
	}
	within := off & (ioTLBSize - 1)
	if within >= s.allocSize {
		return 0, 0, false
	}
	return s.orig + mem.PhysAddr(within), s.allocSize - within, true
}

// release is swiotlb_release_slots for the mapping whose first slot is
// at pa: the slot count comes from the slot's metadata, never from the
// caller. It reports false if pa is not the first slot of a mapping in
// use (an unmap of something never mapped, or of an address inside a
// mapping), and then changes nothing.
func (t *swiotlb) release(pa mem.PhysAddr) bool {
	off := uint64(pa - t.start)
	if off&(ioTLBSize-1) != 0 {
		return false
	}
	index := int(off >> ioTLBShift)
	s := t.slots[index]
	// A used predecessor with more than one slot's worth left runs on
	// into this slot: pa is inside a mapping, not its start.
	if s.orig == invalidPhys || (index > 0 && t.slots[index-1].orig != invalidPhys &&
		t.slots[index-1].allocSize > ioTLBSize) {
		return false
	}
	nslots := nrSlots(s.allocSize)
	count := 0
	if end := index + nslots; end < (index/ioTLBSegSize+1)*ioTLBSegSize {
		count = t.slots[end].list
	}
	for i := index + nslots - 1; i >= index; i-- {
		count++
		t.slots[i] = tlbSlot{orig: invalidPhys, list: count}
	}
	for i := index - 1; i >= 0 && i%ioTLBSegSize != ioTLBSegSize-1 && t.slots[i].list != 0; i-- {
		count++
		t.slots[i].list = count
	}
	t.used -= nslots
	return true
}

// fullWarning is swiotlb_tbl_map_single's log line when no slots fit.
func (t *swiotlb) fullWarning(size uint64) string {
	return fmt.Sprintf("swiotlb buffer is full (sz: %d bytes), total %d (slots), used %d (slots)", size, len(t.slots), t.used)
}

// SwiotlbStats describes the bounce pool: where it is, its slots, and
// how many are in use now and at most so far.
type SwiotlbStats struct {
	Start                  mem.PhysAddr
	Size                   uint64
	Slots, Used, HighWater int
}

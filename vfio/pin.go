package vfio

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// mapping is one range of user memory mapped for devices: type1's
// struct vfio_dma, iommufd's struct iopt_area.
type mapping struct {
	iova  mem.DMAAddr
	size  uint64
	vaddr mem.VirtAddr
	prot  iommu.Prot
	// proc is whose memory it is and whose locked_vm its pinned pages
	// count in (dma->mm, the IOAS's source mm).
	proc *kernel.Process
	// pinned are the physical ranges of the pinned pages; nil while
	// not pinned (an IOAS with no domain pins nothing).
	pinned []mem.PhysRange
	// pin keeps the anonymous pages from migrating while pinned (the
	// device DMAs to their physical addresses).
	pin *mem.PagePin
	// call is the call that made it, for messages.
	call string
}

func (m *mapping) end() uint64    { return uint64(m.iova) + m.size }
func (m *mapping) pages() uint64  { return m.size / mem.PageSize }
func (m *mapping) String() string { return fmt.Sprintf("%v+%#x", m.iova, m.size) }

func protFlags(p iommu.Prot) string {
	switch p {
	case iommu.ProtRead:
		return "READ"
	case iommu.ProtWrite:
		return "WRITE"
	}
	return "READ|WRITE"
}

// pin is vfio_pin_pages_remote (and iommufd's pfn_reader_user_pin):
// every page of the user range must lie in a mapping of the process
// (EFAULT otherwise, as get_user_pages finds no VMA), anonymous pages
// not yet placed are faulted in (ENOMEM if the policy's nodes are
// full), the pages count
// against RLIMIT_MEMLOCK (ENOMEM past it, nothing pinned), and t pays
// PinCost per page.
func (v *VFIO) pin(t *sim.Proc, call string, m *mapping) error {
	end := m.vaddr + mem.VirtAddr(m.size)
	for va := m.vaddr; va < end; {
		vma, ok := m.proc.MM.Find(va)
		if !ok {
			return fmt.Errorf("%v is not mapped in %s: %w", va, m.proc.Name(), syscall.EFAULT)
		}
		va = vma.End()
	}
	// get_user_pages faults in what nothing has touched yet (anonymous
	// memory), placed for t's node by the process's policy, before it
	// pins: pinning is a first touch.
	if m.proc.Kernel().Memory() != nil {
		if err := m.proc.Populate(t, m.vaddr, m.size); errors.Is(err, syscall.ENOMEM) {
			return fmt.Errorf("%v+%#x: %w", m.vaddr, m.size, err)
		}
	}
	ranges, _, _, err := v.mem.Translate(m.vaddr, m.size)
	if err != nil {
		return fmt.Errorf("%v+%#x: %v: %w", m.vaddr, m.size, err, syscall.EFAULT)
	}
	if err := m.proc.AccountLockedVM(call, m.pages(), true); err != nil {
		return err
	}
	t.Sleep(sim.Time(m.pages()) * v.params.PinCost)
	m.pinned = ranges
	if m.proc.Kernel().Memory() != nil {
		m.pin, _ = m.proc.PinPages(m.vaddr, m.size)
	}
	return nil
}

// unpin gives the pages back (vfio_unpin_pages_remote): locked_vm
// falls, t pays UnpinCost per page.
func (v *VFIO) unpin(t *sim.Proc, call string, m *mapping) {
	if m.pinned == nil {
		return
	}
	_ = m.proc.AccountLockedVM(call, m.pages(), false)
	m.pin.Release()
	m.pin = nil
	t.Sleep(sim.Time(m.pages()) * v.params.UnpinCost)
	m.pinned = nil
}

// mapInto maps m's pinned pages at its IOVA in dom, physically
// contiguous runs at once (iommu_map picks the largest pages they
// allow); a failure unmaps what was done.
func mapInto(dom *iommu.Domain, m *mapping) error {
	iova := m.iova
	for _, r := range m.pinned {
		if err := dom.Map(iova, r.Start, r.Size, m.prot); err != nil {
			if done := uint64(iova - m.iova); done > 0 {
				dom.Unmap(m.iova, done)
			}
			return err
		}
		iova += mem.DMAAddr(r.Size)
	}
	return nil
}

// unmapFrom removes m from dom and invalidates the IOTLB at once: both
// type1 (vfio_unmap_unpin: iommu_unmap, then iommu_iotlb_sync before
// the pages are unpinned) and iommufd invalidate synchronously,
// whatever the unit's strict or lazy mode, which applies to the
// kernel's own DMA domains only. t pays the invalidation.
func (v *VFIO) unmapFrom(t *sim.Proc, dom *iommu.Domain, m *mapping) {
	dom.Unmap(m.iova, m.size)
	t.Sleep(v.unit.Params().InvalidateCost)
}

// mappings is an address space's mappings, sorted by IOVA.
type mappings []*mapping

// overlaps reports whether any mapping meets [iova, end).
func (ms mappings) overlaps(iova, end uint64) bool {
	i, _ := slices.BinarySearchFunc(ms, iova, func(m *mapping, a uint64) int { return cmp.Compare(m.end(), a+1) })
	return i < len(ms) && uint64(ms[i].iova) < end
}

func (ms *mappings) insert(m *mapping) {
	i, _ := slices.BinarySearchFunc(*ms, m.iova, func(x *mapping, a mem.DMAAddr) int { return cmp.Compare(x.iova, a) })
	*ms = slices.Insert(*ms, i, m)
}

// within are the mappings that meet [iova, end), and whether one of
// them sticks out of it.
func (ms mappings) within(iova, end uint64) (in []*mapping, partial bool) {
	for _, m := range ms {
		if m.end() <= iova || uint64(m.iova) >= end {
			continue
		}
		if uint64(m.iova) < iova || m.end() > end {
			partial = true
		}
		in = append(in, m)
	}
	return in, partial
}

func (ms *mappings) remove(m *mapping) {
	*ms = slices.DeleteFunc(*ms, func(x *mapping) bool { return x == m })
}

// checkUser validates a map's user range: page-aligned address and
// size, no wrap.
func checkUser(vaddr mem.VirtAddr, iova mem.DMAAddr, size uint64, fixed bool) error {
	if size == 0 {
		return fmt.Errorf("size 0: %w", syscall.EINVAL)
	}
	if uint64(vaddr)+size-1 < uint64(vaddr) || uint64(iova)+size-1 < uint64(iova) {
		return fmt.Errorf("range wraps: %w", syscall.EOVERFLOW)
	}
	a := uint64(vaddr) | size
	if fixed {
		a |= uint64(iova)
	}
	if a&(mem.PageSize-1) != 0 {
		return fmt.Errorf("vaddr %v, iova %v, size %#x not aligned to the IOMMU page (4 KiB): %w", vaddr, iova, size, syscall.EINVAL)
	}
	if fixed && uint64(iova)+size > apertureEnd {
		return fmt.Errorf("iova %v+%#x beyond the domain's aperture (48 bits): %w", iova, size, syscall.EINVAL)
	}
	return nil
}

// apertureEnd is the end of a domain's IOVA space (48-bit tables:
// domain->geometry.aperture_end + 1).
const apertureEnd = 1 << 48

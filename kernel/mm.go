package kernel

import (
	"fmt"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// VMA is one mapping of a process's address space (vm_area_struct): a
// range of user addresses and what backs it (a file's mmap, anonymous
// memory).
type VMA struct {
	Start mem.VirtAddr
	Size  uint64
	// Name is what /proc/PID/maps would show ("anon", "dmabuf:3").
	Name string
	// File is the open file mapped, nil for anonymous memory.
	File File
	// Close is what the end of the mapping does to what backs it
	// (vm_operations_struct.close, reduced): an anonymous mapping's
	// frees its pages. Exit runs it, in thread t, for every mapping
	// still there (exit_mmap); Unmap returns the mapping and leaves it
	// to the caller. nil does nothing.
	Close func(t *sim.Proc) error
}

// End is the first address past the mapping.
func (v VMA) End() mem.VirtAddr { return v.Start + mem.VirtAddr(v.Size) }

// AddressSpace is a process's mm_struct, reduced to its mappings, in
// address order. The model's memory is addressed by kernel virtual
// addresses (mem); a VMA records which of them the process has mapped
// and why, so that munmap, exit and a driver's release can find them.
type AddressSpace struct {
	vmas      []VMA
	notifiers []func(t *sim.Proc, v VMA)
}

// OnUnmap registers fn to be told of every mapping that leaves the
// address space (munmap through Unmap, exit_mmap through Exit), before
// what backs it is closed. It is the event user-space registration
// caches subscribe to so that a cached pin never outlives the memory
// under it: userfaultfd's UFFD_EVENT_UNMAP (libfabric's uffd memory
// monitor, prov/util/src/util_mem_monitor.c), UCX's munmap hooks
// (src/ucm/mmap); in the kernel, mmu_notifier's invalidate_range_start
// (include/linux/mmu_notifier.h). t is the thread that unmaps, nil when
// the caller named none (Unmap). fn must not map or unmap.
func (as *AddressSpace) OnUnmap(fn func(t *sim.Proc, v VMA)) {
	as.notifiers = append(as.notifiers, fn)
}

func (as *AddressSpace) notify(t *sim.Proc, v VMA) {
	for _, fn := range as.notifiers {
		fn(t, v)
	}
}

// Map records v (do_mmap with MAP_FIXED_NOREPLACE): EEXIST if it
// overlaps a mapping, EINVAL for an empty or wrapping range.
func (as *AddressSpace) Map(v VMA) error {
	if v.Size == 0 || v.End() < v.Start {
		return fmt.Errorf("mmap(%v, %#x): %w", v.Start, v.Size, syscall.EINVAL)
	}
	i, _ := slices.BinarySearchFunc(as.vmas, v.Start, func(a VMA, s mem.VirtAddr) int {
		switch {
		case a.Start < s:
			return -1
		case a.Start > s:
			return 1
		}
		return 0
	})
	if i > 0 && as.vmas[i-1].End() > v.Start || i < len(as.vmas) && as.vmas[i].Start < v.End() {
		return fmt.Errorf("mmap(%v, %#x): overlaps a mapping: %w", v.Start, v.Size, syscall.EEXIST)
	}
	as.vmas = slices.Insert(as.vmas, i, v)
	return nil
}

// Unmap removes the mapping that starts at start (munmap of a whole
// mapping); EINVAL if none does. The OnUnmap notifiers are told, with
// no thread.
func (as *AddressSpace) Unmap(start mem.VirtAddr) (VMA, error) {
	for i, v := range as.vmas {
		if v.Start == start {
			as.vmas = slices.Delete(as.vmas, i, i+1)
			as.notify(nil, v)
			return v, nil
		}
	}
	return VMA{}, fmt.Errorf("munmap(%v): no mapping starts there: %w", start, syscall.EINVAL)
}

// Find is find_vma: the mapping holding va.
func (as *AddressSpace) Find(va mem.VirtAddr) (VMA, bool) {
	for _, v := range as.vmas {
		if v.Start <= va && va < v.End() {
			return v, true
		}
	}
	return VMA{}, false
}

// VMAs lists the mappings in address order.
func (as *AddressSpace) VMAs() []VMA { return slices.Clone(as.vmas) }

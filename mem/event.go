package mem

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// AccessKind says who touched memory and how.
type AccessKind int

const (
	CPURead AccessKind = iota + 1
	CPUWrite
	DeviceRead
	DeviceWrite
)

func (k AccessKind) String() string {
	switch k {
	case CPURead:
		return "cpu-read"
	case CPUWrite:
		return "cpu-write"
	case DeviceRead:
		return "device-read"
	case DeviceWrite:
		return "device-write"
	}
	return fmt.Sprintf("AccessKind(%d)", int(k))
}

// Access is one access to memory, reported to observers after it took
// place. Stale is set when what the reader obtained is older than the
// latest write to some byte of the range; Got and Want then give the
// versions at the first such byte (StaleAt).
//
// Observers get one Access per physically contiguous piece of a CPU
// access (a vmalloc buffer is several); the Access a Read returns covers
// the whole access: Phys is its first byte's, Size the whole size, and
// the Stale fields those of its first stale byte.
type Access struct {
	// Header's Proc is the process (CPU) or the device name (device)
	// that accessed; its Component is "mem".
	sim.Header
	Kind AccessKind
	// Node is the NUMA node of the CPU. For a device access, Node is the
	// node whose DRAM holds Phys, -1 for device memory.
	Node  int
	Phys  PhysAddr
	Size  uint64
	Stale bool
	// StaleAt is the first stale byte's address; Got the version the
	// reader obtained there, Want the latest written.
	StaleAt   PhysAddr
	Got, Want Version
	// VA is the CPU's virtual address of Phys (CPU accesses), and Attr
	// the memory type it went through.
	VA   VirtAddr
	Attr Attr
	// Coherent says a device access snooped the CPU caches.
	Coherent bool
	// Version is the version a write created.
	Version Version
	// Err is set when the access could not happen: an address that is
	// not mapped (CPU) or not memory (device), a range that wraps, an
	// unknown node. Nothing was read or written and no time was spent;
	// Err wraps ErrBadAddr or ErrInvalid.
	Err error
}

// Version identifies one write: every write (by a CPU or a device) gets
// the next number, and memory, cache lines and readers carry the version
// of the write that produced their bytes. Version 0 is memory never
// written since boot.
type Version uint64

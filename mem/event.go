package mem

import "github.com/dmalab/dmalab/sim"

// AccessKind says who touched memory and how.
type AccessKind int

const (
	CPURead AccessKind = iota + 1
	CPUWrite
	DeviceRead
	DeviceWrite
)

// Access is one access to memory, reported to observers after it took
// place. Stale is set when what the reader obtained is older than the
// latest write to some byte of the range; Got and Want then give the
// versions at the first such byte (StaleAt).
type Access struct {
	Kind AccessKind
	Time sim.Time
	// Proc is the process (CPU) or the device name (device) that
	// accessed; Node is the NUMA node of the CPU.
	Proc  string
	Node  int
	Phys  PhysAddr
	Size  uint64
	Stale bool
	// StaleAt is the first stale byte's address; Got the version the
	// reader obtained there, Want the latest written.
	StaleAt   PhysAddr
	Got, Want Version
}

// Version identifies one write: every write (by a CPU or a device) gets
// the next number, and memory, cache lines and readers carry the version
// of the write that produced their bytes. Version 0 is memory never
// written since boot.
type Version uint64

package pci

import (
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/sim"
)

// BARFlags describe a BAR (PCI_BASE_ADDRESS_MEM_TYPE_64,
// PCI_BASE_ADDRESS_MEM_PREFETCH).
type BARFlags uint8

const (
	// BAR64 is a 64-bit memory BAR (it takes two BAR slots).
	BAR64 BARFlags = 1 << iota
	// BARPrefetch is prefetchable memory: reads have no side effects,
	// so the CPU may map it write-combined.
	BARPrefetch
)

// Registers serve a BAR's memory-mapped registers. Offsets are from the
// BAR's start; size is the access width in bytes (1, 2, 4 or 8). The
// function charges the access's cost to t: a write is posted (the CPU
// goes on after issuing it), a read waits for the completion's round
// trip over the link. An access outside the registers, or of a width
// the register does not take, is an error naming the offset.
type Registers interface {
	ReadReg(t *sim.Proc, off uint64, size int) (uint64, error)
	WriteReg(t *sim.Proc, off uint64, size int, v uint64) error
}

// BAR is one base address register's window.
type BAR struct {
	// Index is the BAR's number, 0 to 5.
	Index int
	// Size is the window's size in bytes, a power of two.
	Size  uint64
	Flags BARFlags
	// Regs serve the window's registers; nil for a window the model
	// gives no registers (plain device memory).
	Regs Registers
}

// IRQHandler is what a vector's interrupt runs: t is the device's
// thread that raised it, which the handler must not block (hard-IRQ
// context); it wakes whoever waits.
type IRQHandler func(t *sim.Proc)

// Function is one PCI function.
type Function interface {
	// Name is the device's name in the platform ("nvme0").
	Name() string
	// DMA is the function's bus-master view for the DMA layer: the
	// struct device whose translator (dma-direct or an IOMMU domain)
	// its DMA goes through.
	DMA() *dma.Device
	// BARs are the function's implemented BARs, by index order.
	BARs() []BAR
	// Vectors is the size of the function's MSI-X table.
	Vectors() int
	// SetIRQ routes vector v to h; a nil h masks it (the function then
	// drops the interrupt, as a masked MSI-X vector's pending bit
	// would hold it: the model does not replay it). v out of range is
	// an error.
	SetIRQ(v int, h IRQHandler) error
	// Reset is function-level reset (PCI_EXP_DEVCTL_BCR_FLR): every
	// register to its reset value, queues forgotten, no DMA in flight
	// after it returns. It costs t the reset's time.
	Reset(t *sim.Proc) error
}

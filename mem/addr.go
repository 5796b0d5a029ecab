package mem

import (
	"fmt"
	"math/bits"
)

// The address spaces of a machine, each its own type so that the compiler
// catches an IOVA used as a physical address (gVisor's hostarch.Addr
// habit).

// PhysAddr is a CPU physical address (phys_addr_t): DRAM of a NUMA node,
// or an MMIO aperture such as a BAR.
type PhysAddr uint64

// VirtAddr is a CPU virtual address: a kernel address (linear map,
// vmalloc, stack, text) or a user address.
type VirtAddr uint64

// DMAAddr is a device-visible bus address (dma_addr_t): equal to the
// physical address under direct mapping, an IOVA behind an IOMMU, or a
// swiotlb bounce slot.
type DMAAddr uint64

// GPUAddr is a GPU virtual address (CUdeviceptr).
type GPUAddr uint64

func (a PhysAddr) String() string { return fmt.Sprintf("pa:%#x", uint64(a)) }
func (a VirtAddr) String() string { return fmt.Sprintf("va:%#x", uint64(a)) }
func (a DMAAddr) String() string  { return fmt.Sprintf("dma:%#x", uint64(a)) }
func (a GPUAddr) String() string  { return fmt.Sprintf("gpu:%#x", uint64(a)) }

// Overflow-checked arithmetic: an address plus a size that wraps past
// 2^64 is no address, and every caller must see that rather than a small
// number.

// Add is a+n, and false if that wraps.
func (a PhysAddr) Add(n uint64) (PhysAddr, bool) {
	s, c := bits.Add64(uint64(a), n, 0)
	return PhysAddr(s), c == 0
}

// Add is a+n, and false if that wraps.
func (a VirtAddr) Add(n uint64) (VirtAddr, bool) {
	s, c := bits.Add64(uint64(a), n, 0)
	return VirtAddr(s), c == 0
}

// Add is a+n, and false if that wraps.
func (a DMAAddr) Add(n uint64) (DMAAddr, bool) {
	s, c := bits.Add64(uint64(a), n, 0)
	return DMAAddr(s), c == 0
}

// Add is a+n, and false if that wraps.
func (a GPUAddr) Add(n uint64) (GPUAddr, bool) {
	s, c := bits.Add64(uint64(a), n, 0)
	return GPUAddr(s), c == 0
}

// PhysRange is [Start, Start+Size) of physical addresses: one physically
// contiguous piece of a virtual range (Translate).
type PhysRange struct {
	Start PhysAddr
	Size  uint64
}

// End is the first address after r, and false if r wraps.
func (r PhysRange) End() (PhysAddr, bool) { return r.Start.Add(r.Size) }

func (r PhysRange) String() string { return fmt.Sprintf("[%v +%#x]", r.Start, r.Size) }

// alignDown and alignUp round x to a multiple of a power of two a;
// alignUp reports false when that wraps.
func alignDown(x, a uint64) uint64 { return x &^ (a - 1) }

func alignUp(x, a uint64) (uint64, bool) {
	s, c := bits.Add64(x, a-1, 0)
	return s &^ (a - 1), c == 0
}

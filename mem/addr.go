package mem

import "fmt"

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

package dma

import (
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Direction is enum dma_data_direction, with Linux's values.
type Direction int

const (
	Bidirectional Direction = 0 // DMA_BIDIRECTIONAL
	ToDevice      Direction = 1 // DMA_TO_DEVICE
	FromDevice    Direction = 2 // DMA_FROM_DEVICE
	None          Direction = 3 // DMA_NONE
)

// Kind is the API family that made a mapping: dma-debug's entry type
// (kernel/dma/debug.c: dma_debug_single, _sg, _coherent, _resource; a
// page mapping is a "single" entry in the kernel but dmalab keeps it
// apart so that unmapping a page mapping with dma_unmap_single is seen).
type Kind int

const (
	KindSingle Kind = iota + 1
	KindPage
	KindSG
	KindCoherent
	KindResource
)

// Op is what a DMA API call or a device did.
type Op int

const (
	OpMap           Op = iota + 1 // dma_map_single / _page / _sg / _resource
	OpUnmap                       // dma_unmap_single / _page / _sg / _resource
	OpAllocCoherent               // dma_alloc_coherent
	OpFreeCoherent                // dma_free_coherent
	OpMappingError                // dma_mapping_error() called on a handle
	OpSyncForCPU                  // dma_sync_single_for_cpu / dma_sync_sg_for_cpu
	OpSyncForDevice               // dma_sync_single_for_device / dma_sync_sg_for_device
	OpDeviceAccess                // the device read or wrote bus addresses
	OpUnbind                      // the driver was unbound from the device
	OpTransfer                    // a bus master's transfer ended (Device.Transfer)
)

// MemClass is what kind of memory a CPU address given to the DMA API
// points at: dma-debug refuses stack, vmalloc, kernel text/rodata and
// invalid addresses for streaming mappings.
type MemClass int

const (
	MemLinear  MemClass = iota + 1 // the kernel's linear map (kmalloc, page allocator)
	MemVmalloc                     // vmalloc / vmap area
	MemStack                       // a task's kernel stack
	MemText                        // kernel text or rodata
	MemInvalid                     // not backed by RAM
	MemMMIO                        // a device's MMIO (a BAR), for dma_map_resource
)

// Segment is one entry of a mapped scatter-gather list.
type Segment struct {
	Phys mem.PhysAddr
	Addr mem.DMAAddr
	Len  uint64
	// CPULen is the entry's length in memory (sg->length); Len is
	// sg_dma_len for a mapping, which an IOMMU that merged entries makes
	// longer for the first and zero for the rest.
	CPULen uint64
}

// Event is one DMA API call or device access, as the checker (the
// counterpart of kernel/dma/debug.c) and the tracer see it. Fields that do
// not apply to an Op are zero.
type Event struct {
	// Header's Time is when the call took effect: a call that hands
	// memory to the device reports as it returns (after its cache
	// maintenance and bounce copy), one that hands memory back reports
	// as it starts. Its Proc is the process that made the call (empty
	// for a device's own access); its Component is "dma".
	sim.Header
	Op   Op
	Kind Kind
	// Device is the device the call was made for, or that acted.
	Device string
	// Addr and Size: the handle and length the caller passed (for a sync
	// of part of a mapping, the synced range; for sg calls, of the first
	// entry). Failed is set when a map returned DMA_MAPPING_ERROR.
	Addr   mem.DMAAddr
	Size   uint64
	Dir    Direction
	Failed bool
	// Bounced is set when the mapping goes through a swiotlb bounce
	// slot: Addr is then the slot's bus address and Phys the caller's
	// buffer.
	Bounced bool
	// Warn is what the kernel's DMA layer itself logs for this call
	// ("swiotlb buffer is full ...", "rejecting DMA map of vmalloc
	// memory"), empty when it logs nothing. dma-debug's own reports are
	// the checker's, never here.
	Warn string
	// CPUAddr, Phys and Class describe the memory mapped (map,
	// alloc/free coherent).
	CPUAddr mem.VirtAddr
	Phys    mem.PhysAddr
	Class   MemClass
	// SG: the entries as mapped (map_sg) or as passed back (unmap_sg,
	// sync_sg); NEnts is the nents the caller passed, Mapped the count
	// dma_map_sg returned.
	SG     []Segment
	NEnts  int
	Mapped int
	// Write is set for a device access that writes memory.
	Write bool
	// Pinned is set for a device access of host memory its own driver
	// pinned and mapped for it (a GPU's pinned memory, Span.Pinned),
	// which no DMA-API mapping of the program's covers, and for every
	// access of a device given to user space (Device.SetUserDMA).
	Pinned bool
	// Transfer is set for OpTransfer: what moved and where its time
	// went.
	Transfer *TransferInfo
	// Call is the call as a C programmer would read it, for provenance:
	// "dma_map_single(nic0, va:0xffff888100000000, 1500, DMA_FROM_DEVICE)".
	Call string
}

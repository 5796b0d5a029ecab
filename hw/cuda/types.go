package cuda

import "fmt"

// Device is a CUdevice: a device ordinal as the driver numbers them
// (cuda.h: typedef int CUdevice_v1).
type Device int32

// DevicePtr is a CUdeviceptr: a GPU virtual address (cuda.h: typedef unsigned
// long long CUdeviceptr_v2). With unified addressing, mapped and managed host
// memory also has one.
type DevicePtr uint64

// Stream is a CUstream handle (cuda.h: typedef struct CUstream_st *CUstream).
// The zero Stream is the legacy default stream.
type Stream uintptr

// Event is a CUevent handle (cuda.h: typedef struct CUevent_st *CUevent).
type Event uintptr

// Module is a CUmodule handle (cuda.h: typedef struct CUmod_st *CUmodule).
type Module uintptr

// Function is a CUfunction handle (cuda.h: typedef struct CUfunc_st *CUfunction).
type Function uintptr

// context is a CUcontext handle (cuda.h: typedef struct CUctx_st *CUcontext).
type context uintptr

// Attribute is a CUdevice_attribute (cuda.h, enum CUdevice_attribute_enum).
type Attribute int32

// Device attributes read by dmalab (values from cuda.h, CUDA 12.6/13.0).
const (
	AttrMaxThreadsPerBlock                     Attribute = 1
	AttrClockRate                              Attribute = 13 // kHz
	AttrMultiprocessorCount                    Attribute = 16
	AttrIntegrated                             Attribute = 18
	AttrCanMapHostMemory                       Attribute = 19
	AttrPCIBusID                               Attribute = 33
	AttrPCIDeviceID                            Attribute = 34
	AttrMemoryClockRate                        Attribute = 36 // kHz
	AttrGlobalMemoryBusWidth                   Attribute = 37 // bits
	AttrL2CacheSize                            Attribute = 38 // bytes
	AttrAsyncEngineCount                       Attribute = 40
	AttrUnifiedAddressing                      Attribute = 41
	AttrPCIDomainID                            Attribute = 50
	AttrComputeCapabilityMajor                 Attribute = 75
	AttrComputeCapabilityMinor                 Attribute = 76
	AttrManagedMemory                          Attribute = 83
	AttrHostNativeAtomicSupported              Attribute = 86
	AttrPageableMemoryAccess                   Attribute = 88
	AttrConcurrentManagedAccess                Attribute = 89
	AttrCanUseHostPointerForRegisteredMem      Attribute = 91
	AttrHostRegisterSupported                  Attribute = 99
	AttrPageableMemoryAccessUsesHostPageTables Attribute = 100
	AttrDirectManagedMemAccessFromHost         Attribute = 101
	AttrVirtualMemoryManagementSupported       Attribute = 102
	AttrGPUDirectRDMAWithCUDAVMMSupported      Attribute = 110
	AttrReadOnlyHostRegisterSupported          Attribute = 113
	AttrGPUDirectRDMASupported                 Attribute = 116
	AttrGPUDirectRDMAFlushWritesOptions        Attribute = 117
	AttrGPUDirectRDMAWritesOrdering            Attribute = 118
	AttrDMABufSupported                        Attribute = 124
	AttrNUMAConfig                             Attribute = 130
	AttrNUMAID                                 Attribute = 131
	AttrHostNUMAID                             Attribute = 134
)

var attributeNames = map[Attribute]string{
	AttrMaxThreadsPerBlock:                     "max_threads_per_block",
	AttrClockRate:                              "clock_rate_khz",
	AttrMultiprocessorCount:                    "multiprocessor_count",
	AttrIntegrated:                             "integrated",
	AttrCanMapHostMemory:                       "can_map_host_memory",
	AttrPCIBusID:                               "pci_bus_id",
	AttrPCIDeviceID:                            "pci_device_id",
	AttrMemoryClockRate:                        "memory_clock_rate_khz",
	AttrGlobalMemoryBusWidth:                   "global_memory_bus_width",
	AttrL2CacheSize:                            "l2_cache_size",
	AttrAsyncEngineCount:                       "async_engine_count",
	AttrUnifiedAddressing:                      "unified_addressing",
	AttrPCIDomainID:                            "pci_domain_id",
	AttrComputeCapabilityMajor:                 "compute_capability_major",
	AttrComputeCapabilityMinor:                 "compute_capability_minor",
	AttrManagedMemory:                          "managed_memory",
	AttrHostNativeAtomicSupported:              "host_native_atomic_supported",
	AttrPageableMemoryAccess:                   "pageable_memory_access",
	AttrConcurrentManagedAccess:                "concurrent_managed_access",
	AttrCanUseHostPointerForRegisteredMem:      "can_use_host_pointer_for_registered_mem",
	AttrHostRegisterSupported:                  "host_register_supported",
	AttrPageableMemoryAccessUsesHostPageTables: "pageable_memory_access_uses_host_page_tables",
	AttrDirectManagedMemAccessFromHost:         "direct_managed_mem_access_from_host",
	AttrVirtualMemoryManagementSupported:       "virtual_memory_management_supported",
	AttrGPUDirectRDMAWithCUDAVMMSupported:      "gpu_direct_rdma_with_cuda_vmm_supported",
	AttrReadOnlyHostRegisterSupported:          "read_only_host_register_supported",
	AttrGPUDirectRDMASupported:                 "gpu_direct_rdma_supported",
	AttrGPUDirectRDMAFlushWritesOptions:        "gpu_direct_rdma_flush_writes_options",
	AttrGPUDirectRDMAWritesOrdering:            "gpu_direct_rdma_writes_ordering",
	AttrDMABufSupported:                        "dma_buf_supported",
	AttrNUMAConfig:                             "numa_config",
	AttrNUMAID:                                 "numa_id",
	AttrHostNUMAID:                             "host_numa_id",
}

// String returns the attribute's name in snake case without the
// CU_DEVICE_ATTRIBUTE_ prefix ("dma_buf_supported"); dmalab's JSON uses it.
func (a Attribute) String() string {
	if n, ok := attributeNames[a]; ok {
		return n
	}
	return fmt.Sprintf("attribute_%d", int32(a))
}

// Flags of cuMemHostAlloc (cuda.h: CU_MEMHOSTALLOC_*).
const (
	HostAllocPortable      uint32 = 0x01
	HostAllocDeviceMap     uint32 = 0x02
	HostAllocWriteCombined uint32 = 0x04
)

// Flags of cuMemHostRegister (cuda.h: CU_MEMHOSTREGISTER_*).
const (
	HostRegisterPortable  uint32 = 0x01
	HostRegisterDeviceMap uint32 = 0x02
	HostRegisterIOMemory  uint32 = 0x04
	HostRegisterReadOnly  uint32 = 0x08
)

// Flags of cuMemAllocManaged (cuda.h: enum CUmemAttach_flags_enum).
const (
	MemAttachGlobal uint32 = 0x1
	MemAttachHost   uint32 = 0x2
	MemAttachSingle uint32 = 0x4
)

// Flags of cuStreamCreate (cuda.h: enum CUstream_flags_enum).
const (
	StreamDefault     uint32 = 0x0
	StreamNonBlocking uint32 = 0x1
)

// Flags of cuEventCreate (cuda.h: enum CUevent_flags_enum).
const (
	EventDefault       uint32 = 0x0
	EventBlockingSync  uint32 = 0x1
	EventDisableTiming uint32 = 0x2
)

// MemLocationType is a CUmemLocationType (cuda.h, enum CUmemLocationType_enum).
type MemLocationType uint32

// Location types.
const (
	MemLocationInvalid         MemLocationType = 0
	MemLocationDevice          MemLocationType = 1
	MemLocationHost            MemLocationType = 2
	MemLocationHostNUMA        MemLocationType = 3
	MemLocationHostNUMACurrent MemLocationType = 4
)

// MemLocation mirrors CUmemLocation (cuda.h: typedef struct CUmemLocation_st
// { CUmemLocationType type; int id; } CUmemLocation): 8 bytes, type first.
type MemLocation struct {
	Type MemLocationType
	ID   int32
}

// DeviceLocation is the location of GPU memory of device d.
func DeviceLocation(d Device) MemLocation { return MemLocation{MemLocationDevice, int32(d)} }

// HostLocation is host memory (the id is ignored).
func HostLocation() MemLocation { return MemLocation{MemLocationHost, 0} }

// packed is the struct passed by value in one 64-bit integer register, as the
// SysV x86-64 and AAPCS64 ABIs pass an 8-byte struct of two ints: type in the
// low half, id in the high half (little-endian field order).
func (l MemLocation) packed() uint64 {
	return uint64(l.Type) | uint64(uint32(l.ID))<<32
}

// Advice is a CUmem_advise (cuda.h, enum CUmem_advise_enum).
type Advice int32

// cuMemAdvise advice values.
const (
	AdviseSetReadMostly          Advice = 1
	AdviseUnsetReadMostly        Advice = 2
	AdviseSetPreferredLocation   Advice = 3
	AdviseUnsetPreferredLocation Advice = 4
	AdviseSetAccessedBy          Advice = 5
	AdviseUnsetAccessedBy        Advice = 6
)

// PointerAttribute is a CUpointer_attribute (cuda.h, enum CUpointer_attribute_enum).
type PointerAttribute int32

// Pointer attributes read by dmalab.
const (
	PointerAttrContext     PointerAttribute = 1
	PointerAttrMemoryType  PointerAttribute = 2
	PointerAttrDevicePtr   PointerAttribute = 3
	PointerAttrHostPtr     PointerAttribute = 4
	PointerAttrSyncMemops  PointerAttribute = 6
	PointerAttrBufferID    PointerAttribute = 7
	PointerAttrIsManaged   PointerAttribute = 8
	PointerAttrDeviceOrd   PointerAttribute = 9
	PointerAttrMapped      PointerAttribute = 13
	PointerAttrRDMACapable PointerAttribute = 15
)

// MemoryType is a CUmemorytype (cuda.h, enum CUmemorytype_enum).
type MemoryType uint32

// Memory types.
const (
	MemoryTypeHost    MemoryType = 1
	MemoryTypeDevice  MemoryType = 2
	MemoryTypeArray   MemoryType = 3
	MemoryTypeUnified MemoryType = 4
)

// RangeHandleType is a CUmemRangeHandleType (cuda.h, enum CUmemRangeHandleType_enum).
type RangeHandleType uint32

// RangeHandleDMABufFD asks cuMemGetHandleForAddressRange for a dma-buf fd.
const RangeHandleDMABufFD RangeHandleType = 1

// Dim3 is a grid or block shape for LaunchKernel.
type Dim3 struct{ X, Y, Z uint32 }

// Dim returns a one-dimensional shape.
func Dim(x uint32) Dim3 { return Dim3{x, 1, 1} }

package cuda

import (
	"github.com/dmalab/dmalab/mem"
)

// PointerAttribute is a CUpointer_attribute, with cuda.h's values.
type PointerAttribute int

const (
	PointerAttributeContext        PointerAttribute = 1  // CU_POINTER_ATTRIBUTE_CONTEXT
	PointerAttributeMemoryType     PointerAttribute = 2  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
	PointerAttributeDevicePointer  PointerAttribute = 3  // CU_POINTER_ATTRIBUTE_DEVICE_POINTER
	PointerAttributeHostPointer    PointerAttribute = 4  // CU_POINTER_ATTRIBUTE_HOST_POINTER
	PointerAttributeSyncMemops     PointerAttribute = 6  // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
	PointerAttributeBufferID       PointerAttribute = 7  // CU_POINTER_ATTRIBUTE_BUFFER_ID
	PointerAttributeIsManaged      PointerAttribute = 8  // CU_POINTER_ATTRIBUTE_IS_MANAGED
	PointerAttributeDeviceOrdinal  PointerAttribute = 9  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
	PointerAttributeRangeStartAddr PointerAttribute = 11 // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
	PointerAttributeRangeSize      PointerAttribute = 12 // CU_POINTER_ATTRIBUTE_RANGE_SIZE
	PointerAttributeMapped         PointerAttribute = 13 // CU_POINTER_ATTRIBUTE_MAPPED
)

// CUmemorytype values, which PointerAttributeMemoryType answers.
const (
	MemoryTypeHost   = 0x1 // CU_MEMORYTYPE_HOST
	MemoryTypeDevice = 0x2 // CU_MEMORYTYPE_DEVICE
)

// PointerGetAttribute is cuPointerGetAttribute for addr, any address
// inside an allocation, as an integer (a pointer, a size, a boolean 0
// or 1, an ordinal):
//
//   - Context: the ID of the context that allocated or registered it;
//   - MemoryType: MemoryTypeHost for pinned host memory,
//     MemoryTypeDevice for device and managed memory (the driver API
//     says DEVICE for managed memory; IsManaged tells them apart);
//   - DevicePointer, HostPointer: addr itself under unified addressing,
//     where it is accessible (host memory not mapped for the GPU has no
//     device pointer, device memory no host pointer:
//     CUDA_ERROR_INVALID_VALUE);
//   - SyncMemops: whether PointerSetAttribute set it;
//   - BufferID: unique per allocation and never reused, so it changes
//     when memory is freed and allocated again at the same address
//     (907 → 913 seen on the H200 machine, 2026-11-21);
//   - IsManaged, DeviceOrdinal (the context's GPU for host and managed
//     memory), RangeStartAddr, RangeSize, Mapped.
//
// Memory the driver does not know (pageable, freed, another process's)
// and other attributes are CUDA_ERROR_INVALID_VALUE.
func (c *Context) PointerGetAttribute(attr PointerAttribute, addr mem.GPUAddr) (uint64, error) {
	const call = "cuPointerGetAttribute"
	if err := c.check(call); err != nil {
		return 0, err
	}
	pl := c.d.resolve(addr, 1)
	a := pl.a
	if a == nil || c.foreign(pl) {
		return 0, failf(call, ErrorInvalidValue, "%v is %v memory the driver does not know", addr, pl.t.Kind)
	}
	b2u := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	switch attr {
	case PointerAttributeContext:
		if a.ctx == nil {
			return 0, failf(call, ErrorInvalidValue, "%v was not allocated through a context", addr)
		}
		return uint64(a.ctx.id), nil
	case PointerAttributeMemoryType:
		if a.kind == MemPinned {
			return MemoryTypeHost, nil
		}
		return MemoryTypeDevice, nil
	case PointerAttributeDevicePointer:
		if !a.a.Mapped {
			return 0, failf(call, ErrorInvalidValue, "%v is not mapped for the GPU", addr)
		}
		return uint64(addr), nil
	case PointerAttributeHostPointer:
		if a.kind == MemDevice {
			return 0, failf(call, ErrorInvalidValue, "%v is device memory", addr)
		}
		return uint64(addr), nil
	case PointerAttributeSyncMemops:
		return b2u(a.syncMemops), nil
	case PointerAttributeBufferID:
		return a.a.BufferID, nil
	case PointerAttributeIsManaged:
		return b2u(a.kind == MemManaged), nil
	case PointerAttributeDeviceOrdinal:
		if a.kind == MemDevice {
			return uint64(a.a.Device), nil
		}
		if a.ctx != nil {
			return uint64(a.ctx.dev.Index), nil
		}
		return uint64(c.dev.Index), nil
	case PointerAttributeRangeStartAddr:
		return uint64(a.a.Addr), nil
	case PointerAttributeRangeSize:
		return a.a.Size, nil
	case PointerAttributeMapped:
		return b2u(a.a.Mapped), nil
	}
	return 0, failf(call, ErrorInvalidValue, "attribute %d is not modelled", attr)
}

// PointerSetAttribute is cuPointerSetAttribute; only SyncMemops can be
// set (as in CUDA): value 0 or 1, on device memory. With it set,
// synchronous memory operations on the region complete before they
// return, which GPUDirect RDMA needs (NVIDIA's "Developing a Linux
// Kernel Module using GPUDirect RDMA",
// docs.nvidia.com/cuda/gpudirect-rdma). Without it, a synchronous copy
// into memory the GPUDirect RDMA driver has pinned (package nvp2p,
// SetMemopsWindow) returns before its writes are visible to a peer,
// for the driver's window; memory no peer pins is visible at once
// either way. Anything else is CUDA_ERROR_INVALID_VALUE.
func (c *Context) PointerSetAttribute(attr PointerAttribute, value uint64, addr mem.GPUAddr) error {
	const call = "cuPointerSetAttribute"
	if err := c.check(call); err != nil {
		return err
	}
	pl := c.d.resolve(addr, 1)
	a := pl.a
	switch {
	case attr != PointerAttributeSyncMemops || value > 1:
		return failf(call, ErrorInvalidValue, "attribute %d = %d", attr, value)
	case a == nil || c.foreign(pl) || a.kind != MemDevice:
		return failf(call, ErrorInvalidValue, "%v is %v memory, not device memory", addr, pl.t.Kind)
	}
	a.syncMemops = value == 1
	return nil
}

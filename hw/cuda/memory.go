package cuda

import (
	"fmt"
	"unsafe"
)

// HostMem is page-locked host memory allocated by the driver (cuMemAllocHost
// or cuMemHostAlloc). It lives outside the Go heap until FreeHost.
type HostMem struct {
	p     unsafe.Pointer
	n     int
	Flags uint32 // the cuMemHostAlloc flags it was allocated with
}

// Bytes views the memory as a slice; it is invalid after FreeHost.
func (h *HostMem) Bytes() []byte { return hostBytes(h.p, h.n) }

// Len returns the size in bytes.
func (h *HostMem) Len() int { return h.n }

// MemGetInfo returns free and total device memory (cuMemGetInfo_v2).
func (t *Thread) MemGetInfo() (free, total int64, err error) {
	var f, tot uintptr
	if err := check("cuMemGetInfo_v2", t.lib().cuMemGetInfo(&f, &tot)); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(tot), nil
}

// MemAlloc allocates device memory (cuMemAlloc_v2).
func (t *Thread) MemAlloc(n int64) (DevicePtr, error) {
	var p DevicePtr
	if err := check(fmt.Sprintf("cuMemAlloc_v2(%d)", n), t.lib().cuMemAlloc(&p, uintptr(n))); err != nil {
		return 0, err
	}
	return p, nil
}

// MemFree frees device or managed memory (cuMemFree_v2).
func (t *Thread) MemFree(p DevicePtr) error {
	return check("cuMemFree_v2", t.lib().cuMemFree(p))
}

// MemAllocHost allocates page-locked host memory (cuMemAllocHost_v2).
func (t *Thread) MemAllocHost(n int) (*HostMem, error) {
	var p unsafe.Pointer
	if err := check(fmt.Sprintf("cuMemAllocHost_v2(%d)", n), t.lib().cuMemAllocHost(&p, uintptr(n))); err != nil {
		return nil, err
	}
	return &HostMem{p: p, n: n}, nil
}

// MemHostAlloc allocates page-locked host memory with HostAlloc* flags
// (cuMemHostAlloc).
func (t *Thread) MemHostAlloc(n int, flags uint32) (*HostMem, error) {
	var p unsafe.Pointer
	if err := check(fmt.Sprintf("cuMemHostAlloc(%d, %#x)", n, flags), t.lib().cuMemHostAlloc(&p, uintptr(n), flags)); err != nil {
		return nil, err
	}
	return &HostMem{p: p, n: n, Flags: flags}, nil
}

// FreeHost frees memory from MemAllocHost or MemHostAlloc (cuMemFreeHost).
func (t *Thread) FreeHost(h *HostMem) error {
	err := check("cuMemFreeHost", t.lib().cuMemFreeHost(h.p))
	if err == nil {
		h.p, h.n = nil, 0
	}
	return err
}

// HostGetDevicePointer returns the device address of mapped page-locked
// memory (cuMemHostGetDevicePointer_v2): memory from MemHostAlloc with
// HostAllocDeviceMap, or registered with HostRegisterDeviceMap.
func (t *Thread) HostGetDevicePointer(b []byte) (DevicePtr, error) {
	var d DevicePtr
	if err := check("cuMemHostGetDevicePointer_v2", t.lib().cuMemHostGetDevicePointer(&d, slicePtr(b), 0)); err != nil {
		return 0, err
	}
	return d, nil
}

// HostRegister page-locks existing host memory (cuMemHostRegister_v2). b must
// not be Go heap memory (use syscall.Mmap) and must stay mapped until
// HostUnregister.
func (t *Thread) HostRegister(b []byte, flags uint32) error {
	return check(fmt.Sprintf("cuMemHostRegister_v2(%d, %#x)", len(b), flags), t.lib().cuMemHostRegister(slicePtr(b), uintptr(len(b)), flags))
}

// HostUnregister undoes HostRegister (cuMemHostUnregister).
func (t *Thread) HostUnregister(b []byte) error {
	return check("cuMemHostUnregister", t.lib().cuMemHostUnregister(slicePtr(b)))
}

// MemAllocManaged allocates unified memory (cuMemAllocManaged) with a
// MemAttach* flag. Never ask for more than the GPU has free.
func (t *Thread) MemAllocManaged(n int64, flags uint32) (DevicePtr, error) {
	var p DevicePtr
	if err := check(fmt.Sprintf("cuMemAllocManaged(%d)", n), t.lib().cuMemAllocManaged(&p, uintptr(n), flags)); err != nil {
		return 0, err
	}
	return p, nil
}

// ManagedBytes views n bytes of managed memory at p from the CPU. Touching
// the slice migrates or maps pages as the driver decides.
func ManagedBytes(p DevicePtr, n int) []byte { return managedBytes(p, n) }

// MemcpyHtoD copies host memory to the device and waits (cuMemcpyHtoD_v2).
func (t *Thread) MemcpyHtoD(dst DevicePtr, src []byte) error {
	return check("cuMemcpyHtoD_v2", t.lib().cuMemcpyHtoD(dst, slicePtr(src), uintptr(len(src))))
}

// MemcpyDtoH copies device memory to the host and waits (cuMemcpyDtoH_v2).
func (t *Thread) MemcpyDtoH(dst []byte, src DevicePtr) error {
	return check("cuMemcpyDtoH_v2", t.lib().cuMemcpyDtoH(slicePtr(dst), src, uintptr(len(dst))))
}

// MemcpyDtoD copies between device addresses (cuMemcpyDtoD_v2).
func (t *Thread) MemcpyDtoD(dst, src DevicePtr, n int64) error {
	return check("cuMemcpyDtoD_v2", t.lib().cuMemcpyDtoD(dst, src, uintptr(n)))
}

// MemcpyHtoDAsync queues a host-to-device copy on s (cuMemcpyHtoDAsync_v2).
// src must be page-locked and stay valid until s has run the copy.
func (t *Thread) MemcpyHtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	return check("cuMemcpyHtoDAsync_v2", t.lib().cuMemcpyHtoDAsync(dst, slicePtr(src), uintptr(len(src)), s))
}

// MemcpyDtoHAsync queues a device-to-host copy on s (cuMemcpyDtoHAsync_v2).
// dst must be page-locked and stay valid until s has run the copy.
func (t *Thread) MemcpyDtoHAsync(dst []byte, src DevicePtr, s Stream) error {
	return check("cuMemcpyDtoHAsync_v2", t.lib().cuMemcpyDtoHAsync(slicePtr(dst), src, uintptr(len(dst)), s))
}

// MemcpyDtoDAsync queues a device-to-device copy on s (cuMemcpyDtoDAsync_v2).
func (t *Thread) MemcpyDtoDAsync(dst, src DevicePtr, n int64, s Stream) error {
	return check("cuMemcpyDtoDAsync_v2", t.lib().cuMemcpyDtoDAsync(dst, src, uintptr(n), s))
}

// MemcpyPeerAsync queues a copy from src in srcCtx's device to dst in
// dstCtx's device (cuMemcpyPeerAsync).
func (t *Thread) MemcpyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n int64, s Stream) error {
	return check("cuMemcpyPeerAsync", t.lib().cuMemcpyPeerAsync(dst, dstCtx.ctx, src, srcCtx.ctx, uintptr(n), s))
}

// MemsetD8 sets n bytes (cuMemsetD8_v2).
func (t *Thread) MemsetD8(p DevicePtr, v uint8, n int64) error {
	return check("cuMemsetD8_v2", t.lib().cuMemsetD8(p, v, uintptr(n)))
}

// MemsetD32 sets n 32-bit words (cuMemsetD32_v2).
func (t *Thread) MemsetD32(p DevicePtr, v uint32, n int64) error {
	return check("cuMemsetD32_v2", t.lib().cuMemsetD32(p, v, uintptr(n)))
}

// PointerBufferID returns CU_POINTER_ATTRIBUTE_BUFFER_ID: an id unique to the
// allocation, which changes when an address is freed and allocated again.
func (t *Thread) PointerBufferID(p DevicePtr) (uint64, error) {
	var id uint64
	if err := check("cuPointerGetAttribute(BUFFER_ID)", t.lib().cuPointerGetAttribute(unsafe.Pointer(&id), PointerAttrBufferID, p)); err != nil {
		return 0, err
	}
	return id, nil
}

// PointerMemoryType returns CU_POINTER_ATTRIBUTE_MEMORY_TYPE.
func (t *Thread) PointerMemoryType(p DevicePtr) (MemoryType, error) {
	var v uint32
	if err := check("cuPointerGetAttribute(MEMORY_TYPE)", t.lib().cuPointerGetAttribute(unsafe.Pointer(&v), PointerAttrMemoryType, p)); err != nil {
		return 0, err
	}
	return MemoryType(v), nil
}

// PointerIsManaged returns CU_POINTER_ATTRIBUTE_IS_MANAGED.
func (t *Thread) PointerIsManaged(p DevicePtr) (bool, error) {
	var v uint32
	if err := check("cuPointerGetAttribute(IS_MANAGED)", t.lib().cuPointerGetAttribute(unsafe.Pointer(&v), PointerAttrIsManaged, p)); err != nil {
		return false, err
	}
	return v != 0, nil
}

// MemPrefetchAsync queues a migration of managed memory to loc on s
// (cuMemPrefetchAsync_v2; the CUmemLocation goes by value).
func (t *Thread) MemPrefetchAsync(p DevicePtr, n int64, loc MemLocation, s Stream) error {
	l := t.lib()
	if l.cuMemPrefetchAsync == nil {
		return errMissing("cuMemPrefetchAsync_v2")
	}
	return check("cuMemPrefetchAsync_v2", l.cuMemPrefetchAsync(p, uintptr(n), loc.packed(), 0, s))
}

// MemAdvise gives the driver advice about managed memory (cuMemAdvise_v2).
func (t *Thread) MemAdvise(p DevicePtr, n int64, advice Advice, loc MemLocation) error {
	l := t.lib()
	if l.cuMemAdvise == nil {
		return errMissing("cuMemAdvise_v2")
	}
	return check(fmt.Sprintf("cuMemAdvise_v2(%d)", advice), l.cuMemAdvise(p, uintptr(n), advice, loc.packed()))
}

// DMABufFD exports [p, p+n) of device memory as a dma-buf file descriptor
// (cuMemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD).
// p and n must be aligned to the host page size. The caller closes the fd.
func (t *Thread) DMABufFD(p DevicePtr, n int64) (int, error) {
	l := t.lib()
	if l.cuMemGetHandleForAddressRange == nil {
		return -1, errMissing("cuMemGetHandleForAddressRange")
	}
	var fd int32 = -1
	if err := check("cuMemGetHandleForAddressRange(DMA_BUF_FD)", l.cuMemGetHandleForAddressRange(unsafe.Pointer(&fd), p, uintptr(n), RangeHandleDMABufFD, 0)); err != nil {
		return -1, err
	}
	return int(fd), nil
}

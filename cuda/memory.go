package cuda

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// cuMemHostAlloc's flags (CU_MEMHOSTALLOC_*).
const (
	// HostAllocPortable (CU_MEMHOSTALLOC_PORTABLE): pinned for every
	// context. Under unified addressing memory from cuMemHostAlloc is
	// portable and mapped whether or not this and HostAllocDeviceMap are
	// given (the driver API's "Unified Addressing" section), and the
	// model makes it so.
	HostAllocPortable uint32 = 0x1
	// HostAllocDeviceMap (CU_MEMHOSTALLOC_DEVICEMAP): mapped into the
	// GPUs' address space.
	HostAllocDeviceMap uint32 = 0x2
	// HostAllocWriteCombined (CU_MEMHOSTALLOC_WRITECOMBINED):
	// write-combined on the CPU: CPU stores go through write-combining
	// buffers at full speed, CPU loads are uncached and slow; DMA is not
	// slowed (55.4 / 55.1 GB/s, as pinned, measured on the H200 machine
	// 2026-11-21; the probe's write-combined copies agree:
	// docs/measurements/2026-11-21-h200-cli-probe.txt).
	HostAllocWriteCombined uint32 = 0x4
)

// cuMemHostRegister's flags (CU_MEMHOSTREGISTER_*).
const (
	// HostRegisterPortable (CU_MEMHOSTREGISTER_PORTABLE): pinned for
	// every context, not just the registering one.
	HostRegisterPortable uint32 = 0x1
	// HostRegisterDeviceMap (CU_MEMHOSTREGISTER_DEVICEMAP): mapped for
	// kernels; without it a kernel may not touch the memory.
	HostRegisterDeviceMap uint32 = 0x2
	// HostRegisterIOMemory (CU_MEMHOSTREGISTER_IOMEMORY): the range is
	// another device's BAR. Not modelled: CUDA_ERROR_NOT_SUPPORTED.
	HostRegisterIOMemory uint32 = 0x4
	// HostRegisterReadOnly (CU_MEMHOSTREGISTER_READ_ONLY): the GPU only
	// reads it. Accepted and kept; the model does not enforce it.
	HostRegisterReadOnly uint32 = 0x8
)

// hostPages is the number of 4 KiB pages [va, va+size) touches: what
// pinning costs are counted in (platform.HostPage).
func hostPages(va mem.VirtAddr, size uint64) uint64 {
	if size == 0 {
		return 0
	}
	first := uint64(va) / mem.PageSize
	last := (uint64(va) + size - 1) / mem.PageSize
	return last - first + 1
}

// MemAlloc is cuMemAlloc: size bytes of the context's GPU's memory
// (gpu.Device.Alloc: its cost, 512 B and 2 MiB granules, VRAM in mem).
// A zero size is CUDA_ERROR_INVALID_VALUE, no memory left
// CUDA_ERROR_OUT_OF_MEMORY.
func (c *Context) MemAlloc(p *sim.Proc, size uint64) (mem.GPUAddr, error) {
	const call = "cuMemAlloc"
	if err := c.check(call); err != nil {
		return 0, err
	}
	a, err := c.dev.Alloc(p, size)
	if err != nil {
		return 0, wrap(call, err)
	}
	c.d.record(c, p, fmt.Sprintf("cuMemAlloc(%s, %#x)", c.dev.Name, size), a, MemDevice, 0)
	return a.Addr, nil
}

// MemFree is cuMemFree of device or managed memory (addr must be an
// allocation's base): it waits for the GPU's work (all GPUs' for
// managed memory), as cudaFree does, and costs gpu.FreeCost. Host
// memory, an inner address, memory already freed or another process's
// pointer is CUDA_ERROR_INVALID_VALUE. Memory exported as a dma-buf is
// freed for the program at once but stays allocated until the last
// dma-buf of it is released, as the exporter's reference keeps it.
func (c *Context) MemFree(p *sim.Proc, addr mem.GPUAddr) error {
	const call = "cuMemFree"
	if err := c.check(call); err != nil {
		return err
	}
	pl := c.d.resolve(addr, 1)
	var err error
	switch {
	case pl.t.Kind == MemFreed:
		err = failf(call, ErrorInvalidValue, "%v was freed by %s", addr, pl.t.Freed)
	case c.foreign(pl):
		err = failf(call, ErrorInvalidValue, "%v belongs to process %s", addr, pl.t.Process)
	}
	c.observe(p, OpFree, call, addr, 0, true, pl, err)
	if err != nil {
		p.Sleep(gpu.FreeCost)
		return err
	}
	a := pl.a
	if a != nil && a.exports > 0 && pl.t.Base == addr {
		c.dev.Synchronize(p)
		a.freedBy = origin(call, p.Now(), p)
		p.Sleep(gpu.FreeCost)
		return nil
	}
	if err := c.d.sys.Free(p, addr); err != nil {
		return wrap(call, err)
	}
	if a != nil {
		if a.um != nil {
			if err := c.d.um.Free(p, a.um); err != nil {
				return wrap(call, err)
			}
			if err := c.d.releaseUMChunks(p, a.um); err != nil {
				return fail(call, ErrorUnknown, err)
			}
		}
		c.d.forget(a, origin(call, p.Now(), p))
	}
	return nil
}

// MemAllocHost is cuMemAllocHost: MemHostAlloc with no flags (portable
// and mapped all the same, under unified addressing).
func (c *Context) MemAllocHost(p *sim.Proc, size uint64) (mem.VirtAddr, error) {
	return c.memHostAlloc(p, "cuMemAllocHost", size, 0)
}

// MemHostAlloc is cuMemHostAlloc: size bytes of page-locked host memory
// placed by the calling thread's NUMA policy and node (allocHostPages),
// entered in the unified address map at its own
// address (the host pointer is the device pointer), mapped for kernels
// and portable (unified addressing makes it so whatever the flags).
// HostAllocWriteCombined maps it uncached for the CPU (mem.Remap,
// Uncached): CPU reads run at the node's uncached rate, CPU writes at
// the memcpy rate (CPUAccess), DMA at full speed. On an integrated GPU
// without I/O coherence (Tegra before Xavier) all pinned memory is
// uncached on the CPU (NVIDIA's "How does NVIDIA implement unified
// memory on PCIe GPUs and Tegra platforms?"; uvm.PinnedCacheability).
//
// The host pays the platform's PinCall cost and its Pin cost per 4 KiB
// page (assumed: the driver allocates, locks and maps each page for the
// GPUs as cuMemHostRegister does). Unknown flags are CUDA_ERROR_INVALID_VALUE,
// no memory CUDA_ERROR_OUT_OF_MEMORY.
func (c *Context) MemHostAlloc(p *sim.Proc, size uint64, flags uint32) (mem.VirtAddr, error) {
	return c.memHostAlloc(p, "cuMemHostAlloc", size, flags)
}

func (c *Context) memHostAlloc(p *sim.Proc, call string, size uint64, flags uint32) (mem.VirtAddr, error) {
	if err := c.check(call); err != nil {
		return 0, err
	}
	if size == 0 || flags&^(HostAllocPortable|HostAllocDeviceMap|HostAllocWriteCombined) != 0 {
		return 0, failf(call, ErrorInvalidValue, "size %#x, flags %#x", size, flags)
	}
	m := c.d.m.Mem
	pages := hostPages(0, size)
	bytes := pages * mem.PageSize
	pa, err := c.allocHostPages(p, bytes)
	if err != nil {
		if errors.Is(err, mem.ErrNoMemory) {
			return 0, fail(call, ErrorOutOfMemory, err)
		}
		return 0, fail(call, ErrorInvalidValue, err)
	}
	uncached := flags&HostAllocWriteCombined != 0 || c.d.pinnedUncached(c.dev.Index)
	va := m.PhysToVirt(pa)
	var remap mem.VirtAddr
	if uncached {
		if remap, err = m.Remap(pa, bytes, mem.Uncached); err != nil {
			m.FreePages(pa, bytes)
			return 0, fail(call, ErrorOutOfMemory, err)
		}
		va = remap
	}
	gflags := gpu.HostPortable | gpu.HostDeviceMap
	if flags&HostAllocWriteCombined != 0 {
		gflags |= gpu.HostWriteCombined
	}
	p.Sleep(c.dev.GPU.Spec.PinCall() + sim.Time(pages)*c.dev.GPU.Spec.Pin())
	ga, err := c.d.sys.RegisterHost(p, va, size, gflags)
	if err != nil {
		if remap != 0 {
			m.Unremap(remap)
		}
		m.FreePages(pa, bytes)
		return 0, wrap(call, err)
	}
	a := c.d.record(c, p, fmt.Sprintf("%s(%#x, %#x)", call, size, flags), ga, MemPinned, flags|HostAllocPortable|HostAllocDeviceMap)
	a.pa, a.bytes, a.remap = pa, bytes, remap
	return va, nil
}

// allocHostPages allocates the driver's pinned pages for thread p, as
// nv_alloc_system_pages does (open-gpu-kernel-modules,
// kernel-open/nvidia/nv-vm.c: __get_free_pages, so the kernel's
// alloc_pages with the calling task's memory policy and node): the
// first node of the kernel's order for p (kernel.Process.AllocNodes)
// with room for the whole buffer, then the next. The model keeps the
// buffer physically contiguous on one node, where the driver takes it
// page by page: an interleave policy therefore rotates per buffer, not
// per page. With the default policy and an unbound thread it is the
// process's node, as before. ErrNoMemory when no allowed node has room
// (MPOL_BIND's nodes full).
func (c *Context) allocHostPages(p *sim.Proc, bytes uint64) (mem.PhysAddr, error) {
	m := c.d.m.Mem
	nodes := c.proc.kp.AllocNodes(p)
	if nodes == nil {
		nodes = []int{c.proc.node}
	}
	var errs []error
	for _, n := range nodes {
		pa, err := m.AllocPages(n, bytes, mem.ZoneNormal)
		if err == nil {
			return pa, nil
		}
		errs = append(errs, fmt.Errorf("node %d: %w", n, err))
		if !errors.Is(err, mem.ErrNoMemory) {
			break
		}
	}
	return 0, errors.Join(errs...)
}

// MemFreeHost is cuMemFreeHost of memory from MemHostAlloc or
// MemAllocHost: removed from the address map, its pages freed. The host
// pays the platform's Unpin cost per page. Anything else is
// CUDA_ERROR_INVALID_VALUE.
func (c *Context) MemFreeHost(p *sim.Proc, va mem.VirtAddr) error {
	const call = "cuMemFreeHost"
	if err := c.check(call); err != nil {
		return err
	}
	pl := c.d.resolve(mem.GPUAddr(va), 1)
	a := pl.a
	var err error
	switch {
	case pl.t.Kind == MemFreed:
		err = failf(call, ErrorInvalidValue, "%v was freed by %s", va, pl.t.Freed)
	case c.foreign(pl):
		err = failf(call, ErrorInvalidValue, "%v belongs to process %s", va, pl.t.Process)
	case a == nil || a.kind != MemPinned || a.bytes == 0 || a.a.HostVA != va:
		err = failf(call, ErrorInvalidValue, "%v is not memory of cuMemHostAlloc", va)
	}
	c.observe(p, OpFree, call, mem.GPUAddr(va), 0, true, pl, err)
	if err != nil {
		return err
	}
	if err := c.d.sys.UnregisterHost(p, va); err != nil {
		return wrap(call, err)
	}
	p.Sleep(c.dev.GPU.Spec.UnpinCall() + sim.Time(a.bytes/mem.PageSize)*c.dev.GPU.Spec.Unpin())
	m := c.d.m.Mem
	if a.remap != 0 {
		if err := m.Unremap(a.remap); err != nil {
			return fail(call, ErrorUnknown, err)
		}
	}
	if err := m.FreePages(a.pa, a.bytes); err != nil {
		return fail(call, ErrorUnknown, err)
	}
	c.d.forget(a, origin(call, p.Now(), p))
	return nil
}

// MemHostRegister is cuMemHostRegister: it pins the host memory [va,
// va+size) (pageable memory of the process: Malloc's, or any mapped
// host range) and enters it in the unified address map. The host pays
// the platform's PinCall cost (the ioctl, the memory descriptor, the
// GPU's page-table update) and its Pin cost per 4 KiB page touched (35
// ms per GiB measured on the H200 machine 2026-11-21). It is mapped for kernels only with
// HostRegisterDeviceMap and pinned for other contexts only with
// HostRegisterPortable. A range overlapping registered or driver memory
// is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED; an unmapped one or
// unknown flags CUDA_ERROR_INVALID_VALUE; HostRegisterIOMemory
// CUDA_ERROR_NOT_SUPPORTED, and so is any registration on an integrated
// GPU without I/O coherence (Tegra before Xavier: "supported only on I/O
// coherent platforms", CUDA for Tegra).
func (c *Context) MemHostRegister(p *sim.Proc, va mem.VirtAddr, size uint64, flags uint32) error {
	const call = "cuMemHostRegister"
	if err := c.check(call); err != nil {
		return err
	}
	known := HostRegisterPortable | HostRegisterDeviceMap | HostRegisterIOMemory | HostRegisterReadOnly
	switch {
	case size == 0 || flags&^known != 0:
		return failf(call, ErrorInvalidValue, "size %#x, flags %#x", size, flags)
	case flags&HostRegisterIOMemory != 0:
		return failf(call, ErrorNotSupported, "CU_MEMHOSTREGISTER_IOMEMORY is not modelled")
	case c.d.integrated(c.dev.Index) && !c.d.coherent[c.dev.Index]:
		// CUDA for Tegra, I/O Coherency: cuMemHostRegister is supported
		// only on I/O coherent platforms (Xavier on).
		return failf(call, ErrorNotSupported, "%s is integrated without I/O coherence (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED is 0)", c.dev.Name)
	}
	// get_user_pages before pinning (os_lock_user_pages in the driver's
	// os-mlock.c): anonymous pages not yet touched are faulted in here,
	// placed by the calling thread's node and policy, as first touch
	// would place them. Memory already placed stays where it is.
	var pin *mem.PagePin
	if c.proc.kp.Kernel().Memory() != nil {
		if err := c.proc.kp.Populate(p, va, size); errors.Is(err, syscall.ENOMEM) {
			return fail(call, ErrorOutOfMemory, err)
		}
	}
	gflags := gpu.HostRegistered
	if flags&HostRegisterPortable != 0 {
		gflags |= gpu.HostPortable
	}
	if flags&HostRegisterDeviceMap != 0 {
		gflags |= gpu.HostDeviceMap
	}
	ga, err := c.d.sys.RegisterHost(p, va, size, gflags)
	if err != nil {
		return wrap(call, err)
	}
	// The pages are pinned (pin_user_pages) while registered: the GPU
	// holds their bus addresses, so they must not migrate.
	if c.proc.kp.Kernel().Memory() != nil {
		pin, _ = c.proc.kp.PinPages(va, size)
	}
	p.Sleep(c.dev.GPU.Spec.PinCall() + sim.Time(hostPages(va, size))*c.dev.GPU.Spec.Pin())
	c.d.record(c, p, fmt.Sprintf("cuMemHostRegister(%v, %#x, %#x)", va, size, flags), ga, MemPinned, flags).pin = pin
	return nil
}

// MemHostUnregister is cuMemHostUnregister of memory registered at va:
// the host pays the platform's UnpinCall cost and its Unpin cost per
// page (14 ms per GiB measured on the H200 machine 2026-11-21). Memory not registered
// (memory of cuMemHostAlloc included) is
// CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED.
func (c *Context) MemHostUnregister(p *sim.Proc, va mem.VirtAddr) error {
	const call = "cuMemHostUnregister"
	if err := c.check(call); err != nil {
		return err
	}
	pl := c.d.resolve(mem.GPUAddr(va), 1)
	a := pl.a
	var err error
	switch {
	case pl.t.Kind == MemFreed:
		err = failf(call, ErrorHostMemoryNotRegistered, "%v was freed by %s", va, pl.t.Freed)
	case c.foreign(pl):
		err = failf(call, ErrorInvalidValue, "%v belongs to process %s", va, pl.t.Process)
	case a == nil || a.kind != MemPinned || a.bytes != 0 || a.a.HostVA != va:
		err = failf(call, ErrorHostMemoryNotRegistered, "%v", va)
	}
	c.observe(p, OpFree, call, mem.GPUAddr(va), 0, true, pl, err)
	if err != nil {
		return err
	}
	if err := c.d.sys.UnregisterHost(p, va); err != nil {
		return wrap(call, err)
	}
	a.pin.Release()
	p.Sleep(c.dev.GPU.Spec.UnpinCall() + sim.Time(hostPages(va, a.a.Size))*c.dev.GPU.Spec.Unpin())
	// The memory is the program's pageable memory again, not freed.
	delete(c.d.allocs, a.a.BufferID)
	return nil
}

// MemHostGetDevicePointer is cuMemHostGetDevicePointer: the address
// kernels use for mapped pinned memory at va, which under unified
// addressing is va itself. Memory that is not pinned, or registered
// without HostRegisterDeviceMap, and flags other than 0 are
// CUDA_ERROR_INVALID_VALUE.
func (c *Context) MemHostGetDevicePointer(va mem.VirtAddr, flags uint32) (mem.GPUAddr, error) {
	const call = "cuMemHostGetDevicePointer"
	if err := c.check(call); err != nil {
		return 0, err
	}
	pl := c.d.resolve(mem.GPUAddr(va), 1)
	if flags != 0 || pl.t.Kind != MemPinned || !pl.t.Mapped || c.foreign(pl) {
		return 0, failf(call, ErrorInvalidValue, "%v (%v, mapped %v), flags %#x", va, pl.t.Kind, pl.t.Mapped, flags)
	}
	return mem.GPUAddr(va), nil
}

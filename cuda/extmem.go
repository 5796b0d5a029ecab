package cuda

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/gpu"
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ExternalMemoryHandleType is CUexternalMemoryHandleType: what kind of
// handle cuImportExternalMemory is given. The values are cuda.h's. No
// value names a dma-buf: the one file-descriptor type is OPAQUE_FD.
type ExternalMemoryHandleType int

const (
	ExternalMemoryHandleTypeOpaqueFD         ExternalMemoryHandleType = 1 // CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD
	ExternalMemoryHandleTypeOpaqueWin32      ExternalMemoryHandleType = 2 // ..._OPAQUE_WIN32
	ExternalMemoryHandleTypeOpaqueWin32KMT   ExternalMemoryHandleType = 3 // ..._OPAQUE_WIN32_KMT
	ExternalMemoryHandleTypeD3D12Heap        ExternalMemoryHandleType = 4 // ..._D3D12_HEAP
	ExternalMemoryHandleTypeD3D12Resource    ExternalMemoryHandleType = 5 // ..._D3D12_RESOURCE
	ExternalMemoryHandleTypeD3D11Resource    ExternalMemoryHandleType = 6 // ..._D3D11_RESOURCE
	ExternalMemoryHandleTypeD3D11ResourceKMT ExternalMemoryHandleType = 7 // ..._D3D11_RESOURCE_KMT
	ExternalMemoryHandleTypeNvSciBuf         ExternalMemoryHandleType = 8 // ..._NVSCIBUF
)

// ExternalMemoryDedicated is CUDA_EXTERNAL_MEMORY_DEDICATED, the one flag
// of CUDA_EXTERNAL_MEMORY_HANDLE_DESC.
const ExternalMemoryDedicated uint32 = 0x1

// ExternalMemoryHandleDesc is CUDA_EXTERNAL_MEMORY_HANDLE_DESC for the
// handle types that carry a file descriptor.
type ExternalMemoryHandleDesc struct {
	Type ExternalMemoryHandleType
	// FD is handle.fd: a descriptor of the calling process. On success
	// its ownership passes to the driver (cuda.h: "performing any
	// operations on the file descriptor after it is imported results in
	// undefined behavior"); the model closes it then, keeping a
	// reference of its own to the file.
	FD int
	// Size is the size of the memory object, at most the file's.
	Size  uint64
	Flags uint32
}

// ExternalMemoryBufferDesc is CUDA_EXTERNAL_MEMORY_BUFFER_DESC.
type ExternalMemoryBufferDesc struct {
	Offset, Size uint64
	Flags        uint32 // must be 0
}

// ExternalMemory is a CUexternalMemory: memory of another driver or API
// imported into a context. It holds a reference to the imported file
// until DestroyExternalMemory. What it imports is either an opaque
// export of GPU memory (OpaqueMemory) or, on an integrated GPU, a
// dma-buf, attached and mapped for the GPU.
type ExternalMemory struct {
	Type ExternalMemoryHandleType
	Size uint64
	// Source names the imported file ("opaque:N", "dmabuf:N").
	Source string
	// Origin is the import call, with its time and thread.
	Origin string

	ctx  *Context
	file *kern.OpenFile
	// phys are the pages behind the object, in order.
	phys []mem.PhysRange
	// A dma-buf's attachment for the GPU and its mapping.
	buf *dmabuf.Buffer
	att *dmabuf.Attachment
	sgt *dma.SGTable

	destroyed bool
}

// Attachment is the GPU's attachment to an imported dma-buf; nil for an
// opaque import.
func (em *ExternalMemory) Attachment() *dmabuf.Attachment { return em.att }

// OpaqueMemory is an opaque file descriptor of GPU memory: what Vulkan's
// vkGetMemoryFdKHR gives with VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT
// for device memory of an NVIDIA GPU, the handle type CUDA's
// CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD imports (the CUDA samples'
// simpleVulkan does exactly this). It is a file of the kernel: passed by
// SCM_RIGHTS, dup'd and closed as any other, and it keeps the memory
// allocated until its last reference goes. The model has no Vulkan: the
// exporting program's memory is an allocation of cuMemAlloc
// (ExportOpaqueFD).
type OpaqueMemory struct {
	// Device is the GPU whose memory it is.
	Device string
	Addr   mem.GPUAddr
	Size   uint64
	// Pages are the VRAM behind the range.
	Pages []mem.PhysRange

	d   *Driver
	a   *alloc
	dev int
	id  int
}

// FileName names the file: "opaque:N".
func (o *OpaqueMemory) FileName() string { return fmt.Sprintf("opaque:%d", o.id) }

// Release drops the export's hold on the memory: memory the program
// freed meanwhile is freed now, by t.
func (o *OpaqueMemory) Release(t *sim.Proc) error { return o.d.dropExport(t, o.a, "opaque fd release") }

// ExportOpaqueFD exports [addr, addr+size) of device memory of c's GPU as
// an opaque file descriptor (OpaqueMemory), installed in the process's
// table. It stands for vkGetMemoryFdKHR(OPAQUE_FD) of the exporting API
// (see OpaqueMemory); the range must be a whole allocation of device
// memory of this context's process, or it is CUDA_ERROR_INVALID_VALUE.
// The host pays gpu.EnqueueCost (assumed: one ioctl).
func (c *Context) ExportOpaqueFD(p *sim.Proc, addr mem.GPUAddr, size uint64) (int, error) {
	const call = "vkGetMemoryFdKHR(OPAQUE_FD)"
	if err := c.check(call); err != nil {
		return -1, err
	}
	p.Sleep(gpu.EnqueueCost)
	pl := c.d.resolve(addr, size)
	switch {
	case pl.t.Kind != MemDevice || pl.a == nil || c.foreign(pl):
		return -1, failf(call, ErrorInvalidValue, "%v is not live device memory of process %s", addr, c.proc.name)
	case pl.t.Base != addr || pl.t.Size != size:
		return -1, failf(call, ErrorInvalidValue, "[%v +%#x] is not a whole allocation", addr, size)
	}
	_, phys, err := c.d.sys.Resolve(addr, size)
	if err != nil {
		return -1, wrap(call, err)
	}
	c.d.opaques++
	o := &OpaqueMemory{Device: c.dev.Name, Addr: addr, Size: size, Pages: phys, d: c.d, a: pl.a, dev: c.dev.Index, id: c.d.opaques}
	fd, err := c.proc.kp.Install(o)
	if err != nil {
		return -1, fail(call, ErrorOperatingSystem, err)
	}
	pl.a.exports++
	return fd, nil
}

// dropExport ends one export of a's memory (a dma-buf or an opaque fd,
// at its file's release, in thread t): when it was the last and the
// program freed the memory meanwhile, the memory goes now.
func (d *Driver) dropExport(t *sim.Proc, a *alloc, what string) error {
	a.exports--
	if a.exports > 0 || a.freedBy == "" {
		return nil
	}
	if t == nil {
		return fmt.Errorf("cuda: %s: freeing %v needs a thread", what, a.a.Addr)
	}
	if err := d.sys.Free(t, a.a.Addr); err != nil {
		return fmt.Errorf("cuda: %s: freeing %v: %w", what, a.a.Addr, err)
	}
	d.forget(a, a.freedBy)
	return nil
}

// ImportExternalMemory is cuImportExternalMemory. What it accepts is
// what the real driver does on the platform (cuda/doc.go has the table):
//
//   - OPAQUE_FD with an opaque fd of device memory (OpaqueMemory) of this
//     context's GPU, on any GPU: the object is that VRAM.
//   - OPAQUE_FD with a dma-buf fd, on an integrated GPU only (Jetson
//     Linux imports an NvBufSurface's dma-buf this way): the GPU attaches
//     to the buffer and maps it (dma_buf_attach, dma_buf_map_attachment,
//     with the exporter's cache maintenance for a non-coherent SoC), and
//     the object is the buffer's own pages: zero copy. On a discrete GPU
//     a dma-buf is not an opaque fd and the import is
//     CUDA_ERROR_INVALID_VALUE (assumed the code); the real alternatives
//     are cuMemHostRegister of the buffer's mmap, or V4L2 USERPTR
//     capture into pinned memory.
//   - The Windows handle types are CUDA_ERROR_NOT_SUPPORTED on Linux;
//     NVSCIBUF is not modelled (CUDA_ERROR_NOT_SUPPORTED); other values
//     CUDA_ERROR_INVALID_VALUE.
//
// A descriptor the process does not have, a size of 0 or past the file,
// or flags other than ExternalMemoryDedicated are
// CUDA_ERROR_INVALID_VALUE. On success the descriptor is closed (the
// driver owns it) and the driver keeps a reference to the file until
// DestroyExternalMemory. The host pays gpu.EnqueueCost (assumed) and
// whatever attaching and mapping a dma-buf cost.
func (c *Context) ImportExternalMemory(p *sim.Proc, desc ExternalMemoryHandleDesc) (*ExternalMemory, error) {
	const call = "cuImportExternalMemory"
	if err := c.check(call); err != nil {
		return nil, err
	}
	p.Sleep(gpu.EnqueueCost)
	switch desc.Type {
	case ExternalMemoryHandleTypeOpaqueFD:
	case ExternalMemoryHandleTypeOpaqueWin32, ExternalMemoryHandleTypeOpaqueWin32KMT, ExternalMemoryHandleTypeD3D12Heap,
		ExternalMemoryHandleTypeD3D12Resource, ExternalMemoryHandleTypeD3D11Resource, ExternalMemoryHandleTypeD3D11ResourceKMT:
		return nil, failf(call, ErrorNotSupported, "handle type %d is a Windows handle", desc.Type)
	case ExternalMemoryHandleTypeNvSciBuf:
		return nil, failf(call, ErrorNotSupported, "NVSCIBUF objects are not modelled")
	default:
		return nil, failf(call, ErrorInvalidValue, "handle type %d", desc.Type)
	}
	if desc.Flags&^ExternalMemoryDedicated != 0 || desc.Size == 0 {
		return nil, failf(call, ErrorInvalidValue, "size %#x, flags %#x", desc.Size, desc.Flags)
	}
	kp := c.proc.kp
	of, err := kp.OpenFile(call, desc.FD)
	if err != nil {
		return nil, fail(call, ErrorInvalidValue, err)
	}
	em := &ExternalMemory{Type: desc.Type, Size: desc.Size, Source: of.File().FileName(), ctx: c, Origin: origin(call, p.Now(), p)}
	switch f := of.File().(type) {
	case *OpaqueMemory:
		switch {
		case f.d != c.d || f.dev != c.dev.Index:
			return nil, failf(call, ErrorInvalidValue, "%s is memory of %s, not of %s", f.FileName(), f.Device, c.dev.Name)
		case desc.Size > f.Size:
			return nil, failf(call, ErrorInvalidValue, "size %#x is past %s's %#x", desc.Size, f.FileName(), f.Size)
		}
		if err := of.Get(); err != nil {
			return nil, fail(call, ErrorInvalidValue, err)
		}
		em.file, em.phys = of, f.Pages
	case *dmabuf.Buffer:
		if !c.d.integrated(c.dev.Index) {
			return nil, failf(call, ErrorInvalidValue, "%s is a dma-buf (of %s), not an opaque fd: a discrete GPU imports no dma-buf; register an mmap of it (cuMemHostRegister) or capture into pinned memory (V4L2 USERPTR)", f.FileName(), f.ExpName())
		}
		if desc.Size > f.Size() {
			return nil, failf(call, ErrorInvalidValue, "size %#x is past %s's %#x", desc.Size, f.FileName(), f.Size())
		}
		if err := c.importDMABuf(p, em, kp, desc.FD); err != nil {
			return nil, fail(call, ErrorInvalidValue, err)
		}
	default:
		return nil, failf(call, ErrorInvalidValue, "%s is not memory CUDA can import", of.File().FileName())
	}
	c.imports = append(c.imports, em)
	if err := kp.Close(p, desc.FD); err != nil {
		return nil, fail(call, ErrorOperatingSystem, err)
	}
	return em, nil
}

// importDMABuf gets the dma-buf behind fd, attaches the GPU to it and
// maps it: the object's pages are those of the mapping.
func (c *Context) importDMABuf(p *sim.Proc, em *ExternalMemory, kp *kern.Process, fd int) error {
	b, err := c.d.bufs.Get(p, kp, fd)
	if err != nil {
		return err
	}
	// The GPU driver maps the buffer as one scatter-gather table; like
	// the DRM drivers that import dma-bufs (drm/msm, accel/ivpu: "Set dma
	// max_segment_size", after DMA-API debug's "mapping sg segment
	// longer than device claims to support"), it lifts the 64 KiB
	// default segment limit of its device at probe. Assumed for nvgpu
	// and nvidia.ko, whose probe code is not cited here.
	dev := c.dev.DMA()
	if dev.MaxSegmentSize() < math.MaxUint32 {
		dev.SetMaxSegmentSize(math.MaxUint32)
	}
	att, err := b.Attach(p, dev, dmabuf.AttachOptions{})
	if err != nil {
		return errors.Join(err, b.Put(p))
	}
	sgt, err := att.Map(p, dma.Bidirectional)
	if err != nil {
		return errors.Join(err, att.Detach(p), b.Put(p))
	}
	em.buf, em.att, em.sgt, em.file = b, att, sgt, b.File()
	for _, sg := range sgt.SGL[:sgt.Nents] {
		em.phys = append(em.phys, mem.PhysRange{Start: sg.Phys(), Size: sg.Length})
	}
	return nil
}

// ExternalMemoryGetMappedBuffer is cuExternalMemoryGetMappedBuffer: a
// device pointer to [Offset, Offset+Size) of the object, at a new address
// of the GPU's window, which kernels and copies use as device memory:
// their loads, stores and copies are transfers of the DMA layer over the
// object's pages (the same pages, not a copy). It is freed with
// cuMemFree, which gives back the address only. A range past the object,
// a size of 0 or flags are CUDA_ERROR_INVALID_VALUE; a destroyed object
// CUDA_ERROR_INVALID_HANDLE. The host pays gpu.EnqueueCost (assumed).
func (c *Context) ExternalMemoryGetMappedBuffer(p *sim.Proc, em *ExternalMemory, desc ExternalMemoryBufferDesc) (mem.GPUAddr, error) {
	const call = "cuExternalMemoryGetMappedBuffer"
	if err := c.check(call); err != nil {
		return 0, err
	}
	p.Sleep(gpu.EnqueueCost)
	end := desc.Offset + desc.Size
	switch {
	case em == nil || em.destroyed || em.ctx.proc != c.proc:
		return 0, failf(call, ErrorInvalidHandle, "external memory destroyed or of another process")
	case desc.Size == 0 || desc.Flags != 0 || end < desc.Offset || end > em.Size:
		return 0, failf(call, ErrorInvalidValue, "[%#x +%#x] of %#x bytes, flags %#x", desc.Offset, desc.Size, em.Size, desc.Flags)
	}
	ga, err := c.dev.MapExternal(slicePhys(em.phys, desc.Offset, desc.Size), desc.Size)
	if err != nil {
		return 0, wrap(call, err)
	}
	c.d.record(c, p, fmt.Sprintf("%s(%s, %#x, %#x)", call, em.Source, desc.Offset, desc.Size), ga, MemDevice, 0)
	return ga.Addr, nil
}

// slicePhys is [off, off+size) of the ranges rs, in order.
func slicePhys(rs []mem.PhysRange, off, size uint64) []mem.PhysRange {
	var out []mem.PhysRange
	for _, r := range rs {
		if size == 0 {
			break
		}
		if off >= r.Size {
			off -= r.Size
			continue
		}
		n := min(r.Size-off, size)
		out = append(out, mem.PhysRange{Start: r.Start + mem.PhysAddr(off), Size: n})
		size -= n
		off = 0
	}
	return out
}

// DestroyExternalMemory is cuDestroyExternalMemory: the driver drops the
// imported file (for a dma-buf: unmaps and detaches the GPU first).
// Destroying the context (cuCtxDestroy, or the process's exit) destroys
// what it still has.
// Buffers mapped from it must be freed with cuMemFree by the program, as
// cuda.h says; the model leaves them in the map (using them after the
// exporter freed the pages is the program's bug). A second destroy is
// CUDA_ERROR_INVALID_HANDLE.
func (c *Context) DestroyExternalMemory(p *sim.Proc, em *ExternalMemory) error {
	const call = "cuDestroyExternalMemory"
	if err := c.check(call); err != nil {
		return err
	}
	if em == nil || em.destroyed || em.ctx.proc != c.proc {
		return failf(call, ErrorInvalidHandle, "external memory destroyed or of another process")
	}
	em.destroyed = true
	c.imports = slices.DeleteFunc(c.imports, func(x *ExternalMemory) bool { return x == em })
	if em.buf != nil {
		if err := errors.Join(em.att.Unmap(p, em.sgt, dma.Bidirectional), em.att.Detach(p), em.buf.Put(p)); err != nil {
			return fail(call, ErrorUnknown, err)
		}
		return nil
	}
	if err := em.file.Put(p); err != nil {
		return fail(call, ErrorUnknown, err)
	}
	return nil
}

package cuda

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/gpu"
	// Imported as kern: the package's tests name a gpu.Kernel builder kernel.
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// MemRangeHandleTypeDMABufFD is CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
// the one handle type of cuMemGetHandleForAddressRange.
const MemRangeHandleTypeDMABufFD = 0x1

// MemRangeFlagDMABufMappingTypePCIe is
// CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE: importers map the pages
// through BAR1 on PCIe. Accepted; the model's dma-buf lists VRAM pages
// either way.
const MemRangeFlagDMABufMappingTypePCIe = 0x1

// ExpName is the exp_name of the dma-bufs nvidia.ko exports, as the
// kernel's /proc/PID/fdinfo printed it for a cuMemGetHandleForAddressRange
// export on the lent H100 (driver 580.159.04, Linux 6.18, 2026-11-25):
// "nv_dmabuf", not the module's name.
const ExpName = "nv_dmabuf"

// DMABufPageSize is the granule of an exported range: the host page
// (cuMemGetHandleForAddressRange wants the range aligned to it).
const DMABufPageSize = mem.PageSize

// DMABuf is what the GPU driver keeps of a dma-buf it exported
// (nv-dmabuf.c's file private data): its size, the GPU memory it covers
// as physical ranges of VRAM, and the dmabuf.Buffer (struct dma_buf,
// with nvidia.ko as its exporter) whose file is behind the descriptors.
// Descriptors, dup, SCM_RIGHTS and close are the kernel's; attach and
// map to an importer's addresses, fences and reservations are package
// dmabuf's. The exporter's release runs when the file's last reference
// goes (the last close, or the exit of the last process holding it);
// until then it keeps the exported memory allocated, even if the
// program frees it or its context is destroyed (the exporter holds a
// reference).
type DMABuf struct {
	// Exporter is the exporting driver's name ("nvidia").
	Exporter string
	// Device is the GPU whose memory it is.
	Device string
	// Addr and Size are the exported range.
	Addr mem.GPUAddr
	Size uint64
	// Pages are the VRAM behind the range, in address order.
	Pages []mem.PhysRange
	// Origin is the export call, with its time and thread.
	Origin string

	d   *Driver
	a   *alloc
	buf *dmabuf.Buffer
	// bars are the BAR1 mappings of the importers' mapped tables.
	bars map[*dma.SGTable]*gpu.BARMapping
}

// FileName names the dma-buf's file: "dmabuf:N", N its inode number in
// the dma-buf layer (its export number when only the GPU driver
// exports), which /proc/PID/fdinfo shows.
func (b *DMABuf) FileName() string { return b.buf.FileName() }

// Buffer is the dma-buf as package dmabuf has it: what importers
// attach and map, and whose reservation object holds fences.
func (b *DMABuf) Buffer() *dmabuf.Buffer { return b.buf }

// File is the open file: its references and the kernel's Get and Put.
func (b *DMABuf) File() *kern.OpenFile { return b.buf.File() }

// Refs is the number of references to the dma-buf's file (file_count):
// descriptors in every process and references taken with Get.
func (b *DMABuf) Refs() int { return b.buf.Refs() }

// Released reports whether the last reference went.
func (b *DMABuf) Released() bool { return b.buf.Released() }

// release is the exporter's dma_buf_ops.release, run by the kernel when
// the file's last reference goes, in thread t: memory the program freed
// while it was exported is freed now, by t (gpu.System.Free: its wait
// and cost).
func (b *DMABuf) release(t *sim.Proc) error { return b.d.dropExport(t, b.a, "dma-buf release") }

// errNotSupp is the kernel's ENOTSUPP (524), which nv_dma_buf_mmap
// returns: not a user-space errno, so package syscall has no name for it.
const errNotSupp = syscall.Errno(524)

// nvExporter is nvidia.ko's dma_buf_ops (kernel-open/nvidia/nv-dmabuf.c)
// for one export.
type nvExporter struct{ b *DMABuf }

// Attach accepts any importer (nv_dma_buf_attach's peer-to-peer checks
// are not modelled).
func (e nvExporter) Attach(*sim.Proc, *dmabuf.Attachment) error { return nil }

// Detach has nothing to undo.
func (e nvExporter) Detach(*sim.Proc, *dmabuf.Attachment) {}

// MapDMABuf is nv_dma_buf_map with the PCIe mapping type: the export's
// range is mapped through its GPU's BAR1 (64 KiB pages, shared with
// other mappings of the same VRAM; no room is ENOMEM), and each run of
// BAR1 addresses is mapped for the importer as a peer's memory
// (dma_map_resource: no cache maintenance, an IOVA through the
// importer's IOMMU domain). The importer's DMA to those addresses lands
// in the VRAM behind them (gpu.Aperture is a peer window of the DMA
// layer). A range that does not map undoes the others and fails with
// EIO.
func (e nvExporter) MapDMABuf(p *sim.Proc, a *dmabuf.Attachment, dir dma.Direction) (*dma.SGTable, error) {
	dev := a.Device()
	g := e.b.d.sys.Devices[e.b.a.a.Device]
	bm, err := g.BAR1().Map(e.b.Addr, e.b.Size)
	if err != nil {
		return nil, fmt.Errorf("nvidia: BAR1 for %s: %v: %w", dev.Name(), err, syscall.ENOMEM)
	}
	runs := barRuns(bm, e.b.Addr, e.b.Size)
	sgt := dma.SGAllocTable(len(runs))
	for i, r := range runs {
		sg := &sgt.SGL[i]
		sg.SetPage(r.Start, r.Size, 0)
		addr := dev.MapResource(p, r.Start, r.Size, dir)
		if dev.MappingError(addr) {
			for j := range sgt.SGL[:i] {
				dev.UnmapResource(p, sgt.SGL[j].DMAAddress, sgt.SGL[j].DMALength, dir)
			}
			_ = g.BAR1().Unmap(bm) // the mapping just made: cannot fail
			return nil, fmt.Errorf("nvidia: mapping %v for %s: %w", r, dev.Name(), syscall.EIO)
		}
		sg.DMAAddress, sg.DMALength = addr, r.Size
	}
	sgt.Nents = len(runs)
	if e.b.bars == nil {
		e.b.bars = map[*dma.SGTable]*gpu.BARMapping{}
	}
	e.b.bars[sgt] = bm
	return sgt, nil
}

// barRuns are the BAR1 addresses of [addr, addr+size) in m, in address
// order, adjacent pages merged.
func barRuns(m *gpu.BARMapping, addr mem.GPUAddr, size uint64) []mem.PhysRange {
	var runs []mem.PhysRange
	end := addr + mem.GPUAddr(size)
	for _, pg := range m.Pages {
		lo, hi := max(pg.GPU, addr), min(pg.GPU+gpu.BARPageSize, end)
		if lo >= hi {
			continue
		}
		start, n := pg.BAR+mem.PhysAddr(lo-pg.GPU), uint64(hi-lo)
		if k := len(runs); k > 0 && runs[k-1].Start+mem.PhysAddr(runs[k-1].Size) == start {
			runs[k-1].Size += n
		} else {
			runs = append(runs, mem.PhysRange{Start: start, Size: n})
		}
	}
	return runs
}

// UnmapDMABuf is nv_dma_buf_unmap: dma_unmap_resource of each range,
// then the BAR1 mapping goes.
func (e nvExporter) UnmapDMABuf(p *sim.Proc, a *dmabuf.Attachment, sgt *dma.SGTable, dir dma.Direction) {
	for _, sg := range sgt.SGL[:sgt.Nents] {
		a.Device().UnmapResource(p, sg.DMAAddress, sg.DMALength, dir)
	}
	if bm := e.b.bars[sgt]; bm != nil {
		delete(e.b.bars, sgt)
		_ = e.b.d.sys.Devices[e.b.a.a.Device].BAR1().Unmap(bm) // ours, live
	}
}

// BeginCPUAccess: nvidia.ko has no begin_cpu_access (dma-buf.c then
// does nothing): the CPU does not cache VRAM.
func (e nvExporter) BeginCPUAccess(*sim.Proc, *dmabuf.Buffer, dma.Direction) error { return nil }

// EndCPUAccess: nor end_cpu_access.
func (e nvExporter) EndCPUAccess(*sim.Proc, *dmabuf.Buffer, dma.Direction) error { return nil }

// Mmap is nv_dma_buf_mmap: refused with ENOTSUPP (a discrete GPU's
// memory is not mapped for the CPU through its dma-buf).
func (e nvExporter) Mmap(*sim.Proc, *dmabuf.Buffer) (mem.VirtAddr, error) {
	return 0, fmt.Errorf("nvidia: mmap of a dma-buf of GPU memory: %w", errNotSupp)
}

// Vmap: nvidia.ko has no vmap (dma_buf_vmap: EINVAL).
func (e nvExporter) Vmap(*sim.Proc, *dmabuf.Buffer) (mem.VirtAddr, error) {
	return 0, fmt.Errorf("nvidia: vmap: %w", dmabuf.ErrNoOp)
}

// Vunmap has nothing to undo.
func (e nvExporter) Vunmap(*sim.Proc, *dmabuf.Buffer, mem.VirtAddr) {}

// Release is nv_dma_buf_release.
func (e nvExporter) Release(t *sim.Proc, _ *dmabuf.Buffer) error { return e.b.release(t) }

// MemGetHandleForAddressRange is cuMemGetHandleForAddressRange with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: it exports [addr, addr+size) of
// device memory as a dma-buf and returns a new file descriptor of the
// process referring to it (the lowest free, as open(2) gives), in the
// kernel process's table. The range must lie in one allocation of
// device memory and be aligned to the host page; other memory, handle
// types or flags are CUDA_ERROR_INVALID_VALUE; an integrated GPU
// CUDA_ERROR_NOT_SUPPORTED (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0
// there); a full descriptor table CUDA_ERROR_OPERATING_SYSTEM (assumed:
// the driver passes dma_buf_fd's EMFILE on so). The host pays
// gpu.EnqueueCost (assumed: one ioctl into nvidia.ko).
func (c *Context) MemGetHandleForAddressRange(p *sim.Proc, addr mem.GPUAddr, size uint64, handleType int, flags uint64) (int, error) {
	const call = "cuMemGetHandleForAddressRange"
	if err := c.check(call); err != nil {
		return -1, err
	}
	p.Sleep(gpu.EnqueueCost)
	pl := c.d.resolve(addr, size)
	var err error
	switch {
	case handleType != MemRangeHandleTypeDMABufFD || flags&^MemRangeFlagDMABufMappingTypePCIe != 0:
		err = failf(call, ErrorInvalidValue, "handle type %d, flags %#x", handleType, flags)
	case c.dev.GPU.Spec.Integrated:
		err = failf(call, ErrorNotSupported, "%s is integrated: no dma-buf export", c.dev.Name)
	case pl.t.Kind == MemFreed:
		err = failf(call, ErrorInvalidValue, "%v was freed by %s", addr, pl.t.Freed)
	case c.foreign(pl):
		err = failf(call, ErrorInvalidValue, "%v belongs to process %s", addr, pl.t.Process)
	case pl.t.Kind != MemDevice || !pl.inside:
		err = failf(call, ErrorInvalidValue, "[%v +%#x] is not inside one allocation of device memory", addr, size)
	case uint64(addr)%DMABufPageSize != 0 || size%DMABufPageSize != 0:
		err = failf(call, ErrorInvalidValue, "[%v +%#x] is not aligned to %d B pages", addr, size, DMABufPageSize)
	}
	c.observe(p, OpExport, call, addr, size, false, pl, err)
	if err != nil {
		return -1, err
	}
	_, phys, rerr := c.d.sys.Resolve(addr, size)
	if rerr != nil {
		return -1, wrap(call, rerr)
	}
	b := &DMABuf{
		Exporter: "nvidia", Device: c.d.sys.Devices[pl.t.Device].Name, Addr: addr, Size: size, Pages: phys,
		Origin: origin(call, p.Now(), p), d: c.d, a: pl.a,
	}
	if b.buf, err = c.d.bufs.Export(p, dmabuf.ExportInfo{ExpName: ExpName, Ops: nvExporter{b}, Size: size, Priv: b}); err != nil {
		return -1, fail(call, ErrorOperatingSystem, err)
	}
	fd, err := b.buf.FD(c.proc.kp)
	if err != nil {
		// dma_buf_fd failed (EMFILE): the driver frees the export and
		// says the operating system refused.
		return -1, fail(call, ErrorOperatingSystem, err)
	}
	pl.a.exports++
	return fd, nil
}

// DMABuf is the dma-buf fd refers to in the process (dma_buf_get), or
// syscall.EBADF.
func (pr *Process) DMABuf(fd int) (*DMABuf, error) { return DMABufOf(pr.kp, fd) }

// DMABufOf is dma_buf_get(fd) in kernel process kp, which need not use
// CUDA (an importer that received the descriptor): the dma-buf behind
// fd, syscall.EBADF for a closed descriptor, syscall.EINVAL for a file
// that is not a dma-buf of this package.
func DMABufOf(kp *kern.Process, fd int) (*DMABuf, error) {
	f, err := kp.File("dma_buf_get", fd)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	buf, ok := f.(*dmabuf.Buffer)
	var b *DMABuf
	if ok {
		b, ok = buf.Priv().(*DMABuf)
	}
	if !ok {
		return nil, fmt.Errorf("cuda: dma_buf_get(%d) in %s: %s is not a dma-buf: %w", fd, kp.Name(), f.FileName(), syscall.EINVAL)
	}
	return b, nil
}

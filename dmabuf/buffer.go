package dmabuf

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ErrNotDMABuf is wrapped by Get for a descriptor whose file is not a
// dma-buf (dma_buf_get's check of file->f_op: EINVAL).
var ErrNotDMABuf = fmt.Errorf("not a dma-buf: %w", syscall.EINVAL)

// Layer is a machine's DMA-BUF subsystem (drivers/dma-buf): it numbers
// the buffers' files (the dma-buf pseudo-filesystem's inodes) and the
// fence contexts (dma_fence_context_alloc), holds the heaps of
// /dev/dma_heap, and delivers every Event.
type Layer struct {
	eng *sim.Engine
	// Hooks receives every Event.
	Hooks sim.Hooks[Event]

	// ino is the last dma-buf inode number given, syncs the last sync
	// file's number, ctx the last fence context, fences the last fence
	// id.
	ino    int
	syncs  int
	ctx    uint64
	fences uint64
	heaps  []*Heap
}

// New returns the DMA-BUF layer of a machine running on eng. It has no
// heaps until AddHeap.
func New(eng *sim.Engine) *Layer { return &Layer{eng: eng} }

// Engine is the engine the layer runs on.
func (l *Layer) Engine() *sim.Engine { return l.eng }

// Exporter is struct dma_buf_ops: what the driver that owns a buffer's
// memory does when importers and the CPU use it. Each method takes the
// calling thread first, which pays what the operation costs. An
// exporter that lacks an operation returns an error (Linux: EINVAL when
// the op is NULL, or the driver's own code, as nvidia's -ENOTSUPP for
// mmap).
type Exporter interface {
	// Attach is dma_buf_ops.attach: the exporter learns of a new
	// importer (it may refuse a device it cannot serve).
	Attach(p *sim.Proc, a *Attachment) error
	// Detach is dma_buf_ops.detach.
	Detach(p *sim.Proc, a *Attachment)
	// MapDMABuf is dma_buf_ops.map_dma_buf: an sg table of the buffer
	// mapped for a.Device() in direction dir, its DMA addresses the
	// device's own (IOVAs of its IOMMU domain when it has one).
	MapDMABuf(p *sim.Proc, a *Attachment, dir dma.Direction) (*dma.SGTable, error)
	// UnmapDMABuf is dma_buf_ops.unmap_dma_buf.
	UnmapDMABuf(p *sim.Proc, a *Attachment, sgt *dma.SGTable, dir dma.Direction)
	// BeginCPUAccess is dma_buf_ops.begin_cpu_access: the cache
	// maintenance that lets the CPU see what devices wrote.
	BeginCPUAccess(p *sim.Proc, b *Buffer, dir dma.Direction) error
	// EndCPUAccess is dma_buf_ops.end_cpu_access: the cache maintenance
	// that lets devices see what the CPU wrote.
	EndCPUAccess(p *sim.Proc, b *Buffer, dir dma.Direction) error
	// Mmap is dma_buf_ops.mmap: the address at which the model's CPU
	// reaches the buffer's pages (the model addresses memory by kernel
	// virtual addresses; the process's VMA records it).
	Mmap(p *sim.Proc, b *Buffer) (mem.VirtAddr, error)
	// Vmap is dma_buf_ops.vmap: a kernel virtual mapping of the whole
	// buffer; Vunmap undoes it.
	Vmap(p *sim.Proc, b *Buffer) (mem.VirtAddr, error)
	Vunmap(p *sim.Proc, b *Buffer, va mem.VirtAddr)
	// Release is dma_buf_ops.release, run once, when the buffer's file
	// loses its last reference.
	Release(p *sim.Proc, b *Buffer) error
}

// ExportInfo is struct dma_buf_export_info.
type ExportInfo struct {
	// ExpName names the exporter (exp_name, shown in
	// /sys/kernel/debug/dma_buf/bufinfo and /proc/PID/fdinfo).
	ExpName string
	// Ops is the exporter.
	Ops Exporter
	// Size is the buffer's size in bytes, a multiple of the page.
	Size uint64
	// Priv is the exporter's own object (dma_buf->priv).
	Priv any
}

// Buffer is struct dma_buf: memory one driver exports and others
// import, shared through a file. It is a kernel.File: descriptors to it
// live in processes' tables (FD), pass between processes by SCM_RIGHTS
// (kernel.Process.SendFD) and close as any file's; importers take
// references with Get. When the last reference goes the exporter's
// Release runs, once. Each buffer has a reservation object (Resv) with
// the fences of the work that uses it.
type Buffer struct {
	l    *Layer
	info ExportInfo
	ino  int
	file *kernel.OpenFile
	resv *Resv
	// attachments are the importers attached, in attach order; natt
	// numbers them (Attachment.id).
	attachments []*Attachment
	natt        int
	// vmaps counts dma_buf_vmap calls not yet undone (vmapping_counter);
	// vaddr is the mapping they share.
	vmaps int
	vaddr mem.VirtAddr
	// released is set when Release ran.
	released bool
}

// Export is dma_buf_export: a buffer for info's exporter. It has no
// file until FD installs it in a process (dma_buf_fd); a buffer never
// installed is never released.
func (l *Layer) Export(p *sim.Proc, info ExportInfo) (*Buffer, error) {
	var err error
	switch {
	case info.Ops == nil:
		err = fmt.Errorf("dma_buf_export(%s): no ops: %w", info.ExpName, syscall.EINVAL)
	case info.Size == 0 || info.Size%mem.PageSize != 0:
		err = fmt.Errorf("dma_buf_export(%s): size %#x is not whole pages: %w", info.ExpName, info.Size, syscall.EINVAL)
	}
	if err != nil {
		return nil, err
	}
	l.ino++
	b := &Buffer{l: l, info: info, ino: l.ino}
	b.resv = &Resv{l: l, name: b.FileName()}
	l.emit(p, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpExport, Buffer: b.FileName(), Exporter: info.ExpName, Size: info.Size, Pages: Pages(b)})
	return b, nil
}

// FileName names the buffer's file: "dmabuf:N", N its inode number.
func (b *Buffer) FileName() string { return fmt.Sprintf("dmabuf:%d", b.ino) }

// Size is the buffer's size.
func (b *Buffer) Size() uint64 { return b.info.Size }

// ExpName is the exporter's name.
func (b *Buffer) ExpName() string { return b.info.ExpName }

// Exporter is the exporter's operations.
func (b *Buffer) Exporter() Exporter { return b.info.Ops }

// Priv is the exporter's own object (dma_buf->priv).
func (b *Buffer) Priv() any { return b.info.Priv }

// Resv is the buffer's reservation object (dma_buf->resv).
func (b *Buffer) Resv() *Resv { return b.resv }

// File is the buffer's open file (dma_buf->file), nil until FD.
func (b *Buffer) File() *kernel.OpenFile { return b.file }

// Refs is the number of references to the buffer's file (file_count).
func (b *Buffer) Refs() int {
	if b.file == nil {
		return 0
	}
	return b.file.Refs()
}

// Released reports whether the last reference went and the exporter's
// Release ran.
func (b *Buffer) Released() bool { return b.released }

// Attachments lists the importers attached, in attach order.
func (b *Buffer) Attachments() []*Attachment { return append([]*Attachment(nil), b.attachments...) }

// FD is dma_buf_fd: the buffer's file, created now, gets a descriptor
// in proc. Further descriptors come from the kernel (dup, SCM_RIGHTS);
// a second FD is EEXIST.
func (b *Buffer) FD(proc *kernel.Process) (int, error) {
	if b.file != nil {
		return -1, fmt.Errorf("dma_buf_fd(%s): it has a file; dup or send a descriptor of it: %w", b.FileName(), syscall.EEXIST)
	}
	fd, err := proc.Install(b)
	if err != nil {
		return -1, fmt.Errorf("dma_buf_fd(%s): %w", b.FileName(), err)
	}
	if b.file, err = proc.OpenFile("dma_buf_fd", fd); err != nil {
		return -1, fmt.Errorf("dma_buf_fd(%s): %w", b.FileName(), err)
	}
	return fd, nil
}

// Release is file_operations.release of the buffer's file
// (dma_buf_file_release → dma_buf_release): the exporter's release, run
// once, in t. Attachments still present are a bug Linux WARNs about
// (the importer dropped its reference while attached); the event's Warn
// says so.
func (b *Buffer) Release(t *sim.Proc) error {
	if b.released {
		return fmt.Errorf("release of %s: twice: %w", b.FileName(), syscall.EINVAL)
	}
	b.released = true
	warn := ""
	if n := len(b.attachments); n > 0 {
		mapped := 0
		for _, a := range b.attachments {
			if a.sgt != nil {
				mapped++
			}
		}
		warn = fmt.Sprintf("released with %d attachment(s), %d mapped", n, mapped)
	}
	b.resv.fences = nil
	err := b.info.Ops.Release(t, b)
	b.l.emit(t, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpRelease, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Warn: warn}.fail(err))
	if err != nil {
		return fmt.Errorf("dma-buf %s (%s) release: %w", b.FileName(), b.info.ExpName, err)
	}
	return nil
}

// Get is dma_buf_get(fd) in process proc, called by the driver thread
// t: the buffer behind fd, with a reference the caller drops with Put.
// EBADF for a descriptor proc does not have (a number passed as plain
// data rather than by SCM_RIGHTS, a closed one), ErrNotDMABuf for
// another kind of file.
func (l *Layer) Get(t *sim.Proc, proc *kernel.Process, fd int) (*Buffer, error) {
	b, err := l.get(proc, fd)
	if err != nil {
		// Reported too: a descriptor used in a process that does not
		// own it is a bug the checker names.
		l.emit(t, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpGet, Process: proc.Name(), FD: fd}.fail(err))
		return nil, err
	}
	l.emit(t, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpGet, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Process: proc.Name(), FD: fd})
	return b, nil
}

func (l *Layer) get(proc *kernel.Process, fd int) (*Buffer, error) {
	of, err := proc.OpenFile("dma_buf_get", fd)
	if err != nil {
		return nil, fmt.Errorf("dmabuf: %w", err)
	}
	b, ok := of.File().(*Buffer)
	if !ok || b.l != l {
		return nil, fmt.Errorf("dmabuf: dma_buf_get(%d) in %s: %s: %w", fd, proc.Name(), of.File().FileName(), ErrNotDMABuf)
	}
	if err := of.Get(); err != nil {
		return nil, fmt.Errorf("dmabuf: dma_buf_get(%d) in %s: %w", fd, proc.Name(), err)
	}
	return b, nil
}

// Put is dma_buf_put, in thread t: it drops a reference Get took; the
// last reference releases the buffer.
func (b *Buffer) Put(t *sim.Proc) error {
	if b.file == nil {
		return fmt.Errorf("dma_buf_put(%s): no file: %w", b.FileName(), syscall.EINVAL)
	}
	b.l.emit(t, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpPut, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size})
	if err := b.file.Put(t); err != nil {
		return fmt.Errorf("dma_buf_put: %w", err)
	}
	return nil
}

// AttachOptions say what the importing driver needs of a mapping.
type AttachOptions struct {
	// Contiguous: the importer's hardware takes one DMA address range
	// (no scatter-gather), so a mapping whose DMA addresses are not one
	// contiguous range of the buffer's size is refused with EFAULT, as
	// videobuf2-dma-contig's vb2_dc_map_dmabuf does ("contiguous chunk
	// is too small"). Through an IOMMU any buffer is contiguous in
	// IOVA space; without one only physically contiguous memory (a CMA
	// heap's) is.
	Contiguous bool
}

// Attachment is struct dma_buf_attachment: one importing device's link
// to a buffer.
type Attachment struct {
	b   *Buffer
	dev *dma.Device
	opt AttachOptions
	// sgt and dir are the current mapping, nil when unmapped.
	sgt *dma.SGTable
	dir dma.Direction
	// detached is set by Detach.
	detached bool
	// id numbers the attachment among its buffer's, for events.
	id int
	// Priv is the exporter's per-attachment state (attach->priv).
	Priv any
}

// Buffer is the buffer attached.
func (a *Attachment) Buffer() *Buffer { return a.b }

// Device is the importing device.
func (a *Attachment) Device() *dma.Device { return a.dev }

// Mapped is the current mapping and its direction (nil when unmapped).
func (a *Attachment) Mapped() (*dma.SGTable, dma.Direction) { return a.sgt, a.dir }

// Attach is dma_buf_attach: dev becomes an importer of b. The importer
// must hold a reference (Get) for as long as it stays attached.
func (b *Buffer) Attach(p *sim.Proc, dev *dma.Device, opt AttachOptions) (*Attachment, error) {
	b.natt++
	a := &Attachment{b: b, dev: dev, opt: opt, id: b.natt}
	var err error
	if b.released {
		err = fmt.Errorf("dma_buf_attach(%s, %s): released: %w", b.FileName(), dev.Name(), syscall.EBADF)
	} else if err = b.info.Ops.Attach(p, a); err != nil {
		err = fmt.Errorf("dma_buf_attach(%s, %s): %w", b.FileName(), dev.Name(), err)
	}
	b.l.emit(p, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpAttach, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Device: dev.Name(), Attachment: a.id}.fail(err))
	if err != nil {
		return nil, err
	}
	b.attachments = append(b.attachments, a)
	return a, nil
}

// Detach is dma_buf_detach. A mapping still there is unmapped first
// (the event's Warn says so), as dma_buf_detach does with the table it
// cached.
func (a *Attachment) Detach(p *sim.Proc) error {
	b := a.b
	if a.detached {
		// Reported too: a second detach is a use after detach.
		err := fmt.Errorf("dma_buf_detach(%s, %s): not attached: %w", b.FileName(), a.dev.Name(), syscall.EINVAL)
		b.l.emit(p, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpDetach, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Device: a.dev.Name(), Attachment: a.id}.fail(err))
		return err
	}
	warn := ""
	if a.sgt != nil {
		warn = "detached while mapped"
		b.info.Ops.UnmapDMABuf(p, a, a.sgt, a.dir)
		a.sgt = nil
	}
	b.info.Ops.Detach(p, a)
	a.detached = true
	for i, x := range b.attachments {
		if x == a {
			b.attachments = append(b.attachments[:i], b.attachments[i+1:]...)
			break
		}
	}
	b.l.emit(p, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpDetach, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Device: a.dev.Name(), Attachment: a.id, Warn: warn})
	return nil
}

// Map is dma_buf_map_attachment: the exporter's sg table of the buffer,
// mapped for the importer in direction dir. As for an importer that is
// not dynamic, it first waits for the KERNEL fences of the buffer
// (memory management moving it). One mapping per attachment at a time
// (EBUSY for a second); EINVAL after Detach. A Contiguous importer gets
// EFAULT for a table that is not one DMA range (the mapping undone).
func (a *Attachment) Map(p *sim.Proc, dir dma.Direction) (*dma.SGTable, error) {
	b := a.b
	var sgt *dma.SGTable
	var err error
	switch {
	case a.detached:
		err = syscall.EINVAL
	case a.sgt != nil:
		err = syscall.EBUSY
	default:
		if _, err = b.resv.WaitTimeout(p, UsageKernel, MaxScheduleTimeout); err == nil {
			sgt, err = b.info.Ops.MapDMABuf(p, a, dir)
		}
	}
	if err == nil && a.opt.Contiguous {
		if n := ContiguousSize(sgt); n < b.info.Size {
			b.info.Ops.UnmapDMABuf(p, a, sgt, dir)
			sgt, err = nil, fmt.Errorf("contiguous chunk is too small %d/%d: %w", n, b.info.Size, syscall.EFAULT)
		}
	}
	if err != nil {
		err = fmt.Errorf("dma_buf_map_attachment(%s, %s, %v): %w", b.FileName(), a.dev.Name(), dir, err)
	}
	e := Event{Op: OpMap, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Device: a.dev.Name(), Dir: dir, Attachment: a.id}.fail(err)
	if sgt != nil {
		e.Nents = sgt.Nents
		if sgt.Nents > 0 {
			e.Addr = sgt.SGL[0].DMAAddress
		}
	}
	b.l.emit(p, e)
	if err != nil {
		return nil, err
	}
	a.sgt, a.dir = sgt, dir
	return sgt, nil
}

// Unmap is dma_buf_unmap_attachment of the table Map returned.
func (a *Attachment) Unmap(p *sim.Proc, sgt *dma.SGTable, dir dma.Direction) error {
	b := a.b
	var err error
	switch {
	case a.sgt == nil || sgt != a.sgt:
		err = fmt.Errorf("dma_buf_unmap_attachment(%s, %s): table not mapped: %w", b.FileName(), a.dev.Name(), syscall.EINVAL)
	default:
		b.info.Ops.UnmapDMABuf(p, a, sgt, dir)
		a.sgt = nil
	}
	b.l.emit(p, Event{Op: OpUnmap, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Device: a.dev.Name(), Dir: dir, Attachment: a.id}.fail(err))
	return err
}

// ContiguousSize is vb2_dc_get_contiguous_size: how many bytes from the
// table's first DMA address are contiguous in the device's address
// space.
func ContiguousSize(sgt *dma.SGTable) uint64 {
	if sgt == nil || sgt.Nents == 0 {
		return 0
	}
	expected, size := sgt.SGL[0].DMAAddress, uint64(0)
	for _, s := range sgt.SGL[:sgt.Nents] {
		if s.DMAAddress != expected {
			break
		}
		expected += mem.DMAAddr(s.DMALength)
		size += s.DMALength
	}
	return size
}

// writes says whether CPU or device access in direction dir writes the
// buffer (dma_buf_begin_cpu_access's write).
func writes(dir dma.Direction) bool { return dir == dma.Bidirectional || dir == dma.ToDevice }

// BeginCPUAccess is dma_buf_begin_cpu_access: the CPU is about to read
// (FromDevice), write (ToDevice) or both (Bidirectional). It waits for
// the fences a CPU reader or writer must (dma_resv_usage_rw), then the
// exporter does the cache maintenance its importers need.
func (b *Buffer) BeginCPUAccess(p *sim.Proc, dir dma.Direction) error {
	_, err := b.resv.WaitTimeout(p, UsageRW(writes(dir)), MaxScheduleTimeout)
	if err == nil {
		err = b.info.Ops.BeginCPUAccess(p, b, dir)
	}
	if err != nil {
		err = fmt.Errorf("dma_buf_begin_cpu_access(%s, %v): %w", b.FileName(), dir, err)
	}
	b.l.emit(p, Event{Op: OpBeginCPU, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Dir: dir}.fail(err))
	return err
}

// EndCPUAccess is dma_buf_end_cpu_access.
func (b *Buffer) EndCPUAccess(p *sim.Proc, dir dma.Direction) error {
	err := b.info.Ops.EndCPUAccess(p, b, dir)
	if err != nil {
		err = fmt.Errorf("dma_buf_end_cpu_access(%s, %v): %w", b.FileName(), dir, err)
	}
	b.l.emit(p, Event{Op: OpEndCPU, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Dir: dir}.fail(err))
	return err
}

// The flags of DMA_BUF_IOCTL_SYNC and of the sync-file ioctls
// (include/uapi/linux/dma-buf.h).
const (
	SyncRead  = 1 << 0 // DMA_BUF_SYNC_READ
	SyncWrite = 2 << 0 // DMA_BUF_SYNC_WRITE
	SyncRW    = SyncRead | SyncWrite
	SyncStart = 0 << 2 // DMA_BUF_SYNC_START
	SyncEnd   = 1 << 2 // DMA_BUF_SYNC_END
)

// Sync is DMA_BUF_IOCTL_SYNC on the buffer's file: SyncStart or SyncEnd
// with SyncRead, SyncWrite or both; other flags are EINVAL.
func (b *Buffer) Sync(p *sim.Proc, flags uint64) error {
	if flags&^(SyncRW|SyncEnd) != 0 || flags&SyncRW == 0 {
		return fmt.Errorf("DMA_BUF_IOCTL_SYNC(%s, %#x): %w", b.FileName(), flags, syscall.EINVAL)
	}
	dir := dma.Bidirectional
	switch flags & SyncRW {
	case SyncRead:
		dir = dma.FromDevice
	case SyncWrite:
		dir = dma.ToDevice
	}
	if flags&SyncEnd != 0 {
		return b.EndCPUAccess(p, dir)
	}
	return b.BeginCPUAccess(p, dir)
}

// Mmap is mmap(2) of the buffer's file by process proc, from thread p:
// a VMA of proc (named after the file, holding a file reference until
// it is unmapped or proc exits) at the address the exporter gives.
func (b *Buffer) Mmap(p *sim.Proc, proc *kernel.Process) (mem.VirtAddr, error) {
	va, err := b.mmap(p, proc)
	if err != nil {
		err = fmt.Errorf("mmap(%s) in %s: %w", b.FileName(), proc.Name(), err)
	}
	b.l.emit(p, Event{Op: OpMmap, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Process: proc.Name()}.fail(err))
	return va, err
}

func (b *Buffer) mmap(p *sim.Proc, proc *kernel.Process) (mem.VirtAddr, error) {
	if b.file == nil || b.released {
		return 0, syscall.EBADF
	}
	if proc.Exited() {
		return 0, kernel.ErrExited
	}
	va, err := b.info.Ops.Mmap(p, b)
	if err != nil {
		return 0, err
	}
	if err := b.file.Get(); err != nil {
		return 0, err
	}
	of := b.file
	if err := proc.MM.Map(kernel.VMA{Start: va, Size: b.info.Size, Name: b.FileName(), File: b, Close: of.Put}); err != nil {
		_ = of.Put(p)
		return 0, err
	}
	return va, nil
}

// Munmap is munmap(2) of the mapping Mmap made in proc at va: it drops
// the mapping's file reference (which may release the buffer).
func (b *Buffer) Munmap(p *sim.Proc, proc *kernel.Process, va mem.VirtAddr) error {
	v, err := proc.MM.Unmap(va)
	if err == nil && v.File != File(b) {
		err = fmt.Errorf("%v maps %s, not %s: %w", va, v.Name, b.FileName(), syscall.EINVAL)
		_ = proc.MM.Map(v)
	}
	if err == nil && v.Close != nil {
		err = v.Close(p)
	}
	if err != nil {
		err = fmt.Errorf("munmap(%s) in %s: %w", b.FileName(), proc.Name(), err)
	}
	b.l.emit(p, Event{Op: OpMunmap, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size, Process: proc.Name()}.fail(err))
	return err
}

// File is kernel.File, named here so that Munmap can compare a VMA's
// file with the buffer.
type File = kernel.File

// Vmap is dma_buf_vmap: a kernel virtual address of the whole buffer,
// shared by every vmap until the last Vunmap.
func (b *Buffer) Vmap(p *sim.Proc) (mem.VirtAddr, error) {
	var err error
	switch {
	case b.released:
		err = syscall.EBADF
	case b.vmaps == 0:
		b.vaddr, err = b.info.Ops.Vmap(p, b)
	}
	if err != nil {
		err = fmt.Errorf("dma_buf_vmap(%s): %w", b.FileName(), err)
	} else {
		b.vmaps++
	}
	b.l.emit(p, Event{Op: OpVmap, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size}.fail(err))
	return b.vaddr, err
}

// Vunmap is dma_buf_vunmap of the address Vmap returned.
func (b *Buffer) Vunmap(p *sim.Proc, va mem.VirtAddr) error {
	var err error
	switch {
	case b.vmaps == 0 || va != b.vaddr:
		err = fmt.Errorf("dma_buf_vunmap(%s, %v): not vmapped: %w", b.FileName(), va, syscall.EINVAL)
	default:
		b.vmaps--
		if b.vmaps == 0 {
			b.info.Ops.Vunmap(p, b, va)
			b.vaddr = 0
		}
	}
	b.l.emit(p, Event{Op: OpVunmap, Buffer: b.FileName(), Exporter: b.info.ExpName, Size: b.info.Size}.fail(err))
	return err
}

// ErrNoOp is wrapped by an exporter's operation it does not implement;
// it wraps EINVAL, what dma-buf.c returns for a NULL op.
var ErrNoOp = fmt.Errorf("exporter has no such operation: %w", syscall.EINVAL)

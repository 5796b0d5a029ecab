package v4l2

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// queue is struct vb2_queue: one direction's buffers.
type queue struct {
	d         *Device
	typ       BufType
	dir       dma.Direction
	format    Format
	memory    Memory
	bufs      []*vbuf
	owner     *file
	streaming bool
	// ready are the buffers queued to the driver, in QBUF order
	// (vb2's queued list as the driver sees it); done those it
	// finished, in order, for DQBUF.
	ready, done []*vbuf
	cond        *sim.Cond
}

type bufState uint8

const (
	stateDequeued bufState = iota // the application's
	stateQueued                   // queued, waiting for the hardware
	stateActive                   // the hardware is reading or writing it
	stateDone                     // finished, waiting for DQBUF
)

// vbuf is struct vb2_buffer.
type vbuf struct {
	q      *queue
	index  int
	length uint64
	state  bufState
	mapped bool
	// mm is an MMAP buffer's memory.
	mm *mmapMem
	// A DMABUF buffer: the imported buffer, the fd it came from, its
	// attachment for the device and the mapping.
	dbuf *dmabuf.Buffer
	fd   int
	att  *dmabuf.Attachment
	sgt  *dma.SGTable
	// What the last use left: sequence, bytes, timestamp, timeline.
	seq       uint32
	bytesUsed uint32
	ts        sim.Time
	times     FrameTimes
	// inFence is what the device waits for before reading (QBUF's
	// in-fence); fence is the one it signals when done.
	inFence, fence *dmabuf.Fence
}

func (q *queue) buf(call string, index uint32) (*vbuf, error) {
	if int(index) >= len(q.bufs) {
		return nil, fmt.Errorf("%s(%s, %v): index %d of %d buffers: %w", call, q.d.node, q.typ, index, len(q.bufs), syscall.EINVAL)
	}
	return q.bufs[index], nil
}

// offset is the MMAP buffer's m.offset: vb2 gives buffer i the offset
// i << PAGE_SHIFT.
func (b *vbuf) offset() uint32 { return uint32(b.index) * uint32(mem.PageSize) }

func (b *vbuf) info() Buffer {
	out := Buffer{Index: uint32(b.index), Type: b.q.typ, Memory: b.q.memory, Length: uint32(b.length),
		BytesUsed: b.bytesUsed, Sequence: b.seq, Timestamp: b.ts, Times: b.times, FD: b.fd, FenceFD: -1}
	if b.mm != nil {
		out.Offset = b.offset()
		out.FD = -1
		if b.mapped {
			out.Flags |= BufFlagMapped
		}
	}
	switch b.state {
	case stateQueued, stateActive:
		out.Flags |= BufFlagQueued
	case stateDone:
		out.Flags |= BufFlagDone
	}
	return out
}

// streamOff stops the hardware (the driver's stop_streaming) and gives
// every buffer back to the application, its fence signalled with
// ECANCELED so that no waiter hangs.
func (q *queue) streamOff(t *sim.Proc) {
	if !q.streaming {
		return
	}
	q.streaming = false
	if q.d.onStop != nil {
		q.d.onStop(q)
	}
	for _, b := range q.bufs {
		if b.fence != nil && !b.fence.Signaled() {
			_ = b.fence.SetError(syscall.ECANCELED)
			_ = b.fence.Signal(t)
		}
		b.state, b.fence, b.inFence = stateDequeued, nil, nil
	}
	q.ready, q.done = nil, nil
	q.cond.Broadcast()
}

// free is __vb2_queue_free: MMAP memory dropped (it lives on while
// mmapped or exported), DMABUF imports unmapped, detached and put.
func (q *queue) free(t *sim.Proc) {
	for _, b := range q.bufs {
		if b.mm != nil {
			b.mm.put(t)
		}
		b.release(t)
	}
	q.bufs, q.ready, q.done = nil, nil, nil
}

// release drops a DMABUF slot's import.
func (b *vbuf) release(t *sim.Proc) {
	if b.dbuf == nil {
		return
	}
	if b.sgt != nil {
		_ = b.att.Unmap(t, b.sgt, b.q.dir)
	}
	_ = b.att.Detach(t)
	_ = b.dbuf.Put(t)
	b.dbuf, b.att, b.sgt, b.fd = nil, nil, nil, -1
}

// importDMABuf is vb2's __prepare_dmabuf: dma_buf_get(fd); the same
// buffer as before keeps its mapping; another replaces it (attach and
// map for the device: vb2_dma_sg_map_dmabuf).
func (b *vbuf) importDMABuf(t *sim.Proc, proc *kernel.Process, fd int) error {
	l := b.q.d.l.env.Bufs
	db, err := l.Get(t, proc, fd)
	if err != nil {
		return err
	}
	if db.Size() < uint64(b.q.format.SizeImage) {
		_ = db.Put(t)
		return fmt.Errorf("dma-buf %s of %d bytes, sizeimage %d: %w", db.FileName(), db.Size(), b.q.format.SizeImage, syscall.EINVAL)
	}
	if db == b.dbuf {
		_ = db.Put(t) // the slot already holds a reference
		b.fd = fd
		return nil
	}
	b.release(t)
	att, err := db.Attach(t, b.q.d.dev, dmabuf.AttachOptions{})
	if err != nil {
		_ = db.Put(t)
		return err
	}
	sgt, err := att.Map(t, b.q.dir)
	if err != nil {
		_ = att.Detach(t)
		_ = db.Put(t)
		return err
	}
	b.dbuf, b.att, b.sgt, b.fd = db, att, sgt, fd
	return nil
}

// mmapMem is an MMAP buffer's memory (struct vb2_dma_sg_buf): scattered
// pages at a kernel virtual address, mapped for the device once. It is
// freed when its last holder goes: the queue, a process's mapping, an
// exported dma-buf.
type mmapMem struct {
	d     *Device
	node  int
	va    mem.VirtAddr
	size  uint64
	pages []mem.PhysRange
	sgt   *dma.SGTable
	dir   dma.Direction
	refs  int
}

func (d *Device) allocMMAP(t *sim.Proc, size uint64, dir dma.Direction) (*mmapMem, error) {
	m := d.l.env.Mem
	va, err := m.Vmalloc(d.hw.Node, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, syscall.ENOMEM)
	}
	pages, _, _, err := m.Translate(va, size)
	if err != nil {
		_ = m.Vfree(va)
		return nil, err
	}
	mm := &mmapMem{d: d, node: d.hw.Node, va: va, size: size, pages: pages, dir: dir, refs: 1}
	mm.sgt = mm.table()
	if err := d.dev.MapSGTable(t, mm.sgt, dir); err != nil {
		_ = m.Vfree(va)
		return nil, err
	}
	return mm, nil
}

func (mm *mmapMem) table() *dma.SGTable {
	sgt := dma.SGAllocTable(len(mm.pages))
	for i, r := range mm.pages {
		sgt.SGL[i].SetPage(r.Start, r.Size, 0)
	}
	return sgt
}

// put drops one holder; the last unmaps and frees the pages.
func (mm *mmapMem) put(t *sim.Proc) {
	if mm.refs--; mm.refs > 0 {
		return
	}
	mm.d.dev.UnmapSGTable(t, mm.sgt, mm.dir)
	_ = mm.d.l.env.Mem.Vfree(mm.va)
}

// exporter is videobuf2's dma_buf_ops for an exported MMAP buffer
// (vb2_dma_sg_dmabuf_ops): each importer gets the pages mapped for its
// own device.
type exporter struct{ mm *mmapMem }

func (x *exporter) Attach(*sim.Proc, *dmabuf.Attachment) error { return nil }
func (x *exporter) Detach(*sim.Proc, *dmabuf.Attachment)       {}

func (x *exporter) MapDMABuf(p *sim.Proc, a *dmabuf.Attachment, dir dma.Direction) (*dma.SGTable, error) {
	sgt := x.mm.table()
	if err := a.Device().MapSGTable(p, sgt, dir); err != nil {
		return nil, err
	}
	return sgt, nil
}

func (x *exporter) UnmapDMABuf(p *sim.Proc, a *dmabuf.Attachment, sgt *dma.SGTable, dir dma.Direction) {
	a.Device().UnmapSGTable(p, sgt, dir)
}

// BeginCPUAccess syncs the exporting device's mapping for the CPU
// (vb2_dma_sg_dmabuf_ops_begin_cpu_access), then every importer's.
func (x *exporter) BeginCPUAccess(p *sim.Proc, b *dmabuf.Buffer, dir dma.Direction) error {
	x.mm.d.dev.SyncSGTableForCPU(p, x.mm.sgt, x.mm.dir)
	for _, a := range b.Attachments() {
		if sgt, d := a.Mapped(); sgt != nil {
			a.Device().SyncSGTableForCPU(p, sgt, d)
		}
	}
	return nil
}

// EndCPUAccess syncs the mappings for the devices.
func (x *exporter) EndCPUAccess(p *sim.Proc, b *dmabuf.Buffer, dir dma.Direction) error {
	x.mm.d.dev.SyncSGTableForDevice(p, x.mm.sgt, x.mm.dir)
	for _, a := range b.Attachments() {
		if sgt, d := a.Mapped(); sgt != nil {
			a.Device().SyncSGTableForDevice(p, sgt, d)
		}
	}
	return nil
}

func (x *exporter) Mmap(*sim.Proc, *dmabuf.Buffer) (mem.VirtAddr, error) { return x.mm.va, nil }
func (x *exporter) Vmap(*sim.Proc, *dmabuf.Buffer) (mem.VirtAddr, error) { return x.mm.va, nil }
func (x *exporter) Vunmap(*sim.Proc, *dmabuf.Buffer, mem.VirtAddr)       {}

// Release drops the export's hold on the memory.
func (x *exporter) Release(p *sim.Proc, _ *dmabuf.Buffer) error {
	x.mm.put(p)
	return nil
}

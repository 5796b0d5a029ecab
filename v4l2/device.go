package v4l2

import (
	"errors"
	"fmt"
	"math"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ErrNoDevice: the platform has no device of that name and kind.
var ErrNoDevice = errors.New("no such video device")

// BufType is enum v4l2_buf_type.
type BufType uint32

const (
	BufTypeVideoCapture BufType = 1 // V4L2_BUF_TYPE_VIDEO_CAPTURE: the device writes
	BufTypeVideoOutput  BufType = 2 // V4L2_BUF_TYPE_VIDEO_OUTPUT: the device reads
)

func (t BufType) String() string {
	switch t {
	case BufTypeVideoCapture:
		return "capture"
	case BufTypeVideoOutput:
		return "output"
	}
	return fmt.Sprintf("type%d", uint32(t))
}

// Memory is enum v4l2_memory.
type Memory uint32

const (
	MemoryMMAP    Memory = 1 // V4L2_MEMORY_MMAP: the driver allocates
	MemoryUserptr Memory = 2 // V4L2_MEMORY_USERPTR: not supported here (EINVAL)
	MemoryDMABUF  Memory = 4 // V4L2_MEMORY_DMABUF: the application passes dma-buf fds at QBUF
)

func (m Memory) String() string {
	switch m {
	case MemoryMMAP:
		return "mmap"
	case MemoryUserptr:
		return "userptr"
	case MemoryDMABUF:
		return "dmabuf"
	}
	return fmt.Sprintf("memory%d", uint32(m))
}

// Buffer flags (V4L2_BUF_FLAG_*). InFence and OutFence are those of the
// V4L2 explicit-fences proposal (never merged upstream; Android and
// ChromeOS carried similar patches): a fence fd passed in with QBUF that
// the device waits for before it reads, and one handed out that
// signals when the device has written.
const (
	BufFlagMapped   uint32 = 0x00000001
	BufFlagQueued   uint32 = 0x00000002
	BufFlagDone     uint32 = 0x00000004
	BufFlagError    uint32 = 0x00000040
	BufFlagInFence  uint32 = 0x00200000
	BufFlagOutFence uint32 = 0x00400000
)

// RequestBuffers is struct v4l2_requestbuffers.
type RequestBuffers struct {
	Count  uint32
	Type   BufType
	Memory Memory
}

// FrameTimes are the instants of one frame's life, for a latency
// breakdown: when the sensor's readout began (the V4L2 timestamp, as
// V4L2_BUF_FLAG_TSTAMP_SRC_SOE drivers report it; exposure is not
// modelled) and ended, when the last byte landed in memory; for an ISP
// job, when it began (its input fences signalled), when its read of the
// input landed, and when its output was written.
type FrameTimes struct {
	ReadoutStart, ReadoutEnd, Written sim.Time
	ISPStart, ISPRead, ISPDone        sim.Time
}

// Buffer is struct v4l2_buffer (single-planar): what QUERYBUF, QBUF and
// DQBUF exchange.
type Buffer struct {
	Index     uint32
	Type      BufType
	Memory    Memory
	Flags     uint32
	BytesUsed uint32
	Length    uint32
	// Sequence counts frames, with gaps where frames were dropped.
	Sequence  uint32
	Timestamp sim.Time
	// Offset is m.offset (MMAP: what to pass to mmap); FD is m.fd
	// (DMABUF: the buffer's dma-buf fd).
	Offset uint32
	FD     int
	// FenceFD is the in-fence's sync_file fd (QBUF with BufFlagInFence)
	// or the out-fence's (returned by QBUF with BufFlagOutFence).
	FenceFD int
	// Times is the frame's timeline (the model's addition).
	Times FrameTimes
}

// ExportBuffer is struct v4l2_exportbuffer.
type ExportBuffer struct {
	Type  BufType
	Index uint32
	// FD is the dma-buf fd EXPBUF returns.
	FD int
}

// Device is a registered video device (struct video_device) and its
// videobuf2 queues: the part of a driver the ioctls reach. Capture and
// ISP embed it and drive its buffers from the hardware side.
type Device struct {
	l    *Layer
	name string
	node string
	dev  *dma.Device
	hw   *machine.Device
	// toDev and fromDev are the routes of the device's reads and writes
	// of host memory on its node.
	toDev, fromDev fabric.Route
	queues         map[BufType]*queue
	allowed        map[BufType][]PixFmt
	lim            Limits
	// fenceCtx is the device's fence context (dma_fence_context_alloc).
	fenceCtx uint64
	fenceSeq uint64
	// The driver's callbacks: streaming started or stopped on q, a
	// buffer queued to the driver while streaming.
	onStart, onStop func(q *queue)
	onQueued        func(q *queue)
	// onFormat: S_FMT set q's format (an ISP's capture side follows
	// its output side's size).
	onFormat func(q *queue)
}

func (l *Layer) newDevice(name, kind string, lim Limits) (*Device, error) {
	hw, dev, err := l.hw(name, kind)
	if err != nil {
		return nil, fmt.Errorf("v4l2: %w", err)
	}
	host, err := l.env.Machine.HostMemory(hw.Node)
	if err != nil {
		return nil, fmt.Errorf("v4l2 %s: %w", name, err)
	}
	d := &Device{l: l, name: name, node: fmt.Sprintf("/dev/video%d", l.minor), dev: dev, hw: hw,
		queues: map[BufType]*queue{}, allowed: map[BufType][]PixFmt{}, lim: lim, fenceCtx: l.env.Bufs.ContextAlloc(1)}
	l.minor++
	// The driver's probe lifts the 64 KiB default segment limit, as
	// vb2-dma-contig drivers do (vb2_dma_contig_set_max_seg_size, now
	// dma_set_max_seg_size(dev, UINT_MAX) in the driver): a frame in
	// contiguous memory is one segment.
	dev.SetMaxSegmentSize(math.MaxUint32)
	if d.toDev, err = l.env.Machine.DMARoute(host, hw.Side(), hw.DMA()); err != nil {
		return nil, fmt.Errorf("v4l2 %s: %w", name, err)
	}
	if d.fromDev, err = l.env.Machine.DMARoute(hw.Side(), host, hw.DMA()); err != nil {
		return nil, fmt.Errorf("v4l2 %s: %w", name, err)
	}
	return d, nil
}

func (d *Device) addQueue(t BufType, f Format, allowed []PixFmt) {
	dir := dma.FromDevice
	if t == BufTypeVideoOutput {
		dir = dma.ToDevice
	}
	d.allowed[t] = allowed
	d.queues[t] = &queue{d: d, typ: t, dir: dir, format: Adjust(f, allowed, d.lim), cond: sim.NewCond(d.node + " " + t.String())}
}

// Name is the hardware's name; Node the device node (/dev/videoN).
func (d *Device) Name() string { return d.name }
func (d *Device) Node() string { return d.node }

// DMADevice is the device's struct device in the DMA layer.
func (d *Device) DMADevice() *dma.Device { return d.dev }

// file is an open video node.
type file struct {
	d    *Device
	proc *kernel.Process
}

func (f *file) FileName() string { return f.d.node }

// Release is v4l2_release → vb2_fop_release: the queues this file owns
// stop streaming and free their buffers.
func (f *file) Release(t *sim.Proc) error {
	for _, t2 := range []BufType{BufTypeVideoCapture, BufTypeVideoOutput} {
		if q := f.d.queues[t2]; q != nil && q.owner == f {
			q.streamOff(t)
			q.free(t)
			q.owner = nil
		}
	}
	f.d.l.emit(t, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpClose, Device: f.d.name, Node: f.d.node, Process: f.proc.Name()})
	return nil
}

// Open is open(2) of the device node by process proc: a descriptor.
func (d *Device) Open(t *sim.Proc, proc *kernel.Process) (int, error) {
	fd, err := proc.Install(&file{d: d, proc: proc})
	if err != nil {
		err = fmt.Errorf("open(%s): %w", d.node, err)
	}
	d.l.emit(t, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpOpen, Device: d.name, Node: d.node, Process: proc.Name()}.fail(err))
	return fd, err
}

// file resolves fd in proc to an open file of d (EBADF otherwise).
func (d *Device) file(call string, proc *kernel.Process, fd int) (*file, error) {
	f, err := proc.File(call, fd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	vf, ok := f.(*file)
	if !ok || vf.d != d {
		return nil, fmt.Errorf("%s: fd %d is %s, not %s: %w", call, fd, f.FileName(), d.node, syscall.ENOTTY)
	}
	return vf, nil
}

// queue finds the queue of type t (EINVAL for a type the device lacks)
// and checks that f may use it: once a file has allocated buffers, the
// queue is its own (EBUSY for others), as vb2_queue_is_busy says.
// lookup resolves what QBUF and EXPBUF name: the queue of type t of
// the open file fd, and its buffer index.
func (d *Device) lookup(call string, proc *kernel.Process, fd int, t BufType, index uint32) (*queue, *vbuf, error) {
	f, err := d.file(call, proc, fd)
	if err != nil {
		return nil, nil, err
	}
	q, err := d.queue(call, f, t)
	if err != nil {
		return nil, nil, err
	}
	b, err := q.buf(call, index)
	if err != nil {
		return nil, nil, err
	}
	return q, b, nil
}

func (d *Device) queue(call string, f *file, t BufType) (*queue, error) {
	q := d.queues[t]
	if q == nil {
		return nil, fmt.Errorf("%s(%s): buffer type %v: %w", call, d.node, t, syscall.EINVAL)
	}
	if q.owner != nil && q.owner != f {
		return nil, fmt.Errorf("%s(%s): the %v queue belongs to another file: %w", call, d.node, t, syscall.EBUSY)
	}
	return q, nil
}

// GFmt is VIDIOC_G_FMT.
func (d *Device) GFmt(proc *kernel.Process, fd int, t BufType) (Format, error) {
	if _, err := d.file("VIDIOC_G_FMT", proc, fd); err != nil {
		return Format{}, err
	}
	q := d.queues[t]
	if q == nil {
		return Format{}, fmt.Errorf("VIDIOC_G_FMT(%s): buffer type %v: %w", d.node, t, syscall.EINVAL)
	}
	return q.format, nil
}

// TryFmt is VIDIOC_TRY_FMT: the format S_FMT would set.
func (d *Device) TryFmt(t BufType, want Format) (Format, error) {
	if d.queues[t] == nil {
		return Format{}, fmt.Errorf("VIDIOC_TRY_FMT(%s): buffer type %v: %w", d.node, t, syscall.EINVAL)
	}
	return Adjust(want, d.allowed[t], d.lim), nil
}

// SFmt is VIDIOC_S_FMT: the format adjusted as Adjust says, set and
// returned; EBUSY once buffers are allocated.
func (d *Device) SFmt(t *sim.Proc, proc *kernel.Process, fd int, bt BufType, want Format) (Format, error) {
	got, err := d.sFmt(proc, fd, bt, want)
	d.l.emit(t, Event{Op: OpSFmt, Device: d.name, Node: d.node, Process: proc.Name(), Type: bt}.fail(err))
	return got, err
}

func (d *Device) sFmt(proc *kernel.Process, fd int, bt BufType, want Format) (Format, error) {
	f, err := d.file("VIDIOC_S_FMT", proc, fd)
	if err != nil {
		return Format{}, err
	}
	q, err := d.queue("VIDIOC_S_FMT", f, bt)
	if err != nil {
		return Format{}, err
	}
	if len(q.bufs) > 0 {
		return Format{}, fmt.Errorf("VIDIOC_S_FMT(%s): buffers allocated: %w", d.node, syscall.EBUSY)
	}
	q.format = Adjust(want, d.allowed[bt], d.lim)
	if d.onFormat != nil {
		d.onFormat(q)
	}
	return q.format, nil
}

// ReqBufs is VIDIOC_REQBUFS: count buffers of memory type m on queue
// bt (count 0 frees them). MMAP buffers are allocated now, sizeimage
// each rounded to pages, and mapped for the device (videobuf2-dma-sg:
// scattered pages, one IOVA range through an IOMMU); DMABUF slots get
// their buffers at QBUF. EBUSY while streaming; EINVAL for USERPTR or
// an unknown memory type.
func (d *Device) ReqBufs(t *sim.Proc, proc *kernel.Process, fd int, req RequestBuffers) (RequestBuffers, error) {
	got, err := d.reqBufs(t, proc, fd, req)
	d.l.emit(t, Event{Op: OpReqBufs, Device: d.name, Node: d.node, Process: proc.Name(), Type: req.Type, Memory: req.Memory, Count: int(got.Count)}.fail(err))
	return got, err
}

// maxBuffers is VB2_MAX_FRAME (before Linux 6.8's larger limits).
const maxBuffers = 32

func (d *Device) reqBufs(t *sim.Proc, proc *kernel.Process, fd int, req RequestBuffers) (RequestBuffers, error) {
	call := "VIDIOC_REQBUFS"
	f, err := d.file(call, proc, fd)
	if err != nil {
		return req, err
	}
	q, err := d.queue(call, f, req.Type)
	if err != nil {
		return req, err
	}
	if req.Memory != MemoryMMAP && req.Memory != MemoryDMABUF {
		return req, fmt.Errorf("%s(%s, memory %v): %w", call, d.node, req.Memory, syscall.EINVAL)
	}
	if q.streaming {
		return req, fmt.Errorf("%s(%s): streaming: %w", call, d.node, syscall.EBUSY)
	}
	q.free(t)
	q.owner = nil
	if req.Count == 0 {
		return req, nil
	}
	req.Count = min(req.Count, maxBuffers)
	q.memory, q.owner = req.Memory, f
	length := (uint64(q.format.SizeImage) + mem.PageSize - 1) &^ (mem.PageSize - 1)
	for i := range int(req.Count) {
		b := &vbuf{q: q, index: i, length: length, fd: -1}
		if req.Memory == MemoryMMAP {
			if b.mm, err = d.allocMMAP(t, length, q.dir); err != nil {
				q.free(t)
				q.owner = nil
				return req, fmt.Errorf("%s(%s, %d %v): buffer %d: %w", call, d.node, req.Count, req.Memory, i, err)
			}
		}
		q.bufs = append(q.bufs, b)
	}
	return req, nil
}

// QueryBuf is VIDIOC_QUERYBUF: a buffer's length, state and, for MMAP,
// the offset to mmap.
func (d *Device) QueryBuf(proc *kernel.Process, fd int, bt BufType, index uint32) (Buffer, error) {
	f, err := d.file("VIDIOC_QUERYBUF", proc, fd)
	if err != nil {
		return Buffer{}, err
	}
	q, err := d.queue("VIDIOC_QUERYBUF", f, bt)
	if err != nil {
		return Buffer{}, err
	}
	b, err := q.buf("VIDIOC_QUERYBUF", index)
	if err != nil {
		return Buffer{}, err
	}
	return b.info(), nil
}

// Mmap is mmap(2) of the video node at offset (QUERYBUF's m.offset) by
// process proc: the MMAP buffer's pages in proc's address space (a VMA
// that keeps the buffer's memory until it is unmapped or proc exits).
func (d *Device) Mmap(t *sim.Proc, proc *kernel.Process, fd int, bt BufType, offset uint32) (mem.VirtAddr, error) {
	va, err := d.mmap(proc, fd, bt, offset)
	d.l.emit(t, Event{Op: OpMmap, Device: d.name, Node: d.node, Process: proc.Name(), Type: bt}.fail(err))
	return va, err
}

func (d *Device) mmap(proc *kernel.Process, fd int, bt BufType, offset uint32) (mem.VirtAddr, error) {
	f, err := d.file("mmap", proc, fd)
	if err != nil {
		return 0, err
	}
	q, err := d.queue("mmap", f, bt)
	if err != nil {
		return 0, err
	}
	for _, b := range q.bufs {
		if b.mm != nil && b.offset() == offset {
			mm := b.mm
			mm.refs++
			err := proc.MM.Map(kernel.VMA{Start: mm.va, Size: mm.size, Name: d.node, Close: func(t *sim.Proc) error { mm.put(t); return nil }})
			if err != nil {
				mm.refs--
				return 0, fmt.Errorf("mmap(%s, offset %#x): %w", d.node, offset, err)
			}
			b.mapped = true
			return mm.va, nil
		}
	}
	return 0, fmt.Errorf("mmap(%s, offset %#x): no MMAP buffer there: %w", d.node, offset, syscall.EINVAL)
}

// QBuf is VIDIOC_QBUF: the buffer goes to the driver. DMABUF: buf.FD is
// imported (dma_buf_get: EBADF for a descriptor proc lacks; EINVAL for
// a buffer smaller than sizeimage), attached and mapped for the device
// unless the slot already holds that buffer (vb2 keeps the mapping).
// MMAP: the buffer is synced for the device (a non-coherent device's
// cache maintenance). With BufFlagInFence, buf.FenceFD is a sync_file
// the device waits for before it reads the buffer; with
// BufFlagOutFence, the returned FenceFD is a new sync_file that
// signals when the device has written it. EINVAL for a bad index, type
// or memory, or a buffer already queued.
func (d *Device) QBuf(t *sim.Proc, proc *kernel.Process, fd int, buf Buffer) (Buffer, error) {
	got, err := d.qBuf(t, proc, fd, buf)
	e := Event{Op: OpQBuf, Device: d.name, Node: d.node, Process: proc.Name(), Type: buf.Type, Memory: buf.Memory, Index: int(buf.Index)}.fail(err)
	d.l.emit(t, e)
	return got, err
}

func (d *Device) qBuf(t *sim.Proc, proc *kernel.Process, fd int, buf Buffer) (Buffer, error) {
	call := "VIDIOC_QBUF"
	q, b, err := d.lookup(call, proc, fd, buf.Type, buf.Index)
	if err != nil {
		return buf, err
	}
	if buf.Memory != q.memory {
		return buf, fmt.Errorf("%s(%s, index %d): memory %v, the queue's is %v: %w", call, d.node, buf.Index, buf.Memory, q.memory, syscall.EINVAL)
	}
	if b.state != stateDequeued {
		return buf, fmt.Errorf("%s(%s, index %d): already queued: %w", call, d.node, buf.Index, syscall.EINVAL)
	}
	var in *dmabuf.Fence
	if buf.Flags&BufFlagInFence != 0 {
		sf, err := d.l.env.Bufs.SyncFileGet(proc, buf.FenceFD)
		if err != nil {
			return buf, fmt.Errorf("%s(%s, index %d): in-fence: %w", call, d.node, buf.Index, err)
		}
		in = sf.Fence()
	}
	if q.memory == MemoryDMABUF {
		if err := b.importDMABuf(t, proc, buf.FD); err != nil {
			return buf, fmt.Errorf("%s(%s, index %d): %w", call, d.node, buf.Index, err)
		}
	} else {
		d.dev.SyncSGTableForDevice(t, b.mm.sgt, q.dir)
	}
	b.inFence, b.fence = in, nil
	if q.typ == BufTypeVideoOutput {
		// V4L2_BUF_FLAG_TIMESTAMP_COPY: a mem2mem device copies the
		// output buffer's timestamp (and here its timeline and
		// sequence) to the capture buffer it produces.
		b.ts, b.times, b.seq, b.bytesUsed = buf.Timestamp, buf.Times, buf.Sequence, buf.BytesUsed
	}
	out := b.info()
	if buf.Flags&BufFlagOutFence != 0 {
		b.fence = d.newFence()
		fd, err := d.l.env.Bufs.NewSyncFile(d.node, b.fence).FD(proc)
		if err != nil {
			b.fence = nil
			return buf, fmt.Errorf("%s(%s, index %d): out-fence: %w", call, d.node, buf.Index, err)
		}
		out.Flags |= BufFlagOutFence
		out.FenceFD = fd
	}
	b.state = stateQueued
	q.ready = append(q.ready, b)
	out.Flags |= BufFlagQueued
	if q.streaming && d.onQueued != nil {
		d.onQueued(q)
	}
	return out, nil
}

// DQBuf is VIDIOC_DQBUF: the oldest buffer the device is done with; the
// calling thread sleeps (virtual time) until there is one. MMAP buffers
// are synced for the CPU first. EINVAL when the queue is not streaming
// or stops while the thread waits.
func (d *Device) DQBuf(t *sim.Proc, proc *kernel.Process, fd int, bt BufType) (Buffer, error) {
	got, err := d.dqBuf(t, proc, fd, bt)
	d.l.emit(t, Event{Op: OpDQBuf, Device: d.name, Node: d.node, Process: proc.Name(), Type: bt, Index: int(got.Index),
		Sequence: got.Sequence, Times: got.Times}.fail(err))
	return got, err
}

func (d *Device) dqBuf(t *sim.Proc, proc *kernel.Process, fd int, bt BufType) (Buffer, error) {
	call := "VIDIOC_DQBUF"
	f, err := d.file(call, proc, fd)
	if err != nil {
		return Buffer{}, err
	}
	q, err := d.queue(call, f, bt)
	if err != nil {
		return Buffer{}, err
	}
	if !q.streaming {
		return Buffer{}, fmt.Errorf("%s(%s, %v): not streaming: %w", call, d.node, bt, syscall.EINVAL)
	}
	t.WaitUntil(q.cond, func() bool { return len(q.done) > 0 || !q.streaming })
	if len(q.done) == 0 {
		return Buffer{}, fmt.Errorf("%s(%s, %v): streaming stopped: %w", call, d.node, bt, syscall.EINVAL)
	}
	b := q.done[0]
	q.done = q.done[1:]
	b.state = stateDequeued
	if b.mm != nil {
		d.dev.SyncSGTableForCPU(t, b.mm.sgt, q.dir)
	}
	out := b.info()
	out.Flags |= BufFlagDone
	return out, nil
}

// StreamOn is VIDIOC_STREAMON: the device starts (a camera's sensor
// begins reading frames out; an ISP takes jobs). EINVAL without buffers
// allocated.
func (d *Device) StreamOn(t *sim.Proc, proc *kernel.Process, fd int, bt BufType) error {
	err := d.streamOn(proc, fd, bt)
	d.l.emit(t, Event{Op: OpStreamOn, Device: d.name, Node: d.node, Process: proc.Name(), Type: bt}.fail(err))
	return err
}

func (d *Device) streamOn(proc *kernel.Process, fd int, bt BufType) error {
	call := "VIDIOC_STREAMON"
	f, err := d.file(call, proc, fd)
	if err != nil {
		return err
	}
	q, err := d.queue(call, f, bt)
	if err != nil {
		return err
	}
	if len(q.bufs) == 0 {
		return fmt.Errorf("%s(%s, %v): no buffers: %w", call, d.node, bt, syscall.EINVAL)
	}
	if q.streaming {
		return nil
	}
	q.streaming = true
	if d.onStart != nil {
		d.onStart(q)
	}
	return nil
}

// StreamOff is VIDIOC_STREAMOFF: the device stops, and every buffer,
// queued or done, returns to the application (dequeued, without
// DQBUF); a thread blocked in DQBUF gets EINVAL. A frame being written
// when it stops is abandoned: its remaining chunks are not written.
func (d *Device) StreamOff(t *sim.Proc, proc *kernel.Process, fd int, bt BufType) error {
	err := d.streamOffCall(t, proc, fd, bt)
	d.l.emit(t, Event{Op: OpStreamOff, Device: d.name, Node: d.node, Process: proc.Name(), Type: bt}.fail(err))
	return err
}

func (d *Device) streamOffCall(t *sim.Proc, proc *kernel.Process, fd int, bt BufType) error {
	call := "VIDIOC_STREAMOFF"
	f, err := d.file(call, proc, fd)
	if err != nil {
		return err
	}
	q, err := d.queue(call, f, bt)
	if err != nil {
		return err
	}
	q.streamOff(t)
	return nil
}

// ExpBuf is VIDIOC_EXPBUF: MMAP buffer index exported as a new dma-buf
// (exporter "videobuf2", as vb2_dma_sg_get_dmabuf makes one per call)
// with a descriptor in proc. The buffer's memory lives while the queue
// or any export holds it. EINVAL for a DMABUF queue or a bad index.
func (d *Device) ExpBuf(t *sim.Proc, proc *kernel.Process, fd int, exp ExportBuffer) (ExportBuffer, error) {
	got, err := d.expBuf(t, proc, fd, exp)
	d.l.emit(t, Event{Op: OpExpBuf, Device: d.name, Node: d.node, Process: proc.Name(), Type: exp.Type, Index: int(exp.Index)}.fail(err))
	return got, err
}

func (d *Device) expBuf(t *sim.Proc, proc *kernel.Process, fd int, exp ExportBuffer) (ExportBuffer, error) {
	call := "VIDIOC_EXPBUF"
	_, b, err := d.lookup(call, proc, fd, exp.Type, exp.Index)
	if err != nil {
		return exp, err
	}
	if b.mm == nil {
		return exp, fmt.Errorf("%s(%s, index %d): not an MMAP buffer: %w", call, d.node, exp.Index, syscall.EINVAL)
	}
	x := &exporter{mm: b.mm}
	db, err := d.l.env.Bufs.Export(t, dmabuf.ExportInfo{ExpName: "videobuf2", Ops: x, Size: b.mm.size, Priv: b.mm})
	if err != nil {
		return exp, fmt.Errorf("%s(%s, index %d): %w", call, d.node, exp.Index, err)
	}
	b.mm.refs++
	if exp.FD, err = db.FD(proc); err != nil {
		b.mm.put(t)
		return exp, fmt.Errorf("%s(%s, index %d): %w", call, d.node, exp.Index, err)
	}
	return exp, nil
}

// newFence is a new fence on the device's timeline.
func (d *Device) newFence() *dmabuf.Fence {
	d.fenceSeq++
	return d.l.env.Bufs.NewFence(d.name, d.node, d.fenceCtx, d.fenceSeq)
}

// begin is the driver taking buffer b for the hardware, with its fence
// (the out-fence QBUF made, or a new one).
func (d *Device) begin(b *vbuf) {
	b.state = stateActive
	if b.fence == nil {
		b.fence = d.newFence()
	}
}

// publish puts b's fence in its dma-buf's reservation object as a write
// fence (the device writes b) or a read fence (it reads b), as drivers
// publish their work for implicit sync, when the hardware starts on it.
func (d *Device) publish(b *vbuf) {
	if b.dbuf == nil {
		return
	}
	u := dmabuf.UsageWrite
	if b.q.dir == dma.ToDevice {
		u = dmabuf.UsageRead
	}
	b.dbuf.Resv().AddFence(nil, b.fence, u)
}

// finish is the hardware done with b: it is done (DQBUF takes it), its
// fence signals, a thread in DQBUF wakes.
func (d *Device) finish(b *vbuf, seq uint32, used uint32, ts sim.Time, times FrameTimes) {
	if b.state != stateActive {
		return // returned by STREAMOFF meanwhile
	}
	b.seq, b.bytesUsed, b.ts, b.times = seq, used, ts, times
	b.state = stateDone
	b.q.done = append(b.q.done, b)
	if b.fence != nil && !b.fence.Signaled() {
		_ = b.fence.Signal(nil)
	}
	b.q.cond.Broadcast()
}

// spans are the DMA spans of bytes [off, off+n) of b, from its mapping.
func (b *vbuf) spans(off, n uint64) []dma.Span {
	sgt := b.table()
	var out []dma.Span
	for _, s := range sgt.SGL[:sgt.Nents] {
		if n == 0 {
			break
		}
		if off >= s.DMALength {
			off -= s.DMALength
			continue
		}
		k := min(s.DMALength-off, n)
		out = append(out, dma.BusSpan(s.DMAAddress+mem.DMAAddr(off), k))
		n -= k
		off = 0
	}
	return out
}

func (b *vbuf) table() *dma.SGTable {
	if b.mm != nil {
		return b.mm.sgt
	}
	return b.sgt
}

// addr is the first DMA address of b.
func (b *vbuf) addr() mem.DMAAddr {
	if s := b.table(); s != nil && s.Nents > 0 {
		return s.SGL[0].DMAAddress
	}
	return 0
}

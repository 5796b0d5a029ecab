package cuda

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// copyEnd is one end of a copy, resolved.
type copyEnd struct {
	addr mem.GPUAddr
	pl   place
	// dev is the GPU of device memory (of managed memory migrated to a
	// GPU); nil for host memory.
	dev *gpu.Device
	ep  machine.Endpoint
	// phys is the memory behind device and pinned memory, which DMA
	// reads and writes; pageable memory is read and written by the CPU
	// at its address. Managed memory has neither: its content is not
	// followed.
	phys []mem.PhysRange
}

func (e *copyEnd) host() bool    { return e.dev == nil }
func (e *copyEnd) managed() bool { return e.pl.t.Kind == MemManaged }

// ends resolves a copy's two ends and reports them to the observers;
// an end the copy may not use makes it fail with the CUresult the
// driver returns: CUDA_ERROR_INVALID_VALUE for freed memory, another
// process's pointer, nothing mapped, a range past its allocation;
// CUDA_ERROR_NOT_SUPPORTED for managed memory on GPUs without
// concurrent managed access (not modelled).
func (c *Context) ends(p *sim.Proc, call string, dst, src mem.GPUAddr, size uint64) (s, d copyEnd, err error) {
	s = copyEnd{addr: src, pl: c.d.resolve(src, size)}
	d = copyEnd{addr: dst, pl: c.d.resolve(dst, size)}
	for _, e := range []*copyEnd{&s, &d} {
		if err != nil {
			break
		}
		pl := e.pl
		switch {
		case pl.t.Kind == MemFreed:
			err = failf(call, ErrorInvalidValue, "%v was freed by %s", e.addr, pl.t.Freed)
		case c.foreign(pl):
			err = failf(call, ErrorInvalidValue, "%v belongs to process %s", e.addr, pl.t.Process)
		case pl.t.Kind == MemInvalid:
			err = failf(call, ErrorInvalidValue, "nothing is mapped at %v", e.addr)
		case !pl.inside:
			err = failf(call, ErrorInvalidValue, "[%v +%#x] runs past its allocation", e.addr, size)
		case pl.t.Kind == MemManaged && !c.d.ConcurrentManagedAccess():
			err = failf(call, ErrorNotSupported, "copies of managed memory on %v GPUs are not modelled", c.d.gen)
		}
	}
	c.observe(p, OpCopyRead, call, src, size, false, s.pl, err)
	c.observe(p, OpCopyWrite, call, dst, size, true, d.pl, err)
	if err != nil {
		return s, d, err
	}
	for _, e := range []*copyEnd{&s, &d} {
		if err := c.touch(p, e, size); err != nil {
			return s, d, fail(call, ErrorOutOfMemory, err)
		}
		if err := c.d.endpoint(e, size); err != nil {
			return s, d, fail(call, ErrorUnknown, err)
		}
	}
	return s, d, nil
}

// touch places the pages of a pageable end that nothing has touched
// yet (anonymous memory): the copy's CPU memcpy is their first touch,
// so they go where thread p's node and the process's policy say
// (kernel.Process.Populate); e's node is then its first page's.
func (c *Context) touch(p *sim.Proc, e *copyEnd, size uint64) error {
	if e.pl.t.Kind != MemPageable || e.pl.node >= 0 {
		return nil
	}
	va := mem.VirtAddr(e.addr)
	if err := c.proc.kp.Populate(p, va, size); err != nil {
		return err
	}
	n, _, err := c.d.m.Mem.PageNode(va)
	e.pl.node = n
	return err
}

// threadNode is the node thread p of the context's process runs on
// (its CPU affinity: kernel.Process.ThreadNode), where its CPU copies
// run and the staging buffers are.
func (c *Context) threadNode(p *sim.Proc) int { return c.proc.kp.ThreadNode(p) }

// endpoint fills e's machine endpoint and memory.
func (d *Driver) endpoint(e *copyEnd, size uint64) error {
	var err error
	switch e.pl.t.Kind {
	case MemDevice:
		e.dev = d.sys.Devices[e.pl.t.Device]
		e.ep = e.dev.GPU.Memory()
		_, e.phys, err = d.sys.Resolve(e.addr, size)
	case MemPinned:
		e.ep, err = d.m.HostMemory(e.pl.node)
		if err == nil {
			_, e.phys, err = d.sys.Resolve(e.addr, size)
		}
	case MemPageable:
		e.ep, err = d.m.HostMemory(e.pl.node)
	}
	return err
}

// Memcpy is cuMemcpy with unified addressing: size bytes from src to
// dst, the direction inferred from what each address is (host pinned,
// host pageable, device of any GPU, managed), synchronously. Like every
// synchronous call it is issued into the legacy default stream: it
// first waits for the work of that stream and of the blocking streams.
//
//   - pinned ↔ device: one copy on the GPU's copy engine for the
//     direction (gpu.Device.CopyEngine), costing the GPU's CopyOverhead
//     (calibrated so that 8 B take the 6.6 µs measured on the H200), the
//     route's latency and the bytes at their share of every link
//     (machine.Copy);
//   - pageable ↔ device: staged through pinned buffers in chunks, the
//     CPU memcpy and the DMA pipelined (StagedCopy), at about the
//     one-thread memcpy rate;
//   - device ↔ device: on the GPU's engine for copies between VRAMs, over
//     NVLink or PCIe to a peer;
//   - host ↔ host: a CPU memcpy on the process's node;
//   - managed memory (Pascal and later): toward device memory (or both
//     ends managed: the context's GPU) the copy engine touches the
//     managed range and each page it may not access is a non-replayable
//     fault serviced alone, migrating the page and the prefetcher's
//     region (uvm_gpu_non_replayable_faults.c); the copy then reads the
//     pages where they are. Toward host memory the range is first
//     migrated to the CPU as a prefetch.
//
// The source is read when the copy starts and the destination written
// when it ends, through mem (DMA by the GPU for device and pinned
// memory, the CPU for pageable memory), in payload mode with the bytes.
func (c *Context) Memcpy(p *sim.Proc, dst, src mem.GPUAddr, size uint64) error {
	const call = "cuMemcpy"
	if err := c.check(call); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	s, d, err := c.ends(p, call, dst, src, size)
	if err != nil {
		return err
	}
	c.waitLegacy(p)
	return c.copySync(p, call, &d, &s, size)
}

// MemcpyAsync is cuMemcpyAsync on stream s (nil: the legacy default
// stream). Between pinned and device memory it is the GPU model's
// stream copy (gpu.Stream.Memcpy: the host pays gpu.EnqueueCost, the
// copy runs in stream order). With pageable memory, between host
// buffers and with managed memory the driver cannot hand the copy to
// the engine as it is: it waits for the stream's work and copies as
// Memcpy does, returning when done (a pageable device-to-host copy is
// synchronous on the real driver too; a host-to-device one returns once
// staged, which the model does not tell apart).
func (c *Context) MemcpyAsync(p *sim.Proc, dst, src mem.GPUAddr, size uint64, s *Stream) error {
	const call = "cuMemcpyAsync"
	st, err := c.stream(call, s)
	if err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	se, de, err := c.ends(p, call, dst, src, size)
	if err != nil {
		return err
	}
	dmaable := func(e *copyEnd) bool { return e.pl.t.Kind == MemDevice || e.pl.t.Kind == MemPinned }
	if dmaable(&se) && dmaable(&de) && !(se.host() && de.host()) {
		return wrap(call, st.s.Memcpy(p, dst, src, size))
	}
	st.s.Synchronize(p)
	return c.copySync(p, call, &de, &se, size)
}

// waitLegacy is the implicit synchronisation of a call issued into the
// legacy default stream: the work of it and of the blocking streams,
// and the DMA of pageable copies to the GPU that returned once staged.
func (c *Context) waitLegacy(p *sim.Proc) {
	for _, s := range c.d.streams[c.dev.Index] {
		if s.flags&StreamNonBlocking == 0 {
			s.s.Synchronize(p)
		}
	}
	c.d.waitStaged(p, c.dev.Index)
}

// stagedTail is a pageable copy to GPU dev that returned before its
// last chunks' DMA landed.
type stagedTail struct {
	dev    int
	landed *sim.Completion
	err    *error
}

// waitStaged blocks p until the staged copies to GPU dev have landed,
// and forgets them. The model's host waits where the driver orders the
// copy before later work in the stream: the first call after it.
func (d *Driver) waitStaged(p *sim.Proc, dev int) {
	left := d.stagedTails[:0]
	for _, t := range d.stagedTails {
		if t.dev != dev {
			left = append(left, t)
			continue
		}
		p.Wait(t.landed)
	}
	d.stagedTails = left
}

// copySync performs a resolved copy, blocking p until it is done.
func (c *Context) copySync(p *sim.Proc, call string, d, s *copyEnd, size uint64) error {
	if s.managed() || d.managed() {
		if err := c.migrateEnds(p, call, d, s, size); err != nil {
			return err
		}
	}
	m := c.d.m
	switch {
	case s.host() && d.host():
		name := fmt.Sprintf("%s h2h %d", call, size)
		data := c.d.cpuRead(c.proc.node, s, size)
		if err := m.CPUCopy(p, name, c.proc.node, int64(size)); err != nil {
			return fail(call, ErrorUnknown, err)
		}
		c.d.cpuWrite(c.proc.node, d, size, data)
		return nil
	case s.host() && s.pl.t.Kind == MemPageable:
		return c.staged(p, call, d.dev, true, s, d, size)
	case d.host() && d.pl.t.Kind == MemPageable:
		return c.staged(p, call, s.dev, false, s, d, size)
	}
	dev, kind := s.dev, gpu.DeviceToDevice
	switch {
	case s.host():
		dev, kind = d.dev, gpu.HostToDevice
	case d.host():
		kind = gpu.DeviceToHost
	case s.dev != d.dev:
		kind = gpu.PeerToPeer
	}
	t := &dma.Transfer{
		Name: fmt.Sprintf("%s %s %d", call, kind, size), Engine: dev.CopyEngine(kind), Src: s.ep, Dst: d.ep,
		Bytes: int64(size), Overhead: dev.GPU.Spec.CopyOverhead.V,
		Read: dev.Spans(s.phys, s.dev != nil), Write: dev.Spans(d.phys, d.dev != nil),
	}
	if a := d.pl.a; a != nil && a.kind == MemDevice && !a.syncMemops && c.d.memopsWindow != nil {
		t.Visible = c.d.memopsWindow(a.a)
	}
	if _, err := dev.DMA().Transfer(p, t); err != nil {
		return fail(call, ErrorUnknown, err)
	}
	if t.Visible > 0 {
		c.observeUnflushed(p, call, d.addr, size, d.pl, t.Visible)
	}
	return nil
}

// staged is a pageable copy through the driver's staging buffers, which
// the model places on the calling thread's node, where its memcpy runs;
// the pageable end's pages are where they are (on another node, the
// memcpy crosses the socket links: Staging.RemotePages).
func (c *Context) staged(p *sim.Proc, call string, dev *gpu.Device, toDevice bool, s, d *copyEnd, size uint64) error {
	m := c.d.m
	cpu := c.threadNode(p)
	host, err := m.HostMemory(cpu)
	if err != nil {
		return fail(call, ErrorUnknown, err)
	}
	kind := gpu.HostToDevice
	pages := s.pl.node
	if !toDevice {
		kind = gpu.DeviceToHost
		pages = d.pl.node
	}
	var data []byte
	if toDevice {
		data = c.d.cpuRead(cpu, s, size)
	} else {
		data, _ = dev.DMA().Effect(dev.Spans(s.phys, s.dev != nil), nil, nil)
	}
	bufs, err := c.d.stagingFor(p, dev, cpu)
	if err != nil {
		return fail(call, ErrorOutOfMemory, err)
	}
	st := Staging{
		Name: fmt.Sprintf("%s pageable %s %d", call, kind, size), GPU: dev.GPU, DMA: dev.DMA(), Host: host, Node: cpu,
		RemotePages: pages != cpu, PageNode: pages,
		ToDevice: toDevice, Bytes: int64(size), Overhead: dev.GPU.Spec.CopyOverhead.V,
		Completion: dev.GPU.Spec.CopyCompletion.V, Buffers: bufs, Rate: float64(dev.GPU.Spec.StagingRate.V),
	}
	if toDevice {
		// The call returns once staged; what is issued next into the
		// legacy stream, and any synchronisation, waits for the DMA.
		st.Landed = p.Engine().NewNamedCompletion(st.Name + " landed")
		st.LandedErr = new(error)
	}
	err = StagedCopy(p, m, st)
	if err == nil && st.Landed != nil && !st.Landed.Done() {
		// Registered once returned: a call another thread makes
		// meanwhile waits only for what is left after the return, as
		// before the return it was this thread's own work.
		c.d.stagedTails = append(c.d.stagedTails, stagedTail{dev: dev.Index, landed: st.Landed, err: st.LandedErr})
	}
	if err != nil {
		return fail(call, ErrorUnknown, err)
	}
	if toDevice {
		if _, err := dev.DMA().Effect(nil, dev.Spans(d.phys, d.dev != nil), data); err != nil {
			return fail(call, ErrorUnknown, err)
		}
	} else {
		c.d.cpuWrite(cpu, d, size, data)
	}
	return nil
}

// stagingFor is the staging buffers of dev's pageable copies on node:
// made, and mapped for dev, at the first one when dev is behind an
// IOMMU domain; nil under dma-direct (NewStagingMemory).
func (d *Driver) stagingFor(p *sim.Proc, dev *gpu.Device, node int) (*StagingMemory, error) {
	key := [2]int{dev.Index, node}
	if sm, ok := d.staging[key]; ok {
		return sm, nil
	}
	sm, err := NewStagingMemory(p, d.m, dev.DMA(), node, uint64(dev.GPU.Spec.Chunk()))
	if err != nil {
		return nil, err
	}
	if d.staging == nil {
		d.staging = map[[2]int]*StagingMemory{}
	}
	d.staging[key] = sm
	return sm, nil
}

// migrateEnds makes the managed ends of a copy accessible to the copy:
// toward host memory as a prefetch to the CPU (uvm.Driver.Prefetch);
// toward a GPU by that GPU's copy engine touching the range, faulting
// page by page (uvm.Driver.CopyEngineAccess). It points each end where
// its pages are then.
func (c *Context) migrateEnds(p *sim.Proc, call string, d, s *copyEnd, size uint64) error {
	for _, pair := range [][2]*copyEnd{{s, d}, {d, s}} {
		e, other := pair[0], pair[1]
		if !e.managed() {
			continue
		}
		to := uvm.GPU(c.dev.Index)
		switch {
		case other.managed():
		case other.host():
			to = uvm.CPU
		default:
			to = uvm.GPU(other.dev.Index)
		}
		ua, err := c.d.uvmAddr(e.addr)
		if err != nil {
			return fail(call, ErrorInvalidValue, err)
		}
		if to == uvm.CPU {
			if err := c.d.um.Prefetch(p, ua, int64(size), to); err != nil {
				return wrap(call, err)
			}
			e.ep, _ = c.d.m.HostMemory(c.dev.GPU.Node)
			continue
		}
		// The GPU's copy engine touches the range itself: its faults
		// are serviced one by one (uvm.Driver.CopyEngineAccess), and it
		// copies from where the pages then are.
		acc, err := c.d.um.CopyEngineAccess(p, to.GPUIndex(), ua, int64(size), e == d)
		if err != nil {
			return wrap(call, err)
		}
		e.dev = c.d.sys.Devices[to.GPUIndex()]
		e.ep = c.d.procMemory(acc.Where, to)
		if acc.Where == uvm.NoProcessor {
			e.ep = e.dev.GPU.Memory()
		}
	}
	return nil
}

// ---- content ----

// cpuRead is the CPU reading a host end at its address (the CPU time is
// the copy's flows'), returning the bytes in payload mode.
func (d *Driver) cpuRead(node int, e *copyEnd, size uint64) []byte {
	if e.managed() {
		return nil
	}
	m := d.m.Mem
	va := mem.VirtAddr(e.addr)
	if !m.Payload() {
		m.Read(nil, node, va, size)
		return nil
	}
	buf := make([]byte, size)
	m.ReadBytes(nil, node, va, buf)
	return buf
}

// cpuWrite is the CPU writing a host end.
func (d *Driver) cpuWrite(node int, e *copyEnd, size uint64, data []byte) {
	if e.managed() {
		return
	}
	m := d.m.Mem
	va := mem.VirtAddr(e.addr)
	if data == nil {
		m.Write(nil, node, va, size)
		return
	}
	m.WriteBytes(nil, node, va, data)
}

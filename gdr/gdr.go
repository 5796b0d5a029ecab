package gdr

import (
	"errors"
	"fmt"
	"math"
	"syscall"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/gpu"
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/sim"
)

// GPUPageSize is gdrdrv's GPU_PAGE_SIZE: pins and mappings are in whole
// 64 KiB pages, those of nvidia_p2p.
const GPUPageSize = nvp2p.GPUPageSize

// Parameters. The anchor is gdrcopy's README (github.com/NVIDIA/gdrcopy,
// README.md, "Tests": copylat and copybw on a Tesla P100-PCIE-16GB and
// a K40m), the only published numbers for this path.
var (
	// StoreOverhead is what a gdr_copy_to_mapping costs the CPU before
	// its bytes: copylat's 1-byte gdr_copy_to_mapping, 0.0969 µs.
	StoreOverhead = 97 * sim.Nanosecond
	// WCStoreRate is the rate at which one thread's write-combined
	// stores leave the CPU, in bytes/s: copylat's 16 MiB
	// gdr_copy_to_mapping in 1634.56 µs (10.27 GB/s); copybw gives 9.5-9.8
	// GB/s for 64 KiB. The fabric caps it further where the path is
	// narrower or shared.
	WCStoreRate = 10.27e9
	// LoadBytes is what one uncached load brings back: gdrcopy's
	// gdr_copy_from_mapping uses SSE4.1 MOVNTDQA, whose streaming load
	// from write-combining memory fetches a whole 64-byte line into a
	// streaming-load buffer (Intel SDM, MOVNTDQA).
	LoadBytes uint64 = 64
	// LoadsInFlight is how many such loads a core keeps outstanding: its
	// line fill buffers (10 since Sandy Bridge: Intel 64 and IA-32
	// Architectures Optimization Reference Manual). With the model's
	// round trip of about a microsecond this reproduces copylat's reads:
	// 64 KiB in 118.8 µs (552 MB/s), 1 byte in 1.10 µs.
	LoadsInFlight uint64 = 10
	// CallCost is one ioctl or mmap of /dev/gdrdrv (open, map, unmap,
	// unpin, close) besides what nvp2p charges for the pin: assumed, a
	// system call and the driver's bookkeeping.
	CallCost = 1 * sim.Microsecond
)

// ErrInvalidated is an access through a mapping whose pin the driver
// revoked (the memory was freed: gdrdrv's free callback zapped the CPU
// mapping, and the hardware would raise SIGBUS) or that was unmapped or
// unpinned.
var ErrInvalidated = errors.New("gdr: mapping invalidated")

// mmapBase is where the model places gdr_map's mappings in a process's
// address space (below the stack, as mmap's top-down layout would).
const mmapBase mem.VirtAddr = 0x7f00_0000_0000

// Driver is gdrdrv, the kernel module of gdrcopy, with libgdrapi over
// it, for one machine.
type Driver struct {
	cu  *cuda.Driver
	p2p *nvp2p.Driver
	m   *machine.Machine
	// Hooks receives every Event.
	Hooks sim.Hooks[Event]
	// nextVA is the next free user address for a mapping.
	nextVA mem.VirtAddr
}

// New loads gdrdrv over the CUDA driver and its nvidia_p2p interface.
func New(cu *cuda.Driver, p2p *nvp2p.Driver) (*Driver, error) {
	if cu == nil || p2p == nil {
		return nil, errors.New("gdr: no CUDA driver or nvidia_p2p interface")
	}
	return &Driver{cu: cu, p2p: p2p, m: cu.System().Machine(), nextVA: mmapBase}, nil
}

// Handle is gdr_t: an open /dev/gdrdrv of one process.
type Handle struct {
	d      *Driver
	kp     *kern.Process
	fd     int
	pins   []*MemHandle
	closed bool
}

// devFile is the open /dev/gdrdrv in the process's descriptor table.
type devFile struct{ h *Handle }

func (f *devFile) FileName() string { return "/dev/gdrdrv" }

// Release is gdrdrv_release: the pins the process left are unmapped and
// unpinned, as when it exits without gdr_close.
func (f *devFile) Release(t *sim.Proc) error {
	h := f.h
	h.closed = true
	var errs []error
	for _, mh := range h.pins {
		errs = append(errs, h.release(t, mh))
	}
	h.pins = nil
	return errors.Join(errs...)
}

// MemHandle is gdr_mh_t: one pinned range.
type MemHandle struct {
	h     *Handle
	pt    *nvp2p.PageTable
	dev   *gpu.Device
	addr  mem.GPUAddr // the pinned range, rounded out to GPU pages
	size  uint64
	mp    *Mapping
	state pinState
}

type pinState uint8

const (
	pinLive pinState = iota
	pinRevoked
	pinUnpinned
)

// Mapping is the user-space mapping gdr_map gives: BAR1 pages of the
// pinned range, write-combined, in the process's address space.
type Mapping struct {
	mh   *MemHandle
	VA   mem.VirtAddr
	Size uint64
	live bool
}

// Live says accesses through the mapping reach the GPU.
func (mp *Mapping) Live() bool { return mp.live && mp.mh.state == pinLive }

// Info is struct gdr_info.
type Info struct {
	VA         mem.GPUAddr
	MappedSize uint64
	PageSize   uint64
	Mapped     bool
	WCMapping  bool
	// BufferID is the allocation's CU_POINTER_ATTRIBUTE_BUFFER_ID.
	BufferID uint64
}

// Info is gdr_get_info.
func (mh *MemHandle) Info() Info {
	return Info{
		VA: mh.addr, MappedSize: mh.size, PageSize: GPUPageSize,
		Mapped: mh.mp != nil && mh.mp.live, WCMapping: mh.mp != nil && mh.mp.live,
		BufferID: mh.pt.BufferID(),
	}
}

// Revoked says the driver took the pin back (its memory was freed):
// gdr_get_callback_flag's flag.
func (mh *MemHandle) Revoked() bool { return mh.state == pinRevoked }

func (d *Driver) fail(t *sim.Proc, ev Event, err error) error {
	ev.Err = err
	d.emit(t, &ev)
	return err
}

// Open is gdr_open: thread t of process kp opens /dev/gdrdrv.
func (d *Driver) Open(t *sim.Proc, kp *kern.Process) (*Handle, error) {
	ev := Event{Op: OpOpen, Call: "gdr_open"}
	if kp == nil {
		return nil, d.fail(t, ev, fmt.Errorf("gdr_open: no process: %w", syscall.EINVAL))
	}
	ev.Process = kp.Name()
	t.Sleep(CallCost)
	h := &Handle{d: d, kp: kp}
	fd, err := kp.Install(&devFile{h: h})
	if err != nil {
		return nil, d.fail(t, ev, fmt.Errorf("gdr_open: %w", err))
	}
	h.fd = fd
	d.emit(t, &ev)
	return h, nil
}

// FD is the descriptor of /dev/gdrdrv in the process.
func (h *Handle) FD() int { return h.fd }

func (h *Handle) event(op Op, call string) Event {
	return Event{Op: op, Call: call, Process: h.kp.Name()}
}

func (h *Handle) check(call string) error {
	if h.closed {
		return fmt.Errorf("%s: handle closed: %w", call, syscall.EBADF)
	}
	return nil
}

// PinBuffer is gdr_pin_buffer: gdrdrv rounds [addr, addr+size) out to
// 64 KiB GPU pages and pins it with nvidia_p2p_get_pages (tokens as
// given; 0 and 0 for memory of the calling process), registering a
// free callback that zaps the mapping and frees the page table. The
// errors are nvp2p's: EINVAL for memory that is not the process's device
// memory, ENOMEM when BAR1 is full.
func (h *Handle) PinBuffer(t *sim.Proc, addr mem.GPUAddr, size uint64, p2pToken uint64, vaSpace uint32) (*MemHandle, error) {
	const call = "gdr_pin_buffer"
	d := h.d
	ev := h.event(OpPinBuffer, call)
	ev.Addr, ev.Size = addr, size
	if err := h.check(call); err != nil {
		return nil, d.fail(t, ev, err)
	}
	if size == 0 || uint64(addr)+size < uint64(addr) {
		return nil, d.fail(t, ev, fmt.Errorf("%s(%v, %#x): %w", call, addr, size, syscall.EINVAL))
	}
	t.Sleep(CallCost)
	base := uint64(addr) &^ (GPUPageSize - 1)
	end := (uint64(addr) + size + GPUPageSize - 1) &^ (GPUPageSize - 1)
	mh := &MemHandle{h: h, addr: mem.GPUAddr(base), size: end - base}
	ev.Addr, ev.Size = mh.addr, mh.size
	pt, err := d.p2p.GetPages(t, h.kp, p2pToken, vaSpace, mh.addr, mh.size, d.freeCallback, mh)
	if err != nil {
		return nil, d.fail(t, ev, fmt.Errorf("%s(%v, %#x): %w", call, addr, size, err))
	}
	mh.pt, mh.dev = pt, pt.GPU()
	ev.Device = mh.dev.Index
	h.pins = append(h.pins, mh)
	d.emit(t, &ev)
	return mh, nil
}

// freeCallback is gdrdrv's get_pages free callback: the memory is being
// freed, so the CPU mapping is zapped and the table freed (the only
// nvidia_p2p call allowed there).
func (d *Driver) freeCallback(t *sim.Proc, data any) {
	mh := data.(*MemHandle)
	mh.state = pinRevoked
	ev := mh.h.event(OpInvalidate, "gdrdrv free callback")
	ev.Addr, ev.Size, ev.Device = mh.addr, mh.size, mh.dev.Index
	ev.Err = d.p2p.FreePageTable(t, mh.pt)
	d.emit(t, &ev)
}

func (h *Handle) live(call string, mh *MemHandle) error {
	if err := h.check(call); err != nil {
		return err
	}
	if mh == nil || mh.h != h || mh.state == pinUnpinned {
		return fmt.Errorf("%s: not a pinned buffer of this handle: %w", call, syscall.EINVAL)
	}
	return nil
}

// Map is gdr_map: mmap of the pinned range's BAR1 pages into the
// process, write-combined (gdrdrv_mmap with pgprot_writecombine). size
// must not exceed the pinned size (EINVAL); a buffer maps once (a
// second gdr_map is EAGAIN, "mh is mapped already" in gdrapi.c). A
// revoked pin is EINVAL.
func (h *Handle) Map(t *sim.Proc, mh *MemHandle, size uint64) (*Mapping, error) {
	const call = "gdr_map"
	d := h.d
	ev := h.event(OpMap, call)
	if err := h.live(call, mh); err != nil {
		return nil, d.fail(t, ev, err)
	}
	ev.Addr, ev.Size, ev.Device = mh.addr, size, mh.dev.Index
	t.Sleep(CallCost)
	switch {
	case mh.state == pinRevoked:
		return nil, d.fail(t, ev, fmt.Errorf("%s: the pin was revoked (memory freed): %w", call, syscall.EINVAL))
	case size == 0 || size > mh.size:
		return nil, d.fail(t, ev, fmt.Errorf("%s: size %#x of a %#x-byte pin: %w", call, size, mh.size, syscall.EINVAL))
	case mh.mp != nil && mh.mp.live:
		return nil, d.fail(t, ev, fmt.Errorf("%s: already mapped: %w", call, syscall.EAGAIN))
	}
	length := (size + GPUPageSize - 1) &^ (GPUPageSize - 1)
	mp := &Mapping{mh: mh, VA: d.nextVA, Size: size, live: true}
	if err := h.kp.MM.Map(kern.VMA{Start: mp.VA, Size: length, Name: "/dev/gdrdrv"}); err != nil {
		return nil, d.fail(t, ev, fmt.Errorf("%s: %w", call, err))
	}
	// A guard page between mappings, so that an overrun is no other
	// mapping's.
	d.nextVA += mem.VirtAddr(length + GPUPageSize)
	mh.mp = mp
	ev.VA = mp.VA
	d.emit(t, &ev)
	return mp, nil
}

// Unmap is gdr_unmap.
func (h *Handle) Unmap(t *sim.Proc, mh *MemHandle, mp *Mapping) error {
	const call = "gdr_unmap"
	d := h.d
	ev := h.event(OpUnmap, call)
	if err := h.live(call, mh); err != nil {
		return d.fail(t, ev, err)
	}
	ev.Addr, ev.Device = mh.addr, mh.dev.Index
	if mp == nil || mp.mh != mh || !mp.live {
		return d.fail(t, ev, fmt.Errorf("%s: not a live mapping of this buffer: %w", call, syscall.EINVAL))
	}
	t.Sleep(CallCost)
	ev.VA, ev.Size = mp.VA, mp.Size
	d.unmap(mp)
	d.emit(t, &ev)
	return nil
}

func (d *Driver) unmap(mp *Mapping) {
	mp.live = false
	// The VMA is gone if the process's exit took it first.
	_, _ = mp.mh.h.kp.MM.Unmap(mp.VA)
}

// UnpinBuffer is gdr_unpin_buffer: a mapping still there is zapped
// (accesses through it fail) and the pages are put. For a pin the
// driver revoked there is nothing left to put: 0, as gdrdrv.
func (h *Handle) UnpinBuffer(t *sim.Proc, mh *MemHandle) error {
	const call = "gdr_unpin_buffer"
	d := h.d
	ev := h.event(OpUnpinBuffer, call)
	if err := h.live(call, mh); err != nil {
		return d.fail(t, ev, err)
	}
	ev.Addr, ev.Size, ev.Device = mh.addr, mh.size, mh.dev.Index
	t.Sleep(CallCost)
	err := h.release(t, mh)
	for i, x := range h.pins {
		if x == mh {
			h.pins = append(h.pins[:i], h.pins[i+1:]...)
			break
		}
	}
	if err != nil {
		return d.fail(t, ev, fmt.Errorf("%s: %w", call, err))
	}
	d.emit(t, &ev)
	return nil
}

// release unmaps and unpins mh.
func (h *Handle) release(t *sim.Proc, mh *MemHandle) error {
	if mh.mp != nil && mh.mp.live {
		h.d.unmap(mh.mp)
	}
	revoked := mh.state == pinRevoked
	mh.state = pinUnpinned
	if revoked {
		return nil
	}
	return h.d.p2p.PutPages(t, 0, 0, mh.addr, mh.pt)
}

// Close is gdr_close: the descriptor closes; with its last reference
// gdrdrv releases every pin left.
func (h *Handle) Close(t *sim.Proc) error {
	const call = "gdr_close"
	d := h.d
	ev := h.event(OpClose, call)
	if err := h.check(call); err != nil {
		return d.fail(t, ev, err)
	}
	t.Sleep(CallCost)
	if err := h.kp.Close(t, h.fd); err != nil {
		return d.fail(t, ev, fmt.Errorf("%s: %w", call, err))
	}
	h.closed = true
	d.emit(t, &ev)
	return nil
}

// access checks a copy of size bytes at off through mp.
func (h *Handle) access(call string, mp *Mapping, off, size uint64) error {
	if err := h.check(call); err != nil {
		return err
	}
	if mp == nil || mp.mh.h != h {
		return fmt.Errorf("%s: not a mapping of this handle: %w", call, syscall.EINVAL)
	}
	if !mp.Live() {
		return fmt.Errorf("%s: %#x bytes at %v: %w", call, size, mp.VA+mem.VirtAddr(off), ErrInvalidated)
	}
	if size == 0 || off+size < off || off+size > mp.Size {
		return fmt.Errorf("%s: %#x bytes at offset %#x of a %#x-byte mapping: %w", call, size, off, mp.Size, syscall.EINVAL)
	}
	return nil
}

// path is the PCIe path between the thread's node and the GPU in
// direction toGPU, without the host DRAM (the CPU's stores and loads go
// from its core, not from memory), as load-only hops (they take capacity
// but the latency is counted apart), and its one-way latency.
func (h *Handle) path(mh *MemHandle, toGPU bool) (fabric.Route, sim.Time, error) {
	m := h.d.m
	node := h.kp.Node()
	host, err := m.HostMemory(node)
	if err != nil {
		return fabric.Route{}, 0, err
	}
	src, dst := host, mh.dev.GPU.Memory()
	if !toGPU {
		src, dst = dst, src
	}
	r, err := m.Route(src, dst)
	if err != nil {
		return fabric.Route{}, 0, err
	}
	var out fabric.Route
	for _, hp := range r.Hops {
		if hp.Link == m.Nodes[node].DRAM {
			continue
		}
		out.Hops = append(out.Hops, hp)
	}
	lat := out.Latency()
	if f := m.Fabric.Factors().Latency; f != 1 && f > 0 {
		lat = sim.Time(math.Round(float64(lat) * f))
	}
	for i := range out.Hops {
		out.Hops[i].Load = true
	}
	return out, lat, nil
}

// vram is the VRAM behind [off, off+size) of the mapping.
func (mp *Mapping) vram(off, size uint64) ([]mem.PhysRange, error) {
	mh := mp.mh
	ap := mh.dev.BAR1()
	var out []mem.PhysRange
	for size > 0 {
		i := off / GPUPageSize
		in := off % GPUPageSize
		n := min(size, GPUPageSize-in)
		bar := mh.pt.Pages[i].PhysicalAddress + mem.PhysAddr(in)
		var err error
		if out, err = ap.Resolve(out, bar, n); err != nil {
			return nil, err
		}
		off += n
		size -= n
	}
	return out, nil
}

// writer names the CPU as the agent in VRAM's version records.
func (h *Handle) writer() string { return fmt.Sprintf("cpu(%s) via gdr", h.kp.Name()) }

// copyPrologue is what both copies check and find before they move
// bytes: the call's event, the access allowed, the VRAM behind the
// range, and the path between the CPU and the GPU (toGPU: the stores'
// direction). On an error, the event to fail with.
func (h *Handle) copyPrologue(op Op, call string, mp *Mapping, off, size uint64, toGPU bool) (ev Event, ranges []mem.PhysRange, route fabric.Route, lat sim.Time, err error) {
	ev = h.event(op, call)
	ev.Offset, ev.Size = off, size
	if mp != nil {
		ev.VA, ev.Addr, ev.Device = mp.VA, mp.mh.addr+mem.GPUAddr(off), mp.mh.dev.Index
	}
	if err = h.access(call, mp, off, size); err != nil {
		return ev, nil, fabric.Route{}, 0, err
	}
	if ranges, err = mp.vram(off, size); err != nil {
		return ev, nil, fabric.Route{}, 0, fmt.Errorf("%s: %w", call, err)
	}
	if route, lat, err = h.path(mp.mh, toGPU); err != nil {
		return ev, nil, fabric.Route{}, 0, fmt.Errorf("%s: %w", call, err)
	}
	return ev, ranges, route, lat, nil
}

// CopyToMapping is gdr_copy_to_mapping: thread t stores data at offset
// off of the mapping. The thread pays StoreOverhead and the bytes at
// WCStoreRate, capped by the fabric on the path to the GPU; the writes
// are posted and land in VRAM one path latency after the last store
// leaves (new versions; the bytes in payload mode). The call's cost is
// CPU time.
func (h *Handle) CopyToMapping(t *sim.Proc, mp *Mapping, off uint64, data []byte) error {
	const call = "gdr_copy_to_mapping"
	d := h.d
	size := uint64(len(data))
	ev, ranges, route, lat, err := h.copyPrologue(OpCopyTo, call, mp, off, size, true)
	if err != nil {
		return d.fail(t, ev, err)
	}
	start := t.Now()
	t.Sleep(StoreOverhead)
	// The core issues the stores while the flow runs: CPU time too
	// (Sleep has counted the overhead already).
	stores := t.Now()
	fl := d.m.Fabric.Start(call, route, int64(size), fabric.MaxRate(WCStoreRate))
	t.Wait(fl.Done())
	t.Charge(t.Now() - stores)
	payload := append([]byte(nil), data...)
	name := h.writer()
	memory := d.m.Mem
	t.Engine().At(t.Now()+lat, func() {
		var o uint64
		for _, r := range ranges {
			if memory.Payload() {
				memory.DeviceWriteBytes(name, true, r.Start, payload[o:o+r.Size])
			} else {
				memory.DeviceWrite(name, true, r.Start, r.Size)
			}
			o += r.Size
		}
	})
	ev.Duration = t.Now() - start
	d.emit(t, &ev)
	return nil
}

// RoundTrip is the time of one uncached load through mp by a thread of
// the mapping's process: a read request to the GPU and its completion
// back.
func (h *Handle) RoundTrip(mp *Mapping) (sim.Time, error) {
	_, lat, err := h.path(mp.mh, false)
	return 2 * lat, err
}

// LoadRate is the rate of a long read through the mapping with round
// trip rtt: LoadsInFlight loads of LoadBytes per round trip.
func LoadRate(rtt sim.Time) float64 {
	return float64(LoadBytes*LoadsInFlight) / rtt.Seconds()
}

// CopyFromMapping is gdr_copy_from_mapping: thread t loads len(buf)
// bytes at offset off of the mapping into buf (in payload mode; the
// versions are read in any mode). Each load is uncached, a round trip
// over PCIe: the first costs a whole round trip, and the rest follow at
// LoadRate, capped by the fabric. The call's cost is CPU time (the
// core stalls on its loads).
func (h *Handle) CopyFromMapping(t *sim.Proc, mp *Mapping, off uint64, buf []byte) error {
	const call = "gdr_copy_from_mapping"
	d := h.d
	size := uint64(len(buf))
	ev, ranges, route, lat, err := h.copyPrologue(OpCopyFrom, call, mp, off, size, false)
	if err != nil {
		return d.fail(t, ev, err)
	}
	rtt := 2 * lat
	start := t.Now()
	t.Sleep(rtt)
	// The first load's round trip brought its LoadBytes; the others
	// stream behind it, the core stalled on them (CPU time; Sleep has
	// counted the first round trip already).
	if rest := int64(size) - int64(min(size, LoadBytes)); rest > 0 {
		loads := t.Now()
		fl := d.m.Fabric.Start(call, route, rest, fabric.MaxRate(LoadRate(rtt)))
		t.Wait(fl.Done())
		t.Charge(t.Now() - loads)
	}
	name := h.writer()
	memory := d.m.Mem
	var o uint64
	for _, r := range ranges {
		if memory.Payload() {
			memory.DeviceReadBytes(name, true, r.Start, buf[o:o+r.Size])
		} else {
			memory.DeviceRead(name, true, r.Start, r.Size)
		}
		o += r.Size
	}
	ev.Duration = t.Now() - start
	d.emit(t, &ev)
	return nil
}

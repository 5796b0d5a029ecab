package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dmalab/dmalab/hw/cuda"
)

// Route names one way data moves: the engine that moves it ("ce" for the
// copy engines, "sm" for the copy kernel, "sync" for synchronous copies) and
// the memory kinds at each end. FakeConfig.Bandwidth is keyed by it.
type Route struct {
	Engine   string
	Src, Dst MemKind
}

// FakeConfig describes a fake GPU machine. Zero fields take H200-like
// defaults (see NewFake).
type FakeConfig struct {
	GPUs        int
	Name        string
	TotalMemory int64
	SMs         int
	Attributes  map[string]int
	Machine     Machine

	// Bandwidth overrides the default GB/s of a route.
	Bandwidth map[Route]float64
	// CopyLatency is the GPU-side fixed cost of each queued copy,
	// LaunchLatency of each kernel, SpinLatency the time from Release to
	// the spin kernel's end.
	CopyLatency, LaunchLatency, SpinLatency time.Duration
	// EnqueueCost is the host time of one asynchronous call, CallCost of
	// any other small call, SyncOverhead of a synchronous copy on top of
	// its transfer.
	EnqueueCost, CallCost, SyncOverhead time.Duration
	// PinPerGiB and UnpinPerGiB are cuMemHostRegister/Unregister costs.
	PinPerGiB, UnpinPerGiB time.Duration

	// Unified memory, tracked per 4 KiB page (never touched, on the host,
	// on the GPU). GPUFault is the service time of one GPU fault from one
	// thread, or of one batch of up to 256 faults from many; each fault
	// migrates the 64 KiB around it at MigrateGBps. CPUFault is the CPU's
	// fault on a page the GPU holds, which migrates the page back at
	// CPUMigrateGBps; FirstTouch the CPU's fault on a page never touched;
	// Access a GPU access to a resident page. PrefetchGBps is the rate of
	// Prefetch, RemoteGBps of the GPU reading host-resident pages it maps
	// (AdviseRemote). HostLoad and DeviceLoad are the latencies of one
	// dependent GPU load from host and from device memory (Chase).
	GPUFault, CPUFault, FirstTouch, Access, HostLoad, DeviceLoad time.Duration
	MigrateGBps, CPUMigrateGBps, PrefetchGBps, RemoteGBps        float64

	// Fail, if set, is asked before every Device and Driver operation (by
	// its method name, "CopyAsync", "Alloc", ...); an error it returns is
	// the operation's.
	Fail func(op string) error
	// Corrupt, if set, is asked when a copy's data lands (by the method
	// that queued it); true flips one byte of the destination.
	Corrupt func(op string) bool
	// DMABufErr is what ExportDMABuf returns.
	DMABufErr error
	// FDInfo, when set, replaces the fdinfo text ExportDMABuf returns.
	FDInfo string
	// NoPeerAccess makes Peers empty, as on GPUs that cannot map each
	// other's memory.
	NoPeerAccess bool
}

// Fake is a deterministic Driver for tests: real byte buffers, so that data
// verification is exercised, and virtual time from simple formulas, so that
// every measured number is known in advance.
//
// Timing model: the host has a clock that each call advances by its cost.
// A stream runs its operations in order; an operation starts when the
// stream is free and, unless a spin kernel held it, not before the host
// queued it. A copy takes CopyLatency + size/bandwidth. The data of queued
// work lands when its stream is synchronized, so a measurement that reads
// results without synchronizing sees stale bytes, as it might on a GPU.
type Fake struct {
	cfg     FakeConfig
	devices map[int]*fakeDevice // open devices, for leak checks
	leaks   []string
	// dmabufIno numbers the fake's dma-buf exports.
	dmabufIno int
}

// NewFake returns a fake driver.
func NewFake(cfg FakeConfig) *Fake {
	if cfg.GPUs == 0 {
		cfg.GPUs = 1
	}
	if cfg.Name == "" {
		cfg.Name = "Fake H200"
	}
	if cfg.TotalMemory == 0 {
		cfg.TotalMemory = 16 << 30
	}
	if cfg.SMs == 0 {
		cfg.SMs = 132
	}
	if cfg.Attributes == nil {
		cfg.Attributes = map[string]int{
			"managed_memory": 1, "concurrent_managed_access": 1, "pageable_memory_access": 0,
			"dma_buf_supported": 1, "gpu_direct_rdma_supported": 1, "async_engine_count": 3,
			"host_native_atomic_supported": 0, "can_map_host_memory": 1, "unified_addressing": 1,
			"compute_capability_major": 9, "compute_capability_minor": 0, "multiprocessor_count": cfg.SMs,
		}
	}
	if cfg.Machine == (Machine{}) {
		cfg.Machine = Machine{Hostname: "fake", Kernel: "6.0.0-fake", CPU: "Fake Xeon", CPUs: 16, NUMANodes: 1,
			DriverVersion: "580.0.0-fake", CUDAVersion: "13.0"}
	}
	cfg.Machine.GPUCount = cfg.GPUs
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.CopyLatency, 1500*time.Nanosecond)
	def(&cfg.LaunchLatency, 2*time.Microsecond)
	def(&cfg.SpinLatency, time.Microsecond)
	def(&cfg.EnqueueCost, 2*time.Microsecond)
	def(&cfg.CallCost, 200*time.Nanosecond)
	def(&cfg.SyncOverhead, 6*time.Microsecond)
	def(&cfg.PinPerGiB, 35*time.Millisecond)
	def(&cfg.UnpinPerGiB, 14*time.Millisecond)
	def(&cfg.GPUFault, 20*time.Microsecond)
	def(&cfg.CPUFault, 8*time.Microsecond)
	def(&cfg.FirstTouch, 250*time.Nanosecond)
	def(&cfg.Access, 500*time.Nanosecond)
	def(&cfg.HostLoad, time.Microsecond)
	def(&cfg.DeviceLoad, 600*time.Nanosecond)
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	deff(&cfg.MigrateGBps, 12)
	deff(&cfg.CPUMigrateGBps, 6)
	deff(&cfg.PrefetchGBps, 25)
	deff(&cfg.RemoteGBps, 50)
	return &Fake{cfg: cfg, devices: map[int]*fakeDevice{}}
}

// defaultBandwidth is the fake's GB/s for a route when the config does not
// override it: an H200 on PCIe Gen5 x16, roughly as measured on the H200
// machine (docs/measurements/2026-11-21-h200-probe.txt).
func defaultBandwidth(r Route) float64 {
	switch {
	case r.Src == MemPeer || r.Dst == MemPeer:
		if r.Engine == "sm" {
			return 45
		}
		return 48
	case !r.Src.IsHost() && !r.Dst.IsHost():
		if r.Engine == "sm" {
			return 1800
		}
		return 1500
	case r.Engine == "sm":
		return 50
	case r.Src == MemPageable || r.Dst == MemPageable:
		if r.Dst == MemPageable {
			return 15
		}
		return 20
	case r.Src.IsHost():
		return 55
	}
	return 54
}

// Bandwidth returns the fake's GB/s for a route.
func (f *Fake) Bandwidth(r Route) float64 {
	if bw, ok := f.cfg.Bandwidth[r]; ok {
		return bw
	}
	return defaultBandwidth(r)
}

// Config returns the configuration with defaults filled in.
func (f *Fake) Config() FakeConfig { return f.cfg }

// Leaks returns the buffers, streams and events that devices still held when
// WithDevice returned, one line each.
func (f *Fake) Leaks() []string { return slices.Clone(f.leaks) }

func (f *Fake) fail(op string) error {
	if f.cfg.Fail != nil {
		if err := f.cfg.Fail(op); err != nil {
			return fmt.Errorf("fake %s: %w", op, err)
		}
	}
	return nil
}

// Machine implements Driver.
func (f *Fake) Machine() (Machine, error) {
	if err := f.fail("Machine"); err != nil {
		return Machine{}, err
	}
	return f.cfg.Machine, nil
}

// DeviceCount implements Driver.
func (f *Fake) DeviceCount() (int, error) {
	if err := f.fail("DeviceCount"); err != nil {
		return 0, err
	}
	return f.cfg.GPUs, nil
}

// WithDevice implements Driver.
func (f *Fake) WithDevice(ordinal int, fn func(Device) error) error {
	if err := f.fail("WithDevice"); err != nil {
		return err
	}
	if ordinal < 0 || ordinal >= f.cfg.GPUs {
		return fmt.Errorf("fake GPU %d: %w", ordinal, cuda.ErrNoDevice)
	}
	d := &fakeDevice{f: f, ord: ordinal, bufs: map[*Buffer]bool{}, streams: map[Stream]*fakeStream{}, events: map[Event]*fakeEvent{}}
	err := fn(d)
	for b := range d.bufs {
		f.leaks = append(f.leaks, fmt.Sprintf("gpu %d: %v", ordinal, b))
	}
	for s := range d.streams {
		f.leaks = append(f.leaks, fmt.Sprintf("gpu %d: stream %d", ordinal, s))
	}
	for e := range d.events {
		f.leaks = append(f.leaks, fmt.Sprintf("gpu %d: event %d", ordinal, e))
	}
	if d.pinnedPages > 0 {
		f.leaks = append(f.leaks, fmt.Sprintf("gpu %d: %d pinned bytes", ordinal, d.pinnedPages))
	}
	sort.Strings(f.leaks)
	return err
}

// ps is the fake's time unit: integer picoseconds.
type ps = int64

func toPS(d time.Duration) ps           { return ps(d) * 1000 }
func fromPS(t ps) time.Duration         { return time.Duration(t / 1000) }
func transfer(n int64, gbps float64) ps { return ps(float64(n) / gbps * 1e3) } // bytes / (GB/s) in ps

type fakeDevice struct {
	f           *Fake
	ord         int
	host        ps // the host's clock
	allocated   int64
	nextAddr    uint64
	nextBufID   uint64
	pinnedPages int64
	bufs        map[*Buffer]bool
	streams     map[Stream]*fakeStream
	nextHandle  uintptr
	events      map[Event]*fakeEvent
	armed       []*fakeSpin // blocked, not yet released
	finished    []*fakeSpin // released or timed out, not yet settled
}

type fakeStream struct {
	ready   ps        // when the last executed operation ends
	queue   []*fakeOp // queued, not yet executed
	effects []func()  // data of executed operations, landing at Synchronize
	events  []*fakeEvent
}

type fakeEvent struct {
	executed bool
	complete bool // executed and its stream synchronized since
	at       ps
}

type fakeSpin struct {
	deadline ps // host time at which it times out, once started
	released bool
	at       ps // release time
	timedOut bool
	done     bool
	timeout  ps
}

type fakeOp struct {
	enq    ps
	dur    ps
	effect func()
	record *fakeEvent
	wait   *fakeEvent
	spin   *fakeSpin
}

type fakeBuf struct {
	data   []byte
	id     uint64
	pinned bool
	ranges map[int64]int64 // PinRange: offset to size
	pages  []uint8         // managed memory: where each 4 KiB page is
	remote bool            // managed memory: AdviseRemote is on
}

// Where a managed page is.
const (
	pageNone uint8 = iota
	pageHost
	pageGPU
)

const (
	umPage  = 4 << 10
	umChunk = 64 << 10 // what one GPU fault migrates
)

func (d *fakeDevice) call(op string, cost time.Duration) error {
	if err := d.f.fail(op); err != nil {
		return err
	}
	d.host += toPS(cost)
	return nil
}

func (d *fakeDevice) Info() DeviceInfo {
	c := d.f.cfg
	attrs := map[string]int{}
	for k, v := range c.Attributes {
		attrs[k] = v
	}
	return DeviceInfo{
		Ordinal: d.ord, Name: c.Name, PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x18+d.ord),
		TotalMemory: c.TotalMemory, ComputeCapability: "9.0", Multiprocessors: c.SMs, Attributes: attrs,
		PCIe: &PCIeLink{CurrentGen: 5, CurrentWidth: 16, MaxGen: 5, MaxWidth: 16},
		BAR1: &BAR1{TotalBytes: 256 << 30, UsedBytes: 1 << 20},
	}
}

func (d *fakeDevice) Now() time.Duration { return fromPS(d.host) }

func (d *fakeDevice) MemInfo() (int64, int64, error) {
	if err := d.call("MemInfo", d.f.cfg.CallCost); err != nil {
		return 0, 0, err
	}
	return d.f.cfg.TotalMemory - d.allocated, d.f.cfg.TotalMemory, nil
}

func (d *fakeDevice) Alloc(kind MemKind, size int64) (*Buffer, error) {
	if err := d.call("Alloc", d.f.cfg.CallCost); err != nil {
		return nil, err
	}
	if size <= 0 || kind < MemDevice || kind > MemManaged {
		return nil, fmt.Errorf("fake Alloc(%v, %d): %w", kind, size, cuda.ErrorInvalidValue)
	}
	if !kind.IsHost() {
		if d.allocated+size > d.f.cfg.TotalMemory {
			return nil, fmt.Errorf("fake Alloc(%v, %d): %w", kind, size, cuda.ErrorOutOfMemory)
		}
		d.allocated += size
	}
	d.nextBufID++
	fb := &fakeBuf{data: make([]byte, size), id: d.nextBufID, pinned: kind != MemPageable}
	if kind == MemManaged {
		fb.pages = make([]uint8, (size+umPage-1)/umPage)
	}
	b := &Buffer{Kind: kind, Size: size, impl: fb}
	if kind != MemDevice {
		b.Host = fb.data
	}
	if kind == MemDevice || kind == MemMapped || kind == MemRegistered || kind == MemManaged {
		b.DevAddr = cuda.DevicePtr(0x7f00_0000_0000 + d.nextAddr)
		d.nextAddr += uint64(size+0xfffff) &^ 0xfffff
	}
	if kind == MemRegistered {
		d.pinnedPages += size
	}
	d.bufs[b] = true
	return b, nil
}

func (d *fakeDevice) Peers() ([]int, error) {
	if err := d.call("Peers", d.f.cfg.CallCost); err != nil {
		return nil, err
	}
	var out []int
	for i := range d.f.cfg.GPUs {
		if i != d.ord && !d.f.cfg.NoPeerAccess {
			out = append(out, i)
		}
	}
	return out, nil
}

func (d *fakeDevice) AllocPeer(ordinal int, size int64) (*Buffer, error) {
	if err := d.call("AllocPeer", d.f.cfg.CallCost); err != nil {
		return nil, err
	}
	peers, _ := d.Peers()
	if !slices.Contains(peers, ordinal) || size <= 0 {
		return nil, fmt.Errorf("fake AllocPeer(%d, %d) on GPU %d: %w", ordinal, size, d.ord, cuda.ErrorInvalidValue)
	}
	d.nextBufID++
	fb := &fakeBuf{data: make([]byte, size), id: d.nextBufID, pinned: true}
	b := &Buffer{Kind: MemPeer, Size: size, Peer: ordinal, impl: fb,
		DevAddr: cuda.DevicePtr(0x7e00_0000_0000 + uint64(ordinal)<<36 + d.nextAddr)}
	d.nextAddr += uint64(size+0xfffff) &^ 0xfffff
	d.bufs[b] = true
	return b, nil
}

func (d *fakeDevice) own(b *Buffer) (*fakeBuf, error) {
	if b == nil || !d.bufs[b] {
		return nil, fmt.Errorf("fake: %v is not a live buffer of this device: %w", b, cuda.ErrorInvalidValue)
	}
	return b.impl.(*fakeBuf), nil
}

func (d *fakeDevice) Free(b *Buffer) error {
	if err := d.call("Free", d.f.cfg.CallCost); err != nil {
		return err
	}
	if _, err := d.own(b); err != nil {
		return err
	}
	if !b.Kind.IsHost() && b.Kind != MemPeer {
		d.allocated -= b.Size
	}
	if b.Kind == MemRegistered {
		// Freeing registered memory unregisters it; a pageable buffer freed
		// while pinned stays counted and shows up in Leaks.
		d.pinnedPages -= b.Size
	}
	delete(d.bufs, b)
	return nil
}

func (d *fakeDevice) Pin(b *Buffer) error {
	fb, err := d.own(b)
	if err != nil {
		return err
	}
	if b.Kind != MemPageable || fb.pinned {
		return fmt.Errorf("fake Pin(%v): %w", b, cuda.ErrorHostAlreadyRegistered)
	}
	if err := d.call("Pin", time.Duration(float64(d.f.cfg.PinPerGiB)*float64(b.Size)/(1<<30))); err != nil {
		return err
	}
	fb.pinned = true
	d.pinnedPages += b.Size
	return nil
}

// PinRange costs what Pin of size bytes costs and refuses a range that
// overlaps one pinned, as cuMemHostRegister does.
func (d *fakeDevice) PinRange(b *Buffer, off, size int64) error {
	fb, err := d.own(b)
	if err != nil {
		return err
	}
	if b.Kind != MemPageable || fb.pinned || off < 0 || size <= 0 || off+size > b.Size {
		return fmt.Errorf("fake PinRange(%v, %d, %d): %w", b, off, size, cuda.ErrorInvalidValue)
	}
	for o, n := range fb.ranges {
		if off < o+n && o < off+size {
			return fmt.Errorf("fake PinRange(%v, %d, %d): %w", b, off, size, cuda.ErrorHostAlreadyRegistered)
		}
	}
	if err := d.call("Pin", time.Duration(float64(d.f.cfg.PinPerGiB)*float64(size)/(1<<30))); err != nil {
		return err
	}
	if fb.ranges == nil {
		fb.ranges = map[int64]int64{}
	}
	fb.ranges[off] = size
	d.pinnedPages += size
	return nil
}

// UnpinRange undoes a PinRange of exactly that range.
func (d *fakeDevice) UnpinRange(b *Buffer, off, size int64) error {
	fb, err := d.own(b)
	if err != nil {
		return err
	}
	if n, ok := fb.ranges[off]; !ok || n != size {
		return fmt.Errorf("fake UnpinRange(%v, %d, %d): %w", b, off, size, cuda.Result(713))
	}
	if err := d.call("Unpin", time.Duration(float64(d.f.cfg.UnpinPerGiB)*float64(size)/(1<<30))); err != nil {
		return err
	}
	delete(fb.ranges, off)
	d.pinnedPages -= size
	return nil
}

func (d *fakeDevice) Unpin(b *Buffer) error {
	fb, err := d.own(b)
	if err != nil {
		return err
	}
	if b.Kind != MemPageable || !fb.pinned {
		return fmt.Errorf("fake Unpin(%v): %w", b, cuda.Result(713))
	}
	if err := d.call("Unpin", time.Duration(float64(d.f.cfg.UnpinPerGiB)*float64(b.Size)/(1<<30))); err != nil {
		return err
	}
	fb.pinned = false
	d.pinnedPages -= b.Size
	return nil
}

func (d *fakeDevice) Upload(b *Buffer, src []byte) error {
	fb, err := d.own(b)
	if err != nil {
		return err
	}
	if int64(len(src)) > b.Size {
		return fmt.Errorf("fake Upload of %d B to %v: %w", len(src), b, cuda.ErrorInvalidValue)
	}
	if err := d.call("Upload", d.f.cfg.SyncOverhead+fromPS(transfer(int64(len(src)), 20))); err != nil {
		return err
	}
	copy(fb.data, src)
	return nil
}

func (d *fakeDevice) Download(b *Buffer, dst []byte) error {
	fb, err := d.own(b)
	if err != nil {
		return err
	}
	if int64(len(dst)) > b.Size {
		return fmt.Errorf("fake Download of %d B from %v: %w", len(dst), b, cuda.ErrorInvalidValue)
	}
	if err := d.call("Download", d.f.cfg.SyncOverhead+fromPS(transfer(int64(len(dst)), 15))); err != nil {
		return err
	}
	copy(dst, fb.data)
	return nil
}

func (d *fakeDevice) handle() uintptr {
	d.nextHandle++
	return d.nextHandle
}

func (d *fakeDevice) NewStream() (Stream, error) {
	if err := d.call("NewStream", d.f.cfg.CallCost); err != nil {
		return 0, err
	}
	s := Stream(d.handle())
	d.streams[s] = &fakeStream{}
	return s, nil
}

func (d *fakeDevice) stream(s Stream) (*fakeStream, error) {
	fs, ok := d.streams[s]
	if !ok {
		return nil, fmt.Errorf("fake: stream %d: %w", s, cuda.ErrorInvalidHandle)
	}
	return fs, nil
}

func (d *fakeDevice) DestroyStream(s Stream) error {
	if err := d.call("DestroyStream", d.f.cfg.CallCost); err != nil {
		return err
	}
	if _, err := d.stream(s); err != nil {
		return err
	}
	delete(d.streams, s)
	return nil
}

func (d *fakeDevice) NewEvent() (Event, error) {
	if err := d.call("NewEvent", d.f.cfg.CallCost); err != nil {
		return 0, err
	}
	e := Event(d.handle())
	d.events[e] = &fakeEvent{}
	return e, nil
}

func (d *fakeDevice) event(e Event) (*fakeEvent, error) {
	fe, ok := d.events[e]
	if !ok {
		return nil, fmt.Errorf("fake: event %d: %w", e, cuda.ErrorInvalidHandle)
	}
	return fe, nil
}

func (d *fakeDevice) DestroyEvent(e Event) error {
	if err := d.call("DestroyEvent", d.f.cfg.CallCost); err != nil {
		return err
	}
	if _, err := d.event(e); err != nil {
		return err
	}
	delete(d.events, e)
	return nil
}

// enqueue queues op on s and runs whatever can run.
func (d *fakeDevice) enqueue(name string, s Stream, op *fakeOp) error {
	if err := d.call(name, d.f.cfg.EnqueueCost); err != nil {
		return err
	}
	fs, err := d.stream(s)
	if err != nil {
		return err
	}
	op.enq = d.host
	fs.queue = append(fs.queue, op)
	d.drain()
	return nil
}

// drain executes queued operations, on every stream, until each is empty or
// waits: for a spin not yet released (and not yet past its timeout at the
// current host time), or for an event not yet executed.
func (d *fakeDevice) drain() {
	for progress := true; progress; {
		progress = false
		for _, fs := range d.streams {
			for len(fs.queue) > 0 && d.step(fs, fs.queue[0]) {
				fs.queue = fs.queue[1:]
				progress = true
			}
		}
	}
}

// step executes op at the head of fs if it can run now.
func (d *fakeDevice) step(fs *fakeStream, op *fakeOp) bool {
	start := max(fs.ready, op.enq)
	switch {
	case op.spin != nil:
		sp := op.spin
		if sp.deadline == 0 {
			sp.deadline = start + sp.timeout
		}
		switch {
		case sp.released:
			fs.ready = max(start, sp.at) + toPS(d.f.cfg.SpinLatency)
		case d.host >= sp.deadline:
			sp.timedOut = true
			fs.ready = sp.deadline
			d.armed = slices.DeleteFunc(d.armed, func(x *fakeSpin) bool { return x == sp })
			d.finished = append(d.finished, sp)
		default:
			return false
		}
		sp.done = true
	case op.wait != nil:
		if !op.wait.executed {
			return false
		}
		fs.ready = max(start, op.wait.at)
	case op.record != nil:
		op.record.executed, op.record.complete, op.record.at = true, false, start
		fs.ready = start
		fs.events = append(fs.events, op.record)
	default:
		fs.ready = start + op.dur
		if op.effect != nil {
			fs.effects = append(fs.effects, op.effect)
		}
	}
	return true
}

func (d *fakeDevice) Record(e Event, s Stream) error {
	fe, err := d.event(e)
	if err != nil {
		return err
	}
	fe.executed, fe.complete = false, false
	return d.enqueue("Record", s, &fakeOp{record: fe})
}

func (d *fakeDevice) WaitEvent(s Stream, e Event) error {
	fe, err := d.event(e)
	if err != nil {
		return err
	}
	return d.enqueue("WaitEvent", s, &fakeOp{wait: fe})
}

func (d *fakeDevice) Synchronize(s Stream) error {
	if err := d.f.fail("Synchronize"); err != nil {
		return err
	}
	fs, err := d.stream(s)
	if err != nil {
		return err
	}
	d.drain()
	// A stream held by a spin nobody releases waits for the spin's
	// timeout, as the GPU would.
	for len(fs.queue) > 0 {
		next := ps(-1)
		for _, sp := range d.armed {
			if sp.deadline > 0 && (next < 0 || sp.deadline < next) {
				next = sp.deadline
			}
		}
		if next < 0 {
			return fmt.Errorf("fake Synchronize: stream %d waits forever", s)
		}
		d.host = max(d.host, next)
		d.drain()
	}
	d.host = max(d.host, fs.ready) + toPS(d.f.cfg.CallCost)
	for _, eff := range fs.effects {
		eff()
	}
	fs.effects = nil
	for _, e := range fs.events {
		e.complete = true
	}
	fs.events = nil
	return nil
}

func (d *fakeDevice) Elapsed(start, end Event) (time.Duration, error) {
	if err := d.call("Elapsed", d.f.cfg.CallCost); err != nil {
		return 0, err
	}
	s, err := d.event(start)
	if err != nil {
		return 0, err
	}
	e, err := d.event(end)
	if err != nil {
		return 0, err
	}
	if !s.complete || !e.complete {
		return 0, fmt.Errorf("fake Elapsed: %w", cuda.ErrorNotReady)
	}
	return fromPS(e.at - s.at), nil
}

// copyEffect returns the function that makes a copy's data land.
func (d *fakeDevice) copyEffect(op string, dst, src *fakeBuf, size int64) func() {
	return func() {
		copy(dst.data[:size], src.data[:size])
		if d.f.cfg.Corrupt != nil && d.f.cfg.Corrupt(op) {
			dst.data[size/2] ^= 0x5a
		}
	}
}

func (d *fakeDevice) route(engine string, dst, src *Buffer, size int64) (*fakeBuf, *fakeBuf, float64, error) {
	df, err := d.own(dst)
	if err != nil {
		return nil, nil, 0, err
	}
	sf, err := d.own(src)
	if err != nil {
		return nil, nil, 0, err
	}
	if size <= 0 || size > dst.Size || size > src.Size {
		return nil, nil, 0, fmt.Errorf("fake copy of %d B from %v to %v: %w", size, src, dst, cuda.ErrorInvalidValue)
	}
	if engine == "ce" && (src.Kind == MemPageable || dst.Kind == MemPageable) {
		// cuMemcpyAsync from or to pageable memory is staged synchronously
		// by the host: behind a held stream it would wait for the spin.
		return nil, nil, 0, fmt.Errorf("fake CopyAsync with pageable memory: %w", cuda.ErrorNotSupported)
	}
	if src.Kind.IsHost() && dst.Kind.IsHost() {
		return nil, nil, 0, fmt.Errorf("fake copy host to host: %w", cuda.ErrorInvalidValue)
	}
	return df, sf, d.f.Bandwidth(Route{engine, src.Kind, dst.Kind}), nil
}

func (d *fakeDevice) CopyAsync(dst, src *Buffer, size int64, s Stream) error {
	df, sf, bw, err := d.route("ce", dst, src, size)
	if err != nil {
		return err
	}
	return d.enqueue("CopyAsync", s, &fakeOp{dur: toPS(d.f.cfg.CopyLatency) + transfer(size, bw), effect: d.copyEffect("CopyAsync", df, sf, size)})
}

func (d *fakeDevice) Copy(dst, src *Buffer, size int64) error {
	df, sf, bw, err := d.route("sync", dst, src, size)
	if err != nil {
		return err
	}
	if err := d.call("Copy", d.f.cfg.SyncOverhead+fromPS(transfer(size, bw))); err != nil {
		return err
	}
	d.copyEffect("Copy", df, sf, size)()
	return nil
}

func (d *fakeDevice) CopyKernel(dst, src *Buffer, size int64, s Stream) error {
	if dst.DevAddr == 0 || src.DevAddr == 0 {
		return fmt.Errorf("fake CopyKernel: %v or %v has no device address: %w", src, dst, cuda.ErrorInvalidValue)
	}
	if size%16 != 0 {
		return fmt.Errorf("fake CopyKernel of %d B (not a multiple of 16): %w", size, cuda.ErrorInvalidValue)
	}
	df, sf, bw, err := d.route("sm", dst, src, size)
	if err != nil {
		return err
	}
	for _, b := range []*fakeBuf{df, sf} {
		if b.pages != nil {
			bw = d.f.cfg.MigrateGBps
			if b.remote {
				bw = d.f.cfg.RemoteGBps
			}
		}
	}
	return d.enqueue("CopyKernel", s, &fakeOp{dur: toPS(d.f.cfg.LaunchLatency) + transfer(size, bw), effect: d.copyEffect("CopyKernel", df, sf, size)})
}

func (d *fakeDevice) Block(s Stream, timeout time.Duration) error {
	sp := &fakeSpin{timeout: toPS(timeout)}
	if err := d.enqueue("Block", s, &fakeOp{spin: sp}); err != nil {
		return err
	}
	if !sp.done {
		d.armed = append(d.armed, sp)
	}
	return nil
}

func (d *fakeDevice) Release() error {
	if err := d.call("Release", d.f.cfg.CallCost); err != nil {
		return err
	}
	for _, sp := range d.armed {
		sp.released, sp.at = true, d.host
		d.finished = append(d.finished, sp)
	}
	d.armed = nil
	d.drain()
	return nil
}

func (d *fakeDevice) Settle() (int, error) {
	if err := d.call("Settle", d.f.cfg.CallCost); err != nil {
		return 0, err
	}
	n := 0
	for _, sp := range d.finished {
		if !sp.done {
			return 0, errors.New("fake Settle: a released spin kernel has not finished (synchronize first)")
		}
		if sp.timedOut {
			n++
		}
	}
	d.finished = nil
	return n, nil
}

func (d *fakeDevice) NullCall() error { return d.call("NullCall", d.f.cfg.CallCost) }

func (d *fakeDevice) ExportDMABuf(b *Buffer) (DMABufExport, error) {
	t0 := d.Now()
	if err := d.call("ExportDMABuf", d.f.cfg.CallCost); err != nil {
		return DMABufExport{}, err
	}
	if _, err := d.own(b); err != nil {
		return DMABufExport{}, err
	}
	if b.Kind != MemDevice {
		return DMABufExport{}, fmt.Errorf("fake ExportDMABuf(%v): %w", b, cuda.ErrorInvalidValue)
	}
	if err := d.f.cfg.DMABufErr; err != nil {
		return DMABufExport{}, err
	}
	d.f.dmabufIno++
	// What the lent H100's kernel printed for nvidia.ko's export
	// (driver 580.159.04, 2026-11-25): fs/proc/fd.c's lines (O_RDWR |
	// O_CLOEXEC in octal), then dma_buf_show_fdinfo's.
	info := fmt.Sprintf("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t%d\nsize:\t%d\ncount:\t1\nexp_name:\tnv_dmabuf\n", 2000+d.f.dmabufIno, b.Size)
	if d.f.cfg.FDInfo != "" {
		info = d.f.cfg.FDInfo
	}
	return DMABufExport{Elapsed: d.Now() - t0, FDInfo: info}, nil
}

func (d *fakeDevice) BufferID(b *Buffer) (uint64, error) {
	if err := d.call("BufferID", d.f.cfg.CallCost); err != nil {
		return 0, err
	}
	fb, err := d.own(b)
	if err != nil {
		return 0, err
	}
	return fb.id, nil
}

func (d *fakeDevice) Chase(b *Buffer, start cuda.DevicePtr, steps int) (cuda.DevicePtr, time.Duration, error) {
	fb, err := d.own(b)
	if err != nil {
		return 0, 0, err
	}
	if b.DevAddr == 0 || steps < 1 {
		return 0, 0, fmt.Errorf("fake Chase through %v: %w", b, cuda.ErrorInvalidValue)
	}
	addr := start
	for range steps {
		off := uint64(addr - b.DevAddr)
		if addr < b.DevAddr || off+8 > uint64(b.Size) {
			return 0, 0, fmt.Errorf("fake Chase: address %#x outside %v: %w", addr, b, cuda.ErrorIllegalAddress)
		}
		addr = cuda.DevicePtr(binary.LittleEndian.Uint64(fb.data[off:]))
	}
	load := d.f.cfg.DeviceLoad
	if b.Kind.IsHost() {
		load = d.f.cfg.HostLoad
	}
	el := time.Duration(steps) * load
	if err := d.call("Chase", d.f.cfg.LaunchLatency+el); err != nil {
		return 0, 0, err
	}
	return addr, el, nil
}

func (d *fakeDevice) managed(b *Buffer) (*fakeBuf, error) {
	fb, err := d.own(b)
	if err != nil {
		return nil, err
	}
	if fb.pages == nil {
		return nil, fmt.Errorf("fake: %v is not managed memory: %w", b, cuda.ErrorInvalidValue)
	}
	return fb, nil
}

func (d *fakeDevice) Prefetch(b *Buffer, toGPU bool, s Stream) error {
	fb, err := d.managed(b)
	if err != nil {
		return err
	}
	to := pageHost
	if toGPU {
		to = pageGPU
	}
	moved := int64(0)
	for i, p := range fb.pages {
		if p != to {
			fb.pages[i] = to
			moved += umPage
		}
	}
	return d.enqueue("Prefetch", s, &fakeOp{dur: toPS(d.f.cfg.CopyLatency) + transfer(moved, d.f.cfg.PrefetchGBps)})
}

func (d *fakeDevice) AdviseRemote(b *Buffer, on bool) error {
	fb, err := d.managed(b)
	if err != nil {
		return err
	}
	if err := d.call("AdviseRemote", d.f.cfg.CallCost); err != nil {
		return err
	}
	fb.remote = on
	return nil
}

// Touch models the driver's fault handling: a touch of a page the GPU does
// not hold faults and migrates the 64 KiB around it, unless the memory is
// advised to stay on the host, in which case the GPU reads it remotely.
// Residency changes at once; the data and the recorded times land at
// Synchronize.
func (d *fakeDevice) Touch(b *Buffer, size, stride int64, write bool, threads int, times *Buffer, s Stream) error {
	fb, err := d.own(b)
	if err != nil {
		return err
	}
	if b.DevAddr == 0 || size <= 0 || size > b.Size || stride < 4 || threads < 1 {
		return fmt.Errorf("fake Touch of %d B every %d B of %v: %w", size, stride, b, cuda.ErrorInvalidValue)
	}
	n := (size + stride - 1) / stride
	var tb *fakeBuf
	if times != nil {
		if tb, err = d.own(times); err != nil {
			return err
		}
		if times.Size < n*8 {
			return fmt.Errorf("fake Touch: times buffer %v too small: %w", times, cuda.ErrorInvalidValue)
		}
	}
	c := d.f.cfg
	chunk := transfer(umChunk, c.MigrateGBps)
	per := make([]ps, n)
	var faults, chunks int64
	for k := range n {
		off := k * stride
		switch {
		case fb.pages == nil:
			per[k] = toPS(c.Access)
			if b.Kind.IsHost() {
				per[k] = toPS(c.HostLoad)
			}
		case fb.remote:
			per[k] = toPS(c.HostLoad)
		case fb.pages[off/umPage] == pageGPU:
			per[k] = toPS(c.Access)
		default:
			faults++
			chunks++
			per[k] = toPS(c.GPUFault) + chunk
			first := off / umChunk * umChunk / umPage
			for p := first; p < min(first+umChunk/umPage, int64(len(fb.pages))); p++ {
				fb.pages[p] = pageGPU
			}
		}
	}
	var dur ps
	if threads == 1 {
		for _, t := range per {
			dur += t
		}
	} else {
		dur = chunks*chunk + (faults+255)/256*toPS(c.GPUFault)
		if fb.remote {
			dur = transfer(n*4, c.RemoteGBps) + toPS(c.HostLoad)
		}
	}
	effect := func() {
		for k := range n {
			if write {
				binary.LittleEndian.PutUint32(fb.data[k*stride:], uint32(k))
			}
			if tb != nil {
				binary.LittleEndian.PutUint64(tb.data[k*8:], uint64(fromPS(per[k])))
			}
		}
	}
	return d.enqueue("Touch", s, &fakeOp{dur: toPS(c.LaunchLatency) + dur, effect: effect})
}

func (d *fakeDevice) HostTouch(b *Buffer, size, stride int64, write bool) error {
	fb, err := d.own(b)
	if err != nil {
		return err
	}
	if b.Host == nil || size <= 0 || size > b.Size || stride < 1 {
		return fmt.Errorf("fake HostTouch of %d B every %d B of %v: %w", size, stride, b, cuda.ErrorInvalidValue)
	}
	c := d.f.cfg
	var cost time.Duration
	if fb.pages != nil {
		for off := int64(0); off < size; off += stride {
			switch p := &fb.pages[off/umPage]; *p {
			case pageNone:
				cost += c.FirstTouch
				*p = pageHost
			case pageGPU:
				cost += c.CPUFault + fromPS(transfer(umPage, c.CPUMigrateGBps))
				*p = pageHost
			}
		}
	}
	if err := d.call("HostTouch", cost); err != nil {
		return err
	}
	hostTouch(b.Host[:size], stride, write)
	return nil
}

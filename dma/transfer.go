package dma

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// The one transfer primitive. Every bus master moves bytes through
// Device.Transfer (a program's thread waits for it) or
// Device.StartTransfer (hardware state machines, which call back): a
// GPU's copy engines and its SMs, a DMA engine's channels, a NIC's rings,
// and the devices to come. One transfer is, in order:
//
//  1. the call's fixed overhead (driver work, push buffer, doorbell);
//  2. the wait for its engine, FIFO, if it has one and it is busy
//     (queueing);
//  3. translation of every bus address it drives through the device's
//     Translator (dma-direct: free; an IOMMU: its IOTLB and walks), each
//     access reported as an OpDeviceAccess event, so the checker sees it;
//     through a Pipeline translator only an access's first page is
//     translated before its bytes move, the rest overlapping them;
//  4. the source read (versions, and the bytes in payload mode; a
//     non-coherent master reads DRAM under dirty cache lines);
//  5. the bytes as one flow over the route the master's transactions
//     take (machine.DMARoute), sharing every link by max-min fairness;
//  6. the destination written when the last byte lands (new versions,
//     the source's bytes; a non-coherent master leaves stale lines in the
//     caches);
//  7. one OpTransfer event with where its time went.

// Span is one piece of memory a transfer reads or writes, as its master
// addresses it.
type Span struct {
	// Bus is the bus address the master drives, translated by the
	// device's Translator: host memory, another device's memory.
	Bus mem.DMAAddr
	// Local marks memory the master reaches without the DMA layer's
	// translation: its own VRAM, or a peer GPU's over NVLink. Phys is
	// then where it is.
	Local bool
	Phys  mem.PhysAddr
	Len   uint64
	// Pinned marks host memory the device's own driver pinned and
	// mapped for it (the GPU driver's pinned and registered memory,
	// nv_dma_map_pages), not a streaming mapping a program made through
	// the DMA API: the access is translated and reported like any
	// other, with OpDeviceAccess's Pinned set.
	Pinned bool
}

// BusSpan is n bytes at bus address a.
func BusSpan(a mem.DMAAddr, n uint64) Span { return Span{Bus: a, Len: n} }

// PinnedSpan is n bytes of driver-pinned host memory at bus address a.
func PinnedSpan(a mem.DMAAddr, n uint64) Span { return Span{Bus: a, Len: n, Pinned: true} }

// LocalSpan is n bytes of the master's own memory at pa.
func LocalSpan(pa mem.PhysAddr, n uint64) Span { return Span{Local: true, Phys: pa, Len: n} }

// Transfer is one transfer a bus master makes.
type Transfer struct {
	// Name names it in traces and messages.
	Name string
	// Engine is the queue it waits in (a GPU copy engine, a device's
	// DMA queue); nil for a master with none (a GPU's SMs, a channel
	// that sequences its own descriptors).
	Engine *machine.Engine
	// Master is the PCIe agent whose transactions carry the bytes; the
	// zero Master means the Engine's.
	Master machine.Master
	// Src and Dst are where the bytes are, for the route.
	Src, Dst machine.Endpoint
	// Route, when not nil, is used instead of the one the endpoints give
	// (a kernel's access route, a device's own wire).
	Route *fabric.Route
	// Bytes is what moves; it may differ from the spans' total (a
	// kernel reading a buffer twice moves twice its size).
	Bytes int64
	// Overhead is the call's fixed cost before it queues.
	Overhead sim.Time
	// Read is what the master reads at the start; Write what it writes
	// at the end. Either may be empty (a device's own side).
	Read, Write []Span
	// Data is what the master writes when it reads nothing from memory
	// (a received packet), in payload mode; nil writes versions only.
	Data []byte
	// Opts are the flow's options (a tag, a rate cap).
	Opts []fabric.Option
	// Visible, when positive, is how long after the transfer ends (and
	// Transfer returns) its writes become visible in memory: a GPU copy
	// whose completion is reported before its posted writes are visible
	// to third-party readers (a synchronous cuMemcpy into memory without
	// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, NVIDIA's GPUDirect RDMA guide).
	// Until then readers get the old content. Transfer only.
	Visible sim.Time
	// Dependent marks a master that writes what it reads (a copy
	// engine): when a read fails, its completion (Unsupported Request
	// or Completer Abort) reaches the master before any data, so it
	// issues none of the writes.
	Dependent bool
	// Load marks a transfer over a given Route that its Master reads (a
	// kernel's loads, the SMs as master): the data comes back as
	// completions of the master's requests. Without a Route the DMA
	// layer decides it from the endpoints (machine.Reads). A read waits
	// for its first request to reach the memory before its data starts
	// back, and its rate is bounded by the master's outstanding
	// requests over the round trip (machine.ReadLimit).
	Load bool

	// Transient says that StartTransfer's done keeps neither the
	// *TransferInfo it is handed nor its Flow past its return (a state
	// machine that reads the result and drops it), so that the DMA layer
	// may reuse both for a later transfer instead of allocating them.
	// They are reused only while no hook listens to the DMA layer or the
	// fabric: observers may keep what their events point to.
	Transient bool

	// Fixed says that the transfer is made again and again (a channel's
	// data phase, its descriptor fetch) over the same Route, whose hops
	// are not changed in place, by the same master: the layer then keeps
	// what it derives from the route and the master (the read's lead and
	// rate, the copy rate) in the Transfer, and derives them again only
	// when the route's Hops slice, the master or Load is another. A
	// transfer whose route's hops may change in place leaves it unset.
	Fixed bool

	// rateCap is a cap the peer rules put on the transfer (0: none).
	rateCap float64
	// kept is what a Fixed transfer's route and master gave, made at
	// its first start (a pointer, so that other transfers stay small).
	kept *keptLimits
	// short is the state of the transfer's last start the short way
	// (StartPosted, StartRead), for its next.
	short *shortXfer
}

// keptLimits are the route limits a Fixed transfer keeps (readLimit):
// hops and n are the route's Hops slice they were derived for (its
// first element, its length); lim.hops is nil until kept.
type keptLimits struct {
	hops *fabric.Hop
	n    int
	lim  routeLimits
}

// TransferInfo is a finished transfer: when it was issued, started and
// ended, and where its time went.
type TransferInfo struct {
	Name     string
	Engine   string
	Src, Dst machine.Endpoint
	Bytes    int64
	// Call is when it was issued, Start when its bytes began to move,
	// End when the last landed.
	Call, Start, End sim.Time
	// Overhead, Queue, Translate and Move split End-Call: the call's
	// fixed cost, waiting for the engine, address translation the bytes
	// waited for (before the first moved, and after the last, when a
	// Pipeline translator's overlapped walks outlast the wire), and the
	// bytes on the wire (the route's latency and the flow).
	Overhead, Queue, Translate, Move sim.Time
	Route                            fabric.Route
	Flow                             *fabric.Flow
	// Data is what was read, in payload mode.
	Data []byte
	// Err is the first bus error (an address beyond the mask, not RAM,
	// an IOMMU fault); the bytes still moved on the wire, as a device's
	// transfer does before its completion reports the error.
	Err error
	// ReadErr and WriteErr split Err by what the master learns. A read
	// that fails gets a completion with Unsupported Request or
	// Completer Abort status: the master sees ReadErr. A write is
	// posted, has no completion, and one the IOMMU blocks is dropped
	// where it is blocked: a device never learns of WriteErr (its
	// driver learns from the IOMMU's fault report or the data missing).
	ReadErr, WriteErr error
	// Peer is the peer-to-peer rule the transfer took, when it read or
	// wrote another agent's memory window (a GPU's BAR1); nil otherwise.
	Peer *PeerRule
	// overlap is the translation that runs while the bytes move
	// (Pipeline translators).
	overlap sim.Time
}

// Transfer makes t from the running process p and returns when its last
// byte has landed. It runs the steps in p itself, so that a copy costs
// no more than its flow.
func (d *Device) Transfer(p *sim.Proc, t *Transfer) (TransferInfo, error) {
	var err error
	if err = d.checkTransfer(t); err != nil {
		return TransferInfo{}, err
	}
	info := TransferInfo{Name: t.Name, Src: t.Src, Dst: t.Dst, Bytes: t.Bytes, Call: p.Now()}
	p.Sleep(t.Overhead)
	info.Overhead = p.Now() - info.Call
	if t.Engine != nil {
		queued := p.Now()
		t.Engine.Acquire(p)
		info.Queue = p.Now() - queued
		info.Engine = t.Engine.Name
	}
	release := func() {
		if t.Engine != nil {
			t.Engine.Release()
		}
	}
	t, info.Peer, err = d.peer(t)
	var route fabric.Route
	if err == nil {
		route, err = d.route(t)
	}
	if err != nil {
		release()
		info.Err = err
		info.Start, info.End = p.Now(), p.Now()
		return info, err
	}
	info.Src, info.Dst = t.Src, t.Dst
	info.Route = route
	var optBuf [1]fabric.Option
	lead, opts := d.readLimit(t, route, &optBuf)
	reads, writes, err := d.translateAll(t, &info, nil, nil)
	p.Sleep(info.Translate)
	info.Start = p.Now()
	info.Data = d.readRanges(reads)
	p.Sleep(lead)
	info.Flow = d.dma.mach.Fabric.Start(t.Name, route, t.Bytes, opts...)
	p.Wait(info.Flow.Done())
	info.Move = p.Now() - info.Start
	if tail := info.translateTail(p.Now()); tail > 0 {
		p.Sleep(tail)
	}
	info.End = p.Now()
	data := info.Data
	if len(t.Read) == 0 {
		data = t.Data
	}
	if t.Visible > 0 {
		d.dma.eng.After(t.Visible, func() { d.writeRanges(writes, data) })
	} else {
		d.writeRanges(writes, data)
	}
	release()
	if d.dma.Transfers.Active() {
		// Through a copy, so that info does not escape.
		d.dma.info = info
		d.dma.Transfers.Emit(&d.dma.info)
	}
	if d.dma.observed() {
		// The event keeps a pointer to the info; a copy of its own
		// lets info stay on the stack when nobody observes, instead of
		// an allocation per transfer.
		ip := new(TransferInfo)
		*ip = info
		d.event(ip)
	}
	return info, err
}

// translateTail is how long past now the overlapped translation of a
// transfer whose bytes have all moved still runs (walks slower than the
// wire): the last bytes land after it. It is added to Translate.
func (i *TransferInfo) translateTail(now sim.Time) sim.Time {
	tail := i.Start + i.overlap - now
	if tail <= 0 {
		return 0
	}
	i.Translate += tail
	return tail
}

// translateAll translates t's reads and writes, setting info.Translate
// to their cost and info.Err to their first bus error. The ranges are
// appended to rbuf and wbuf (nil for fresh slices). A side with no
// spans (a device's own, as every transfer of a DMA engine has one) is
// not walked at all.
func (d *Device) translateAll(t *Transfer, info *TransferInfo, rbuf, wbuf []mem.PhysRange) (reads, writes []mem.PhysRange, err error) {
	var cost, wcost xlat
	var rerr, werr error
	reads = rbuf
	if len(t.Read) > 0 {
		reads, cost, rerr = d.translateInto(rbuf, t.Read, false)
	}
	if len(t.Write) > 0 && (rerr == nil || !t.Dependent) {
		writes, wcost, werr = d.translateInto(wbuf, t.Write, true)
	} else if rerr == nil || !t.Dependent {
		writes = wbuf
	}
	c := cost.add(wcost)
	// Set, not added to: a reused state (start) keeps the last
	// transfer's.
	info.Translate = c.lead
	info.overlap = c.overlap
	info.ReadErr, info.WriteErr = rerr, werr
	info.Err = nil
	if rerr != nil || werr != nil {
		info.Err = errors.Join(rerr, werr)
	}
	return reads, writes, info.Err
}

// StartTransfer makes t from event context (hardware) and calls done
// when its last byte has landed; t.Engine and t.Overhead must be zero:
// a state machine queues and sequences on its own. It returns the
// translation's cost and a read's request leg, known as the transfer
// starts (the bytes move after them), for hardware that must wait for
// them before its next access.
func (d *Device) StartTransfer(t *Transfer, done func(*TransferInfo)) (sim.Time, error) {
	if err := d.checkTransfer(t); err != nil {
		return 0, err
	}
	if t.Engine != nil || t.Overhead != 0 {
		return 0, fmt.Errorf("dma: %s: transfer %s: an engine or overhead needs a process (Transfer)", d.name, t.Name)
	}
	return d.start(t, true, done, nil, nil), nil
}

// StartPosted is StartTransfer for a master that learns nothing of the
// transfer but that it is over (a device's posted writes of the data it
// received): done is called when the last byte has landed, with no
// TransferInfo. t must not change until then.
//
// A transfer made again and again (a DMA engine's data phase) keeps its
// state for its next start when it took the short way (short).
func (d *Device) StartPosted(t *Transfer, done func()) (sim.Time, error) {
	return d.startShortOr(t, done, nil)
}

// StartRead is StartTransfer for a master that learns of the transfer
// what it read (the bytes, in payload mode) and whether the read failed
// (a DMA engine's descriptor fetch, a device's read of the data it
// sends): done gets the info's Data and ReadErr when the last byte has
// landed, and no TransferInfo. t must not change until then.
func (d *Device) StartRead(t *Transfer, done func(data []byte, readErr error)) (sim.Time, error) {
	return d.startShortOr(t, nil, done)
}

// startShortOr starts t the short way (short) when it can take it, else
// as StartTransfer does, with posted or read as its done.
func (d *Device) startShortOr(t *Transfer, posted func(), read func([]byte, error)) (sim.Time, error) {
	// A transfer with a route, no engine, no overhead and a size passes
	// the checks below: the short way's (a channel's) asks no more.
	if t.Route != nil && t.Engine == nil && t.Overhead == 0 && t.Bytes >= 0 {
		if s, write, ok := d.shortSpan(t); ok {
			return d.short(t, s, write, posted, read), nil
		}
	}
	if err := d.checkTransfer(t); err != nil {
		return 0, err
	}
	if t.Engine != nil || t.Overhead != 0 {
		return 0, fmt.Errorf("dma: %s: transfer %s: an engine or overhead needs a process (Transfer)", d.name, t.Name)
	}
	return d.start(t, true, nil, posted, read), nil
}

func (d *Device) checkTransfer(t *Transfer) error {
	if t.Bytes < 0 {
		return fmt.Errorf("dma: %s: transfer %s: negative size %d", d.name, t.Name, t.Bytes)
	}
	if t.Route == nil && (t.Engine == nil && t.Master == (machine.Master{})) {
		return fmt.Errorf("dma: %s: transfer %s: no engine and no master", d.name, t.Name)
	}
	return nil
}

// start runs a transfer without engine or overhead from event context;
// done gets the result (after d.report when report is set). It returns
// the translation's cost. The info handed to done lives in one
// allocation with the transfer's state, whose steps are methods rather
// than per-call closures.
func (d *Device) start(t *Transfer, report bool, done func(*TransferInfo), posted func(), read func([]byte, error)) sim.Time {
	eng := d.dma.eng
	x := d.dma.newStartXfer()
	x.d, x.report, x.done, x.transient = d, report, done, t.Transient
	x.posted, x.readDone = posted, read
	// The state is new, or a reused one that holds the last transfer's
	// fields: each use sets every field it hands on (the info's Engine,
	// Overhead and Queue, which this way never sets, stay zero), and
	// the way out on an error clears the info whole, sparing a clear of
	// the whole state (about 570 bytes) per transfer.
	info := &x.info
	now := eng.Now()
	// The info names the transfer as given (t0); its endpoints are the
	// ones a peer rule gives, once the transfer can start.
	t0 := t
	var err error
	t, info.Peer, err = d.peer(t)
	var route fabric.Route
	if err == nil {
		route, err = d.route(t)
	}
	if err != nil {
		*info = TransferInfo{Name: t0.Name, Src: t0.Src, Dst: t0.Dst, Bytes: t0.Bytes, Call: now,
			Peer: info.Peer, Err: err, Start: now, End: now}
		x.finish()
		return 0
	}
	info.Name, info.Src, info.Dst, info.Bytes, info.Call = t0.Name, t.Src, t.Dst, t0.Bytes, now
	info.Route = route
	x.noRead, x.tdata = len(t.Read) == 0, t.Data
	x.lead, x.opts = d.readLimit(t, route, &x.optBuf)
	x.reads, x.writes, _ = d.translateAll(t, info, x.rbuf[:0], x.wbuf[:0])
	if info.Translate > 0 {
		if x.moveFn == nil {
			x.moveFn = x.move
		}
		eng.After(info.Translate, x.moveFn)
	} else {
		x.move()
	}
	// The bytes move after the translation and, for a read, its
	// request's way out.
	return info.Translate + x.lead
}

// startXfer is one transfer's state from start to done; info is the
// TransferInfo handed to done.
type startXfer struct {
	// info holds the transfer's name, bytes and route too (the flow's).
	info      TransferInfo
	d         *Device
	noRead    bool // the transfer reads no span: its bytes are tdata
	tdata     []byte
	report    bool
	transient bool // Transfer.Transient: reused once done has run
	// done gets the info; when it is nil, posted (StartPosted) or
	// readDone (StartRead) is called instead.
	done          func(*TransferInfo)
	posted        func()
	readDone      func([]byte, error)
	lead          sim.Time
	opts          []fabric.Option
	optBuf        [1]fabric.Option // backs opts when only the cap is
	reads, writes []mem.PhysRange
	data          []byte
	// rbuf and wbuf back reads and writes of a few ranges, saving
	// their allocations.
	rbuf, wbuf [2]mem.PhysRange
	// The steps as method values, each made the first time the engine
	// must schedule it and kept when the state is reused.
	moveFn, flowFn, movedFn, landFn func()
}

// newStartXfer returns a transfer state, a reused one if a transient
// transfer gave one back.
func (x *DMA) newStartXfer() *startXfer {
	if n := len(x.freeXfers); n > 0 {
		s := x.freeXfers[n-1]
		x.freeXfers[n-1] = nil
		x.freeXfers = x.freeXfers[:n-1]
		return s
	}
	return new(startXfer)
}

func (x *startXfer) finish() {
	if x.report {
		x.d.report(&x.info)
	}
	switch {
	case x.done != nil:
		x.done(&x.info)
	case x.posted != nil:
		x.posted()
	default:
		x.readDone(x.info.Data, x.info.ReadErr)
	}
	// done has returned and, the transfer being transient, kept
	// nothing; with no observer, nobody else saw the info or the flow.
	dm := x.d.dma
	if x.transient && !dm.observed() {
		if fl := x.info.Flow; fl != nil {
			dm.mach.Fabric.Release(fl)
		}
		x.reset()
		dm.freeXfers = append(dm.freeXfers, x)
	}
}

// reset readies a finished state for reuse. It clears only what the
// next use might not set before reading it: the released flow (finish
// would release it again, were the next start to fail before its flow),
// and the bytes read or given, which the state need not keep alive. The
// rest the next start, move, flow, moved and land set again (start).
func (x *startXfer) reset() {
	x.info.Flow, x.info.Data = nil, nil
	x.data, x.tdata = nil, nil
}

func (x *startXfer) move() {
	eng := x.d.dma.eng
	info := &x.info
	info.Start = eng.Now()
	info.Data = x.d.readRanges(x.reads)
	x.data = info.Data
	if x.noRead {
		x.data = x.tdata
	}
	if x.lead > 0 {
		if x.flowFn == nil {
			x.flowFn = x.flow
		}
		eng.After(x.lead, x.flowFn)
	} else {
		x.flow()
	}
}

func (x *startXfer) flow() {
	info := &x.info
	info.Flow = x.d.dma.mach.Fabric.Start(info.Name, info.Route, info.Bytes, x.opts...)
	if x.movedFn == nil {
		x.movedFn = x.moved
	}
	info.Flow.Done().OnComplete(x.movedFn)
}

func (x *startXfer) moved() {
	eng := x.d.dma.eng
	x.info.Move = eng.Now() - x.info.Start
	if tail := x.info.translateTail(eng.Now()); tail > 0 {
		if x.landFn == nil {
			x.landFn = x.land
		}
		eng.After(tail, x.landFn)
	} else {
		x.land()
	}
}

func (x *startXfer) land() {
	x.info.End = x.d.dma.eng.Now()
	x.d.writeRanges(x.writes, x.data)
	x.finish()
}

// readLimit is what t's reads add to its flow (machine.ReadLimit): the
// request's way out, lead, before the data starts back, and the flow's
// options with the master's Little's-law rate as a cap, the lowest of it,
// the peer rules' cap and a DRAM-to-DRAM copy's (machine.CopyRate). A
// write (posted) adds no lead. When t has no options of its own, the
// cap's option goes in buf (the caller's, which outlives the flow's
// Start) rather than in a new slice.
func (d *Device) readLimit(t *Transfer, route fabric.Route, buf *[1]fabric.Option) (sim.Time, []fabric.Option) {
	master := t.Master
	// (The engine first: a channel's transfers have none, and the
	// compare of the master's words is the dearer test.)
	if t.Engine != nil && master == (machine.Master{}) {
		master = t.Engine.Master
	}
	m := d.dma.mach
	var lead sim.Time
	capRate := t.rateCap
	read := t.Load
	if t.Route == nil {
		read = m.Reads(t.Dst, master)
	}
	var lim *routeLimits
	if t.Fixed && t.Route != nil {
		k := t.kept
		if k == nil {
			k = new(keptLimits)
			t.kept = k
		}
		// What the layer keeps with a Fixed transfer, as long as its
		// hops (the slice), master and direction are the ones it was
		// kept for: no search of the kept routes, no compare of hops.
		var hops *fabric.Hop
		if len(route.Hops) > 0 {
			hops = &route.Hops[0]
		}
		if k.hops != hops || k.n != len(route.Hops) || k.lim.master != master || k.lim.isRead != read || k.lim.hops == nil {
			k.hops, k.n = hops, len(route.Hops)
			k.lim = *d.dma.limits(route, master, read)
		}
		lim = &k.lim
	} else {
		lim = d.dma.limits(route, master, read)
	}
	lead = lim.lead
	if rate := lim.read; rate > 0 && (capRate == 0 || rate < capRate) {
		capRate = rate
	}
	// A copy that reads and writes one DRAM runs at its bus's copy
	// efficiency (machine.CopyRate).
	if rate := lim.copy; rate > 0 && (capRate == 0 || rate < capRate) {
		capRate = rate
	}
	if capRate == 0 {
		return lead, t.Opts
	}
	if len(t.Opts) == 0 {
		buf[0] = fabric.MaxRate(capRate)
		return lead, buf[:]
	}
	return lead, append(slices.Clone(t.Opts), fabric.MaxRate(capRate))
}

// routeLimits are the machine's limits on a transfer by master over
// route: the read's lead and rate (machine.ReadLimit; zero when it does
// not read, or has no master) and the copy rate (machine.CopyRate).
type routeLimits struct {
	hops   []fabric.Hop // the route's, copied
	master machine.Master
	isRead bool
	lead   sim.Time
	read   float64
	copy   float64
}

// matches reports whether l holds the limits of route for master in
// the direction read.
func (l *routeLimits) matches(route fabric.Route, master machine.Master, read bool) bool {
	return l.hops != nil && l.isRead == read && l.master == master && slices.Equal(l.hops, route.Hops)
}

// limits are the routeLimits of route, master and read, kept for the
// last few: they depend on nothing else (a machine's links, memories
// and masters do not change once it is built), and a GPU's migrations
// come back to the same few routes millions of times, each a walk of
// the route's hops with two map lookups per hop otherwise.
func (x *DMA) limits(route fabric.Route, master machine.Master, read bool) *routeLimits {
	// The entry found last first: a channel's transfers take one route
	// after the other.
	if l := &x.lims[x.limLast]; l.matches(route, master, read) {
		return l
	}
	for i := range x.lims {
		l := &x.lims[i]
		if i != x.limLast && l.matches(route, master, read) {
			x.limLast = i
			return l
		}
	}
	x.limLast = x.limNext
	l := &x.lims[x.limNext]
	x.limNext = (x.limNext + 1) % len(x.lims)
	*l = routeLimits{hops: append(l.hops[:0:0], route.Hops...), master: master, isRead: read}
	if l.hops == nil {
		l.hops = []fabric.Hop{} // a route of no hops is kept too
	}
	m := x.mach
	if read && master != (machine.Master{}) {
		l.lead, l.read = m.ReadLimit(route, master)
	}
	l.copy = m.CopyRate(route, master)
	return l
}

// route is the path of t's bytes: given, or the endpoints' as its
// master's transactions load it.
func (d *Device) route(t *Transfer) (fabric.Route, error) {
	if t.Route != nil {
		return *t.Route, nil
	}
	master := t.Master
	if master == (machine.Master{}) {
		master = t.Engine.Master
	}
	r, err := d.dma.mach.DMARoute(t.Src, t.Dst, master)
	if err != nil {
		return fabric.Route{}, fmt.Errorf("dma: %s: transfer %s: %w", d.name, t.Name, err)
	}
	return r, nil
}

// translate turns spans into physical ranges, reporting every bus access
// (OpDeviceAccess) before it happens; a span that fails is dropped from
// the memory effect and its error returned.
func (d *Device) translate(spans []Span, write bool) ([]mem.PhysRange, xlat, error) {
	return d.translateInto(nil, spans, write)
}

// translateInto is translate appending the ranges to out.
func (d *Device) translateInto(out []mem.PhysRange, spans []Span, write bool) ([]mem.PhysRange, xlat, error) {
	var cost xlat
	var errs []error
	for i := range spans {
		s := &spans[i]
		if s.Local {
			out = append(out, mem.PhysRange{Start: s.Phys, Size: s.Len})
			continue
		}
		n := len(out)
		var c xlat
		var err error
		out, c, err = d.access(out, s.Bus, s.Len, write, s.Pinned)
		cost = cost.add(c)
		if err != nil {
			out = out[:n]
			errs = append(errs, err)
		}
	}
	if errs == nil {
		return out, cost, nil
	}
	return out, cost, errors.Join(errs...)
}

// readRanges is the master reading ranges through mem: the versions,
// and the bytes in payload mode (nil otherwise).
func (d *Device) readRanges(ranges []mem.PhysRange) []byte {
	m := d.dma.mem
	if !m.Payload() {
		for _, r := range ranges {
			m.DeviceRead(d.name, d.coherent, r.Start, r.Size)
		}
		return nil
	}
	var n uint64
	for _, r := range ranges {
		n += r.Size
	}
	buf := make([]byte, n)
	off := uint64(0)
	for _, r := range ranges {
		m.DeviceReadBytes(d.name, d.coherent, r.Start, buf[off:off+r.Size])
		off += r.Size
	}
	return buf
}

// writeRanges is the master writing ranges: new versions, with data's
// bytes where data covers them.
func (d *Device) writeRanges(ranges []mem.PhysRange, data []byte) {
	m := d.dma.mem
	off := uint64(0)
	for _, r := range ranges {
		if off+r.Size <= uint64(len(data)) {
			m.DeviceWriteBytes(d.name, d.coherent, r.Start, data[off:off+r.Size])
		} else {
			m.DeviceWrite(d.name, d.coherent, r.Start, r.Size)
		}
		off += r.Size
	}
}

// report hands info to the Transfers hooks and emits the OpTransfer
// event.
func (d *Device) report(info *TransferInfo) {
	if d.dma.Transfers.Active() {
		d.dma.Transfers.Emit(info)
	}
	d.event(info)
}

// event emits the OpTransfer event of info, if anyone listens.
func (d *Device) event(info *TransferInfo) {
	if !d.dma.observed() {
		return
	}
	e := &d.dma.ev
	*e = Event{
		Header: sim.Header{Time: info.End}, Op: OpTransfer, Device: d.name,
		Size: uint64(info.Bytes), Failed: info.Err != nil, Transfer: info,
		Call: info.Name,
	}
	if info.Err != nil {
		e.Warn = info.Err.Error()
	}
	d.dma.fire()
}

// Effect is the memory effect of an access the device makes with no
// transfer of its own to time it (a GPU kernel's loads and stores, whose
// bytes its own flows carry): the reads, then the writes, translated and
// reported as Transfer does them, at no cost in time. The writes carry
// data when it is not nil, else what was read (payload mode). It returns
// what was read, and the first bus error.
func (d *Device) Effect(read, write []Span, data []byte) ([]byte, error) {
	reads, _, rerr := d.translate(read, false)
	got := d.readRanges(reads)
	if data == nil {
		data = got
	}
	writes, _, werr := d.translate(write, true)
	d.writeRanges(writes, data)
	return got, errors.Join(rerr, werr)
}

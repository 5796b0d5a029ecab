package dma

import (
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// The short way of StartPosted and StartRead. A DMA engine's data
// phases and descriptor fetches, a transfer a packet, are each one span
// of RAM read or written over a given route, under Direct, with nobody
// observing: the translation is the span itself at no cost, there is no
// peer rule, no event and no info for anyone. For such a transfer the
// short way makes the same calls of mem, the fabric and the engine, in
// the same order and at the same times, as start's state machine does
// (readLimit, the read at once, the flow after the read's lead, the
// write when the flow completes), from a state of a few words rather
// than a TransferInfo that nobody reads.

// shortSpan says whether t, which has a route (so no peer rule: peer
// leaves t as it is), can take the short way, and if so returns its one
// span and whether it is written (else read): one span of RAM under the
// device's mask, not Local, on one side and none on the other; the
// device under Direct (directRAM: RAM is RAM whatever peer windows the
// layer has); nobody listening to the layer (directRAM checks Hooks) or
// to its transfers; t Transient, so that the flow is released as
// start's finish releases it.
func (d *Device) shortSpan(t *Transfer) (s *Span, write, ok bool) {
	if !t.Transient || d.dma.Transfers.Active() {
		return nil, false, false
	}
	switch {
	case len(t.Read) == 0 && len(t.Write) == 1:
		s, write = &t.Write[0], true
	case len(t.Read) == 1 && len(t.Write) == 0:
		s = &t.Read[0]
	default:
		return nil, false, false
	}
	if s.Local || !d.directRAM(s.Bus, s.Len) {
		return nil, false, false
	}
	return s, write, true
}

// shortXfer is the state of a transfer on the short way, from short to
// land. The transfer keeps it for its next start (Transfer.short): a
// transfer is under way once at a time (StartPosted and StartRead ask
// that it not change until done), and one started again while it is
// under way gets a state of its own.
type shortXfer struct {
	busy bool // under way, from short to land
	d    *Device
	// t is the transfer, unchanged until done (StartPosted, StartRead).
	t        *Transfer
	pa       mem.PhysAddr // the span, RAM under Direct: its own range
	n        uint64
	write    bool
	call     sim.Time
	opts     []fabric.Option
	optBuf   [1]fabric.Option // backs opts when only the cap is
	data     []byte           // read (payload mode), or t.Data to write
	flow     *fabric.Flow
	posted   func()
	readDone func([]byte, error)
	// flowFn and landFn are the steps as method values, made once per
	// state.
	flowFn, landFn func()
	// What readLimit gave the transfer's last start, when it was Fixed
	// (limOK), for a start whose route's hops (the slice), master and
	// Load are the ones it was derived for: the lead, and whether the
	// flow's options were the transfer's own (limOwn) or the cap in
	// optBuf. (A transfer once Fixed has its hops unchanged in place,
	// Transfer.Fixed.)
	limOK, limOwn bool
	limHops       *fabric.Hop
	limN          int
	limMaster     machine.Master
	limLoad       bool
	limLead       sim.Time
}

// limits is readLimit(t, *t.Route, &x.optBuf), kept in x for a Fixed
// transfer, as Transfer.Fixed allows: readLimit's result depends on
// nothing else but t's options, which the transfer's own are read anew
// (a cap it adds to options of the transfer's own, in a new slice, is
// not kept), and on the cap a peer rule puts, which no transfer with a
// route has.
func (x *shortXfer) limits(d *Device, t *Transfer) (sim.Time, []fabric.Option) {
	hops := t.Route.Hops
	var h0 *fabric.Hop
	if len(hops) > 0 {
		h0 = &hops[0]
	}
	if x.limOK && x.limHops == h0 && x.limN == len(hops) && x.limLoad == t.Load && x.limMaster == t.Master {
		// The options were the transfer's own (no cap), whatever they
		// are now; or the cap alone, in optBuf, for a transfer that has
		// none of its own still.
		if x.limOwn {
			return x.limLead, t.Opts
		}
		if len(t.Opts) == 0 {
			return x.limLead, x.optBuf[:]
		}
	}
	lead, opts := d.readLimit(t, *t.Route, &x.optBuf)
	x.limOK = t.Fixed && t.rateCap == 0
	x.limOwn = len(opts) == len(t.Opts) && (len(opts) == 0 || &opts[0] == &t.Opts[0])
	if !x.limOwn && (len(opts) != 1 || &opts[0] != &x.optBuf[0]) {
		x.limOK = false // a new slice: the transfer's options and the cap
	}
	x.limHops, x.limN, x.limLoad, x.limMaster, x.limLead = h0, len(hops), t.Load, t.Master, lead
	return lead, opts
}

// short starts t, which shortSpan accepted with span s, the short way,
// and returns what StartTransfer returns: the translation's cost (none)
// and the read's lead. Each step is start's for a transfer with no
// translation cost, no overlap and nothing to report: move at once (the
// read, whose lead then delays the flow), flow, moved and land at the
// flow's completion (translateTail is zero).
func (d *Device) short(t *Transfer, s *Span, write bool, posted func(), read func([]byte, error)) sim.Time {
	dm := d.dma
	x := t.short
	if x == nil || x.busy {
		x = &shortXfer{}
		x.flowFn, x.landFn = x.startFlow, x.land
		t.short = x
	}
	x.busy = true
	x.d, x.t, x.pa, x.n, x.write = d, t, mem.PhysAddr(s.Bus), s.Len, write
	x.posted, x.readDone = posted, read
	x.call = dm.eng.Now()
	lead, opts := x.limits(d, t)
	x.opts = opts
	if write {
		x.data = t.Data
	} else {
		x.data = d.readRange(x.pa, x.n)
	}
	if lead > 0 {
		dm.eng.After(lead, x.flowFn)
	} else {
		x.startFlow()
	}
	return lead
}

// startFlow is start's flow step.
func (x *shortXfer) startFlow() {
	t := x.t
	x.flow = x.d.dma.mach.Fabric.Start(t.Name, *t.Route, t.Bytes, x.opts...)
	x.flow.Done().OnComplete(x.landFn)
}

// land is start's moved, land and finish: the write, the report if
// someone has begun to listen since the transfer started, done, and the
// state and the flow given back.
func (x *shortXfer) land() {
	d := x.d
	dm := d.dma
	if x.write {
		d.writeRange(x.pa, x.n, x.data)
	}
	fl, data := x.flow, x.data
	posted, read := x.posted, x.readDone
	var info *TransferInfo
	if dm.observed() || dm.Transfers.Active() {
		info = x.info()
	}
	// The state is free again; the bytes are not its to keep alive.
	x.busy, x.data = false, nil
	if info != nil {
		d.report(info)
	}
	if posted != nil {
		posted()
	} else {
		read(data, nil)
	}
	// As finish: with no observer, nobody else saw the flow.
	if !dm.observed() {
		dm.mach.Fabric.Release(fl)
	}
}

// info is the TransferInfo start would have made for x, for a hook
// added while x was under way: its flow started when it was called (no
// translation cost) and ended now; a write's Data is what reading no
// ranges gives.
func (x *shortXfer) info() *TransferInfo {
	t := x.t
	now := x.d.dma.eng.Now()
	i := &TransferInfo{Name: t.Name, Src: t.Src, Dst: t.Dst, Bytes: t.Bytes, Call: x.call, Start: x.call, End: now,
		Move: now - x.call, Route: *t.Route, Flow: x.flow, Data: x.data}
	if x.write {
		i.Data = x.d.readRanges(nil)
	}
	return i
}

// readRange is readRanges of the one range [pa, pa+n).
func (d *Device) readRange(pa mem.PhysAddr, n uint64) []byte {
	m := d.dma.mem
	if !m.Payload() {
		m.DeviceRead(d.name, d.coherent, pa, n)
		return nil
	}
	buf := make([]byte, n)
	m.DeviceReadBytes(d.name, d.coherent, pa, buf)
	return buf
}

// writeRange is writeRanges of the one range [pa, pa+n).
func (d *Device) writeRange(pa mem.PhysAddr, n uint64, data []byte) {
	m := d.dma.mem
	if n <= uint64(len(data)) {
		m.DeviceWriteBytes(d.name, d.coherent, pa, data[:n])
	} else {
		m.DeviceWrite(d.name, d.coherent, pa, n)
	}
}

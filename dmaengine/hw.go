package dmaengine

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// The engine's state machine. Everything here runs in event context
// (sim.Engine.After callbacks and flow completions), never in a process:
// the engine is hardware.

// kick starts whatever the engine can start now: a descriptor fetch when
// its cache runs low and the doorbell shows more, then data phases for
// fetched descriptors up to Inflight.
func (ch *Chan) kick() {
	if ch.stopped {
		ch.hwCond.Broadcast()
		return
	}
	if ready := ch.fetched - ch.started; !ch.fetching && ch.fetched < ch.doorbell && ready < ch.fetchMax {
		// One read of contiguous entries: up to Fetch of them, not
		// past the end of the ring.
		n := min(ch.doorbell-ch.fetched, ch.fetchMax, ch.n-ch.fetched%ch.n)
		ch.fetch(n)
	}
	// The next entry's slot is looked up once for the checks and the
	// start.
	for ch.started < ch.fetched && ch.inflight < ch.inMax {
		s := ch.slot(ch.started)
		if ch.fenced(s) || !ch.canStart(s) {
			break
		}
		ch.start(s)
	}
}

// fetch reads n descriptors from the ring: a read request up to the
// root complex (one-way latency), the memory read there, and the
// completion carrying n×32 bytes back as a flow over host → device
// (DRAM latency, the path's latency, the bytes at its rate).
func (ch *Chan) fetch(n uint64) {
	ch.fetching = true
	f := &ch.fetch1
	f.first, f.n = ch.fetched, n
	ch.stats.Fetches++
	if f.issue == nil {
		f.issue, f.done = ch.fetchIssue, ch.fetchDone
	}
	ch.eng().After(ch.c.oneWay, f.issue)
}

// fetchState is the one descriptor fetch a channel has in flight
// (fetching): its entries, and the pieces of its transfer and its steps
// made once, so that a fetch allocates nothing.
type fetchState struct {
	first, n uint64
	t        dma.Transfer
	route    fabric.Route
	read     [1]dma.Span
	issue    func()
	done     func([]byte, error)
}

// fetchIssue reads the fetch's entries, once its request is up.
func (ch *Chan) fetchIssue() {
	f := &ch.fetch1
	addr, size := ch.entryDMA(f.first), f.n*DescSize
	// The result's data and read error are read in fetchDone, and
	// nothing of it is kept: the transfer is transient. What every
	// fetch shares is set once.
	t := &f.t
	if t.Route == nil {
		f.route = ch.c.toDev
		*t = dma.Transfer{Name: ch.flowNames[0], Route: &f.route, Read: f.read[:], Opts: ch.opts, Transient: true, Fixed: true}
	}
	f.read[0], t.Bytes = dma.BusSpan(addr, size), int64(size)
	if _, err := ch.c.dev.StartRead(t, f.done); err != nil {
		panic(fmt.Sprintf("dmaengine: %s: %v", ch.name, err)) // a malformed transfer is a bug of this package
	}
}

// fetchDone takes the fetched descriptors into the slots: data is what
// the fetch read (payload mode), readErr its read's error.
func (ch *Chan) fetchDone(data []byte, readErr error) {
	f := &ch.fetch1
	first, n := f.first, f.n
	now := ch.eng().Now()
	for k := range n {
		s := ch.slot(first + k)
		if uint64(len(data)) >= (k+1)*DescSize {
			s.hw = decodeDescriptor(data[k*DescSize:])
		}
		// A fetch whose read failed got an error completion:
		// the engine has no descriptor to run.
		s.failed = readErr != nil
		s.rec.Fetched = now
	}
	ch.fetched += n
	ch.stats.FetchedDescs += n
	ch.fetching = false
	ch.kick()
}

// canStart says whether the next fetched descriptor's data phase, s's,
// can begin: a DevToMem channel needs data from the device, a MemToDev
// one room in the device's buffer (or an empty buffer, for a transfer
// larger than all of it).
func (ch *Chan) canStart(s *slot) bool {
	if s.failed {
		return true
	}
	switch ch.kind {
	case DevToMem:
		return ch.rx.len() > 0
	case MemToDev:
		l := s.hw.Len
		return ch.fifoUsed == 0 || ch.fifoUsed+l <= ch.fifoCap
	}
	return true
}

// fenced says whether the next fetched descriptor, s, must wait for
// every earlier one to land (FlagFence).
func (ch *Chan) fenced(s *slot) bool {
	return ch.inflight > 0 && s.hw.Flags&FlagFence != 0
}

// start begins the data phase of the next fetched descriptor, s.
func (ch *Chan) start(s *slot) {
	ch.started++
	ch.inflight++
	s.rec.Started = ch.eng().Now()
	d := s.hw
	if s.failed {
		// Its fetch failed: it completes with an error at once, moving
		// nothing (the buffer a MemToDev descriptor would have filled
		// is reserved and released as for any other).
		if ch.kind == MemToDev {
			ch.fifoUsed += d.Len
		}
		ch.land(s, 0, true)
		return
	}
	switch ch.kind {
	case MemToMem:
		// A read request up, the memory read, then the bytes down to
		// the engine and up again into memory as one flow over both
		// directions of the device's link.
		ch.eng().After(ch.c.oneWay, func() {
			// A read that faults completes with an error before any
			// data: nothing is written. A write that faults is
			// dropped by the IOMMU unseen: the engine reports success.
			ch.transfer(ch.flowNames[1], ch.c.copy, d.Len, []dma.Span{dma.BusSpan(d.Src, d.Len)}, []dma.Span{dma.BusSpan(d.Dst, d.Len)}, nil,
				func(i *dma.TransferInfo) { ch.land(s, uint32(d.Len), i.ReadErr != nil) })
		})
	case MemToDev:
		ch.fifoUsed += d.Len
		ph := ch.takePhase(s)
		x := &ph.tx
		x.n, x.read[0] = d.Len, dma.BusSpan(d.Src, d.Len)
		if x.start == nil {
			x.start = func() { ch.txRead(ph) }
			x.done = func(data []byte, readErr error) { ch.txLanded(ph, data, readErr) }
		}
		ch.eng().After(ch.c.oneWay, x.start)
	case DevToMem:
		// Posted writes: no request; the data flows device → memory.
		c := ch.rx.pop()
		s.rec.Origin = c.origin
		n, trunc := c.size, c.size > d.Len
		if trunc {
			n = d.Len
		}
		payload := c.payload
		if payload != nil {
			payload = payload[:n]
		}
		// Posted writes: one the IOMMU blocks is dropped and the
		// engine never learns of it, so the descriptor completes as if
		// the data had landed (the driver finds its buffer unchanged).
		ph := ch.takePhase(s)
		r := &ph.rx
		r.size, r.n, r.trunc = c.size, n, trunc
		if r.done == nil {
			// What every transfer of the phase shares, set once: the
			// DMA layer reads the transfer and changes none of it.
			r.route = ch.c.fromDev
			r.t = dma.Transfer{Name: ch.flowNames[3], Route: &r.route, Write: r.write[:], Opts: ch.opts, Transient: true, Fixed: true}
			r.done = func() { ch.rxLanded(ph) }
		}
		r.write[0] = dma.BusSpan(d.Dst, n)
		r.t.Bytes, r.t.Data = int64(n), payload
		if _, err := ch.c.dev.StartPosted(&r.t, r.done); err != nil {
			panic(fmt.Sprintf("dmaengine: %s: %v", ch.name, err)) // a malformed transfer is a bug of this package
		}
	}
}

// rxLanded ends the DevToMem data phase ph: the device's buffer frees
// the chunk, the descriptor lands, the device hears of the room.
func (ch *Chan) rxLanded(ph *phase) {
	r, s := &ph.rx, ph.s
	r.t.Data = nil // the payload is the driver's to read now, not the phase's to keep
	ch.fifoUsed -= r.size
	n, trunc := r.n, r.trunc
	ch.freePhase(ph)
	ch.land(s, uint32(n), trunc)
	if ch.onSpace != nil {
		ch.onSpace()
	}
}

// txLanded ends the MemToDev data phase ph, its read done (data, in
// payload mode, and the read's error): the bytes read wait in the entry
// for the device.
func (ch *Chan) txLanded(ph *phase, data []byte, readErr error) {
	s, n := ph.s, ph.tx.n
	s.data = data
	ch.freePhase(ph)
	ch.land(s, uint32(n), readErr != nil)
}

// txRead starts the read of a MemToDev entry's bytes, as transfer does
// with the phase's own transfer, span and route.
func (ch *Chan) txRead(ph *phase) {
	x := &ph.tx
	if x.t.Route == nil {
		// Set once per phase, as start's DevToMem transfer.
		x.route = ch.c.toDev
		x.t = dma.Transfer{Name: ch.flowNames[2], Route: &x.route, Read: x.read[:], Opts: ch.opts, Transient: true, Fixed: true}
	}
	x.t.Bytes = int64(x.n)
	if _, err := ch.c.dev.StartRead(&x.t, x.done); err != nil {
		panic(fmt.Sprintf("dmaengine: %s: %v", ch.name, err)) // a malformed transfer is a bug of this package
	}
}

// transfer is one data movement of the engine through the DMA layer's
// primitive (dma.Device.StartTransfer): the reads when it starts, the
// bytes over route, the writes (of data, or of what was read) when they
// land, then done.
func (ch *Chan) transfer(name string, route fabric.Route, n uint64, read, write []dma.Span, data []byte, done func(*dma.TransferInfo)) {
	// Every done of the engine's reads what it needs of the result
	// (the bytes read, the read's error) and keeps no TransferInfo.
	t := &dma.Transfer{Name: name, Route: &route, Bytes: int64(n), Read: read, Write: write, Data: data, Opts: ch.opts,
		Dependent: len(read) > 0 && len(write) > 0, Transient: true}
	if _, err := ch.c.dev.StartTransfer(t, done); err != nil {
		panic(fmt.Sprintf("dmaengine: %s: %v", ch.name, err)) // a malformed transfer is a bug of this package
	}
}

// write is the engine's DMA write of [addr, addr+size).
func (ch *Chan) write(addr mem.DMAAddr, size uint64, data []byte) error {
	var err error
	if ch.payload && data != nil {
		_, err = ch.c.dev.WriteBytes(addr, data[:size])
	} else {
		_, err = ch.c.dev.Write(addr, size)
	}
	return err
}

// land ends s's data phase, then retires, in ring order, every
// descriptor whose data phase is over: its status word is written
// (posted behind the data, it lands with the data's last byte) and, if
// asked, an MSI is sent.
func (ch *Chan) land(s *slot, bytes uint32, failed bool) {
	s.done = true
	s.rec.Landed = ch.eng().Now()
	s.result = Status{Done: true, Bytes: bytes, Error: failed || s.failed}
	for ch.retired < ch.started {
		r := ch.slot(ch.retired)
		if !r.done {
			break
		}
		r.done = false
		if ch.kind == MemToDev && ch.onData != nil {
			// The device takes the data in ring order, whatever order
			// concurrent reads finished in.
			data := r.data
			r.data = nil
			ch.onData(ch.completed(r), data)
		}
		st := r.result
		addr := ch.entryDMA(ch.retired) + StatusOffset
		var b [StatusSize]byte
		st.encode(b[:])
		if ch.write(addr, StatusSize, b[:]) != nil {
			// A posted write the engine cannot know was blocked: the
			// driver will find the entry never completed.
			ch.stats.LostStatus++
		}
		r.rec.Status = st
		ch.retired++
		ch.inflight--
		ch.stats.Completed++
		ch.stats.Bytes += uint64(st.Bytes)
		if st.Error {
			ch.stats.Errors++
		}
		if r.hw.Flags&FlagIRQ != 0 {
			ch.raise()
		}
	}
	ch.kick()
}

// completed is s as the device sees it at the end of its data phase.
func (ch *Chan) completed(s *slot) Completed {
	return Completed{
		Cookie: s.rec.Cookie, Desc: s.hw, Status: s.result,
		Origin: s.rec.Origin, Submitted: s.rec.Submitted, Fetched: s.rec.Fetched, Started: s.rec.Started, Landed: s.rec.Landed,
	}
}

// raise sends an MSI unless the vector is masked, in which case it is
// left pending until the handler unmasks it. Delivery to the handler
// takes Timing.MSI.
func (ch *Chan) raise() {
	if ch.masked {
		ch.pending = true
		return
	}
	ch.masked = true
	ch.stats.MSIs++
	if ch.msiFn == nil {
		ch.msiFn = ch.msi
	}
	ch.eng().After(ch.t.MSI, ch.msiFn)
}

// msi is an MSI arriving at the CPU: the handler runs.
func (ch *Chan) msi() {
	ch.delivered++
	ch.irqCond.Broadcast()
}

// Deliver hands the engine of a DevToMem channel size bytes the device
// produced (a received packet): origin is when the device got them,
// payload their bytes in payload mode (nil otherwise). The engine moves
// them into the next descriptor's buffer as soon as it has one fetched;
// data longer than that buffer is cut to it, and the descriptor
// completes with StatusError. Deliver reports false, taking nothing, when the device's buffer
// (Config.FIFO) has no room; OnSpace says when it has.
func (ch *Chan) Deliver(size uint64, origin sim.Time, payload []byte) bool {
	if ch.kind != DevToMem {
		panic("dmaengine: Deliver on " + ch.kind.String() + " channel " + ch.name)
	}
	if ch.stopped || ch.fifoUsed > 0 && ch.fifoUsed+size > ch.fifoCap {
		return false
	}
	ch.fifoUsed += size
	ch.rx.push(chunk{size: size, origin: origin, payload: payload})
	ch.kick()
	return true
}

// Drain tells the engine of a MemToDev channel that the device has
// disposed of n bytes it read (sent them on the wire), freeing buffer.
func (ch *Chan) Drain(n uint64) {
	ch.fifoUsed -= min(n, ch.fifoUsed)
	ch.kick()
}

// Room is the device-side buffer left.
func (ch *Chan) Room() uint64 { return ch.fifoCap - min(ch.fifoUsed, ch.fifoCap) }

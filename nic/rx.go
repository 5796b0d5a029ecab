package nic

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// rxState is the receive side: the wire's generator (hardware) and the
// driver's posted buffers.
type rxState struct {
	ch   *dmaengine.Chan
	bufs []rxBuf // by ring slot: the buffer each posted descriptor holds
	proc *sim.Proc
	irq  *sim.Proc

	// The generator: packets put on the wire so far, and one held back
	// by flow control while the NIC's buffer is full.
	sent    int
	held    bool
	heldAt  sim.Time
	heldSeq uint64
	// The packet on the wire (one at a time: the next starts when it
	// has arrived), its flow, and its arrival, made once.
	wireSeq   uint64
	wireStart sim.Time
	wireFlow  *fabric.Flow
	arrived   func()

	s       Stream
	lat     hist
	scratch []byte
	handled uint64 // packets the driver processed or the NIC dropped
	// cpu0 and cpu1 are the path's CPU time when the link came up and
	// when the last packet was done: setup and teardown are left out.
	cpu0, cpu1 sim.Time
}

type rxBuf struct {
	va   mem.VirtAddr
	addr mem.DMAAddr
}

func (n *NIC) startRx() {
	n.rx.proc = n.m.Engine.Spawn(n.opt.Device+"-rx", n.rxDriver)
	// The driver's processes sleep between the device's events, and no
	// event of the NIC, its engine, the DMA layer, memory or the fabric
	// runs the engine: their sleeps run those events ahead rather than
	// switching coroutines (sim.Proc.RunAhead).
	if runAhead {
		n.rx.proc.RunAhead()
	}
	n.attach(n.rx.proc, n.opt.RxCore)
}

// rxDriver is the driver's receive path: open (ring, buffers posted),
// then NAPI polling from interrupts or busy polling until every packet
// has been handled, then close.
func (n *NIC) rxDriver(p *sim.Proc) {
	o, rx := &n.opt, &n.rx
	ch, err := n.c.NewChan(p, dmaengine.Config{
		Name: o.Device + ".rx", Kind: dmaengine.DevToMem, Entries: o.Ring, FIFO: o.FIFO,
		PollInterval: o.PollInterval, Timing: o.Timing, OnSpace: n.rxSpace,
	})
	if err != nil {
		n.fail(err)
		return
	}
	rx.ch = ch
	rx.bufs = make([]rxBuf, ch.Entries())
	if n.mem.Payload() {
		rx.scratch = make([]byte, o.PacketSize)
	}
	for range ch.Entries() {
		va, err := n.mem.Kmalloc(n.node, o.PacketSize)
		if err != nil {
			n.fail(fmt.Errorf("nic %s: rx buffer: %w", o.Device, err))
		} else if n.postAt(p, rxBuf{va: va}, true) {
			continue
		}
		// Undo what was set up.
		n.rxClose(p)
		return
	}
	ch.IssuePending(p)
	if !o.Polling {
		rx.irq = ch.RequestIRQ(n.napi)
		if runAhead {
			rx.irq.RunAhead()
		}
		n.attach(rx.irq, o.RxCore)
	}
	// The link comes up: the generator starts.
	rx.cpu0 = n.rxCPU()
	n.rxSend()
	if o.Polling {
		for !n.rxDone() && n.err == nil {
			if n.napiPoll(p) == 0 {
				p.Sleep(o.PollInterval)
			}
		}
	} else {
		p.WaitUntil(n.done, func() bool { return n.rxDone() || n.err != nil })
		ch.FreeIRQ(p)
	}
	rx.cpu1 = n.rxCPU()
	n.rxClose(p)
}

func (n *NIC) rxDone() bool { return n.rx.handled == uint64(n.opt.Packets) }

// postAt gives the buffer b to the device and submits a descriptor for
// it. With fresh set, or without Sync, it maps it (dma_map_single
// FROM_DEVICE, checked with dma_mapping_error); with Sync it hands the
// still-mapped buffer back (dma_sync_single_for_device).
func (n *NIC) postAt(p *sim.Proc, b rxBuf, fresh bool) bool {
	o, rx := &n.opt, &n.rx
	if fresh || !o.Sync {
		b.addr = n.dev.MapSingle(p, b.va, o.PacketSize, dma.FromDevice)
		if n.dev.MappingError(b.addr) {
			n.fail(fmt.Errorf("nic %s: dma_map_single of rx buffer %v failed", o.Device, b.va))
			n.mem.Kfree(b.va)
			n.done.Broadcast()
			return false
		}
	} else {
		n.dev.SyncSingleForDevice(p, b.addr, o.PacketSize, dma.FromDevice)
	}
	var flags dmaengine.Flags
	if !o.Polling {
		flags = dmaengine.FlagIRQ
	}
	c, err := rx.ch.Submit(p, dmaengine.Descriptor{Dst: b.addr, Len: o.PacketSize, Flags: flags})
	if err != nil {
		n.fail(err)
		n.done.Broadcast()
		return false
	}
	rx.bufs[wrap(uint64(c-1), len(rx.bufs))] = b
	return true
}

// napi is the interrupt handler: one NAPI poll.
func (n *NIC) napi(p *sim.Proc) { n.napiPoll(p) }

// napiPoll processes every completed rx descriptor, in budgets, reposts
// each buffer, and rings the doorbell once for all the reposts. It
// returns the packets processed.
func (n *NIC) napiPoll(p *sim.Proc) int {
	rx, total := &n.rx, 0
	for n.err == nil {
		k := rx.ch.ReapInPlace(p, n.opt.Budget, func(c *dmaengine.Completed) { n.rxPacket(p, c) })
		total += k
		if k < n.opt.Budget {
			break
		}
	}
	if total > 0 && n.err == nil {
		rx.ch.IssuePending(p)
	}
	return total
}

// rxPacket is the driver's work for one received packet: take the
// buffer back from the device, read the packet, give the buffer back.
// c is the ring entry's own record (Chan.ReapInPlace): it is read before
// the buffer is posted again, whose Submit may take the entry.
func (n *NIC) rxPacket(p *sim.Proc, c *dmaengine.Completed) {
	o, rx := &n.opt, &n.rx
	b := rx.bufs[wrap(uint64(c.Cookie-1), len(rx.bufs))]
	if o.Sync {
		n.dev.SyncSingleForCPU(p, b.addr, o.PacketSize, dma.FromDevice)
	} else {
		n.dev.UnmapSingle(p, b.addr, o.PacketSize, dma.FromDevice)
	}
	if c.Status.Error {
		rx.s.Errors++
	}
	size := uint64(c.Status.Bytes)
	touch := size
	if o.Touch > 0 {
		touch = min(touch, o.Touch)
	}
	var acc mem.Access
	if rx.scratch != nil {
		buf := rx.scratch[:touch]
		acc = n.mem.ReadBytes(p, n.node, b.va, buf)
		rx.s.Verified++
		if _, ok := verify(buf); !ok || size != o.PacketSize {
			rx.s.Corrupt++
		}
	} else {
		acc = n.mem.Read(p, n.node, b.va, touch)
	}
	if acc.Stale {
		rx.s.Stale++
	}
	rx.s.Packets++
	rx.s.Bytes += size
	rx.lat.add(p.Now() - c.Origin)
	rx.s.End = p.Now()
	n.rxHandled()
	n.postAt(p, b, false)
}

func (n *NIC) rxHandled() {
	n.rx.handled++
	if n.rxDone() {
		n.done.Broadcast()
	}
}

// rxClose stops the engine, takes every posted buffer back (unmap and
// free) and frees the ring.
func (n *NIC) rxClose(p *sim.Proc) {
	o, rx := &n.opt, &n.rx
	rx.ch.Terminate(p)
	// The buffers still posted are the outstanding descriptors' ones.
	out := rx.ch.Outstanding()
	first := rx.ch.Stats().Submitted - uint64(out)
	for k := range uint64(out) {
		b := rx.bufs[wrap(first+k, len(rx.bufs))]
		n.dev.UnmapSingle(p, b.addr, o.PacketSize, dma.FromDevice)
		if err := n.mem.Kfree(b.va); err != nil {
			n.fail(err)
		}
	}
	if err := rx.ch.Close(p); err != nil {
		n.fail(err)
	}
}

// ---- the wire (hardware) ----

// rxSend puts the next packet on the wire, back to back at line rate: a
// flow over the line's receive direction.
func (n *NIC) rxSend() {
	rx := &n.rx
	if rx.sent == n.opt.Packets {
		return
	}
	seq := uint64(rx.sent)
	rx.sent++
	start := n.m.Engine.Now()
	if seq == 0 {
		rx.s.Start = start
	}
	rx.wireSeq, rx.wireStart = seq, start
	if rx.arrived == nil {
		rx.arrived = func() {
			// The wire's flow is the NIC's alone: given back, it is
			// the next packet's.
			n.m.Fabric.Release(rx.wireFlow)
			rx.wireFlow = nil
			n.rxArrive(rx.wireSeq, rx.wireStart)
		}
	}
	rx.wireFlow = n.m.Fabric.Start(n.wire.inName, n.wire.in, int64(n.opt.PacketSize))
	rx.wireFlow.Done().OnComplete(rx.arrived)
}

// rxArrive hands a packet that has fully arrived (store and forward) to
// the rx engine, and starts the next one; with the NIC's buffer full it
// drops it (Lossy) or holds the wire until there is room.
func (n *NIC) rxArrive(seq uint64, at sim.Time) {
	rx := &n.rx
	var payload []byte
	if n.mem.Payload() {
		payload = make([]byte, n.opt.PacketSize)
		fill(payload, seq)
	}
	if rx.ch.Deliver(n.opt.PacketSize, at, payload) {
		n.rxSend()
		return
	}
	if n.opt.Lossy {
		rx.s.Dropped++
		n.rxHandled()
		n.rxSend()
		return
	}
	rx.held, rx.heldAt, rx.heldSeq = true, at, seq
}

// rxSpace is the engine telling the NIC that its buffer has room.
func (n *NIC) rxSpace() {
	rx := &n.rx
	if rx.held {
		rx.held = false
		n.rxArrive(rx.heldSeq, rx.heldAt)
	}
}

// rxCPU is the receive path's CPU time so far.
func (n *NIC) rxCPU() sim.Time {
	t := n.rx.proc.CPUTime()
	if n.rx.irq != nil {
		t += n.rx.irq.CPUTime()
	}
	return t
}

func (rx *rxState) stream() Stream {
	s := rx.s
	cpu := rx.cpu1 - rx.cpu0
	if rx.ch != nil {
		st := rx.ch.Stats()
		s.Interrupts, s.Doorbells = st.Interrupts, st.Doorbells
	}
	s.finish(&rx.lat, cpu)
	return s
}

package nic

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// txState is the transmit side: the driver's in-flight packets and the
// NIC's queue in front of the wire.
type txState struct {
	ch   *dmaengine.Chan
	bufs []txBuf // by ring slot
	proc *sim.Proc
	irq  *sim.Proc

	// The wire: packets read from memory waiting to go out, oldest
	// first; busy while one is being sent.
	queue fifo[txPacket]
	busy  bool
	sent  int
	// The packet on the wire, its flow and its end (txSent, bound once),
	// so that sending a packet makes no closure.
	wire     txPacket
	wireFlow *fabric.Flow
	sentFn   func()

	s       Stream
	lat     hist
	scratch []byte
	// cpu0 and cpu1 are the path's CPU time when the first packet was
	// prepared and when the last was sent: setup and teardown are left
	// out.
	cpu0, cpu1 sim.Time
}

type txBuf struct {
	va   mem.VirtAddr
	addr mem.DMAAddr
	t0   sim.Time // the driver began preparing the packet
}

type txPacket struct {
	t0      sim.Time
	payload []byte
	// failed: the NIC's read of it got an error completion; it is not
	// sent.
	failed bool
}

func (n *NIC) startTx() {
	n.tx.proc = n.m.Engine.Spawn(n.opt.Device+"-tx", n.txDriver)
	if runAhead {
		n.tx.proc.RunAhead()
	}
	n.attach(n.tx.proc, n.opt.TxCore)
}

// txDriver is the driver's transmit path (ndo_start_xmit for each
// packet, completions cleaned by interrupt or by polling), then close.
func (n *NIC) txDriver(p *sim.Proc) {
	o, tx := &n.opt, &n.tx
	ch, err := n.c.NewChan(p, dmaengine.Config{
		Name: o.Device + ".tx", Kind: dmaengine.MemToDev, Entries: o.Ring, FIFO: o.FIFO,
		PollInterval: o.PollInterval, Timing: o.Timing, OnData: n.txWire,
	})
	if err != nil {
		n.fail(err)
		return
	}
	tx.ch = ch
	tx.bufs = make([]txBuf, ch.Entries())
	if n.mem.Payload() {
		tx.scratch = make([]byte, o.PacketSize)
	}
	if !o.Polling {
		tx.irq = ch.RequestIRQ(n.txClean)
		if runAhead {
			tx.irq.RunAhead()
		}
		n.attach(tx.irq, o.TxCore)
	}
	mode := dmaengine.Interrupt
	if o.Polling {
		mode = dmaengine.Polling
	}
	tx.s.Start = p.Now()
	tx.cpu0 = n.txCPU()
	var last dmaengine.Cookie
	for seq := range uint64(o.Packets) {
		if n.err != nil {
			break
		}
		if o.Polling {
			n.txReap(p)
		}
		if ch.Space() == 0 {
			ch.WaitSpace(p, mode, n.txDone(p))
		}
		c, ok := n.xmit(p, seq)
		if !ok {
			break
		}
		last = c
	}
	// Take back every buffer given to the device, even after a failure,
	// then (when all went well) wait for the wire to send the last.
	if last != 0 {
		if o.Polling {
			ch.Poll(p, last, n.txDone(p))
		} else {
			ch.Wait(p, last)
		}
	}
	if n.err == nil {
		p.WaitUntil(n.done, func() bool { return tx.sent == o.Packets })
	}
	ch.FreeIRQ(p)
	tx.cpu1 = n.txCPU()
	ch.Terminate(p)
	if err := ch.Close(p); err != nil {
		n.fail(err)
	}
}

// xmit sends packet seq: allocate a buffer, write the packet with the
// CPU, map it TO_DEVICE (checked), submit, ring the doorbell.
func (n *NIC) xmit(p *sim.Proc, seq uint64) (dmaengine.Cookie, bool) {
	o, tx := &n.opt, &n.tx
	t0 := p.Now()
	va, err := n.mem.Kmalloc(n.node, o.PacketSize)
	if err != nil {
		n.fail(fmt.Errorf("nic %s: tx buffer: %w", o.Device, err))
		return 0, false
	}
	if tx.scratch != nil {
		fill(tx.scratch, seq)
		n.mem.WriteBytes(p, n.node, va, tx.scratch)
	} else {
		n.mem.Write(p, n.node, va, o.PacketSize)
	}
	addr := n.dev.MapSingle(p, va, o.PacketSize, dma.ToDevice)
	if n.dev.MappingError(addr) {
		n.fail(fmt.Errorf("nic %s: dma_map_single of tx buffer %v failed", o.Device, va))
		n.mem.Kfree(va)
		return 0, false
	}
	var flags dmaengine.Flags
	if !o.Polling {
		flags = dmaengine.FlagIRQ
	}
	c, err := tx.ch.Submit(p, dmaengine.Descriptor{Src: addr, Len: o.PacketSize, Flags: flags})
	if err != nil {
		n.fail(err)
		return 0, false
	}
	tx.bufs[wrap(uint64(c-1), len(tx.bufs))] = txBuf{va: va, addr: addr, t0: t0}
	tx.ch.IssuePending(p)
	return c, true
}

// txClean is the tx interrupt handler: reap every completed packet.
func (n *NIC) txClean(p *sim.Proc) { n.txReap(p) }

func (n *NIC) txReap(p *sim.Proc) { n.tx.ch.ReapInPlace(p, 0, n.txDoneInPlace(p)) }

// txDone returns the completion work for one sent packet: the device
// has read it, so unmap (TO_DEVICE) and free the buffer.
func (n *NIC) txDone(p *sim.Proc) func(dmaengine.Completed) {
	done := n.txDoneInPlace(p)
	return func(c dmaengine.Completed) { done(&c) }
}

// txDoneInPlace is txDone for Chan.ReapInPlace: it reads the entry's
// own record, and submits nothing.
func (n *NIC) txDoneInPlace(p *sim.Proc) func(*dmaengine.Completed) {
	return func(c *dmaengine.Completed) {
		tx := &n.tx
		if c.Status.Error {
			tx.s.Errors++
		}
		b := tx.bufs[wrap(uint64(c.Cookie-1), len(tx.bufs))]
		n.dev.UnmapSingle(p, b.addr, n.opt.PacketSize, dma.ToDevice)
		if err := n.mem.Kfree(b.va); err != nil {
			n.fail(err)
		}
	}
}

// ---- the wire (hardware) ----

// txWire is the engine handing the NIC a packet it has read: it joins
// the queue in front of the wire.
func (n *NIC) txWire(c dmaengine.Completed, payload []byte) {
	tx := &n.tx
	// The driver's record of the packet is still there: the entry is
	// reaped only after this instant.
	t0 := tx.bufs[wrap(uint64(c.Cookie-1), len(tx.bufs))].t0
	tx.queue.push(txPacket{t0: t0, payload: payload, failed: c.Status.Error})
	n.txNext()
}

// txNext sends the oldest queued packet: a flow over the line's
// transmit direction. Its end frees the NIC's buffer (Drain).
func (n *NIC) txNext() {
	tx := &n.tx
	if tx.busy || tx.queue.len() == 0 {
		return
	}
	pkt := tx.queue.pop()
	size := n.opt.PacketSize
	if pkt.failed {
		// Dropped in front of the wire, its buffer freed; it still
		// counts towards the packets the run waits for.
		tx.sent++
		tx.ch.Drain(size)
		if tx.sent == n.opt.Packets {
			n.done.Broadcast()
		}
		n.txNext()
		return
	}
	tx.busy, tx.wire = true, pkt
	if tx.sentFn == nil {
		tx.sentFn = n.txSent
	}
	tx.wireFlow = n.m.Fabric.Start(n.wire.outName, n.wire.out, int64(size))
	tx.wireFlow.Done().OnComplete(tx.sentFn)
}

// txSent is the end of the packet on the wire: its NIC buffer is free,
// and the next queued packet goes.
func (n *NIC) txSent() {
	tx := &n.tx
	// The wire's flow is the NIC's alone: given back, it is the next
	// packet's.
	n.m.Fabric.Release(tx.wireFlow)
	pkt, size, now := tx.wire, n.opt.PacketSize, n.m.Engine.Now()
	tx.wireFlow, tx.wire = nil, txPacket{}
	tx.busy = false
	tx.sent++
	tx.s.Packets++
	tx.s.Bytes += size
	tx.s.End = now
	tx.lat.add(now - pkt.t0)
	if pkt.payload != nil {
		tx.s.Verified++
		if seq, ok := verify(pkt.payload); !ok || seq != uint64(tx.sent-1) {
			tx.s.Corrupt++
		}
	}
	tx.ch.Drain(size)
	if tx.sent == n.opt.Packets {
		n.done.Broadcast()
	}
	n.txNext()
}

// txCPU is the transmit path's CPU time so far.
func (n *NIC) txCPU() sim.Time {
	t := n.tx.proc.CPUTime()
	if n.tx.irq != nil {
		t += n.tx.irq.CPUTime()
	}
	return t
}

func (tx *txState) stream() Stream {
	s := tx.s
	cpu := tx.cpu1 - tx.cpu0
	if tx.ch != nil {
		st := tx.ch.Stats()
		s.Interrupts, s.Doorbells = st.Interrupts, st.Doorbells
	}
	s.finish(&tx.lat, cpu)
	return s
}

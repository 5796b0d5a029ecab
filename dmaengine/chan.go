package dmaengine

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Kind is a channel's transfer direction: Linux's enum
// dma_transfer_direction.
type Kind int

const (
	// MemToMem is a memcpy engine (I/OAT, DSA, AXI CDMA): it reads Src
	// and writes Dst, both in host memory, the bytes crossing the
	// device's link down and up again.
	MemToMem Kind = iota + 1
	// DevToMem moves data the device produced (a received packet) into
	// host memory at Dst: a NIC's rx queue, AXI DMA's S2MM channel.
	DevToMem
	// MemToDev moves host memory at Src into the device (a packet to
	// transmit): a NIC's tx queue, AXI DMA's MM2S channel.
	MemToDev
)

func (k Kind) String() string {
	switch k {
	case MemToMem:
		return "mem-to-mem"
	case DevToMem:
		return "dev-to-mem"
	case MemToDev:
		return "mem-to-dev"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Cookie names one submitted descriptor (dma_cookie_t): cookies are
// handed out in submission order from 1, and descriptors complete in
// that order.
type Cookie uint64

// Errors.
var (
	ErrRingFull  = errors.New("descriptor ring full")
	ErrBadLength = errors.New("bad descriptor length")
	ErrBusy      = errors.New("channel busy")
	ErrClosed    = errors.New("channel closed")
)

// Defaults of Config.
const (
	DefaultEntries = 256
	DefaultFetch   = 8
	// DefaultInflight is the descriptors whose data may move at once: 64.
	// Model choice: enough 1500-byte packets to cover the
	// bandwidth-delay product of a Gen5 x16 link (55.5 GB/s × ~1 µs of
	// DMA-read round trip ≈ 56 KB ≈ 37 packets), as a NIC's many
	// outstanding read requests (PCIe tags) do.
	DefaultInflight = 64
	// DefaultFIFO is the device's data buffer of a DevToMem or MemToDev
	// channel: 256 KiB. Model choice, of the order of a NIC's per-queue
	// packet buffer.
	DefaultFIFO = 256 << 10
)

// Config describes a channel.
type Config struct {
	// Name names the channel in flows, processes and errors
	// ("nic0.rx0"); default device.chanN.
	Name string
	Kind Kind
	// Entries is the ring's size in descriptors (default 256).
	Entries int
	// Fetch is how many descriptors the engine reads in one DMA read, and
	// the low-water mark of its descriptor cache: it fetches again when
	// fewer than Fetch fetched descriptors are waiting (default 8).
	Fetch int
	// Inflight is how many descriptors may move data at once (default
	// DefaultInflight): the engine's outstanding requests. Descriptors
	// still complete, and write their status, in ring order.
	// FlagFence holds one back until the earlier ones have landed.
	Inflight int
	// FIFO is the bytes of device-side buffer: received data waiting for
	// a descriptor (DevToMem), or read data waiting for the device to
	// take it (MemToDev; see Drain). Default DefaultFIFO.
	FIFO uint64
	// OnData is called (MemToDev) when a descriptor's data has reached
	// the device, with its bytes in payload mode; the device calls Drain
	// when it has disposed of them.
	OnData func(c Completed, payload []byte)
	// OnSpace is called (DevToMem) when device-side buffer space frees
	// up, so that a device holding data back can Deliver it.
	OnSpace func()
	// PollInterval spaces the status reads of Poll (default
	// DefaultPollInterval).
	PollInterval sim.Time
	Timing       Timing
}

// Completed is a descriptor the driver has reaped, with when each step
// of its life happened (hardware timestamps, for latency attribution).
type Completed struct {
	Cookie Cookie
	// Desc is the descriptor as the driver submitted it; Status the
	// status word as the driver read it.
	Desc   Descriptor
	Status Status
	// Origin is, on a DevToMem channel, when the device got the data (a
	// NIC: the packet's first byte on the wire).
	Origin sim.Time
	// Submitted: the driver began writing the entry. Fetched: the entry
	// reached the engine. Started: the engine began the data phase (for
	// DevToMem, with data in hand). Landed: the last byte and the status
	// word reached memory (MemToDev: the device). Reaped: the driver read
	// the status.
	Submitted, Fetched, Started, Landed, Reaped sim.Time
}

// Stats count a channel's activity.
type Stats struct {
	Submitted, Completed, Reaped uint64
	// Bytes is data moved (not descriptors or status words).
	Bytes uint64
	// Doorbells rung; Fetches (DMA reads of descriptors) and the
	// descriptors they brought.
	Doorbells, Fetches, FetchedDescs uint64
	// MSIs the engine sent; Interrupts the handler ran for.
	MSIs, Interrupts uint64
	// StatusReads is the CPU reads of status words (each poll is one).
	StatusReads uint64
	// Errors is descriptors completed with StatusError: a read of the
	// descriptor or of its data that failed (an IOMMU fault gets an
	// Unsupported Request or Completer Abort completion), or received
	// data longer than the buffer. A write the IOMMU blocks is not an
	// error here: it is posted, and the engine never learns of it.
	Errors uint64
	// LostStatus is status words whose write was blocked (the model's
	// count; the engine itself does not know, and the driver waits for
	// a completion that never comes).
	LostStatus uint64
}

// Chan is one channel of the engine: a descriptor ring in coherent
// memory, the driver's view of it, and the hardware state machine that
// consumes it (Linux's struct dma_chan with its driver's ring state).
//
// Driver operations take the calling process and charge its CPU:
// Submit writes an entry (a CPU write to the coherent ring),
// ring is the oldest doorbell write on its way arriving at the device.
func (ch *Chan) ring() {
	if tail := ch.rung.pop(); tail > ch.doorbell {
		ch.doorbell = tail
	}
	ch.kick()
}

// IssuePending rings the doorbell (an MMIO write), Reap reads status
// words. The hardware side runs in events: it is never a process.
//
// Indexes are free-running counters (slot = index mod Entries):
// reaped ≤ retired ≤ started ≤ fetched ≤ doorbell ≤ tail, and
// tail − reaped ≤ Entries. The driver owns slots [reaped, tail) only
// to reap them; the hardware reads [fetched, doorbell) and writes
// status words of [retired, started).
type Chan struct {
	c    *Controller
	name string
	kind Kind
	t    Timing
	n    uint64

	ringVA   mem.VirtAddr
	ringDMA  mem.DMAAddr
	slots    []slot
	fetchMax uint64
	inMax    int
	fifoCap  uint64
	onData   func(Completed, []byte)
	onSpace  func()
	poll     sim.Time
	payload  bool
	closed   bool
	stats    Stats
	// flowNames are the names of the channel's flows, made once; opts
	// the options of every flow (its tag), made once too.
	flowNames []string
	opts      []fabric.Option
	reapCond  *sim.Cond
	// hwCond is broadcast when a stopped engine finishes a step.
	hwCond *sim.Cond

	// Driver side.
	tail, reaped uint64

	// Hardware side.
	doorbell, fetched, started, retired uint64
	fetching, stopped                   bool
	fetch1                              fetchState
	inflight                            int
	fifoUsed                            uint64
	// rx is the device's data waiting for a descriptor (DevToMem),
	// oldest first.
	rx queue[chunk]
	// rung are the tails of the doorbell writes on their way to the
	// device, oldest first: each arrives one way after it was rung, so
	// they arrive in this order, and ringFn (bound once) takes the
	// first.
	rung   queue[uint64]
	ringFn func()

	// Interrupts: the engine masks its vector when it sends an MSI
	// (auto-mask, as Intel NICs' EIAM does for NAPI); the handler
	// unmasks it with an MMIO write when done, and an event that
	// completed meanwhile (pending) sends the next MSI then.
	masked, pending     bool
	delivered, handled  uint64
	irqCond             *sim.Cond
	irqFreed, irqActive bool
	irqRunning          bool
	// msiFn and unmaskFn (bound once) are the arrivals of an MSI at the
	// CPU and of the handler's unmask at the engine, so that an
	// interrupt makes no closure.
	msiFn, unmaskFn func()

	// freePh are the data phases over, for the next entries; phases
	// counts those made (for tests).
	freePh []*phase
	phases int
}

// slot is the model's record of one ring entry.
type slot struct {
	slotFields
}

// slotFields are what Submit sets anew for each entry.
type slotFields struct {
	// rec is the entry as the driver reaps it: its cookie, the
	// descriptor the driver wrote (Desc), the status word in memory
	// (Status), when the data came (Origin) and each step's time. It is
	// kept whole, so that Reap hands it on in one wide copy of lines the
	// engine wrote long before: a record put together field by field
	// and then copied is read with wide loads across narrow stores not
	// yet written back, which the CPU cannot forward (a stall each).
	rec Completed
	// hw is what the engine fetched (the decoded bytes in payload mode,
	// Desc otherwise); result the status the engine will write once the
	// entry retires.
	hw     Descriptor
	result Status
	data   []byte // MemToDev: the bytes read, until the device takes them (payload mode)
	done   bool   // data phase over, status not yet written
	failed bool   // the fetch of the entry failed
}

// phase is the state of an entry's data phase (DevToMem or MemToDev)
// from its start to its landing, which is before the entry retires. The
// channel keeps the phases that are over for the next entries (freePh,
// last freed first), so that a packet allocates no transfer of its own
// and, as at most Config.Inflight are under way at once, the few in use
// stay in the CPU's caches: a phase kept in every ring entry was written
// to once per lap of the ring, cold each time.
type phase struct {
	s  *slot // the entry whose data phase it is
	rx rxPhase
	tx txPhase
}

// takePhase returns a phase for s's data phase.
func (ch *Chan) takePhase(s *slot) *phase {
	var ph *phase
	if n := len(ch.freePh); n > 0 {
		ph = ch.freePh[n-1]
		ch.freePh[n-1] = nil
		ch.freePh = ch.freePh[:n-1]
	} else {
		ph = &phase{}
		ch.phases++
	}
	ph.s = s
	return ph
}

// freePhase gives back ph, whose data phase is over.
func (ch *Chan) freePhase(ph *phase) {
	ph.s = nil
	ch.freePh = append(ch.freePh, ph)
}

// txPhase is a MemToDev data phase: the read request on its way to
// memory, then the read's transfer.
type txPhase struct {
	t     dma.Transfer
	route fabric.Route
	read  [1]dma.Span
	// n is the bytes read, the descriptor's length.
	n uint64
	// start starts the read, one way after the engine started the entry,
	// and done is its completion; both made once per phase.
	start func()
	done  func([]byte, error)
}

// rxPhase is a DevToMem data phase's transfer and what its completion
// needs.
type rxPhase struct {
	t     dma.Transfer
	route fabric.Route
	write [1]dma.Span
	// size is the chunk's bytes (what the device's buffer frees), n the
	// bytes written, trunc whether the chunk was cut to the buffer.
	size, n uint64
	trunc   bool
	// done is the completion, made once per phase.
	done func()
}

// chunk is data the device produced, waiting for a descriptor.
type chunk struct {
	size    uint64
	origin  sim.Time
	payload []byte
}

// queue is a FIFO in a circular buffer: its storage is the most items
// ever waiting at once (for chunks the device's buffer bounds them),
// never the number that went through. A slice appended at the tail and
// consumed from the head, emptied only when drained, grew with every
// packet under steady traffic, where it is never empty.
type queue[T any] struct {
	buf     []T
	head, n int
}

func (q *queue[T]) len() int { return q.n }

// push appends x, doubling the buffer when full: its length is a
// power of two, so that positions wrap by a mask rather than a division.
func (q *queue[T]) push(x T) {
	if q.n == len(q.buf) {
		buf := make([]T, max(2*len(q.buf), 8))
		for i := range q.n {
			buf[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
		}
		q.buf, q.head = buf, 0
	}
	q.buf[(q.head+q.n)&(len(q.buf)-1)] = x
	q.n++
}

// pop removes and returns the oldest item; the queue must not be empty.
func (q *queue[T]) pop() T {
	x := q.buf[q.head]
	var zero T
	q.buf[q.head] = zero
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return x
}

// NewChan creates a channel: it allocates the descriptor ring with
// dma_alloc_coherent on behalf of p (the driver's probe).
func (c *Controller) NewChan(p *sim.Proc, cfg Config) (*Chan, error) {
	if cfg.Kind < MemToMem || cfg.Kind > MemToDev {
		return nil, fmt.Errorf("dmaengine %s: channel kind %v", c.hw.Name, cfg.Kind)
	}
	c.chans++
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("%s.chan%d", c.hw.Name, c.chans-1)
	}
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	ch := &Chan{
		c: c, name: cfg.Name, kind: cfg.Kind, t: cfg.Timing.withDefaults(),
		n:        uint64(def(cfg.Entries, DefaultEntries)),
		fetchMax: uint64(def(cfg.Fetch, DefaultFetch)),
		inMax:    def(cfg.Inflight, DefaultInflight),
		fifoCap:  cfg.FIFO,
		onData:   cfg.OnData,
		onSpace:  cfg.OnSpace,
		poll:     cfg.PollInterval,
		payload:  c.mem.Payload(),
		reapCond: sim.NewCond("reaped " + cfg.Name),
		irqCond:  sim.NewCond("irq " + cfg.Name),
		hwCond:   sim.NewCond("terminate " + cfg.Name),
	}
	if ch.fifoCap == 0 {
		ch.fifoCap = DefaultFIFO
	}
	if ch.poll <= 0 {
		ch.poll = DefaultPollInterval
	}
	ch.fetchMax = min(ch.fetchMax, ch.n)
	va, addr, err := c.dev.AllocCoherent(p, ch.n*DescSize)
	if err != nil {
		return nil, fmt.Errorf("dmaengine %s: ring of %d descriptors: %w", ch.name, ch.n, err)
	}
	ch.ringVA, ch.ringDMA = va, addr
	ch.slots = make([]slot, ch.n)
	for _, op := range []string{"fetch", "copy", "read", "write"} {
		ch.flowNames = append(ch.flowNames, ch.name+" "+op)
	}
	ch.opts = []fabric.Option{fabric.Tag(ch)}
	return ch, nil
}

// Name is the channel's name.
func (ch *Chan) Name() string { return ch.name }

// Kind is the channel's direction.
func (ch *Chan) Kind() Kind { return ch.kind }

// Controller is the engine the channel belongs to.
func (ch *Chan) Controller() *Controller { return ch.c }

// Entries is the ring's size.
func (ch *Chan) Entries() int { return int(ch.n) }

// Ring is the descriptor ring: its kernel address and its bus address.
func (ch *Chan) Ring() (mem.VirtAddr, mem.DMAAddr) { return ch.ringVA, ch.ringDMA }

// Stats returns the channel's counters.
func (ch *Chan) Stats() Stats { return ch.stats }

// Outstanding is the descriptors submitted and not yet reaped.
func (ch *Chan) Outstanding() int { return int(ch.tail - ch.reaped) }

// Space is the ring entries free for Submit.
func (ch *Chan) Space() int { return int(ch.n - (ch.tail - ch.reaped)) }

// IsReaped reports whether the driver has reaped cookie (software
// state: no memory access).
func (ch *Chan) IsReaped(c Cookie) bool { return uint64(c) <= ch.reaped }

func (ch *Chan) entryVA(i uint64) mem.VirtAddr { return ch.ringVA + mem.VirtAddr(ch.wrap(i)*DescSize) }
func (ch *Chan) entryDMA(i uint64) mem.DMAAddr { return ch.ringDMA + mem.DMAAddr(ch.wrap(i)*DescSize) }
func (ch *Chan) slot(i uint64) *slot           { return &ch.slots[ch.wrap(i)] }

// wrap is index i's position in the ring, i mod Entries: by a mask when
// Entries is a power of two, as rings almost always are, sparing the
// division that every slot lookup would otherwise cost.
func (ch *Chan) wrap(i uint64) uint64 {
	if ch.n&(ch.n-1) == 0 {
		return i & (ch.n - 1)
	}
	return i % ch.n
}
func (ch *Chan) eng() *sim.Engine { return ch.c.m.Engine }

// ---- driver side ----

// Submit writes d into the next ring entry with CPU writes to the
// coherent ring (status word cleared) on behalf of p, and returns its
// cookie. The engine sees it after the next IssuePending.
func (ch *Chan) Submit(p *sim.Proc, d Descriptor) (Cookie, error) {
	switch {
	case ch.closed:
		return 0, fmt.Errorf("submit on %s: %w", ch.name, ErrClosed)
	case d.Len == 0 || d.Len > MaxLen:
		return 0, fmt.Errorf("submit on %s: %w: %d (want 1..%d)", ch.name, ErrBadLength, d.Len, uint64(MaxLen))
	case ch.tail-ch.reaped >= ch.n:
		return 0, fmt.Errorf("submit on %s: %w (%d entries)", ch.name, ErrRingFull, ch.n)
	}
	i := ch.tail
	s := ch.slot(i)
	// Cleared in place, then set field by field: a composite literal is
	// built on the stack and copied in with wide loads across its narrow
	// stores, which the CPU cannot forward (a stall per packet).
	s.slotFields = slotFields{}
	s.rec.Cookie, s.rec.Desc, s.hw, s.rec.Submitted = Cookie(i+1), d, d, p.Now()
	m, node, va := ch.c.mem, ch.c.node, ch.entryVA(i)
	if ch.payload {
		var b [DescSize]byte
		d.encode(b[:])
		m.WriteBytes(p, node, va, b[:])
	} else {
		m.Write(p, node, va, DescSize)
	}
	ch.tail++
	ch.stats.Submitted++
	return s.rec.Cookie, nil
}

// IssuePending rings the doorbell (dma_async_issue_pending): an MMIO
// write of the ring's tail, posted now, which the engine sees after the
// one-way latency to the device; the store holds p's core for
// Timing.MMIOWrite.
func (ch *Chan) IssuePending(p *sim.Proc) {
	ch.stats.Doorbells++
	ch.rung.push(ch.tail)
	if ch.ringFn == nil {
		ch.ringFn = ch.ring
	}
	ch.eng().After(ch.c.oneWay, ch.ringFn)
	p.Sleep(ch.t.MMIOWrite)
}

// Reap reads, on behalf of p, the status words of the oldest
// outstanding descriptors in ring order (CPU reads of the coherent
// ring), and for each one the engine has completed frees its entry and
// calls fn (which may Submit again). It stops at the first descriptor
// not yet complete (whose status read it has paid for), after max
// completions when max > 0, or when nothing is outstanding. It returns
// the number reaped.
func (ch *Chan) Reap(p *sim.Proc, max int, fn func(Completed)) int {
	n := 0
	for (max <= 0 || n < max) && ch.reaped < ch.tail {
		s := ch.reapNext(p)
		if s == nil {
			break
		}
		n++
		if fn != nil {
			fn(s.rec)
		}
	}
	return n
}

// ReapInPlace is Reap handing fn the entry's record itself rather than
// a copy: a driver's per-packet callback then reads the few fields it
// needs, not a copy of the whole record (the copy's wide loads of the
// reap time just stored stall the CPU). The record is valid until fn
// Submits (a Submit on a full ring takes this very entry) or returns;
// fn must not keep it.
func (ch *Chan) ReapInPlace(p *sim.Proc, max int, fn func(*Completed)) int {
	n := 0
	for (max <= 0 || n < max) && ch.reaped < ch.tail {
		s := ch.reapNext(p)
		if s == nil {
			break
		}
		n++
		fn(&s.rec)
	}
	return n
}

// reapNext reads the status word of the oldest outstanding descriptor,
// which must exist; completed, it frees the entry and returns it, else
// nil.
func (ch *Chan) reapNext(p *sim.Proc) *slot {
	i := ch.reaped
	s := ch.slot(i)
	va := ch.entryVA(i) + StatusOffset
	ch.stats.StatusReads++
	// The read obtains the word as it is when the read begins (the
	// shadow is taken before mem charges the read's time), in both
	// modes.
	st := s.rec.Status
	if ch.payload {
		var b [StatusSize]byte
		ch.c.mem.ReadBytes(p, ch.c.node, va, b[:])
		st = decodeStatus(b[:])
	} else {
		ch.c.mem.Read(p, ch.c.node, va, StatusSize)
	}
	if !st.Done {
		return nil
	}
	if st != s.rec.Status {
		// (Payload mode: the word as read.)
		s.rec.Status = st
	}
	s.rec.Reaped = p.Now()
	ch.reaped++
	ch.stats.Reaped++
	ch.reapCond.Broadcast()
	return s
}

// Lookup returns the completion of a reaped cookie while its ring entry
// has not been reused by a later Submit.
func (ch *Chan) Lookup(c Cookie) (Completed, bool) {
	if c == 0 || !ch.IsReaped(c) {
		return Completed{}, false
	}
	s := ch.slot(uint64(c) - 1)
	if s.rec.Cookie != c {
		return Completed{}, false
	}
	return s.rec, true
}

// Wait blocks p, idle, until cookie has been reaped, by an interrupt
// handler or another process.
func (ch *Chan) Wait(p *sim.Proc, c Cookie) {
	p.WaitUntil(ch.reapCond, func() bool { return ch.IsReaped(c) })
}

// Poll busy-polls from p until cookie has been reaped: it reaps (a
// status read each time), then spins PollInterval, and again. All of it
// is CPU time. fn gets every descriptor reaped on the way.
func (ch *Chan) Poll(p *sim.Proc, c Cookie, fn func(Completed)) {
	for {
		ch.Reap(p, 0, fn)
		if ch.IsReaped(c) {
			return
		}
		p.Sleep(ch.poll)
	}
}

// RequestIRQ registers handler for the channel's interrupt
// (request_threaded_irq): it spawns the handler's process, which sleeps
// until an MSI is delivered, then charges Timing.IRQEntry, runs handler
// (which reaps: one interrupt serves every descriptor completed by then,
// as NAPI does) and unmasks the vector with an MMIO write. A nil handler
// reaps everything completed. It returns the process, so that its CPU
// time can be accounted to a core.
func (ch *Chan) RequestIRQ(handler func(p *sim.Proc)) *sim.Proc {
	if ch.irqActive {
		panic("dmaengine: " + ch.name + ": RequestIRQ twice")
	}
	if handler == nil {
		handler = func(p *sim.Proc) { ch.Reap(p, 0, nil) }
	}
	ch.irqActive, ch.irqFreed = true, false
	return ch.eng().Spawn("irq/"+ch.name, func(p *sim.Proc) {
		for {
			p.WaitUntil(ch.irqCond, func() bool { return ch.delivered > ch.handled || ch.irqFreed })
			if ch.irqFreed {
				break
			}
			ch.handled = ch.delivered
			ch.stats.Interrupts++
			ch.irqRunning = true
			p.Sleep(ch.t.IRQEntry)
			handler(p)
			ch.unmask(p)
			ch.irqRunning = false
		}
		ch.irqActive = false
		ch.irqCond.Broadcast()
	})
}

// FreeIRQ unregisters the handler (free_irq): like Linux's, it waits,
// p idle, until a run of the handler in progress has finished, and the
// handler's process ends.
func (ch *Chan) FreeIRQ(p *sim.Proc) {
	if !ch.irqActive {
		return
	}
	ch.irqFreed = true
	ch.irqCond.Broadcast()
	p.WaitUntil(ch.irqCond, func() bool { return !ch.irqActive })
}

// unmask re-enables the vector with an MMIO write from p.
func (ch *Chan) unmask(p *sim.Proc) {
	if ch.unmaskFn == nil {
		ch.unmaskFn = ch.unmasked
	}
	ch.eng().After(ch.c.oneWay, ch.unmaskFn)
	p.Sleep(ch.t.MMIOWrite)
}

// unmasked is the handler's unmask arriving at the engine: an event that
// completed while masked sends its MSI now.
func (ch *Chan) unmasked() {
	ch.masked = false
	if ch.pending {
		ch.pending = false
		ch.raise()
	}
}

// Terminate stops the engine (dmaengine_terminate_sync) with an MMIO
// write from p: once it arrives, the engine fetches and starts nothing
// more, and data the device holds for it is discarded. Terminate
// returns, p having slept idle, when transfers and fetches already under
// way have finished: the engine touches no memory after that, so
// buffers still posted can be unmapped and the ring freed.
func (ch *Chan) Terminate(p *sim.Proc) {
	ch.eng().After(ch.c.oneWay, func() {
		ch.stopped = true
		for ch.rx.len() > 0 {
			ch.fifoUsed -= ch.rx.pop().size
		}
		ch.hwCond.Broadcast()
	})
	p.Sleep(ch.t.MMIOWrite)
	p.WaitUntil(ch.hwCond, func() bool { return ch.stopped && ch.Idle() })
}

// Idle reports whether the engine has no data phase in progress.
func (ch *Chan) Idle() bool { return ch.started == ch.retired && !ch.fetching }

// Close frees the ring (dma_free_coherent) on behalf of p. The engine
// must be idle: ErrBusy otherwise.
func (ch *Chan) Close(p *sim.Proc) error {
	if ch.closed {
		return fmt.Errorf("close %s: %w", ch.name, ErrClosed)
	}
	if !ch.Idle() {
		return fmt.Errorf("close %s: %w: %d transfers in progress", ch.name, ErrBusy, ch.started-ch.retired)
	}
	ch.closed, ch.stopped = true, true
	ch.c.dev.FreeCoherent(p, ch.n*DescSize, ch.ringVA, ch.ringDMA)
	return nil
}

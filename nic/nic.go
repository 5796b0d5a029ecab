package nic

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Dir selects the traffic a run carries.
type Dir int

const (
	Rx   Dir       = 1 << iota // packets from the wire into host memory
	Tx                         // packets from host memory onto the wire
	Both = Rx | Tx             // both at once, on separate rings and cores
)

func (d Dir) String() string {
	switch d {
	case Rx:
		return "rx"
	case Tx:
		return "tx"
	case Both:
		return "rx+tx"
	}
	return fmt.Sprintf("Dir(%d)", int(d))
}

// Defaults of Options.
const (
	DefaultPacketSize = 1500
	DefaultPackets    = 1000
	DefaultRing       = 256
	// DefaultBudget is NAPI's per-poll budget (NAPI_POLL_WEIGHT, 64).
	DefaultBudget = 64
	// MinPacketSize leaves room for the sequence number that starts
	// every packet's payload.
	MinPacketSize = 16
)

// ErrBadOption is wrapped by every invalid Options error.
var ErrBadOption = errors.New("bad option")

// Options describe a run.
type Options struct {
	// Device is the NIC's name; empty means the platform's first device
	// of kind nic.
	Device string
	// Dir is the traffic: Rx, Tx or Both (default Rx).
	Dir Dir
	// PacketSize is the bytes of every packet (default 1500), Packets the
	// count per direction (default 1000).
	PacketSize uint64
	Packets    int
	// Ring is the descriptors per ring (default 256); every rx entry
	// holds a posted buffer.
	Ring int
	// Polling busy-polls the rings from the driver's process (a DPDK poll
	// mode driver) instead of taking interrupts; PollInterval spaces the
	// polls (default dmaengine.DefaultPollInterval).
	Polling      bool
	PollInterval sim.Time
	// Sync keeps rx buffers mapped and hands them back and forth with
	// dma_sync_single_for_cpu / _for_device instead of unmapping and
	// mapping each packet.
	Sync bool
	// Budget is NAPI's per-poll budget (default 64).
	Budget int
	// Touch is how many bytes of each received packet the driver reads
	// with the CPU (0: all of it). A stack that only parses headers
	// touches ~128 B.
	Touch uint64
	// Lossy drops a packet that finds the NIC's rx buffer full; by
	// default the link is lossless (InfiniBand credits, Ethernet PAUSE):
	// the wire waits.
	Lossy bool
	// FIFO is the NIC's buffer per direction (default
	// dmaengine.DefaultFIFO).
	FIFO uint64
	// RxCore and TxCore are the cores the rx and tx paths (driver
	// process and interrupt handler) run on, for Cores; both zero means
	// 0 and 1.
	RxCore, TxCore int
	// Cores, when set, accounts the run's CPU time per core.
	Cores  *dmaengine.Cores
	Timing dmaengine.Timing
}

// Stream is the outcome of one direction.
type Stream struct {
	// Packets and Bytes delivered (rx: read by the driver; tx: sent on
	// the wire); Dropped packets (rx, Lossy only).
	Packets, Bytes, Dropped uint64
	// Start is when the first packet started (rx: its first byte on the
	// wire; tx: the driver began preparing it), End when the last was
	// done (rx: read by the driver; tx: its last byte on the wire).
	Start, End sim.Time
	// Throughput is Bytes / (End − Start), in bytes per second.
	Throughput float64
	// Latency of each packet: rx from its first byte on the wire to the
	// driver having read it; tx from the driver beginning to prepare it
	// to its last byte on the wire. Percentiles are exact to 0.1%.
	P50, P99, Max, Mean sim.Time
	// CPU is the CPU time of the direction's driver process and
	// interrupt handler; CPUPerPacket that over Packets.
	CPU, CPUPerPacket sim.Time
	// Interrupts the handler ran for; Doorbells rung.
	Interrupts, Doorbells uint64
	// Verified is packets whose bytes were compared with what was sent
	// (payload mode); Corrupt those that differed; Stale the driver's
	// reads that obtained stale data.
	Verified, Corrupt, Stale uint64
	// Errors is descriptors the driver reaped with the error status:
	// tx, a packet the NIC could not read (an IOMMU fault answered its
	// read with an error completion), which it did not send; rx, a
	// packet longer than its buffer. An rx write the IOMMU blocked is
	// not among them: the NIC never learns of it, and the driver finds
	// the buffer unchanged (Corrupt, in payload mode).
	Errors uint64
}

// Result is the outcome of a run.
type Result struct {
	Device string
	Rx, Tx Stream
}

// NIC is a network adapter on a machine with its driver: the hardware
// (a wire at the device's line rate, a packet generator behind it, rx
// and tx DMA channels) and the driver's state (posted buffers,
// in-flight packets).
type NIC struct {
	m    *machine.Machine
	mem  *mem.Memory
	c    *dmaengine.Controller
	dev  *dma.Device
	opt  Options
	node int
	wire struct {
		in, out         fabric.Route
		inName, outName string
	}
	err  error
	done *sim.Cond

	rx rxState
	tx txState
}

// Start builds the NIC named by opt on machine m, with its memory and
// the DMA layer d over it, and spawns its driver's processes; the run
// happens when the machine's engine runs. Result gives the outcome
// after that.
func Start(m *machine.Machine, memory *mem.Memory, d *dma.DMA, opt Options) (*NIC, error) {
	opt, err := opt.withDefaults(m)
	if err != nil {
		return nil, err
	}
	c, err := dmaengine.New(m, memory, d, opt.Device)
	if err != nil {
		return nil, err
	}
	hw := c.Hardware()
	if hw.Line == nil {
		return nil, fmt.Errorf("nic %s: %w: the device has no line rate", opt.Device, ErrBadOption)
	}
	n := &NIC{m: m, mem: memory, c: c, dev: c.Device(), opt: opt, node: c.Node(), done: sim.NewCond("nic " + opt.Device)}
	n.wire.in = fabric.Route{Hops: []fabric.Hop{{Link: hw.Line, Dir: fabric.BtoA, Weight: 1}}}
	n.wire.out = fabric.Route{Hops: []fabric.Hop{{Link: hw.Line, Dir: fabric.AtoB, Weight: 1}}}
	n.wire.inName, n.wire.outName = opt.Device+" wire rx", opt.Device+" wire tx"
	if opt.Dir&Rx != 0 {
		n.startRx()
	}
	if opt.Dir&Tx != 0 {
		n.startTx()
	}
	return n, nil
}

// Run is Start, then the machine's engine run to the end, then Result.
func Run(m *machine.Machine, memory *mem.Memory, d *dma.DMA, opt Options) (Result, error) {
	n, err := Start(m, memory, d, opt)
	if err != nil {
		return Result{}, err
	}
	m.Engine.Run()
	return n.Result()
}

func (o Options) withDefaults(m *machine.Machine) (Options, error) {
	if o.Device == "" {
		for _, d := range m.Devices {
			if d.Spec.Kind == "nic" {
				o.Device = d.Name
				break
			}
		}
		if o.Device == "" {
			return o, fmt.Errorf("nic: %w: platform %s has no NIC", ErrBadOption, m.Spec.Name)
		}
	}
	if o.Dir == 0 {
		o.Dir = Rx
	}
	if o.PacketSize == 0 {
		o.PacketSize = DefaultPacketSize
	}
	if o.Packets == 0 {
		o.Packets = DefaultPackets
	}
	if o.Ring == 0 {
		o.Ring = DefaultRing
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	if o.PollInterval == 0 {
		o.PollInterval = dmaengine.DefaultPollInterval
	}
	if o.FIFO == 0 {
		o.FIFO = dmaengine.DefaultFIFO
	}
	if o.TxCore == 0 && o.RxCore == 0 {
		o.TxCore = 1
	}
	switch {
	case o.Dir&^Both != 0:
		return o, fmt.Errorf("nic: %w: direction %v", ErrBadOption, o.Dir)
	case o.PacketSize < MinPacketSize || o.PacketSize > dmaengine.MaxLen:
		return o, fmt.Errorf("nic: %w: packet size %d (want %d..%d)", ErrBadOption, o.PacketSize, MinPacketSize, uint64(dmaengine.MaxLen))
	case o.Packets < 0 || o.Ring < 0 || o.Budget < 0 || o.PollInterval < 0:
		return o, fmt.Errorf("nic: %w: negative count or interval", ErrBadOption)
	}
	if o.Cores != nil && (o.RxCore >= o.Cores.Len() || o.TxCore >= o.Cores.Len() || o.RxCore < 0 || o.TxCore < 0) {
		return o, fmt.Errorf("nic: %w: cores %d, %d of %d", ErrBadOption, o.RxCore, o.TxCore, o.Cores.Len())
	}
	return o, nil
}

// Result is the outcome, once the engine has run; an error is the first
// failure of the driver (a mapping error, an allocation failure).
func (n *NIC) Result() (Result, error) {
	r := Result{Device: n.opt.Device}
	if n.opt.Dir&Rx != 0 {
		r.Rx = n.rx.stream()
	}
	if n.opt.Dir&Tx != 0 {
		r.Tx = n.tx.stream()
	}
	return r, n.err
}

// fail records the driver's first error.
func (n *NIC) fail(err error) {
	if n.err == nil {
		n.err = err
	}
}

// runAhead marks the driver's processes sim.Proc.RunAhead. (A variable
// so that tests can run the same model with every sleep switching.)
var runAhead = true

// attach accounts p's CPU time to core.
func (n *NIC) attach(p *sim.Proc, core int) {
	if n.opt.Cores != nil {
		n.opt.Cores.Attach(p, core)
	}
}

// fill writes packet seq's bytes into b: the sequence number, then a
// pattern of it and the offset.
func fill(b []byte, seq uint64) {
	binary.LittleEndian.PutUint64(b, seq)
	for j := 8; j < len(b); j++ {
		b[j] = pattern(seq, j)
	}
}

func pattern(seq uint64, j int) byte { return byte(seq*131 + uint64(j)*7 + uint64(j>>8)) }

// verify checks b (a prefix of a packet) against the pattern of the
// sequence number it starts with, and returns that number.
func verify(b []byte) (seq uint64, ok bool) {
	if len(b) < 8 {
		return 0, false
	}
	seq = binary.LittleEndian.Uint64(b)
	for j := 8; j < len(b); j++ {
		if b[j] != pattern(seq, j) {
			return seq, false
		}
	}
	return seq, true
}

// finish fills the fields of s that derive from the others.
func (s *Stream) finish(h *hist, cpu sim.Time) {
	if d := s.End - s.Start; d > 0 {
		s.Throughput = float64(s.Bytes) / d.Seconds()
	}
	s.P50, s.P99, s.Max, s.Mean = h.quantile(0.50), h.quantile(0.99), h.max, h.mean()
	s.CPU = cpu
	if s.Packets > 0 {
		s.CPUPerPacket = cpu / sim.Time(s.Packets)
	}
}

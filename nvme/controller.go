package nvme

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/pci"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Defaults of Options. Each is an assumption or a model choice, with
// its source.
const (
	// DefaultLBASize is the namespace's block size: 512 B, the format
	// most drives ship with (LBA format 0).
	DefaultLBASize = 512
	// DefaultCapacity is the namespace's size: 3.84 TB, a capacity
	// point of the Intel D7-P5500 (datasheet: 1.92, 3.84 and 7.68 TB).
	DefaultCapacity = 3_840_000_000_000
	// DefaultReadLatency is the media time of a read before its data
	// flows: assumed 85 µs, of the order datasheets give for a 4 KiB
	// random read of a TLC data-center drive (Intel P4500 product
	// specification: 85 µs random read access latency); to be measured.
	DefaultReadLatency = 85 * sim.Microsecond
	// DefaultWriteLatency is the time from a write's data reaching the
	// drive to its completion: assumed 20 µs (Intel P4500: 20 µs random
	// write access latency; the data lands in the drive's power-loss
	// protected buffer, not yet in NAND).
	DefaultWriteLatency = 20 * sim.Microsecond
	// DefaultReadyTime is the time CSTS.RDY takes to follow CC.EN (and a
	// shutdown to complete): assumed 1 ms, well inside any drive's
	// CAP.TO; real drives take from milliseconds to seconds.
	DefaultReadyTime = 1 * sim.Millisecond
	// DefaultFLRTime is function-level reset's wait: 100 ms, what the
	// PCIe Base Specification allows a function to complete FLR in and
	// what Linux's pcie_flr (drivers/pci/pci.c) sleeps before touching
	// the device again.
	DefaultFLRTime = 100 * sim.Millisecond
	// DefaultMaxInflight is the commands the controller works on at
	// once, over all queues: 256, a model choice (drives have many
	// dies; the media rate, not this, bounds a deep queue's throughput).
	DefaultMaxInflight = 256
	// DefaultMaxQueueEntries is CAP.MQES+1: 1024, a model choice
	// (Linux asks for at most 1024 entries, NVME_Q_DEPTH).
	DefaultMaxQueueEntries = 1024
	// DefaultMDTS is the maximum data transfer size as a power of two
	// of the minimum page size: 5, so 128 KiB, a common value of
	// data-center drives; model choice.
	DefaultMDTS = 5
	// maxMPS is CAP.MPSMAX: pages of 4 KiB to 64 KiB.
	maxMPS = 4
	// maxAERs is the Asynchronous Event Request Limit plus one (AERL is
	// 0-based): 4, as Linux's NVME_NR_AEN_COMMANDS needs 1.
	maxAERs = 4
)

// ErrBadOption is wrapped by every invalid Options error.
var ErrBadOption = errors.New("bad option")

// ErrNeedsPayload: the controller reads commands from memory, so the
// machine must keep real bytes (machine.Options.Payload).
var ErrNeedsPayload = errors.New("the NVMe model needs payload mode (real bytes in memory)")

// Options describe the controller and its namespace. Zero fields take
// the defaults above.
type Options struct {
	// LBASize is the namespace's block size: 512 or 4096.
	LBASize uint64
	// Capacity is the namespace's size in bytes, rounded down to blocks.
	Capacity uint64
	// ReadLatency and WriteLatency are the media's fixed time per
	// command; the data then flows at the device's line_rate, shared by
	// the commands in flight.
	ReadLatency, WriteLatency sim.Time
	ReadyTime, FLRTime        sim.Time
	MaxInflight               int
	// MaxQueueEntries is the largest queue, 2 to 65536.
	MaxQueueEntries int
	// MDTS is Identify's Maximum Data Transfer Size (1 to 10).
	MDTS uint8
	// DoorbellStride is CAP.DSTRD (0 to 15): doorbells 4 << DSTRD
	// bytes apart.
	DoorbellStride uint8
	// MMIOWrite is the CPU's cost of a posted register write, MSI the
	// time from an MSI-X write to the handler running (defaults:
	// dmaengine's MMIOWriteCost and MSILatency, whose sources they
	// give).
	MMIOWrite, MSI sim.Time
	// Serial and Model are Identify's SN and MN.
	Serial, Model string
}

func (o Options) withDefaults() (Options, error) {
	def := func(v *sim.Time, d sim.Time) {
		if *v == 0 {
			*v = d
		}
	}
	if o.LBASize == 0 {
		o.LBASize = DefaultLBASize
	}
	if o.Capacity == 0 {
		o.Capacity = DefaultCapacity
	}
	def(&o.ReadLatency, DefaultReadLatency)
	def(&o.WriteLatency, DefaultWriteLatency)
	def(&o.ReadyTime, DefaultReadyTime)
	def(&o.FLRTime, DefaultFLRTime)
	def(&o.MMIOWrite, dmaengine.MMIOWriteCost)
	def(&o.MSI, dmaengine.MSILatency)
	if o.MaxInflight == 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.MaxQueueEntries == 0 {
		o.MaxQueueEntries = DefaultMaxQueueEntries
	}
	if o.MDTS == 0 {
		o.MDTS = DefaultMDTS
	}
	if o.Serial == "" {
		o.Serial = "DMALAB00000001"
	}
	if o.Model == "" {
		o.Model = "dmalab NVMe model"
	}
	switch {
	case o.LBASize != 512 && o.LBASize != 4096:
		return o, fmt.Errorf("%w: LBA size %d (want 512 or 4096)", ErrBadOption, o.LBASize)
	case o.Capacity < o.LBASize:
		return o, fmt.Errorf("%w: capacity %d is less than one %d-byte block", ErrBadOption, o.Capacity, o.LBASize)
	case o.ReadLatency < 0 || o.WriteLatency < 0 || o.ReadyTime < 0 || o.FLRTime < 0 || o.MMIOWrite < 0 || o.MSI < 0:
		return o, fmt.Errorf("%w: negative time", ErrBadOption)
	case o.ReadyTime > 255*500*sim.Millisecond:
		return o, fmt.Errorf("%w: ready time %v beyond CAP.TO's 127.5 s", ErrBadOption, o.ReadyTime)
	case o.MaxInflight < 1:
		return o, fmt.Errorf("%w: max in flight %d (want at least 1)", ErrBadOption, o.MaxInflight)
	case o.MaxQueueEntries < 2 || o.MaxQueueEntries > 65536:
		return o, fmt.Errorf("%w: max queue entries %d (want 2..65536)", ErrBadOption, o.MaxQueueEntries)
	case o.MDTS > 10:
		return o, fmt.Errorf("%w: MDTS %d (want 1..10)", ErrBadOption, o.MDTS)
	case o.DoorbellStride > 15:
		return o, fmt.Errorf("%w: doorbell stride %d (want 0..15)", ErrBadOption, o.DoorbellStride)
	case len(o.Serial) > 20 || len(o.Model) > 40:
		return o, fmt.Errorf("%w: serial (20 bytes) or model (40 bytes) too long", ErrBadOption)
	}
	return o, nil
}

// Stats count the controller's activity.
type Stats struct {
	// Doorbells written, Fetches (DMA reads of submission entries) and
	// the Commands they brought.
	Doorbells, Fetches, Commands uint64
	// Completions posted; Errors those with a status other than success.
	Completions, Errors uint64
	// BytesRead and BytesWritten are the namespace's data moved by Read
	// and Write commands.
	BytesRead, BytesWritten uint64
	// Interrupts are MSI-X messages delivered to a handler; Dropped
	// those whose vector had no handler (masked).
	Interrupts, Dropped uint64
	// AsyncEvents reported to the host.
	AsyncEvents uint64
}

// Controller is an NVMe controller on a PCIe function with one
// namespace: the hardware a driver (nvme.ko, or SPDK through VFIO)
// drives through BAR0's registers, queues in host memory and MSI-X. It
// implements pci.Function. Everything the hardware does runs in event
// context, never in a process.
type Controller struct {
	m    *machine.Machine
	mem  *mem.Memory
	dev  *dma.Device
	hw   *machine.Device
	name string
	opt  Options
	ns   *namespace

	// toDev and fromDev are host memory → device and back; mediaIn is
	// the media → device → host memory (a read's data), mediaOut host
	// memory → device → media (a write's).
	toDev, fromDev, mediaIn, mediaOut fabric.Route
	// oneWay is a TLP's latency between the CPU side of the root
	// complex and the device.
	oneWay    sim.Time
	numQueues int
	vectors   []pci.IRQHandler
	flow      struct{ fetch, prp, read, write, data, cqe string }

	// Registers.
	cc, csts, aqa, intms uint32
	asq, acq             uint64

	// State of the enabled controller. gen changes at every reset:
	// timers and DMA callbacks of an older generation do nothing.
	gen     uint64
	page    uint64
	sqs     map[uint16]*subQueue
	cqs     map[uint16]*compQueue
	sqOrder []uint16
	rr      int
	// inflight is commands fetched and not yet completed.
	inflight int
	fatal    bool
	aers     []Command
	events   []AsyncEvent

	// dmaBusy is DMA transfers started and not landed; drained is
	// broadcast when it falls to zero, and onDrain run.
	dmaBusy int
	drained *sim.Cond
	onDrain []func()

	stats Stats
}

// New builds the NVMe controller of the machine's device named device
// (a platform device of kind nvme, with a line_rate: its media
// bandwidth). d is the machine's DMA layer over memory, which must be
// in payload mode. Its I/O queue count is the device's dma_engines.
func New(m *machine.Machine, memory *mem.Memory, d *dma.DMA, device string, opt Options) (*Controller, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("nvme %s: %w", device, err)
	}
	if !memory.Payload() {
		return nil, fmt.Errorf("nvme %s: %w", device, ErrNeedsPayload)
	}
	c, err := dmaengine.New(m, memory, d, device)
	if err != nil {
		return nil, fmt.Errorf("nvme: %w", err)
	}
	hw := c.Hardware()
	if hw.Spec.Kind != platform.DeviceNVMe {
		return nil, fmt.Errorf("nvme %s: %w: device of kind %q, not %q", device, ErrBadOption, hw.Spec.Kind, platform.DeviceNVMe)
	}
	if hw.Line == nil {
		return nil, fmt.Errorf("nvme %s: %w: the device has no line_rate (its media bandwidth)", device, ErrBadOption)
	}
	ctl := &Controller{
		m: m, mem: memory, dev: c.Device(), hw: hw, name: device, opt: opt,
		ns:        newNamespace(opt.LBASize, opt.Capacity/opt.LBASize),
		oneWay:    c.OneWay(),
		numQueues: max(hw.Spec.DMAEngines.V, 1),
		drained:   sim.NewCond("dma drained " + device),
	}
	ctl.toDev, ctl.fromDev, _ = c.Routes()
	in := fabric.Hop{Link: hw.Line, Dir: fabric.BtoA, Weight: 1}
	out := fabric.Hop{Link: hw.Line, Dir: fabric.AtoB, Weight: 1}
	ctl.mediaIn = fabric.Route{Hops: append([]fabric.Hop{in}, ctl.fromDev.Hops...)}
	ctl.mediaOut = fabric.Route{Hops: append(append([]fabric.Hop(nil), ctl.toDev.Hops...), out)}
	ctl.vectors = make([]pci.IRQHandler, ctl.numQueues+1)
	f := &ctl.flow
	f.fetch, f.prp, f.read, f.write = device+" sq fetch", device+" prp list", device+" read", device+" write"
	f.data, f.cqe = device+" data", device+" cqe"
	ctl.resetState()
	return ctl, nil
}

// Name is the device's name in the platform.
func (c *Controller) Name() string { return c.name }

// DMA is the function's bus master: every access of the controller goes
// through its translator.
func (c *Controller) DMA() *dma.Device { return c.dev }

// BARs is BAR0, the 64-bit register window.
func (c *Controller) BARs() []pci.BAR {
	return []pci.BAR{{Index: 0, Size: BAR0Size, Flags: pci.BAR64, Regs: c}}
}

// Vectors is the MSI-X table's size: one per I/O queue and the admin
// queue's.
func (c *Controller) Vectors() int { return len(c.vectors) }

// SetIRQ routes vector v to h (nil masks it).
func (c *Controller) SetIRQ(v int, h pci.IRQHandler) error {
	if v < 0 || v >= len(c.vectors) {
		return fmt.Errorf("nvme %s: set irq of vector %d: out of range (%d vectors)", c.name, v, len(c.vectors))
	}
	c.vectors[v] = h
	return nil
}

// Options are the controller's options, defaults filled in.
func (c *Controller) Options() Options { return c.opt }

// Queues is the number of I/O queue pairs the controller supports.
func (c *Controller) Queues() int { return c.numQueues }

// OneWay is the latency of a TLP between the CPU and the controller: a
// posted register write reaches it that long after the CPU issued it;
// a register read costs twice that.
func (c *Controller) OneWay() sim.Time { return c.oneWay }

// Node is the NUMA node of the device.
func (c *Controller) Node() int { return c.hw.Node }

// Stats returns the controller's counters.
func (c *Controller) Stats() Stats { return c.stats }

// PageSize is the memory page size the enabled controller uses for
// PRPs (CC.MPS).
func (c *Controller) PageSize() uint64 { return c.page }

// cap is the CAP register.
func (c *Controller) capReg() uint64 {
	to := (c.opt.ReadyTime + 500*sim.Millisecond - 1) / (500 * sim.Millisecond)
	return uint64(c.opt.MaxQueueEntries-1) | CapCQR | uint64(max(to, 1))<<CapTOShift |
		uint64(c.opt.DoorbellStride)<<CapDSTRDShift | CapCSSNVM |
		0<<CapMPSMINShift | maxMPS<<CapMPSMAXShift
}

// resetState puts every register and queue at its reset value.
func (c *Controller) resetState() {
	c.cc, c.csts, c.aqa, c.intms, c.asq, c.acq = 0, 0, 0, 0, 0, 0
	c.dropQueues()
}

// dropQueues forgets queues and commands (a controller reset).
func (c *Controller) dropQueues() {
	c.gen++
	c.sqs, c.cqs, c.sqOrder, c.rr = map[uint16]*subQueue{}, map[uint16]*compQueue{}, nil, 0
	c.inflight, c.fatal = 0, false
	c.aers, c.events = nil, nil
	c.page = 0
}

// Reset is function-level reset: every register and queue to its reset
// value at once, then t waits, idle, for the DMA already in flight to
// land and for the rest of FLRTime, as pcie_flr sleeps. The MSI-X
// routing (SetIRQ) is kept: the kernel saves and restores MSI-X state
// around a reset (pci_reset_function), and VFIO does the same.
func (c *Controller) Reset(t *sim.Proc) error {
	start := t.Now()
	c.resetState()
	t.WaitUntil(c.drained, func() bool { return c.dmaBusy == 0 })
	if rest := start + c.opt.FLRTime - t.Now(); rest > 0 {
		idle(t, rest, "flr "+c.name)
	}
	return nil
}

// idle blocks p for d without using its CPU (msleep).
func idle(p *sim.Proc, d sim.Time, what string) {
	e := p.Engine()
	done := e.NewNamedCompletion(what)
	e.After(d, done.Complete)
	p.Wait(done)
}

// after runs fn d from now unless the controller was reset meanwhile.
func (c *Controller) after(d sim.Time, fn func()) {
	gen := c.gen
	c.m.Engine.After(d, func() {
		if c.gen == gen {
			fn()
		}
	})
}

// whenDrained runs fn once no DMA is in flight.
func (c *Controller) whenDrained(fn func()) {
	if c.dmaBusy == 0 {
		fn()
		return
	}
	c.onDrain = append(c.onDrain, fn)
}

// transfer is one DMA of the controller through the DMA layer's
// primitive. done runs when its last byte has landed, unless the
// controller was reset meanwhile (the bytes land all the same: a reset
// waits for them).
func (c *Controller) transfer(name string, route fabric.Route, n uint64, read, write []dma.Span, data []byte, done func(*dma.TransferInfo)) {
	gen := c.gen
	t := &dma.Transfer{Name: name, Route: &route, Bytes: int64(n), Read: read, Write: write, Data: data, Opts: []fabric.Option{fabric.Tag(c)}}
	c.dmaBusy++
	if _, err := c.dev.StartTransfer(t, func(i *dma.TransferInfo) {
		c.dmaBusy--
		if c.dmaBusy == 0 {
			c.drained.Broadcast()
			fns := c.onDrain
			c.onDrain = nil
			for _, fn := range fns {
				fn()
			}
		}
		if c.gen == gen {
			done(i)
		}
	}); err != nil {
		panic(fmt.Sprintf("nvme: %s: %v", c.name, err)) // a malformed transfer is a bug of this package
	}
}

// readHost is a DMA read of n bytes at addr: the request's trip to the
// root complex, then the completion's bytes over host → device.
func (c *Controller) readHost(name string, addr mem.DMAAddr, n uint64, done func(*dma.TransferInfo)) {
	c.after(c.oneWay, func() {
		c.transfer(name, c.toDev, n, []dma.Span{dma.BusSpan(addr, n)}, nil, nil, done)
	})
}

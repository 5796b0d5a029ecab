package dma

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// MappingErrorAddr is DMA_MAPPING_ERROR: the handle a failed mapping
// returns, which dma_mapping_error (Device.MappingError) recognises.
const MappingErrorAddr = ^mem.DMAAddr(0)

// ErrNoDevice is wrapped by DMA.Device for a name that is neither a
// device nor a GPU of the machine.
var ErrNoDevice = errors.New("no such DMA device")

// DMA is a machine's DMA mapping layer: dma-direct with its swiotlb
// bounce pool (kernel/dma/direct.c, kernel/dma/swiotlb.c), one per
// machine. It is not safe for concurrent use; in the model one process
// runs at a time.
type DMA struct {
	mach *machine.Machine
	mem  *mem.Memory
	eng  *sim.Engine

	// Hooks receives every Event, in the order they happen. An event
	// is valid only during the call (the layer reuses it).
	Hooks sim.Hooks[Event]
	// Transfers receives every transfer's info as it ends, the one
	// Hooks' OpTransfer event carries, and nothing else: a listener
	// that needs only transfers (the run's time split by cause) does
	// not make the layer build an event for every call and access,
	// format their calls, or keep transfers' state from being reused,
	// as a hook on Hooks does. The info is valid only during the call.
	Transfers sim.Hooks[TransferInfo]
	devices   map[string]*Device

	// tlb is the swiotlb pool, nil until some device needs it;
	// [tlbLo, tlbHi) is where it lies (empty without one), for inTLB.
	tlb          *swiotlb
	tlbLo, tlbHi mem.PhysAddr
	// dramTop is the highest DRAM address of the machine.
	dramTop mem.PhysAddr
	// call is scratch for Event.Call; ev for the event being emitted;
	// info for the info a blocking transfer hands to Transfers.
	call callFmt
	ev   Event
	info TransferInfo
	// peers are the peer memory windows (peer.go); crossSocket the
	// efficiency of cross-socket peer traffic, 0 to refuse it.
	peers       []PeerMemory
	crossSocket float64
	// freeXfers are the states of finished transient transfers, for
	// StartTransfer to reuse.
	freeXfers []*startXfer
	// lims are the last routes' limits (limits), limNext the slot the
	// next one replaces, limLast the one found last.
	lims             [4]routeLimits
	limNext, limLast int
	// ramLo and ramHi bound the DRAM of the node isRAM found last.
	ramLo, ramHi mem.PhysAddr
}

// New builds the DMA layer of machine m over its memory. As swiotlb_init
// does at boot, it reserves the bounce pool (Spec.SWIOTLB, 64 MiB by
// default, in ZONE_DMA32 of the first node) when some device's DMA mask
// does not reach all of DRAM; otherwise the pool is reserved the first
// time a device needs it (Device.SetMask, Device.SetForceBounce).
func New(m *machine.Machine, memory *mem.Memory) (*DMA, error) {
	x := &DMA{mach: m, mem: memory, eng: m.Engine, devices: map[string]*Device{}}
	for _, n := range m.Nodes {
		base, size := memory.NodeRange(n.ID)
		if size > 0 {
			x.dramTop = max(x.dramTop, base+mem.PhysAddr(size-1))
		}
	}
	need := false
	for _, d := range m.Spec.Devices {
		need = need || bitMask(d.MaskBits()) < uint64(x.dramTop)
	}
	if need {
		if err := x.ensureSwiotlb(); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// observed says whether anyone listens: events are built only then.
func (x *DMA) observed() bool { return x.Hooks.Active() }

// fire delivers the event the caller built in x.ev (so that building
// and delivering it copy nothing and allocate nothing), with its
// component and cause filled in.
func (x *DMA) fire() {
	x.ev.Component = "dma"
	switch x.ev.Op {
	case OpDeviceAccess:
		x.ev.Cause = sim.CauseAccess
	case OpTransfer:
		x.ev.Cause = sim.CauseTransfer
	default:
		x.ev.Cause = sim.CauseCall
	}
	x.Hooks.Emit(&x.ev)
}

// emit delivers e (built elsewhere) as fire does.
func (x *DMA) emit(e *Event) {
	x.ev = *e
	x.fire()
}

// Machine is the machine the layer serves.
func (x *DMA) Machine() *machine.Machine { return x.mach }

// Memory is the machine's memory.
func (x *DMA) Memory() *mem.Memory { return x.mem }

// Swiotlb describes the bounce pool; the zero value when none is
// reserved.
func (x *DMA) Swiotlb() SwiotlbStats {
	if x.tlb == nil {
		return SwiotlbStats{}
	}
	return SwiotlbStats{Start: x.tlb.start, Size: x.tlb.size(), Slots: len(x.tlb.slots), Used: x.tlb.used, HighWater: x.tlb.highWater}
}

// Device returns the DMA view of the machine's device or GPU called
// name: its coherency, DMA mask, segment limits and node. Each name
// gives the same *Device every time.
func (x *DMA) Device(name string) (*Device, error) {
	if d := x.devices[name]; d != nil {
		return d, nil
	}
	var d *Device
	for _, md := range x.mach.Devices {
		if md.Name == name {
			d = newDevice(x, name, md.Node, md.Spec)
		}
	}
	for _, g := range x.mach.GPUs {
		if g.Name == name {
			d = newDevice(x, name, g.Node, platform.Device{})
		}
	}
	if d == nil {
		return nil, fmt.Errorf("dma: machine %s: %q: %w", x.mach.Spec.Name, name, ErrNoDevice)
	}
	coherent, err := x.mach.Spec.DeviceCoherent(name)
	if err != nil {
		return nil, fmt.Errorf("dma: %w", err)
	}
	d.coherent = coherent
	x.devices[name] = d
	return d, nil
}

// ensureSwiotlb reserves the bounce pool if it is not there yet.
func (x *DMA) ensureSwiotlb() error {
	if x.tlb != nil {
		return nil
	}
	size := uint64(x.mach.Spec.SwiotlbSize())
	// The pool is whole segments (swiotlb_adjust_nareas / nslabs is
	// rounded to IO_TLB_SEGSIZE).
	seg := uint64(ioTLBSize * ioTLBSegSize)
	size = (size + seg - 1) / seg * seg
	node := x.mach.Nodes[0].ID
	pa, err := x.mem.AllocPages(node, size, mem.ZoneDMA32)
	if err != nil {
		return fmt.Errorf("dma: swiotlb: reserving %d bytes in ZONE_DMA32 of node %d: %w", size, node, err)
	}
	x.tlb = newSwiotlb(pa, int(size>>ioTLBShift))
	x.tlbLo, x.tlbHi = pa, pa+mem.PhysAddr(x.tlb.size())
	return nil
}

// inTLB is x.tlb.contains(pa) from the bounds kept in x: every unmap
// and sync asks, and the pool's own struct is cold by then.
func (x *DMA) inTLB(pa mem.PhysAddr) bool { return x.tlbLo <= pa && pa < x.tlbHi }

// isRAM says whether [pa, pa+size) is DRAM of some node: whether its
// first and its last byte are. A range inside the node's DRAM found
// last, [ramLo, ramHi), is, with no lookup: a machine's DRAM does not
// move once it is built (mem lays it out in New), and a device's
// accesses come in runs on one node's buffers.
func (x *DMA) isRAM(pa mem.PhysAddr, size uint64) bool {
	end := pa
	if size > 1 {
		end = pa + mem.PhysAddr(size-1)
		if end < pa {
			return false
		}
	}
	if x.ramLo <= pa && end < x.ramHi {
		return true
	}
	node, ok := x.mem.NodeOf(pa)
	if !ok {
		return false
	}
	base, n := x.mem.NodeRange(node)
	x.ramLo, x.ramHi = base, base+mem.PhysAddr(n)
	if end == pa {
		return true
	}
	_, ok = x.mem.NodeOf(end)
	return ok
}

// bitMask is DMA_BIT_MASK(bits).
func bitMask(bits int) uint64 {
	if bits <= 0 || bits >= 64 {
		return ^uint64(0)
	}
	return 1<<bits - 1
}

// emitSG delivers an sg call's event (sgEvent builds it by value).
func (x *DMA) emitSG(e Event) { x.emit(&e) }

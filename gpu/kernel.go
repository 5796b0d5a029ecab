package gpu

import (
	"fmt"
	"github.com/dmalab/dmalab/dma"
	"math"
	"math/bits"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// KernelLaunchLatency is the GPU-side time from a launch reaching the
// GPU to the kernel's first instruction (front end, grid setup, CTA
// dispatch) and from its last to its completion being visible: an empty
// kernel's whole run. An empty kernel launch took 3.2 µs on the H200
// machine (measured 2026-11-21); the model gives EnqueueCost of it to
// the host and the rest here (an assumed split).
const KernelLaunchLatency = 3200*sim.Nanosecond - EnqueueCost

// SectorSize is the unit in which the GPU's memory system moves data:
// 32-byte sectors between L2 and memory (the CUDA C++ Best Practices
// Guide, "Coalesced Access to Global Memory": accesses are serviced in
// 32-byte transactions). An access that uses fewer bytes of a sector
// still moves all of it. The model applies it to VRAM, peer VRAM and
// host memory alike (over PCIe a small read also carries a TLP header,
// which is not modelled: small zero-copy accesses are optimistic), and
// ignores L2 hits (a random access to a small, hot region is
// pessimistic).
const SectorSize = 32

// DefaultElem is the element size of a Strided or Random pattern that
// gives none: a 4-byte word.
const DefaultElem = 4

// Pattern is how a kernel walks the memory of an access; it sets the
// bytes the memory system moves for the bytes the kernel uses. A nil
// Pattern is Streaming.
type Pattern interface {
	// Traffic is the bytes moved to use bytes of data.
	Traffic(bytes uint64) uint64
	String() string
}

// Streaming is coalesced, sequential access: every byte moved is used
// (efficiency 1).
type Streaming struct{}

// Traffic is bytes.
func (Streaming) Traffic(bytes uint64) uint64 { return bytes }

func (Streaming) String() string { return "streaming" }

// PointerChase is one thread following a chain of Hops pointers (a
// linked list, a pointer-chasing latency benchmark): each load's address
// is what the last one returned, so the loads never overlap and each
// costs one read round trip from the SMs to the memory and back
// (machine.RoundTrip: the GPU's hub when the memory is off the chip,
// the links both ways, the memory's latency). Each hop moves one 32 B
// sector; the access takes Hops round trips whatever the bandwidth.
type PointerChase struct{ Hops uint64 }

// Traffic is one sector per hop.
func (c PointerChase) Traffic(uint64) uint64 { return mulSat(c.Hops, SectorSize) }

func (c PointerChase) String() string { return fmt.Sprintf("pointer chase (%d hops)", c.Hops) }

// Strided is access to one Elem-byte element every Stride bytes (a
// column of a row-major matrix, a field of an array of structures).
// Each element moves the sectors it touches, but consecutive elements
// closer than a sector share it: an element costs min(Stride, Elem
// rounded up to sectors) bytes. Stride ≤ Elem is streaming.
type Strided struct {
	Stride, Elem uint64
}

// Traffic is the bytes moved for bytes of elements.
func (s Strided) Traffic(bytes uint64) uint64 {
	elem := orDefault(s.Elem)
	if s.Stride <= elem {
		return bytes
	}
	return mulSat(divUp(bytes, elem), min(s.Stride, roundSector(elem)))
}

func (s Strided) String() string {
	return fmt.Sprintf("strided(%d B every %d B)", orDefault(s.Elem), s.Stride)
}

// Random is access to Elem-byte elements at random places of the
// region: each moves whole sectors (a 4-byte random read costs a
// 32-byte sector, efficiency 1/8).
type Random struct {
	Elem uint64
}

// Traffic is the bytes moved for bytes of elements.
func (r Random) Traffic(bytes uint64) uint64 {
	elem := orDefault(r.Elem)
	return mulSat(divUp(bytes, elem), roundSector(elem))
}

func (r Random) String() string { return fmt.Sprintf("random(%d B)", orDefault(r.Elem)) }

func orDefault(elem uint64) uint64 {
	if elem == 0 {
		return DefaultElem
	}
	return elem
}

func roundSector(n uint64) uint64 {
	r, ok := alignUp(n, SectorSize)
	if !ok {
		return math.MaxUint64
	}
	return r
}

func divUp(a, b uint64) uint64 { return a/b + min(a%b, 1) }

// mulSat is a×b, saturating at the largest uint64.
func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// Access is one memory access of a kernel: the region [Addr, Addr+Size)
// it reads or writes (a unified address: VRAM of this GPU or a peer,
// mapped pinned host memory, or managed memory), Bytes of data used in
// it (0: Size, each byte once; more than Size: several passes), and the
// Pattern of the walk.
type Access struct {
	Addr    mem.GPUAddr
	Size    uint64
	Bytes   uint64
	Pattern Pattern
	Write   bool
}

// Kernel is a kernel described by what it costs: its memory accesses
// and its compute time, not its instructions.
//
// Its run is roofline-like: after Launch (0: KernelLaunchLatency), its
// accesses and its compute proceed at once, each access as one fabric
// flow of Pattern.Traffic bytes over its route (this GPU's VRAM bus;
// the PCIe path to host DRAM for zero-copy memory; NVLink or PCIe and
// the peer's VRAM for peer memory), the compute as a flow of Compute
// through the GPU's SMs; the kernel ends when the last of them does. So
// its time is Launch + max(Compute, memory time), where the memory time
// is what the concurrent flows take under max-min sharing with each
// other and with everything else on those links, and the SMs are shared
// by max-min too: two compute-bound kernels on different streams each
// get half the GPU. The roofline's ridge falls where the two times
// meet; a kernel is memory-bound above it.
//
// Compute is the time the kernel's arithmetic takes on the whole GPU
// when memory is never waited for, and carries what the flows do not:
// latency-bound code (a pointer chase), too little parallelism to
// saturate the bus, or anything the author measured.
type Kernel struct {
	Name     string
	Launch   sim.Time
	Accesses []Access
	Compute  sim.Time
}

// planned is an access resolved at launch.
type planned struct {
	a       Access
	route   fabric.Route
	traffic int64
	spans   []dma.Span
	managed bool
}

// Launch is cuLaunchKernel: k runs in stream order. The accesses are
// checked now: each must lie inside one allocation the GPU may reach
// (its own VRAM; a peer's with EnablePeerAccess; pinned host memory that
// is mapped; managed memory with a ManagedHandler set), else the launch
// fails with ErrIllegalAddress, ErrPeerAccessNotEnabled or
// ErrNotSupported and nothing is enqueued. Reads take the memory's
// versions when the kernel starts and writes make new ones when their
// flow ends, through mem as the GPU's accesses (without bytes). The host
// pays EnqueueCost.
func (s *Stream) Launch(p *sim.Proc, k Kernel) error {
	if err := s.check(p, "cuLaunchKernel"); err != nil {
		return err
	}
	if k.Compute < 0 || k.Launch < 0 {
		return fmt.Errorf("gpu: cuLaunchKernel %s: negative time: %w", k.Name, ErrInvalidValue)
	}
	d := s.dev
	plan := make([]planned, len(k.Accesses))
	for i, a := range k.Accesses {
		pl, err := d.plan(a)
		if err != nil {
			return fmt.Errorf("gpu: cuLaunchKernel %s on %s: access %d [%v +%#x]: %w", k.Name, d.Name, i, a.Addr, a.Size, err)
		}
		plan[i] = pl
	}
	o := &op{act: Activity{Kind: ActivityKernel, Name: k.Name}}
	o.run = func(w *sim.Proc) { s.execute(w, k, plan) }
	s.enqueue(p, o)
	return nil
}

func (d *Device) plan(a Access) (planned, error) {
	sys := d.sys
	if a.Size == 0 {
		return planned{}, fmt.Errorf("empty region: %w", ErrInvalidValue)
	}
	b, err := sys.resolve(a.Addr, a.Size)
	if err != nil {
		return planned{}, fmt.Errorf("%w: %v", ErrIllegalAddress, err)
	}
	bytes := a.Bytes
	if bytes == 0 {
		bytes = a.Size
	}
	pat := a.Pattern
	if pat == nil {
		pat = Streaming{}
	}
	traffic := pat.Traffic(bytes)
	if traffic > math.MaxInt64 {
		return planned{}, fmt.Errorf("%d bytes of traffic: %w", traffic, ErrInvalidValue)
	}
	pl := planned{a: a, traffic: int64(traffic), spans: d.spans(b, a.Addr, a.Size)}
	switch b.a.Type {
	case MemoryManaged:
		if sys.managed == nil {
			return planned{}, fmt.Errorf("managed memory and no ManagedHandler: %w", ErrNotSupported)
		}
		pl.managed = true
		return pl, nil
	case MemoryHost:
		if !b.a.Mapped {
			return planned{}, fmt.Errorf("%w: host memory registered without DEVICEMAP", ErrIllegalAddress)
		}
	case MemoryDevice:
		if b.dev != d && !d.peers[b.dev.Index] {
			return planned{}, fmt.Errorf("memory of %s: %w", b.dev.Name, ErrPeerAccessNotEnabled)
		}
	}
	pl.route, err = d.accessRoute(b, a.Write)
	return pl, err
}

// accessRoute is the path of a kernel's loads from b (or stores to it):
// they start or end in the SMs, at the GPU's port, so the GPU's own VRAM
// bus is on the route only when b is in it. An integrated GPU's own
// memory is its node's DRAM, reached over its port into the memory
// controller (LocalRoute).
func (d *Device) accessRoute(b *buffer, write bool) (fabric.Route, error) {
	if b.dev == d {
		return d.LocalRoute(write)
	}
	far, err := d.sys.endpoint(b)
	if err != nil {
		return fabric.Route{}, err
	}
	return d.routeFrom(far, write)
}

// execute runs k on the stream's worker w.
func (s *Stream) execute(w *sim.Proc, k Kernel, plan []planned) {
	d, sys := s.dev, s.dev.sys
	launch := k.Launch
	if launch == 0 {
		launch = KernelLaunchLatency
	}
	delay(w, launch)
	lh, hooks := sys.managed.(ManagedLaunchHandler)
	if hooks {
		lh.BeforeKernel(w, d.Index)
	}
	name := d.Name + " " + k.Name
	var waits []*sim.Completion
	for _, pl := range plan {
		if pl.managed {
			// Managed memory backed by DRAM (an integrated GPU's) is
			// read when the access starts, after the handler's launch
			// work (Tegra's cache maintenance), and written when the
			// handler has moved its bytes.
			h, a, spans := sys.managed, pl.a, pl.spans
			if !a.Write && len(spans) > 0 {
				d.access(spans, false)
			}
			child := w.Spawn(name+" managed", func(q *sim.Proc) {
				h.GPUAccess(q, d.Index, a.Addr, a.Size, a.Write)
				if a.Write && len(spans) > 0 && sys.lookup(a.Addr) != nil {
					d.access(spans, true)
				}
			})
			waits = append(waits, child.Exited())
			continue
		}
		if c, ok := pl.a.Pattern.(PointerChase); ok {
			// Dependent loads: one round trip each, one after the
			// other; the memory is read when the chase starts.
			d.access(pl.spans, false)
			rtt := d.sys.m.RoundTrip(pl.route, d.GPU.SMs())
			child := w.Spawn(name+" chase", func(q *sim.Proc) { delay(q, sim.Time(c.Hops)*rtt) })
			waits = append(waits, child.Exited())
			continue
		}
		// The SMs' loads and stores as one transfer of the DMA layer:
		// read when it starts, written when its flow ends. Loads are
		// the SMs' reads: each waits for its request's way out, and
		// the SMs' requests in flight bound their rate.
		t := &dma.Transfer{Name: name, Route: &pl.route, Bytes: pl.traffic, Opts: []fabric.Option{fabric.Tag(s)},
			Master: d.GPU.SMs(), Load: !pl.a.Write}
		if pl.a.Write {
			t.Write = pl.spans
		} else {
			t.Read = pl.spans
		}
		done := w.Engine().NewNamedCompletion(name)
		if _, err := d.dma.StartTransfer(t, func(*dma.TransferInfo) { done.Complete() }); err != nil {
			panic(fmt.Sprintf("gpu: %s: %v", name, err))
		}
		waits = append(waits, done)
	}
	if k.Compute > 0 {
		sm := fabric.Route{Hops: []fabric.Hop{{Link: d.sm, Dir: fabric.AtoB, Weight: 1}}}
		waits = append(waits, sys.compute.Start(name, sm, int64(k.Compute)).Done())
	}
	for _, c := range waits {
		w.Wait(c)
	}
	if hooks {
		lh.AfterKernel(w, d.Index)
	}
}

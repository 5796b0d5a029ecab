package cuda

import (
	"fmt"
	"github.com/dmalab/dmalab/dma"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// cuMemAllocManaged's flags (CU_MEM_ATTACH_*).
const (
	// MemAttachGlobal (CU_MEM_ATTACH_GLOBAL): accessible from any stream
	// on any GPU.
	MemAttachGlobal uint32 = 0x1
	// MemAttachHost (CU_MEM_ATTACH_HOST): initially attached to the
	// host. Kept; stream attachment is not modelled.
	MemAttachHost uint32 = 0x2
)

// DeviceCPU is CU_DEVICE_CPU: the CPU as a destination of
// MemPrefetchAsync and a location of MemAdvise.
const DeviceCPU = -1

// Advice is a cuMemAdvise advice (CUmem_advise), with cuda.h's values.
type Advice int

const (
	AdviseSetReadMostly          Advice = 1 // CU_MEM_ADVISE_SET_READ_MOSTLY
	AdviseUnsetReadMostly        Advice = 2 // CU_MEM_ADVISE_UNSET_READ_MOSTLY
	AdviseSetPreferredLocation   Advice = 3 // CU_MEM_ADVISE_SET_PREFERRED_LOCATION
	AdviseUnsetPreferredLocation Advice = 4 // CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION
	AdviseSetAccessedBy          Advice = 5 // CU_MEM_ADVISE_SET_ACCESSED_BY
	AdviseUnsetAccessedBy        Advice = 6 // CU_MEM_ADVISE_UNSET_ACCESSED_BY
)

// newUVM builds the unified-memory driver for the machine's GPUs: the
// generation from each GPU's arch, all of its VRAM available to managed
// memory, peers over NVLink where the platform has it and PCIe
// otherwise, the nvidia_uvm parameters from the first GPU's UVM section,
// and the fault batch overhead recalibrated so that an isolated fault
// on this machine takes the platform's FaultLatency with the Move this
// Env makes.
func newUVM(d *Driver) (*uvm.Driver, uvm.Generation, error) {
	m := d.m
	var cfg uvm.Config
	var gen uvm.Generation
	for _, dev := range d.sys.Devices {
		g := dev.GPU.Spec
		gg, err := uvm.GenerationOf(g.Arch, g.Integrated)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", dev.Name, err)
		}
		gen = gg
		_, total := dev.MemGetInfo()
		cfg.GPUs = append(cfg.GPUs, uvm.GPUConfig{
			Name: dev.Name, Generation: gg, ManagedMemory: int64(total),
			CPULink: uvm.LinkPCIe,
		})
	}
	if n := len(m.GPUs); n > 1 {
		cfg.Peers = make([][]uvm.Link, n)
		for i, a := range m.GPUs {
			cfg.Peers[i] = make([]uvm.Link, n)
			for j, b := range m.GPUs {
				switch {
				case i == j:
				case nvlinked(m, a, b):
					cfg.Peers[i][j] = uvm.LinkNVLink
				default:
					cfg.Peers[i][j] = uvm.LinkPCIe
				}
			}
		}
	}
	cfg.Params = params(m)
	um, err := uvm.New(umEnv{d}, cfg)
	if err != nil {
		return nil, 0, err
	}
	return um, gen, nil
}

// nvlinked reports whether GPUs a and b share an NVLink bundle or an
// NVSwitch.
func nvlinked(m *machine.Machine, a, b *machine.GPU) bool {
	if _, ok := a.NVLinks[b.Name]; ok {
		return true
	}
	for _, s := range m.Spec.NVSwitches {
		_, x := a.NVLinks[s.Name]
		_, y := b.NVLinks[s.Name]
		if x && y {
			return true
		}
	}
	return false
}

// params are the driver's parameters from the platform.
func params(m *machine.Machine) uvm.Params {
	p := uvm.DefaultParams()
	g := m.GPUs[0]
	u := g.Spec.UVM
	p.FaultBatchCount = u.Batch()
	p.MaxBatchesPerService = u.Batches()
	p.PrefetchThreshold = u.Prefetch()
	p.ThrashingThreshold = u.Thrashing()
	p.ThrashingLapse = u.Lapse()
	p.ThrashingPin = u.PinLapses()
	p.ThrashingEpoch = u.EpochLapses()
	if g.Spec.Integrated {
		return p
	}
	host, err := m.HostMemory(g.Node)
	if err != nil {
		return p
	}
	r, err := m.DMARoute(host, g.Memory(), g.CE())
	if err != nil {
		return p
	}
	p.FaultEntryCost = u.EntryCost()
	p.FaultPageCost = u.PageCost()
	p.CPUMapPageCost = u.MapCost()
	// The migration is the copy engine's read of host memory: its
	// request's way out (machine.ReadLimit's lead) is in the measured
	// round trip too.
	lead, _ := m.ReadLimit(r, g.CE())
	move := moveTime(m, r, uvm.BigPageSize) + lead
	if o, err := uvm.CalibrateBatchOverhead(p, u.Fault(), move); err == nil {
		p.FaultBatchOverhead = o
		// A CPU fault runs the same service less the fault buffer: the
		// isolated round trip less its transfer.
		p.CPUFaultCost = u.Fault() - move
	}
	return p
}

// moveTime is what a lone flow of bytes over r takes: its latency (with
// the fabric's latency factor) and the bytes at its tightest hop.
func moveTime(m *machine.Machine, r fabric.Route, bytes int64) sim.Time {
	rate := 0.0
	for _, h := range r.Hops {
		w := h.Weight
		if w == 0 {
			w = 1
		}
		if c := h.Link.Effective() / w; rate == 0 || c < rate {
			rate = c
		}
	}
	lat := sim.Time(float64(r.Latency()) * m.Spec.Fabric.Latency())
	return lat + sim.TransferTime(float64(bytes), rate)
}

// umEnv is the unified-memory driver's data path: transfers of the DMA
// layer by the GPU that drives them, so that migrations share PCIe,
// NVLink, DRAM and HBM with every other transfer and are seen as every
// other bus master's are.
type umEnv struct{ d *Driver }

func (e umEnv) Engine() *sim.Engine { return e.d.m.Engine }

// Move is a migration as one flow over the route between the two
// memories. System memory is the DRAM of the GPU's node (UVM allocates
// its CPU pages near the GPU that faulted). The flow takes no copy
// engine: UVM pushes on channels of its own, and the model does not
// queue them behind the program's copies.
func (e umEnv) Move(p *sim.Proc, from, to uvm.Processor, bytes int64) {
	e.move(p, from, to, bytes, nil)
}

// MovePages is Move of the pages in mask of the VA block at block
// (uvm.PageEnv): when the GPU that drives it is behind an IOMMU domain,
// its system-memory side is the block's CPU chunk at the IOVAs of the
// GPU's mapping (umdma.go), which the transfer translates.
func (e umEnv) MovePages(p *sim.Proc, from, to uvm.Processor, block uvm.Addr, mask uvm.PageMask) {
	bytes := int64(mask.Count()) * uvm.PageSize
	by := driver(from, to)
	var spans []dma.Span
	if from == uvm.CPU || to == uvm.CPU {
		var err error
		if spans, err = e.d.umSpans(p, by.GPUIndex(), block, mask); err != nil {
			panic(fmt.Sprintf("cuda: uvm migration %v → %v: %v", from, to, err))
		}
	}
	e.move(p, from, to, bytes, spans)
}

// driver is the GPU that drives a move with its copy engines: the one
// at the far end (the destination's when both are GPUs).
func driver(from, to uvm.Processor) uvm.Processor {
	if to.IsGPU() {
		return to
	}
	return from
}

// umMove is what every migration from one processor to another
// shares: the memories, the copy engine, the transfer's name, its route
// and whether the engine reads (machine.Reads). The machine's routes do
// not change while it runs, so they are worked out once per pair, not
// once per migration.
type umMove struct {
	from, to uvm.Processor
	name     string
	src, dst machine.Endpoint
	master   machine.Master
	route    fabric.Route
	load     bool
}

// umMove is the shared part of migrations from one processor to
// another.
func (d *Driver) umMove(from, to uvm.Processor) *umMove {
	for _, mv := range d.umMoves {
		if mv.from == from && mv.to == to {
			return mv
		}
	}
	m := d.m
	by := driver(from, to)
	mv := &umMove{from: from, to: to, name: fmt.Sprintf("uvm %v→%v", from, to), src: d.procMemory(from, to), dst: d.procMemory(to, from),
		master: m.GPUs[by.GPUIndex()].CE()}
	r, err := m.DMARoute(mv.src, mv.dst, mv.master)
	if err != nil {
		panic(fmt.Sprintf("cuda: uvm migration %v → %v: %v", from, to, err))
	}
	mv.route, mv.load = r, m.Reads(mv.dst, mv.master)
	d.umMoves = append(d.umMoves, mv)
	return mv
}

// move is one migration; sys are the system-memory side's spans (nil:
// bytes only).
func (e umEnv) move(p *sim.Proc, from, to uvm.Processor, bytes int64, sys []dma.Span) {
	mv := e.d.umMove(from, to)
	g := e.d.sys.Devices[driver(from, to).GPUIndex()]
	t := &dma.Transfer{Name: mv.name, Master: mv.master, Src: mv.src, Dst: mv.dst, Route: &mv.route, Load: mv.load, Bytes: bytes}
	if from == uvm.CPU {
		t.Read = sys
	} else {
		t.Write = sys
	}
	info, err := g.DMA().Transfer(p, t)
	if err != nil {
		panic(fmt.Sprintf("cuda: uvm migration %v → %v: %v", from, to, err))
	}
	if info.Flow != nil && !e.d.sys.DMA().Hooks.Active() {
		// Nobody saw the transfer's info (no DMA hook) and the driver
		// keeps nothing of it: its flow goes back to the fabric for a
		// later Start to reuse (Fabric.Release, which keeps it while a
		// fabric hook listens), instead of one flow allocated per
		// migration.
		e.d.m.Fabric.Release(info.Flow)
	}
}

// CacheMaintenance is the CPU cleaning or invalidating bytes of managed
// memory line by line at the integrated GPU's node's per-line cost, and
// in mem over the pages written since; nothing on an I/O-coherent GPU
// (tegraMaintain).
func (e umEnv) CacheMaintenance(p *sim.Proc, op uvm.CacheOp, bytes int64) {
	e.d.tegraMaintain(p, op, bytes)
}

// procMemory is where processor x keeps managed pages: a GPU's VRAM, or
// for the CPU the DRAM of the node of the GPU it trades with (GPU 0's
// when other is the CPU too).
func (d *Driver) procMemory(x, other uvm.Processor) machine.Endpoint {
	if x.IsGPU() {
		return d.m.GPUs[x.GPUIndex()].Memory()
	}
	g := 0
	if other.IsGPU() {
		g = other.GPUIndex()
	}
	ep, _ := d.m.HostMemory(d.m.GPUs[g].Node)
	return ep
}

// uvmAddr is the unified-memory driver's address of managed memory at
// addr (the GPU model and the driver number the managed window each
// their own way; the offset in the allocation is what they share).
func (d *Driver) uvmAddr(addr mem.GPUAddr) (uvm.Addr, error) {
	attr, err := d.sys.PointerAttributes(addr)
	if err != nil {
		return 0, err
	}
	a := d.allocs[attr.BufferID]
	if a == nil || a.um == nil {
		return 0, fmt.Errorf("%v is not managed memory of the façade", addr)
	}
	return a.um.Base + uvm.Addr(addr-a.a.Addr), nil
}

// managedHandler is gpu.ManagedLaunchHandler over the unified-memory
// driver: a kernel's access faults and migrates there, then its bytes
// move over the GPU's VRAM bus, and over the route to wherever the rest
// is mapped remotely.
type managedHandler struct{ d *Driver }

func (h *managedHandler) GPUAccess(p *sim.Proc, g int, addr mem.GPUAddr, size uint64, write bool) {
	d := h.d
	ua, err := d.uvmAddr(addr)
	if err != nil {
		return // freed while the kernel ran; uvm has nothing to move
	}
	acc, err := d.um.GPUAccess(p, g, ua, int64(size), write)
	if err != nil {
		return // reported by uvm as a KindError event
	}
	if write && d.integrated(g) {
		d.markDirty(d.managedPhys(addr, size), true)
	}
	d.moveAccess(p, g, acc, ua, size, write)
}

// GPUAccessStrided is gpu.ManagedStridedHandler: only the pages the
// walk's elements touch fault (uvm.Driver.GPUAccessStrided); the bytes
// move as GPUAccess moves them.
func (h *managedHandler) GPUAccessStrided(p *sim.Proc, g int, addr mem.GPUAddr, size, stride, elem uint64, write bool) {
	d := h.d
	ua, err := d.uvmAddr(addr)
	if err != nil {
		return // freed while the kernel ran; uvm has nothing to move
	}
	acc, err := d.um.GPUAccessStrided(p, g, ua, int64(size), int64(stride), int64(elem), write)
	if err != nil {
		return // reported by uvm as a KindError event
	}
	if write && d.integrated(g) {
		d.markDirty(d.managedPhys(addr, size), true)
	}
	d.moveAccess(p, g, acc, ua, size, write)
}

func (h *managedHandler) BeforeKernel(p *sim.Proc, g int) { h.d.um.KernelLaunch(p, g) }
func (h *managedHandler) AfterKernel(p *sim.Proc, g int)  { h.d.um.KernelComplete(p, g) }

// moveAccess moves a kernel's bytes of a managed access once the pages
// are where uvm put them: the local part over the GPU's VRAM bus (an
// integrated GPU's: its port into the memory controller and the node's
// DRAM bus, gpu.Device.LocalRoute, where Tegra's managed memory is), the
// remotely mapped part over the route from where it lives (acc.Where,
// or system memory when the first byte was local: uvm names one
// holder).
//
// Behind an IOMMU the remote part in system memory is read or written at
// the IOVAs of its blocks' CPU chunks (remoteSpans), translated as the
// SMs' accesses of pinned memory are.
func (d *Driver) moveAccess(p *sim.Proc, g int, acc uvm.Access, ua uvm.Addr, size uint64, write bool) {
	m := d.m
	gp := m.GPUs[g]
	dev := d.sys.Devices[g].DMA()
	remote := min(uint64(max(acc.RemoteBytes, 0)), size)
	var waits []*sim.Completion
	// move starts the SMs' bytes over r as a transfer of the DMA layer
	// (managed memory's content is not followed: no spans).
	move := func(name string, r fabric.Route, n uint64, spans []dma.Span) {
		done := m.Engine.NewNamedCompletion(name)
		// The SMs' loads are reads (request leg, tags), as a kernel's
		// loads of other memory are.
		t := &dma.Transfer{Name: name, Route: &r, Bytes: int64(n), Master: gp.SMs(), Load: !write}
		if write {
			t.Write = spans
		} else {
			t.Read = spans
		}
		if _, err := dev.StartTransfer(t, func(*dma.TransferInfo) { done.Complete() }); err != nil {
			panic(fmt.Sprintf("cuda: %s: %v", name, err))
		}
		waits = append(waits, done)
	}
	if local := size - remote; local > 0 {
		r, err := d.sys.Devices[g].LocalRoute(write)
		if err != nil {
			panic(fmt.Sprintf("cuda: %s managed access: %v", gp.Name, err))
		}
		move(gp.Name+" managed", r, local, nil)
	}
	if remote > 0 {
		where := acc.Where
		if where == uvm.GPU(g) || where == uvm.NoProcessor {
			where = uvm.CPU
		}
		far := d.procMemory(where, uvm.GPU(g))
		var r fabric.Route
		var err error
		if write {
			r, err = m.DMARoute(gp.Memory(), far, gp.SMs())
		} else {
			r, err = m.DMARoute(far, gp.Memory(), gp.SMs())
		}
		if err == nil {
			var hops []fabric.Hop
			for _, hop := range r.Hops {
				if hop.Link != gp.VRAM {
					hops = append(hops, hop)
				}
			}
			var spans []dma.Span
			if where == uvm.CPU {
				if spans, err = d.remoteSpans(p, g, ua, remote); err != nil {
					panic(fmt.Sprintf("cuda: %s managed remote access: %v", gp.Name, err))
				}
			}
			move(gp.Name+" managed remote", fabric.Route{Hops: hops}, remote, spans)
		}
	}
	for _, c := range waits {
		p.Wait(c)
	}
}

// MemAllocManaged is cuMemAllocManaged: size bytes of managed memory,
// at one address for the CPU and every GPU (gpu.System.AllocManaged)
// whose pages the unified-memory driver places and moves (package uvm:
// populated where first touched, migrated on faults, prefetch and
// advice, evicted when VRAM is full; on pre-Pascal GPUs resident in the
// device's memory). flags must be MemAttachGlobal or MemAttachHost
// (else CUDA_ERROR_INVALID_VALUE); GPUs without a unified-memory model
// give CUDA_ERROR_NOT_SUPPORTED.
func (c *Context) MemAllocManaged(p *sim.Proc, size uint64, flags uint32) (mem.GPUAddr, error) {
	const call = "cuMemAllocManaged"
	if err := c.check(call); err != nil {
		return 0, err
	}
	if c.d.um == nil {
		return 0, fail(call, ErrorNotSupported, c.d.umErr)
	}
	if flags != MemAttachGlobal && flags != MemAttachHost {
		return 0, failf(call, ErrorInvalidValue, "flags %#x", flags)
	}
	ga, err := c.d.sys.AllocManaged(p, size)
	if err != nil {
		return 0, wrap(call, err)
	}
	ua, err := c.d.um.Allocate(int64(size), uvm.AllocOptions{Device: c.dev.Index})
	if err != nil {
		c.d.sys.Free(p, ga.Addr)
		return 0, wrap(call, err)
	}
	a := c.d.record(c, p, fmt.Sprintf("cuMemAllocManaged(%#x, %#x)", size, flags), ga, MemManaged, flags)
	a.um = ua
	return ga.Addr, nil
}

// managedRange checks a range given to MemPrefetchAsync or MemAdvise.
func (c *Context) managedRange(call string, pl place, addr mem.GPUAddr) error {
	switch {
	case c.d.um == nil:
		return fail(call, ErrorNotSupported, c.d.umErr)
	case pl.t.Kind == MemFreed:
		return failf(call, ErrorInvalidValue, "%v was freed by %s", addr, pl.t.Freed)
	case c.foreign(pl):
		return failf(call, ErrorInvalidValue, "%v belongs to process %s", addr, pl.t.Process)
	case pl.t.Kind != MemManaged:
		return failf(call, ErrorInvalidValue, "%v is %v memory, not managed", addr, pl.t.Kind)
	case !pl.inside:
		return failf(call, ErrorInvalidValue, "range at %v runs past its allocation", addr)
	}
	return nil
}

// processor is the unified-memory processor of a device ordinal
// (DeviceCPU for the CPU).
func (c *Context) processor(call string, dev int) (uvm.Processor, error) {
	switch {
	case dev == DeviceCPU:
		return uvm.CPU, nil
	case dev < 0 || dev >= len(c.d.sys.Devices):
		return 0, failf(call, ErrorInvalidDevice, "device %d", dev)
	}
	return uvm.GPU(dev), nil
}

// MemPrefetchAsync is cuMemPrefetchAsync: in stream order, the managed
// range migrates to dst (a GPU ordinal, or DeviceCPU) block by block at
// the links' bandwidth, without faults (uvm.Driver.Prefetch, run on the
// stream's worker as a host function). The host pays gpu.EnqueueCost.
// A range that is not managed memory is CUDA_ERROR_INVALID_VALUE; an
// unknown device, or GPUs without concurrent managed access,
// CUDA_ERROR_INVALID_DEVICE.
func (c *Context) MemPrefetchAsync(p *sim.Proc, addr mem.GPUAddr, size uint64, dst int, s *Stream) error {
	const call = "cuMemPrefetchAsync"
	st, err := c.stream(call, s)
	if err != nil {
		return err
	}
	pl := c.d.resolve(addr, size)
	err = c.managedRange(call, pl, addr)
	to, perr := c.processor(call, dst)
	switch {
	case err != nil:
	case perr != nil:
		err = perr
	case !c.d.ConcurrentManagedAccess():
		err = failf(call, ErrorInvalidDevice, "%v GPUs have no concurrent managed access", c.d.gen)
	}
	c.observe(p, OpPrefetch, call, addr, size, false, pl, err)
	if err != nil {
		return err
	}
	ua, err := c.d.uvmAddr(addr)
	if err != nil {
		return fail(call, ErrorInvalidValue, err)
	}
	um := c.d.um
	return wrap(call, st.s.LaunchHostFunc(p, fmt.Sprintf("%s %v", call, to), func(q *sim.Proc) {
		// An error here (the memory freed meanwhile) is reported by
		// uvm's KindError event; the stream goes on, as CUDA's would.
		um.Prefetch(q, ua, int64(size), to)
	}))
}

// MemAdvise is cuMemAdvise on a managed range (uvm.Driver.Advise:
// ReadMostly duplicates read-only copies, PreferredLocation resists
// migration away, AccessedBy maps so that access does not fault). dev
// is a GPU ordinal or DeviceCPU. An unknown advice or a range that is
// not managed memory is CUDA_ERROR_INVALID_VALUE, an unknown device
// CUDA_ERROR_INVALID_DEVICE.
func (c *Context) MemAdvise(p *sim.Proc, addr mem.GPUAddr, size uint64, advice Advice, dev int) error {
	const call = "cuMemAdvise"
	if err := c.check(call); err != nil {
		return err
	}
	pl := c.d.resolve(addr, size)
	err := c.managedRange(call, pl, addr)
	proc, perr := c.processor(call, dev)
	switch {
	case err != nil:
	case advice < AdviseSetReadMostly || advice > AdviseUnsetAccessedBy:
		err = failf(call, ErrorInvalidValue, "advice %d", advice)
	case perr != nil && advice != AdviseSetReadMostly && advice != AdviseUnsetReadMostly && advice != AdviseUnsetPreferredLocation:
		err = perr
	}
	c.observe(p, OpAdvise, call, addr, size, false, pl, err)
	if err != nil {
		return err
	}
	ua, err := c.d.uvmAddr(addr)
	if err != nil {
		return fail(call, ErrorInvalidValue, err)
	}
	return wrap(call, c.d.um.Advise(p, ua, int64(size), uvm.Advice(advice), proc))
}

// memcpyRate is a CPU thread's copy rate on node n.
func memcpyRate(spec *platform.Spec, n int) float64 { return float64(spec.Nodes[n].MemcpyRate.V) }

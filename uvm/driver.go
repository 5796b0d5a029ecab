package uvm

import (
	"fmt"
	"math"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// Env is the machine the driver runs on: virtual time and the data path.
// The integrator implements Move with fabric flows over the route
// between the two memories (a copy engine, PCIe, NVLink); tests use fixed
// rates.
type Env interface {
	// Engine is the simulation engine.
	Engine() *sim.Engine
	// Move blocks p while bytes of managed memory are copied from one
	// processor's memory to another's (UVM's copy-engine pushes). It is
	// called with the VA block locked.
	Move(p *sim.Proc, from, to Processor, bytes int64)
	// CacheMaintenance blocks p while the CPU cleans (write back) or
	// invalidates bytes of managed memory in its caches: Tegra's
	// coherence at kernel launch and completion.
	CacheMaintenance(p *sim.Proc, op CacheOp, bytes int64)
}

// PageEnv is an Env that is told which pages each move carries: the
// pages in mask of the VA block that starts at block (page i is PageSize
// bytes at block+i*PageSize). The driver calls MovePages instead of
// Move when its Env has it, so that the integrator can address the
// pages' system memory: the DMA mappings of CPU pages a GPU's copy
// engines read or write (uvm_gpu_map_cpu_pages in
// open-gpu-kernel-modules' kernel-open/nvidia-uvm), which an IOMMU
// translates.
type PageEnv interface {
	Env
	MovePages(p *sim.Proc, from, to Processor, block Addr, pages PageMask)
}

// move moves the pages in mask of block b from one processor to
// another through the Env (MovePages when it has it).
func (d *Driver) move(p *sim.Proc, b *vaBlock, from, to Processor, mask PageMask) {
	if pe, ok := d.env.(PageEnv); ok {
		pe.MovePages(p, from, to, b.start, mask)
		return
	}
	d.env.Move(p, from, to, int64(mask.Count())*PageSize)
}

// CacheOp is a CPU cache maintenance operation.
type CacheOp int

const (
	// CacheClean writes dirty lines back (DC CVAC), so that the GPU
	// reads what the CPU wrote.
	CacheClean CacheOp = iota + 1
	// CacheInvalidate drops lines (DC IVAC), so that the CPU reads what
	// the GPU wrote.
	CacheInvalidate
)

func (o CacheOp) String() string {
	switch o {
	case CacheClean:
		return "clean"
	case CacheInvalidate:
		return "invalidate"
	}
	return fmt.Sprintf("CacheOp(%d)", int(o))
}

// ManagedBase is where the driver places the first managed allocation.
// Arbitrary: 2 MiB aligned, in the user half of a 48-bit address space.
const ManagedBase Addr = 0x7e00_0000_0000

// Driver is the unified-memory driver of one process's VA space
// (uvm_va_space_t with its GPUs): managed allocations, per-block
// residency and mappings, the per-GPU fault buffers and their bottom
// halves, the prefetcher, eviction, thrashing detection and the advice.
//
// A Driver is not safe for concurrent use; in the model one process runs
// at a time. Lock order: one VA block lock at a time, except that a
// process holding a block's lock may take a victim block's for eviction,
// choosing only victims nobody holds, so it never waits for one.
type Driver struct {
	env  Env
	eng  *sim.Engine
	cfg  Config
	p    Params
	gen  Generation
	gpus []*gpuState

	// allocs are the live allocations, by Base.
	allocs   []*Allocation
	nextBase Addr
	// nblocks counts the touched VA blocks; each live allocation
	// indexes its own (Allocation.blocks, which blockAt reads).
	nblocks int
	// unlocked is broadcast whenever a block lock is released: an
	// evictor that found every chunk locked waits on it.
	unlocked *sim.Cond
	// dirty are the blocks with cpuDirty or gpuDirty pages; cpuHeld the
	// blocks with CPU copies (pre-Pascal and Tegra).
	dirty, cpuHeld map[uint64]*vaBlock

	// Hooks receives every Event, in the order they happen; the event
	// is valid only during the call.
	Hooks sim.Hooks[Event]
	ev    Event
	stats Stats
	// spare are procPages no service uses (takeProcPages); spareChunks
	// chunks freed, for ensureChunk to reuse (a sweep over more than
	// the GPU holds frees and takes one per block it faults).
	spare       []procPages
	spareChunks []*chunk
	// chunkWaiters counts the processes waiting on unlocked for a
	// chunk to evict; firstTouches are the CPU first touches worked out
	// (firstTouch).
	chunkWaiters int
	firstTouches map[firstTouchKey]firstTouchPlan
	// stepwise turns firstTouch off; firstTouched counts the blocks it
	// serviced (tests).
	stepwise     bool
	firstTouched int
	// spareMasks are residency masks of GPUs that evictions dropped,
	// for residentMask to reuse instead of allocating (at most
	// maxSpareMasks of them).
	spareMasks []*PageMask
	// spareBlocks, freeMasks and freeThrash are what Free gave back
	// (recycle): blocks, their residency masks and thrashing state, for
	// the blocks made after to reuse. Unlike spareMasks they are not
	// bounded: they hold no more than the freed allocations did.
	spareBlocks []*vaBlock
	freeMasks   []*PageMask
	freeThrash  []*blockThrashing
	// norecycle turns recycle off (tests).
	norecycle bool
	// general turns servicePlain off; plainServices counts the
	// services it did (tests).
	general       bool
	plainServices int
	// prefetches are the prefetcher's last decisions (servicePlain).
	prefetches prefetchMemo
}

// gpuState is one GPU: its managed memory (uvm_pmm_gpu_t), its
// replayable fault buffer and the state of its bottom half.
type gpuState struct {
	id  Processor
	cfg GPUConfig
	bh  string
	// chunks is the GPU's managed memory in root chunks; free of them
	// are free. lru holds the used ones, least recently used first.
	chunks, free int
	lru          chunkList
	// queue are the posted fault entries not yet fetched, as runs from
	// qhead on; queued counts their entries.
	queue  []faultRun
	qhead  int
	queued int
	// batch, waiters and pins are the bottom half's scratch space for
	// the batch being serviced, kept to spare an allocation per batch.
	batch     []faultRun
	waiters   []*faultWaiter
	pins      []pinnedFault
	servicing bool
	// bhFn is the bottom half's body, made once rather than per kick.
	bhFn func(*sim.Proc)
	// kernels running on the GPU (KernelLaunch, KernelComplete).
	kernels int
	// homeBytes: pre-Pascal allocations living here.
	homeBytes int64
}

// chunk is a 2 MiB root chunk of a GPU backing one VA block
// (uvm_gpu_root_chunk_t).
type chunk struct {
	block      *vaBlock
	gpu        *gpuState
	prev, next *chunk
}

// chunkList is PMM's root_chunks.va_block_used list: chunks move to the
// tail when the driver makes pages resident in them, eviction takes the
// head.
type chunkList struct{ head, tail *chunk }

func (l *chunkList) pushBack(c *chunk) {
	c.prev, c.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = c
	} else {
		l.head = c
	}
	l.tail = c
}

// toBack moves c, in the list, to its tail: the chunk the driver used
// last.
func (l *chunkList) toBack(c *chunk) {
	l.remove(c)
	l.pushBack(c)
}

func (l *chunkList) remove(c *chunk) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.tail = c.prev
	}
	c.prev, c.next = nil, nil
}

// New makes the driver of one VA space on env. The GPUs' bottom halves
// run as processes named "uvm-bh-<gpu name>" while they have faults to
// service.
func New(env Env, cfg Config) (*Driver, error) {
	cfg.GPUs = slices.Clone(cfg.GPUs)
	gen, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	d := &Driver{
		env: env, eng: env.Engine(), cfg: cfg, p: cfg.Params, gen: gen,
		nextBase: ManagedBase,
		unlocked: sim.NewCond("uvm block unlock"),
		dirty:    map[uint64]*vaBlock{}, cpuHeld: map[uint64]*vaBlock{},
	}
	for i, g := range cfg.GPUs {
		if g.Name == "" {
			cfg.GPUs[i].Name = GPU(i).String()
		}
		n := int(g.ManagedMemory / BlockSize)
		if gen == Tegra {
			n = 0
		}
		d.gpus = append(d.gpus, &gpuState{id: GPU(i), cfg: cfg.GPUs[i], bh: "uvm-bh-" + cfg.GPUs[i].Name, chunks: n, free: n})
	}
	return d, nil
}

// Generation is the unified-memory model of the VA space's GPUs.
func (d *Driver) Generation() Generation { return d.gen }

// Params are the tunables and costs in use.
func (d *Driver) Params() Params { return d.p }

// Stats are the counters so far.
func (d *Driver) Stats() Stats { return d.stats }

// BlockCount is the number of VA blocks touched so far.
func (d *Driver) BlockCount() int { return d.nblocks }

// Footprint is the memory the driver's per-page state takes, in bytes:
// it grows with the blocks touched, never with allocation sizes.
func (d *Driver) Footprint() int64 {
	var n int64
	for _, a := range d.allocs {
		a.eachBlock(func(b *vaBlock) { n += b.footprint() })
	}
	return n
}

// ChunksUsed is the number of GPU gpu's root chunks backing managed
// memory.
func (d *Driver) ChunksUsed(gpu int) int {
	g := d.gpus[gpu]
	return g.chunks - g.free
}

// Residency is the set of processors holding a valid copy of the page
// at addr (none for untouched memory).
func (d *Driver) Residency(addr Addr) ProcSet {
	b, pg := d.lookupBlock(addr)
	if b == nil {
		return 0
	}
	return b.holders(pg)
}

// MapsRemotely reports whether processor p maps the page at addr in
// another processor's memory.
func (d *Driver) MapsRemotely(p Processor, addr Addr) bool {
	b, pg := d.lookupBlock(addr)
	if b == nil || int(p) >= len(b.remote) || p < 0 {
		return false
	}
	r := b.remoteOn(p)
	return r.Test(pg)
}

func (d *Driver) lookupBlock(addr Addr) (*vaBlock, int) {
	b := d.blockAt(uint64(addr) / BlockSize)
	if b == nil {
		return nil, 0
	}
	pg := int(addr-b.start) / PageSize
	if pg >= b.pages {
		return nil, 0
	}
	return b, pg
}

// AllocOptions are the context of a cuMemAllocManaged call.
type AllocOptions struct {
	// Device is the current device (cudaSetDevice): a pre-Pascal
	// allocation lives in its memory.
	Device int
}

// Allocate is cuMemAllocManaged(size, CU_MEM_ATTACH_GLOBAL): it reserves
// VA and nothing else; pages are populated where they are first touched.
// On pre-Pascal GPUs managed memory lives in the device's VRAM, so an
// allocation larger than what is left fails with ErrOutOfMemory.
func (d *Driver) Allocate(size int64, opt AllocOptions) (*Allocation, error) {
	if size <= 0 || opt.Device < 0 || opt.Device >= len(d.gpus) {
		return nil, fmt.Errorf("cuMemAllocManaged(%d) on device %d: %w", size, opt.Device, ErrInvalidValue)
	}
	span := (uint64(size) + BlockSize - 1) &^ (BlockSize - 1)
	end, ok := d.nextBase.Add(span + BlockSize) // a guard block between allocations
	if !ok || span > math.MaxInt64/2 {
		return nil, fmt.Errorf("cuMemAllocManaged(%d): %w", size, ErrOutOfMemory)
	}
	a := &Allocation{Base: d.nextBase, Size: size, Home: CPU, d: d}
	if d.gen == PrePascal {
		if d.allPeers() {
			a.Home = GPU(opt.Device)
			g := d.gpus[opt.Device]
			if g.homeBytes+int64(span) > int64(g.chunks)*BlockSize {
				return nil, fmt.Errorf("cuMemAllocManaged(%d) on %s: %d of %d B used: %w",
					size, g.cfg.Name, g.homeBytes, int64(g.chunks)*BlockSize, ErrOutOfMemory)
			}
			g.homeBytes += int64(span)
		}
	}
	pageEnd := a.Base + Addr((uint64(size)+PageSize-1)&^(PageSize-1))
	a.policies = []policySpan{{start: a.Base, end: pageEnd, policy: defaultPolicy}}
	d.nextBase = end
	d.allocs = append(d.allocs, a)
	return a, nil
}

// allPeers reports whether every pair of GPUs has peer access.
func (d *Driver) allPeers() bool {
	for i := range d.gpus {
		for j := range d.gpus {
			if i != j && d.peer(i, j) == LinkNone {
				return false
			}
		}
	}
	return true
}

func (d *Driver) peer(i, j int) Link {
	if d.cfg.Peers == nil {
		return LinkNone
	}
	return d.cfg.Peers[i][j]
}

// Free is cuMemFree of a managed allocation: its blocks go, with their
// GPU chunks.
func (d *Driver) Free(p *sim.Proc, a *Allocation) error {
	if a == nil || a.d != d || a.freed {
		return fmt.Errorf("cuMemFree(%v): %w", a, ErrInvalidValue)
	}
	for _, b := range d.touched(a.Base, a.End()) {
		d.lock(p, b)
		for _, c := range b.chunk {
			if c != nil {
				d.freeChunk(c)
			}
		}
		b.dead = true
		d.nblocks--
		a.setBlock(b.num, b, nil)
		delete(d.dirty, b.num)
		delete(d.cpuHeld, b.num)
		d.unlock(b)
		d.recycle(b)
	}
	if d.gen == PrePascal && a.Home.IsGPU() {
		d.gpus[a.Home.GPUIndex()].homeBytes -= int64((uint64(a.Size) + BlockSize - 1) &^ (BlockSize - 1))
	}
	a.freed = true
	d.allocs = slices.DeleteFunc(d.allocs, func(x *Allocation) bool { return x == a })
	return nil
}

// find is the allocation holding all of [addr, addr+size).
func (d *Driver) find(addr Addr, size int64) (*Allocation, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%v size %d: %w", addr, size, ErrInvalidValue)
	}
	i, _ := slices.BinarySearchFunc(d.allocs, addr, func(a *Allocation, x Addr) int {
		switch {
		case a.End() <= x:
			return -1
		case a.Base > x:
			return 1
		}
		return 0
	})
	if i < len(d.allocs) {
		a := d.allocs[i]
		if end, ok := addr.Add(uint64(size)); ok && a.Base <= addr && end <= a.End() {
			return a, nil
		}
	}
	return nil, fmt.Errorf("[%v +%#x]: %w", addr, size, ErrInvalidAddress)
}

// block is the VA block number num of a, made on first touch.
func (d *Driver) block(a *Allocation, num uint64) *vaBlock {
	if b := d.blockAt(num); b != nil {
		return b
	}
	start := Addr(num * BlockSize)
	pageEnd := a.policies[len(a.policies)-1].end
	n := len(d.gpus) + 1
	var b *vaBlock
	if k := len(d.spareBlocks); k > 0 {
		b = d.spareBlocks[k-1]
		d.spareBlocks[k-1] = nil
		d.spareBlocks = d.spareBlocks[:k-1]
	} else {
		b = new(vaBlock)
	}
	*b = vaBlock{
		num: num, start: start, alloc: a,
		pages: int(min(pageEnd, start+BlockSize)-start) / PageSize,
	}
	if n <= len(b.small.resident) {
		// One GPU: the lists live in the block.
		b.resident, b.remote, b.chunk = b.small.resident[:n], b.small.remote[:n], b.small.chunk[:n-1]
	} else {
		b.resident, b.remote, b.chunk = make([]*PageMask, n), make([]*PageMask, n), make([]*chunk, n-1)
	}
	d.nblocks++
	a.setBlock(num, nil, b)
	return b
}

// recycle keeps b, freed, for a later block to reuse with its residency
// masks and thrashing state, when nothing can still refer to it: no
// process ever waited for its lock (a waiter wakes after Free and
// looks at it) and no unpin timer was armed on it. A sweep frees an
// allocation of a hundred thousand blocks and makes another as large;
// reusing them spares three or four allocations per block, and the
// collector's work on them. Blocks are made on Pascal and later only
// here; the other generations keep side tables of blocks and do not
// recycle.
func (d *Driver) recycle(b *vaBlock) {
	if d.norecycle || b.cond != nil || b.pinTimer || !d.gen.ConcurrentAccess() {
		return
	}
	for q, r := range b.resident {
		if r != nil {
			d.freeMasks = append(d.freeMasks, r)
			b.resident[q] = nil
		}
	}
	if bt := b.thrash; bt != nil {
		*bt = blockThrashing{}
		d.freeThrash = append(d.freeThrash, bt)
	}
	// The block keeps nothing of its past: block() sets every field.
	*b = vaBlock{}
	d.spareBlocks = append(d.spareBlocks, b)
}

// blockAt is the touched block number num, nil if none: from the index
// of the live allocation holding it (Allocation.blocks). A map of a few
// hundred thousand blocks would cost a cache miss or two per lookup, and
// an insert and a delete per block; an access, its batches and its
// description look up each of its blocks several times, and the index
// of a sweep's allocation is read in address order.
func (d *Driver) blockAt(num uint64) *vaBlock {
	addr := Addr(num * BlockSize)
	i, found := slices.BinarySearchFunc(d.allocs, addr, func(a *Allocation, x Addr) int {
		switch {
		case a.Base+Addr(a.blockCount())*BlockSize <= x:
			return -1
		case a.Base > x:
			return 1
		}
		return 0
	})
	if !found {
		// Blocks live only in live allocations (Free removes them).
		return nil
	}
	a := d.allocs[i]
	k := num - uint64(a.Base)/BlockSize
	if a.blocks == nil || a.blocks[k/leafBlocks] == nil {
		return nil
	}
	return a.blocks[k/leafBlocks][k%leafBlocks]
}

// touched are the touched blocks overlapping [start, end), in address
// order. It looks at whichever is fewer: the range's blocks or the
// touched ones.
func (d *Driver) touched(start, end Addr) []*vaBlock {
	if end <= start {
		return nil
	}
	first, last := uint64(start)/BlockSize, (uint64(end)-1)/BlockSize
	var out []*vaBlock
	if last-first < uint64(d.nblocks) {
		for n := first; n <= last; n++ {
			if b := d.blockAt(n); b != nil {
				out = append(out, b)
			}
		}
		return out
	}
	// Fewer touched blocks than the range has: walk the allocations'
	// indexes, in address order.
	for _, a := range d.allocs {
		if lo := uint64(a.Base) / BlockSize; lo > last || lo+uint64(a.blockCount()) <= first {
			continue
		}
		a.eachBlock(func(b *vaBlock) {
			if b.num >= first && b.num <= last {
				out = append(out, b)
			}
		})
	}
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// pageSpan is the pages [first, end) of block b within [start, end).
func (b *vaBlock) pageSpan(start, end Addr) (int, int) {
	lo := max(start, b.start)
	hi := min(end, b.start+Addr(b.pages)*PageSize)
	if hi <= lo {
		return 0, 0
	}
	return int(lo-b.start) / PageSize, int(hi-b.start+PageSize-1) / PageSize
}

// lock takes b's lock for p, waiting while another process holds it.
func (d *Driver) lock(p *sim.Proc, b *vaBlock) {
	if b.locked {
		if b.cond == nil {
			b.cond = sim.NewCond(fmt.Sprintf("uvm block %v", b.start))
		}
		p.WaitUntil(b.cond, func() bool { return !b.locked })
	}
	b.locked = true
}

func (d *Driver) unlock(b *vaBlock) {
	b.locked = false
	if b.cond != nil {
		b.cond.Signal()
	}
	d.unlocked.Broadcast()
}

// canAccess reports whether processor x can map memory of processor m
// (va_space->accessible_from[m] holds x).
func (d *Driver) canAccess(x, m Processor) bool {
	switch {
	case x == m || m == CPU:
		return true
	case x == CPU:
		return d.gpus[m.GPUIndex()].cfg.CPULink == LinkNVLink
	}
	return d.peer(x.GPUIndex(), m.GPUIndex()) != LinkNone
}

// fastAccess reports whether x reaches m's memory over NVLink with
// native atomics (va_space->has_nvlink and has_native_atomics).
func (d *Driver) fastAccess(x, m Processor) bool {
	switch {
	case x == m:
		return true
	case x == CPU:
		return d.gpus[m.GPUIndex()].cfg.CPULink == LinkNVLink
	case m == CPU:
		return d.gpus[x.GPUIndex()].cfg.CPULink == LinkNVLink
	}
	return d.peer(x.GPUIndex(), m.GPUIndex()) == LinkNVLink
}

// hasMemory reports whether processor p can hold managed pages.
func (d *Driver) hasMemory(p Processor) bool {
	return p == CPU || d.gpus[p.GPUIndex()].chunks > 0
}

// closest is the holder of a set nearest to processor to: to itself, a
// GPU it reaches over NVLink, the CPU, then any other by number
// (uvm_va_block_page_get_closest_resident).
func (d *Driver) closest(holders ProcSet, to Processor) Processor {
	if holders == 0 {
		return NoProcessor
	}
	if holders.Has(to) {
		return to
	}
	for p := GPU(0); int(p) <= len(d.gpus); p++ {
		if holders.Has(p) && to != CPU && d.fastAccess(to, p) {
			return p
		}
	}
	if holders.Has(CPU) {
		return CPU
	}
	return holders.First()
}

func (d *Driver) observed() bool { return d.Hooks.Active() }

// stall accounts an access by who to [start, end) that waited for faults
// to be serviced, and reports it.
func (d *Driver) stall(p *sim.Proc, who Processor, start, end Addr, wait sim.Time) {
	d.stats.FaultStall += wait
	if wait > 0 && d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindStall, Processor: who,
			Addr: start, Bytes: int64(end - start), Stall: wait})
	}
}

func (d *Driver) emit(e Event) {
	if !d.Hooks.Active() {
		return
	}
	d.ev = e
	d.ev.Component = "uvm"
	d.ev.Header.Cause = sim.CauseFault
	d.Hooks.Emit(&d.ev)
}

// procName is the name of the running process, for events.
func procName(p *sim.Proc) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

// fail reports misuse as an event and returns err.
func (d *Driver) fail(p *sim.Proc, who Processor, addr Addr, err error) error {
	d.stats.Errors++
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindError, Processor: who, Addr: addr, Err: err})
	}
	return err
}

func (d *Driver) gpu(i int) (*gpuState, error) {
	if i < 0 || i >= len(d.gpus) {
		return nil, fmt.Errorf("GPU %d of %d: %w", i, len(d.gpus), ErrInvalidValue)
	}
	return d.gpus[i], nil
}

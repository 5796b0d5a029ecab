package dmadebug

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// DefaultLineSize is the cache line Options.LineSize defaults to when
// no memory gives one.
const DefaultLineSize = 64

// maxOverlap is debug.c's ACTIVE_CACHELINE_MAX_OVERLAP: the radix tree
// holds an overlap count in its RADIX_TREE_MAX_TAGS (3) tag bits.
const maxOverlap = 7

// mappingError is DMA_MAPPING_ERROR, (dma_addr_t)~0.
const mappingError = mem.DMAAddr(^uint64(0))

// recentSize is how many unmapped mappings are remembered, to name the
// mapping behind a double unmap, a use after unmap or a stale read.
const recentSize = 256

// SegLimits are a device's scatter-gather limits (struct
// device_dma_parameters), as check_sg_segment reads them.
type SegLimits struct {
	// MaxSegSize is dma_get_max_seg_size: the longest segment the
	// device takes.
	MaxSegSize uint64
	// SegBoundaryMask is dma_get_seg_boundary: no segment may cross an
	// address that is a multiple of mask+1.
	SegBoundaryMask uint64
}

// DefaultSegLimits are a PCI device's until its driver sets others
// (pci_setup_device: 64 KiB segments, no crossing of a 4 GiB boundary).
var DefaultSegLimits = SegLimits{MaxSegSize: 64 << 10, SegBoundaryMask: 0xffffffff}

// Options configure a Pack. The zero value is usable; Attach fills what
// its subjects know.
type Options struct {
	// LineSize is the cache line for cache-line overlap tracking
	// (L1_CACHE_BYTES); 0 means the memory's (node 0's) when attached to
	// one, DefaultLineSize otherwise.
	LineSize uint64
	// Seg is every device's scatter-gather limits unless Limits gives
	// others; a zero field takes DefaultSegLimits'.
	Seg SegLimits
	// Limits, when set, gives a device's scatter-gather limits as they
	// are now (a driver may change them at probe); it is asked at every
	// dma_map_sg, and a false or a zero field falls back to Seg. Attach
	// sets it, when nil, to the DMA layer's devices' MaxSegmentSize and
	// SegmentBoundary.
	Limits func(device string) (SegLimits, bool)
}

// mapErr is debug.c's map_err_type.
type mapErr uint8

const (
	errNotApplicable mapErr = iota // sg and coherent mappings
	errNotChecked                  // single, page, resource until dma_mapping_error()
	errChecked
)

// entry is one active mapping: dma_debug_entry. A scatter-gather mapping
// is one entry per mapped segment, as in the kernel.
type entry struct {
	dev       int32
	kind      dma.Kind
	dir       dma.Direction
	mapErr    mapErr
	streaming bool // single, page or sg: the device owns its memory
	lineHeld  bool // tracked by cache line: the device may write it
	addr      mem.DMAAddr
	size      uint64
	phys      mem.PhysAddr
	cpu       mem.VirtAddr
	nents     int // nents passed to dma_map_sg
	mapped    int // what dma_map_sg returned
	seq       uint64
	// Provenance: the call that made the mapping.
	call, proc string
	time       sim.Time
	// [phys+cpuLo, phys+cpuHi) is what a sync_for_cpu handed back to the
	// CPU; the rest of a streaming mapping is the device's. Empty when
	// cpuLo >= cpuHi.
	cpuLo, cpuHi uint64
	next         *entry // free list
	dn           inode  // in the device's bus-address index
	pn           inode  // in the physical index
	// more are the further physical ranges of a segment an IOMMU merged
	// from several (dma_map_sg through dma-iommu): the pages behind one
	// IOVA range, each in the physical index with its offset.
	more []inode
}

func (e *entry) origin() string { return check.Origin(e.call, e.time, e.proc) }

// gone is a mapping that was unmapped, kept in a ring for provenance.
type gone struct {
	dev        int32
	kind       dma.Kind
	dir        dma.Direction
	addr       mem.DMAAddr
	size       uint64
	phys       mem.PhysAddr
	call, proc string
	time       sim.Time
	endTime    sim.Time
	endProc    string
}

// device is one device's mappings by bus address: debug.c's hash of
// dma_debug_entry by (dev, dev_addr), one index per device.
type device struct {
	name string
	bus  bindex
}

// Pack is dmalab's counterpart of CONFIG_DMA_API_DEBUG for one DMA
// layer and its memory: it observes every DMA API call (DMA) and every
// memory access (Access) and records a diagnostic on the Checker for
// every misuse. A Pack serves one simulation and is not safe for
// concurrent use.
type Pack struct {
	chk  *check.Checker
	opt  Options
	line uint64

	devIdx   map[string]int32
	devs     []*device
	lastName string
	lastDev  int32

	// phys holds every mapping by physical address: CPU ownership
	// (streaming ones) and debug.c's active cache lines (those the
	// device may write).
	phys bindex
	free *entry
	seq  uint64

	recent  [recentSize]gone
	nRecent int
}

// New returns a Pack with no mappings that records on c, hooked to
// nothing: events reach it through its DMA and Access methods. Attach
// is New hooked to a DMA layer and its memory.
func New(c *check.Checker, opt Options) *Pack {
	if opt.LineSize == 0 {
		opt.LineSize = DefaultLineSize
	}
	opt.Seg = fillSeg(opt.Seg, DefaultSegLimits)
	return &Pack{
		chk:     c,
		opt:     opt,
		line:    opt.LineSize,
		devIdx:  make(map[string]int32),
		lastDev: -1,
	}
}

// Attach makes a Pack on c and hooks it to d's events and m's accesses;
// either may be nil (a pack on synthetic events, a memory without a DMA
// layer). Options left zero take what the subjects know: m's cache line
// (node 0's) and d's devices' segment limits.
func Attach(c *check.Checker, d *dma.DMA, m *mem.Memory, opt Options) *Pack {
	if opt.LineSize == 0 && m != nil {
		opt.LineSize = uint64(m.LineSize(0))
	}
	if opt.Limits == nil && d != nil {
		opt.Limits = func(name string) (SegLimits, bool) {
			dev, err := d.Device(name)
			if err != nil {
				return SegLimits{}, false
			}
			return SegLimits{MaxSegSize: dev.MaxSegmentSize(), SegBoundaryMask: dev.SegmentBoundary()}, true
		}
	}
	x := New(c, opt)
	if d != nil {
		x.AttachDMA(d)
	}
	if m != nil {
		x.AttachMemory(m)
	}
	return x
}

// AttachDMA hooks x to a DMA layer's events.
func (x *Pack) AttachDMA(d *dma.DMA) { d.Hooks.Hook(x.DMA) }

// AttachMemory hooks x to another memory's accesses as well.
func (x *Pack) AttachMemory(m *mem.Memory) {
	m.Hooks.Hook(x.Access)
}

func fillSeg(s, def SegLimits) SegLimits {
	if s.MaxSegSize == 0 {
		s.MaxSegSize = def.MaxSegSize
	}
	if s.SegBoundaryMask == 0 {
		s.SegBoundaryMask = def.SegBoundaryMask
	}
	return s
}

// segLimits are device's scatter-gather limits now.
func (x *Pack) segLimits(device string) SegLimits {
	if x.opt.Limits != nil {
		if s, ok := x.opt.Limits(device); ok {
			return fillSeg(s, x.opt.Seg)
		}
	}
	return x.opt.Seg
}

func (x *Pack) device(name string) (int32, *device) {
	if x.lastDev >= 0 && name == x.lastName {
		return x.lastDev, x.devs[x.lastDev]
	}
	i, ok := x.devIdx[name]
	if !ok {
		i = int32(len(x.devs))
		x.devIdx[name] = i
		x.devs = append(x.devs, &device{name: name})
	}
	x.lastName, x.lastDev = name, i
	return i, x.devs[i]
}

// Active is how many mappings are active: streaming segments, coherent
// buffers and resources of every device.
func (x *Pack) Active() int {
	n := 0
	for _, d := range x.devs {
		n += d.bus.n
	}
	return n
}

// DMA checks one DMA API call.
func (x *Pack) DMA(ev *dma.Event) {
	switch ev.Op {
	case dma.OpMap:
		x.onMap(ev)
	case dma.OpAllocCoherent:
		x.onAllocCoherent(ev)
	case dma.OpUnmap, dma.OpFreeCoherent:
		x.onUnmap(ev)
	case dma.OpMappingError:
		x.onMappingError(ev)
	case dma.OpSyncForCPU:
		x.onSync(ev, true)
	case dma.OpSyncForDevice:
		x.onSync(ev, false)
	case dma.OpDeviceAccess:
		x.onDeviceAccess(ev)
	case dma.OpUnbind:
		x.onUnbind(ev)
	}
}

// Access checks one memory access. An access that could not happen (Err
// set) touched nothing and is ignored.
func (x *Pack) Access(a *mem.Access) {
	if a.Err != nil {
		return
	}
	if a.Kind == mem.CPURead || a.Kind == mem.CPUWrite {
		x.checkOwnership(a)
	}
	if a.Stale {
		x.staleRead(a)
	}
}

// ---- diagnostics ----

func (x *Pack) diag(k cls, t sim.Time, proc, dev, buf, msg, orig string) {
	x.chk.Record(classes[k], check.Diagnostic{
		Time: t, Proc: proc, Device: dev, Buffer: buf, Message: msg, Origin: orig,
	})
}

func busBuf(addr mem.DMAAddr, size uint64) string { return fmt.Sprintf("%v +%d", addr, size) }
func physBuf(pa mem.PhysAddr, size uint64) string { return fmt.Sprintf("%v +%d", pa, size) }

func dirName(d dma.Direction) string {
	switch d {
	case dma.Bidirectional:
		return "DMA_BIDIRECTIONAL"
	case dma.ToDevice:
		return "DMA_TO_DEVICE"
	case dma.FromDevice:
		return "DMA_FROM_DEVICE"
	case dma.None:
		return "DMA_NONE"
	}
	return fmt.Sprintf("direction(%d)", int(d))
}

func kindName(k dma.Kind) string {
	switch k {
	case dma.KindSingle:
		return "single"
	case dma.KindPage:
		return "page"
	case dma.KindSG:
		return "scatter-gather"
	case dma.KindCoherent:
		return "coherent"
	case dma.KindResource:
		return "resource"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ---- map ----

// segments are the entries a scatter-gather call concerns: for a map, the
// mapped ones; for an unmap or sync, the ones passed back (none for
// nents 0, and then nothing is checked, as in debug.c).
func segments(ev *dma.Event, mapped bool) []dma.Segment {
	if mapped && ev.Mapped > 0 && ev.Mapped < len(ev.SG) {
		return ev.SG[:ev.Mapped]
	}
	return ev.SG
}

func (x *Pack) onMap(ev *dma.Event) {
	dev, d := x.device(ev.Device)
	kind := ev.Kind
	if kind == 0 {
		kind = dma.KindSingle
	}
	switch kind {
	case dma.KindResource:
		x.checkResource(ev, d)
		if ev.Failed {
			return
		}
		e := x.newEntry(ev, dev, kind, ev.Addr, ev.Size, ev.Phys)
		e.mapErr = errNotChecked
		x.add(e, d, ev)
	case dma.KindSG:
		x.checkIllegal(ev, d, kind)
		if ev.Failed {
			return
		}
		segs := segments(ev, true)
		lim := x.segLimits(d.name)
		x.chk.BeginBatch()
		orig := 0 // the next original entry behind the mapped segments
		for i, s := range segs {
			e := x.newEntry(ev, dev, kind, s.Addr, s.Len, s.Phys)
			orig = x.physRanges(e, ev, orig)
			e.streaming = true
			e.nents, e.mapped = ev.NEnts, len(segs)
			x.checkSegment(ev, d, lim, i, s)
			x.add(e, d, ev)
		}
		x.chk.EndBatch("segment")
	default:
		x.checkIllegal(ev, d, kind)
		if ev.Failed {
			return
		}
		e := x.newEntry(ev, dev, kind, ev.Addr, ev.Size, ev.Phys)
		e.streaming = kind == dma.KindSingle || kind == dma.KindPage
		e.mapErr = errNotChecked
		x.add(e, d, ev)
	}
}

func (x *Pack) onAllocCoherent(ev *dma.Event) {
	if ev.Failed {
		return
	}
	dev, d := x.device(ev.Device)
	e := x.newEntry(ev, dev, dma.KindCoherent, ev.Addr, ev.Size, ev.Phys)
	e.dir = dma.Bidirectional
	x.add(e, d, ev)
}

// checkIllegal is debug_dma_map_single (vmalloc and invalid addresses, for
// dma_map_single only, checked before the map so even when it fails)
// with check_for_stack and check_for_illegal_area (every streaming map;
// text and rodata once mapped). A stack is reported even when the map
// failed: Linux's dma_map_single refuses vmalloc'ed memory, VMAP_STACK
// stacks included, with a WARN of its own before dma-debug sees the call
// (so does package dma), while a direct-mapped stack is mapped and
// check_for_stack reports it; the misuse is the same.
func (x *Pack) checkIllegal(ev *dma.Event, d *device, kind dma.Kind) {
	var what string
	switch ev.Class {
	case dma.MemStack:
		what = "a kernel stack (vmalloc'ed under VMAP_STACK, and sharing cache lines with live variables)"
	case dma.MemText:
		if !ev.Failed {
			what = "kernel text or rodata"
		}
	case dma.MemVmalloc:
		if kind == dma.KindSingle {
			what = "the vmalloc area (virtually contiguous only: map its pages with dma_map_page)"
		}
	case dma.MemInvalid, dma.MemMMIO:
		if kind == dma.KindSingle {
			what = "an address outside the kernel's linear map (no struct page behind it)"
		}
	}
	if what == "" {
		return
	}
	x.diag(cMapIllegalMemory, ev.Time, ev.Proc, d.name,
		fmt.Sprintf("%v +%d", ev.CPUAddr, ev.Size),
		fmt.Sprintf("%s maps memory from %s", d.name, what),
		check.Origin(ev.Call, ev.Time, ev.Proc))
}

// checkResource: dma_map_resource is for MMIO. Older kernels refused RAM
// in dma_map_resource itself (a WARN, and DMA_MAPPING_ERROR); current
// debug.c reports it from debug_dma_map_phys (DMA_ATTR_MMIO on a valid,
// unreserved pfn). It is reported whatever the map's outcome. Kernel text
// is reserved memory, which the pfn_valid && !PageReserved test lets
// through; so does dmalab.
func (x *Pack) checkResource(ev *dma.Event, d *device) {
	switch ev.Class {
	case dma.MemLinear, dma.MemVmalloc, dma.MemStack:
	default:
		return
	}
	x.diag(cMapResourceRAM, ev.Time, ev.Proc, d.name, physBuf(ev.Phys, ev.Size),
		fmt.Sprintf("dma_map_resource of %v, which is RAM: map RAM with dma_map_page, resources are MMIO", ev.Phys),
		check.Origin(ev.Call, ev.Time, ev.Proc))
}

// checkSegment is check_sg_segment.
func (x *Pack) checkSegment(ev *dma.Event, d *device, lim SegLimits, i int, s dma.Segment) {
	if s.Len > lim.MaxSegSize {
		x.diag(cSGSegment, ev.Time, ev.Proc, d.name, busBuf(s.Addr, s.Len),
			fmt.Sprintf("sg segment %d is %d bytes, longer than %s's max_seg_size %d", i, s.Len, d.name, lim.MaxSegSize),
			check.Origin(ev.Call, ev.Time, ev.Proc))
	}
	if s.Len == 0 {
		return
	}
	first := uint64(s.Addr)
	last := first + s.Len - 1
	if (first^last)&^lim.SegBoundaryMask != 0 {
		x.diag(cSGSegment, ev.Time, ev.Proc, d.name, busBuf(s.Addr, s.Len),
			fmt.Sprintf("sg segment %d (%#x..%#x) crosses %s's segment boundary (mask %#x)", i, first, last, d.name, lim.SegBoundaryMask),
			check.Origin(ev.Call, ev.Time, ev.Proc))
	}
}

func (x *Pack) newEntry(ev *dma.Event, dev int32, kind dma.Kind, addr mem.DMAAddr, size uint64, phys mem.PhysAddr) *entry {
	e := x.free
	if e != nil {
		x.free = e.next
		*e = entry{}
	} else {
		e = new(entry)
	}
	x.seq++
	e.dev, e.kind, e.dir = dev, kind, ev.Dir
	e.addr, e.size, e.phys = addr, size, phys
	e.cpu = ev.CPUAddr
	e.seq = x.seq
	e.call, e.proc, e.time = ev.Call, ev.Proc, ev.Time
	e.dn = inode{start: uint64(addr), end: end(uint64(addr), size), seq: e.seq, e: e}
	e.pn = inode{start: uint64(phys), end: end(uint64(phys), size), seq: e.seq, e: e}
	return e
}

// physRanges gives e, a mapped segment of ev starting at original
// entry orig, the physical ranges of the original entries it covers
// when there are several (an IOMMU merged them behind one IOVA range):
// its own index node then spans the first, and e.more the rest. It
// returns the first original entry after e's.
func (x *Pack) physRanges(e *entry, ev *dma.Event, orig int) int {
	if ev.Mapped <= 0 || ev.Mapped >= len(ev.SG) || orig >= len(ev.SG) {
		return orig + 1
	}
	first := ev.SG[orig]
	if first.CPULen == 0 || first.CPULen >= e.size {
		return orig + 1
	}
	e.pn.end = end(uint64(first.Phys), first.CPULen)
	covered := first.CPULen
	i := orig + 1
	for ; i < len(ev.SG) && covered < e.size; i++ {
		s := ev.SG[i]
		n := min(s.CPULen, e.size-covered)
		e.more = append(e.more, inode{start: uint64(s.Phys), end: end(uint64(s.Phys), n), off: covered, seq: e.seq, e: e})
		covered += n
	}
	return i
}

// end is addr+size, saturating.
func end(addr, size uint64) uint64 {
	if addr+size < addr {
		return ^uint64(0)
	}
	return addr + size
}

// add is add_dma_entry: the indexes, and the active cache line.
func (x *Pack) add(e *entry, d *device, ev *dma.Event) {
	d.bus.insert(&e.dn)
	// active_cacheline_insert: a device that only reads memory cannot
	// make the CPU consume stale data, so DMA_TO_DEVICE mappings may
	// share lines. debug.c tracks a mapping by the line it starts in.
	for i := range e.more {
		x.phys.insert(&e.more[i])
	}
	if e.dir == dma.ToDevice {
		x.phys.insert(&e.pn)
		return
	}
	e.lineHeld = true
	line := uint64(e.phys) - uint64(e.phys)%x.line
	var n int
	var first *entry
	x.phys.starts(line, line+x.line, func(p *inode) {
		// debug.c tracks a mapping by its first line only.
		if p.off == 0 && p.e.lineHeld {
			n++
			if first == nil || p.e.seq < first.seq {
				first = p.e
			}
		}
	})
	x.phys.insert(&e.pn)
	if n == 0 {
		return
	}
	lineAddr := mem.PhysAddr(line)
	buf := physBuf(lineAddr, x.line)
	// debug.c counts overlaps in three tag bits and, past 7, stops
	// counting (and so loses track of the line). dmalab counts exactly
	// and reports every mapping past the 7th overlap.
	if n > maxOverlap {
		x.diag(cCachelineOverflow, ev.Time, ev.Proc, x.devs[e.dev].name, buf,
			fmt.Sprintf("%d mappings of cache line %v are active, more than the %d overlaps dma-debug can count: mappings are probably leaking",
				n+1, lineAddr, maxOverlap),
			e.origin())
	}
	x.diag(cCachelineOverlap, ev.Time, ev.Proc, x.devs[e.dev].name, buf,
		fmt.Sprintf("%s mapping %s starts in cache line %v, as does %s's %s mapping %s made by %s: overlapping mappings the device may write are not supported",
			dirName(e.dir), busBuf(e.addr, e.size), lineAddr,
			x.devs[first.dev].name, dirName(first.dir), busBuf(first.addr, first.size), first.origin()),
		e.origin())
}

// remove takes e out of the indexes, remembers it, and frees it.
func (x *Pack) remove(e *entry, ev *dma.Event) {
	x.devs[e.dev].bus.remove(&e.dn)
	x.phys.remove(&e.pn)
	for i := range e.more {
		x.phys.remove(&e.more[i])
	}
	x.recent[x.nRecent%recentSize] = gone{
		dev: e.dev, kind: e.kind, dir: e.dir, addr: e.addr, size: e.size, phys: e.phys,
		call: e.call, proc: e.proc, time: e.time, endTime: ev.Time, endProc: ev.Proc,
	}
	x.nRecent++
	*e = entry{next: x.free}
	x.free = e
}

// recentBus is the latest unmapped mapping of dev covering bus address a.
func (x *Pack) recentBus(dev int32, a mem.DMAAddr) *gone {
	return x.recentWhere(func(g *gone) bool {
		return g.dev == dev && g.addr <= a && uint64(a) < end(uint64(g.addr), g.size)
	})
}

// recentPhys is the latest unmapped mapping covering physical address pa.
func (x *Pack) recentPhys(pa mem.PhysAddr) *gone {
	return x.recentWhere(func(g *gone) bool {
		return g.kind != dma.KindResource && g.phys <= pa && uint64(pa) < end(uint64(g.phys), g.size)
	})
}

func (x *Pack) recentWhere(fn func(*gone) bool) *gone {
	n := min(x.nRecent, recentSize)
	for i := 1; i <= n; i++ {
		g := &x.recent[(x.nRecent-i)%recentSize]
		if fn(g) {
			return g
		}
	}
	return nil
}

func (g *gone) origin() string { return check.Origin(g.call, g.time, g.proc) }

func (g *gone) ended() string {
	s := "unmapped at " + g.endTime.String()
	if g.endProc != "" {
		s += " by " + g.endProc
	}
	return s
}

// ---- look-ups ----

// ref is what an unmap or sync call says about a mapping: debug.c's
// reference entry.
type ref struct {
	addr  mem.DMAAddr
	size  uint64
	kind  dma.Kind
	dir   dma.Direction
	nents int
	cpu   mem.VirtAddr
}

// fit is how well e matches r: debug.c's match_lvl (size, type,
// direction, sg nents).
func fit(e *entry, r *ref) int {
	n := 0
	if e.size == r.size {
		n++
	}
	if e.kind == r.kind {
		n++
	}
	if e.dir == r.dir {
		n++
	}
	if e.nents == r.nents {
		n++
	}
	return n
}

// better reports whether e fits r better than best, which fits bestFit;
// the oldest wins a tie.
func better(e *entry, f int, best *entry, bestFit int) bool {
	return f > bestFit || f == bestFit && e.seq < best.seq
}

// find is bucket_find_exact: the entry at (dev, r.addr) that fits r
// best, the oldest on a tie. debug.c returns no entry when several match
// and none perfectly (and then reports a free of unallocated memory);
// dmalab takes the best fit, which names the real mismatch instead.
func (x *Pack) find(d *device, r *ref) *entry {
	var best *entry
	bestFit := -1
	a := uint64(r.addr)
	d.bus.starts(a, a+1, func(n *inode) {
		if f := fit(n.e, r); better(n.e, f, best, bestFit) {
			best, bestFit = n.e, f
		}
	})
	return best
}

// findContaining is bucket_find_contain: the best-fitting entry of d
// whose bus range contains [r.addr, r.addr+r.size).
func (x *Pack) findContaining(d *device, r *ref) *entry {
	var best *entry
	bestFit := -1
	lo := uint64(r.addr)
	hi := end(lo, max(r.size, 1))
	d.bus.overlaps(lo, lo+1, func(n *inode) {
		if n.end < hi {
			return
		}
		if f := fit(n.e, r); better(n.e, f, best, bestFit) {
			best, bestFit = n.e, f
		}
	})
	return best
}

// findAt is the entry of d with the lowest (start, seq) whose bus range
// contains a.
func (x *Pack) findAt(d *device, a mem.DMAAddr) *entry {
	var first *inode
	d.bus.overlaps(uint64(a), uint64(a)+1, func(n *inode) {
		if first == nil || n.before(first) {
			first = n
		}
	})
	if first == nil {
		return nil
	}
	return first.e
}

// ---- unmap ----

func (x *Pack) onUnmap(ev *dma.Event) {
	dev, d := x.device(ev.Device)
	kind, dir := ev.Kind, ev.Dir
	if ev.Op == dma.OpFreeCoherent {
		// debug_dma_free_coherent: a free is of a coherent entry, and
		// coherent entries are bidirectional.
		kind, dir = dma.KindCoherent, dma.Bidirectional
	} else if kind == 0 {
		kind = dma.KindSingle
	}
	if kind != dma.KindSG {
		x.checkUnmap(ev, dev, d, &ref{addr: ev.Addr, size: ev.Size, kind: kind, dir: dir, cpu: ev.CPUAddr})
		return
	}
	// debug_dma_unmap_sg: every entry passed back, up to the count
	// dma_map_sg returned for the first one.
	x.chk.BeginBatch()
	limit := 0
	for i, s := range segments(ev, false) {
		r := &ref{addr: s.Addr, size: s.Len, kind: kind, dir: dir, nents: ev.NEnts}
		if i == 0 {
			if e := x.find(d, r); e != nil {
				limit = e.mapped
			}
		}
		if limit > 0 && i >= limit {
			break
		}
		x.checkUnmap(ev, dev, d, r)
	}
	x.chk.EndBatch("segment")
}

// checkUnmap is check_unmap.
func (x *Pack) checkUnmap(ev *dma.Event, dev int32, d *device, r *ref) {
	e := x.find(d, r)
	if e == nil {
		if r.addr == mappingError {
			x.diag(cUnmapUnknown, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
				fmt.Sprintf("%s frees DMA_MAPPING_ERROR: the map failed and its handle was used without dma_mapping_error()", d.name),
				"")
			return
		}
		msg := fmt.Sprintf("%s frees %v, which it has no mapping at", d.name, r.addr)
		orig := ""
		if g := x.recentBus(dev, r.addr); g != nil {
			msg += fmt.Sprintf(": the %s mapping %s there was already %s", kindName(g.kind), busBuf(g.addr, g.size), g.ended())
			orig = g.origin()
		} else {
			msg += " (never mapped)"
		}
		x.diag(cUnmapUnknown, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size), msg, orig)
		return
	}
	if r.size != e.size {
		x.diag(cUnmapSize, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
			fmt.Sprintf("freed with size %d, mapped with size %d", r.size, e.size), e.origin())
	}
	if r.kind != e.kind {
		x.diag(cUnmapType, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
			fmt.Sprintf("freed as %s, mapped as %s", kindName(r.kind), kindName(e.kind)), e.origin())
	} else if e.kind == dma.KindCoherent && r.cpu != e.cpu {
		// debug.c compares the physical addresses behind the two CPU
		// addresses; dmalab compares what the caller passes, which also
		// catches freeing the linear alias of a remapped buffer.
		x.diag(cFreeCoherentAddress, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
			fmt.Sprintf("dma_free_coherent with %v, but dma_alloc_coherent returned %v", r.cpu, e.cpu), e.origin())
	}
	if r.nents != 0 && r.kind == dma.KindSG && r.nents != e.nents {
		x.diag(cUnmapSGCount, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
			fmt.Sprintf("dma_unmap_sg with nents %d, but dma_map_sg was given %d (pass the nents given to the map, not the count it returned)", r.nents, e.nents),
			e.origin())
	}
	if r.dir != e.dir {
		x.diag(cUnmapDirection, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
			fmt.Sprintf("unmapped with %s, mapped with %s", dirName(r.dir), dirName(e.dir)), e.origin())
	}
	if e.mapErr == errNotChecked {
		x.diag(cMapErrorUnchecked, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
			fmt.Sprintf("the %s mapping is unmapped, but dma_mapping_error() was never called on its handle", kindName(e.kind)),
			e.origin())
	}
	x.remove(e, ev)
}

// onMappingError is debug_dma_mapping_error: the oldest unchecked entry
// at the handle is now checked.
func (x *Pack) onMappingError(ev *dma.Event) {
	_, d := x.device(ev.Device)
	var old *entry
	a := uint64(ev.Addr)
	d.bus.starts(a, a+1, func(n *inode) {
		if n.e.mapErr == errNotChecked && (old == nil || n.e.seq < old.seq) {
			old = n.e
		}
	})
	if old != nil {
		old.mapErr = errChecked
	}
}

// ---- sync ----

func (x *Pack) onSync(ev *dma.Event, toCPU bool) {
	dev, d := x.device(ev.Device)
	kind := ev.Kind
	if kind != dma.KindSG {
		// debug_dma_sync_single_*: the reference is a single entry;
		// type does not take part in sync checks.
		if kind == 0 {
			kind = dma.KindSingle
		}
		x.checkSync(ev, dev, d, &ref{addr: ev.Addr, size: ev.Size, kind: kind, dir: ev.Dir}, toCPU)
		return
	}
	// debug_dma_sync_sg_*: entries up to the count dma_map_sg returned.
	// When the first entry is unknown debug.c checks nothing; dmalab
	// reports it.
	x.chk.BeginBatch()
	limit := 0
	for i, s := range segments(ev, false) {
		r := &ref{addr: s.Addr, size: s.Len, kind: kind, dir: ev.Dir, nents: ev.NEnts}
		if i == 0 {
			if e := x.find(d, r); e != nil {
				limit = e.mapped
			}
		}
		if limit > 0 && i >= limit {
			break
		}
		x.checkSync(ev, dev, d, r, toCPU)
		if limit == 0 {
			break
		}
	}
	x.chk.EndBatch("segment")
}

// checkSync is check_sync, plus the ownership a sync hands over.
func (x *Pack) checkSync(ev *dma.Event, dev int32, d *device, r *ref, toCPU bool) {
	e := x.findContaining(d, r)
	if e == nil {
		// debug.c looks the sync up with a containing match, so a sync
		// running past its mapping's end is reported as a sync of
		// unallocated memory and its "outside allocated range" check
		// never fires. dmalab finds the mapping by the sync's start and
		// reports the range, which is what that check means.
		e = x.findAt(d, r.addr)
		if e == nil {
			msg := fmt.Sprintf("%s syncs %s, which is inside no mapping of %s", d.name, busBuf(r.addr, r.size), d.name)
			orig := ""
			if g := x.recentBus(dev, r.addr); g != nil {
				msg += fmt.Sprintf(": the %s mapping %s there was %s", kindName(g.kind), busBuf(g.addr, g.size), g.ended())
				orig = g.origin()
			}
			x.diag(cSyncUnknown, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size), msg, orig)
			return
		}
		x.diag(cSyncRange, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
			fmt.Sprintf("sync of %d bytes at offset %d runs %d bytes past the end of the mapping %s",
				r.size, r.addr-e.addr, uint64(r.addr-e.addr)+r.size-e.size, busBuf(e.addr, e.size)),
			e.origin())
	}
	// A bidirectional mapping may be synced either way, and debug.c
	// checks nothing more for it (the sg count included).
	if e.dir != dma.Bidirectional {
		if r.dir != e.dir {
			x.diag(cSyncDirection, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
				fmt.Sprintf("synced with %s, mapped with %s", dirName(r.dir), dirName(e.dir)), e.origin())
		}
		// The two checks below fire only together with the direction
		// check: debug.c lets a sync in the mapped direction through
		// (sync_for_cpu of a DMA_TO_DEVICE mapping with DMA_TO_DEVICE,
		// sync_for_device of a DMA_FROM_DEVICE mapping with
		// DMA_FROM_DEVICE, which hands an RX buffer back).
		if toCPU && e.dir != dma.FromDevice && r.dir != dma.ToDevice {
			x.diag(cSyncCPUToDeviceBuffer, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
				fmt.Sprintf("sync for the CPU with %s of memory mapped %s: the device only reads it, the CPU has nothing to receive", dirName(r.dir), dirName(e.dir)),
				e.origin())
		}
		if !toCPU && e.dir != dma.ToDevice && r.dir != dma.FromDevice {
			x.diag(cSyncDeviceFromDeviceBuffer, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
				fmt.Sprintf("sync for the device with %s of memory mapped %s: the device only writes it, so nothing is to be written back for it", dirName(r.dir), dirName(e.dir)),
				e.origin())
		}
		if r.nents != 0 && r.kind == dma.KindSG && r.nents != e.nents {
			x.diag(cSyncSGCount, ev.Time, ev.Proc, d.name, busBuf(r.addr, r.size),
				fmt.Sprintf("dma_sync_sg with nents %d, but dma_map_sg was given %d", r.nents, e.nents), e.origin())
		}
	}
	if e.streaming {
		hand(e, r, toCPU)
	}
}

// hand moves ownership of the synced part of e: to the CPU for a
// sync_for_cpu, back to the device for a sync_for_device. The CPU's part
// is one window; a sync_for_cpu that does not touch it widens it to the
// hull, and a sync_for_device inside it leaves it whole: imprecision
// errs toward silence, never toward a false report.
func hand(e *entry, r *ref, toCPU bool) {
	lo := uint64(r.addr - e.addr)
	hi := min(lo+r.size, e.size)
	if lo >= hi {
		return
	}
	if toCPU {
		if e.cpuLo >= e.cpuHi {
			e.cpuLo, e.cpuHi = lo, hi
		} else {
			e.cpuLo, e.cpuHi = min(e.cpuLo, lo), max(e.cpuHi, hi)
		}
		return
	}
	switch {
	case e.cpuLo >= e.cpuHi:
	case lo <= e.cpuLo && hi >= e.cpuHi:
		e.cpuLo, e.cpuHi = 0, 0
	case lo <= e.cpuLo && hi > e.cpuLo:
		e.cpuLo = hi
	case hi >= e.cpuHi && lo < e.cpuHi:
		e.cpuHi = lo
	}
}

// ---- devices ----

// onDeviceAccess: the bytes a device reads or writes must be covered by
// the union of its active mappings (an sg list merged into one bus range
// may be crossed in one access).
func (x *Pack) onDeviceAccess(ev *dma.Event) {
	// A GPU's DMA of the memory its driver pinned for it is covered by
	// the driver's own mapping, not one the program made (Event.Pinned).
	if ev.Size == 0 || ev.Pinned {
		return
	}
	dev, d := x.device(ev.Device)
	lo := uint64(ev.Addr)
	ok, gap := d.bus.covers(lo, end(lo, ev.Size))
	if ok {
		return
	}
	verb := "reads"
	if ev.Write {
		verb = "writes"
	}
	hole := mem.DMAAddr(gap)
	msg := fmt.Sprintf("%s %s %s, but %v is not mapped for it", d.name, verb, busBuf(ev.Addr, ev.Size), hole)
	orig := ""
	if g := x.recentBus(dev, hole); g != nil {
		msg += fmt.Sprintf(": its %s %s mapping %s was %s", dirName(g.dir), kindName(g.kind), busBuf(g.addr, g.size), g.ended())
		orig = g.origin()
	} else {
		msg += " (never mapped)"
	}
	proc := ev.Proc
	if proc == "" {
		proc = d.name // the device itself accessed
	}
	x.diag(cDeviceAccessUnmapped, ev.Time, proc, d.name, busBuf(ev.Addr, ev.Size), msg, orig)
}

// onUnbind is dma_debug_device_change(BUS_NOTIFY_UNBOUND_DRIVER). debug.c
// names one leaked entry (the last its hash walk meets); dmalab names the
// oldest.
func (x *Pack) onUnbind(ev *dma.Event) {
	_, d := x.device(ev.Device)
	if d.bus.n == 0 {
		return
	}
	var old *entry
	d.bus.each(func(n *inode) {
		if old == nil || n.e.seq < old.seq {
			old = n.e
		}
	})
	x.diag(cUnbindLeak, ev.Time, ev.Proc, d.name, busBuf(old.addr, old.size),
		fmt.Sprintf("driver unbound from %s with %s still active; the oldest is a %s %s mapping", d.name, check.Plural(d.bus.n, "mapping"), dirName(old.dir), kindName(old.kind)),
		old.origin())
}

// ---- memory accesses ----

// checkOwnership reports a CPU access that touches a streaming mapping
// outside the part a sync_for_cpu handed back.
func (x *Pack) checkOwnership(a *mem.Access) {
	if a.Size == 0 {
		return
	}
	lo := uint64(a.Phys)
	hi := end(lo, a.Size)
	var first *inode
	x.phys.overlaps(lo, hi, func(n *inode) {
		e := n.e
		if !e.streaming || first != nil && first.before(n) {
			return
		}
		olo, ohi := max(lo, n.start), min(hi, n.end)
		base := n.start - n.off // where the mapping's offset 0 would be
		if e.cpuLo < e.cpuHi && olo >= base+e.cpuLo && ohi <= base+e.cpuHi {
			return
		}
		first = n
	})
	if first == nil {
		return
	}
	hit := first.e
	verb := "reads"
	if a.Kind == mem.CPUWrite {
		verb = "writes"
	}
	state := "mapped and not synced for the CPU"
	if hit.cpuLo < hit.cpuHi {
		state = fmt.Sprintf("only bytes %d..%d were synced for the CPU", hit.cpuLo, hit.cpuHi)
	}
	dev := x.devs[hit.dev].name
	buf := physBuf(a.Phys, a.Size)
	x.diag(cCPUAccessDeviceOwned, a.Time, a.Proc, dev, buf,
		fmt.Sprintf("CPU %s %s while %s owns it: %s mapping %s, %s", verb, buf, dev,
			dirName(hit.dir), busBuf(hit.addr, hit.size), state),
		hit.origin())
}

// staleRead reports an access whose bytes are older than the latest
// write, and names the mapping of that memory if there is one.
func (x *Pack) staleRead(a *mem.Access) {
	who := "CPU read"
	switch a.Kind {
	case mem.CPUWrite:
		who = "CPU write"
	case mem.DeviceRead:
		who = "device read"
	case mem.DeviceWrite:
		who = "device write"
	}
	msg := fmt.Sprintf("%s of %s obtained version %d at %v, but the latest write there is version %d",
		who, physBuf(a.Phys, a.Size), a.Got, a.StaleAt, a.Want)
	dev, orig := "", ""
	if a.Kind == mem.DeviceRead || a.Kind == mem.DeviceWrite {
		dev = a.Proc
	}
	at := uint64(a.StaleAt)
	var first *inode
	x.phys.overlaps(at, at+1, func(n *inode) {
		if n.e.kind != dma.KindResource && (first == nil || n.before(first)) {
			first = n
		}
	})
	if first != nil {
		e := first.e
		dev, orig = x.devs[e.dev].name, e.origin()
		msg += fmt.Sprintf(" (inside %s's active %s mapping %s)", dev, dirName(e.dir), busBuf(e.addr, e.size))
	} else if g := x.recentPhys(a.StaleAt); g != nil {
		dev, orig = x.devs[g.dev].name, g.origin()
		msg += fmt.Sprintf(" (%s's %s %s mapping %s of it was %s)", dev, dirName(g.dir), kindName(g.kind), busBuf(g.addr, g.size), g.ended())
	}
	x.diag(cStaleRead, a.Time, a.Proc, dev, physBuf(a.Phys, a.Size), msg, orig)
}

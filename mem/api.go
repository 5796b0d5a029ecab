package mem

// This file holds the types, errors and constructor of package mem; the
// methods live beside the state they touch: phys.go (DRAM, device
// memory, page allocator), kernel.go (kernel address space), access.go
// (CPU and device accesses, cache maintenance), anon.go (anonymous
// memory placed at first touch, page migration), cache.go (the CPU
// caches), spans.go (the interval map), payload.go (the bytes),
// inspect.go (state for tests and reports).

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// PageSize is the CPU's base page (4 KiB).
const PageSize = 4096

// DefaultCacheSize is the capacity of a node's cache when the platform
// leaves CPUCache.Size unset: a mid-sized server last-level cache. A
// platform that cares about eviction gives its own.
const DefaultCacheSize = 32 << 20

// Errors.
var (
	ErrNoMemory = errors.New("out of memory")
	ErrBadAddr  = errors.New("bad address")
	// ErrNoPayload is for callers that need real bytes and find payload
	// mode off; mem's byte forms work without it and read zeros.
	ErrNoPayload = errors.New("payload mode is off")
	// ErrInvalid is a malformed request: a zero size, an unknown node or
	// device, an alignment that is not a power of two (EINVAL).
	ErrInvalid = errors.New("invalid argument")
	// ErrNotPresent is a page of anonymous memory that nothing has
	// touched yet: Translate does not fault it in (Populate does).
	ErrNotPresent = errors.New("page not present")
	// ErrBusy is a page that cannot migrate because it is pinned
	// (PinPages): its extra references make migrate_folio_move fail
	// (folio_expected_refcount mismatch), move_pages's -EBUSY.
	ErrBusy = errors.New("page pinned")
)

// Options configure a Memory.
type Options struct {
	// Payload keeps the real bytes of every write, so that readers get
	// bytes, not only versions. Costs memory proportional to bytes
	// written; off for large runs.
	Payload bool
	// CopyTime, when set, is the CPU copy model: it blocks p for as long
	// as one thread on node copying bytes from memory on node src to
	// memory on node dst takes, cached saying the source was all in the
	// node's cache (the machine's: machine.CPUCopyBetween for a copy
	// from DRAM, which shares DRAM and the socket links with everything
	// else, CPUCopyCached for one from the cache). src and dst are the
	// home nodes of the copy's first bytes. Without it a copy costs
	// bytes at the node's memcpy rate, alone, scaled as a remote access
	// is (see RemoteTime) when src or dst is another node.
	CopyTime func(p *sim.Proc, node, src, dst int, bytes uint64, cached bool)
	// RemoteTime, when set, is the cost of the part of a CPU access
	// (Read, Write and their Bytes forms) that lands on another node's
	// memory: it blocks p for as long as one thread on node cpu moving
	// bytes of memory on node home takes, at a local rate of rate
	// bytes/s (the memcpy or uncached rate), toMemory saying the bytes
	// go from the CPU to memory (uncached stores) rather than from
	// memory to the CPU (loads, and the line fills of write-allocate
	// stores). The machine's is machine.CPUAccess, a flow over the
	// socket links shared with every other flow. Without it the access
	// costs platform.Spec.LoadLatency(cpu, home) plus bytes at
	// platform.Spec.ThreadRate, capped by the socket links' capacity,
	// alone. Accesses to the CPU's own node cost what they always did:
	// bytes at the local rate.
	RemoteTime func(p *sim.Proc, cpu, home int, bytes uint64, toMemory bool, rate float64)
	// LocalTime, when set, is the cost of a CPU access (Read, Write and
	// their Bytes forms) whose local part lies wholly in the CPU's own
	// node's DRAM: it blocks p for as long as one thread on node moving
	// bytes at most at rate bytes/s (the memcpy or uncached rate) over
	// the node's DRAM takes, toMemory as for RemoteTime. The machine's
	// is machine.CPULocalAccess, a flow on the node's DRAM bus capped at
	// rate, so that a thread alone takes bytes/rate as without it and
	// many threads share the DRAM's bandwidth with one another and with
	// DMA. Without it (and for device memory) the local part costs bytes
	// at rate, alone.
	LocalTime func(p *sim.Proc, node int, bytes uint64, toMemory bool, rate float64)
}

// Zone is where an allocation may come from (Linux's ZONE_DMA32 and
// ZONE_NORMAL).
type Zone int

const (
	// ZoneNormal prefers memory above 4 GiB and falls back below.
	ZoneNormal Zone = iota
	// ZoneDMA32 is memory below 4 GiB only (GFP_DMA32).
	ZoneDMA32
)

func (z Zone) String() string {
	switch z {
	case ZoneNormal:
		return "ZONE_NORMAL"
	case ZoneDMA32:
		return "ZONE_DMA32"
	}
	return fmt.Sprintf("Zone(%d)", int(z))
}

// Attr is the CPU's memory type for a mapping.
type Attr int

const (
	// Cached is normal write-back memory: accesses go through the CPU
	// caches.
	Cached Attr = iota
	// Uncached bypasses the caches at the node's UncachedRate (coherent
	// DMA buffers on a non-coherent platform, pgprot_dmacoherent).
	Uncached
)

func (a Attr) String() string {
	switch a {
	case Cached:
		return "cached"
	case Uncached:
		return "uncached"
	}
	return fmt.Sprintf("Attr(%d)", int(a))
}

// Class is what a kernel virtual address points at.
type Class int

const (
	ClassInvalid Class = iota // not mapped
	ClassLinear               // the linear map (kmalloc, page allocator)
	ClassVmalloc              // vmalloc area, page-scattered
	ClassStack                // a kernel stack (VMAP_STACK)
	ClassText                 // kernel text and rodata
	ClassRemap                // a remapped range (vmap with attributes: uncached coherent buffers)
	ClassAnon                 // anonymous user memory: pages placed at first touch (anon.go)
)

func (c Class) String() string {
	switch c {
	case ClassInvalid:
		return "invalid"
	case ClassLinear:
		return "linear"
	case ClassVmalloc:
		return "vmalloc"
	case ClassStack:
		return "stack"
	case ClassText:
		return "text"
	case ClassRemap:
		return "remap"
	case ClassAnon:
		return "anon"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Memory is a machine's physical memory, kernel address space, CPU caches
// and the content of every byte (by version, and with payload, the bytes).
// It is used from one goroutine at a time (the simulation's): it has no
// locks.
type Memory struct {
	spec *platform.Spec
	eng  *sim.Engine
	opt  Options
	// Hooks receives every access (CPU and device), in order, from
	// inside the access: a hook may inspect m (Classify, Latest, ...)
	// but must not make accesses or maintenance of its own.
	Hooks sim.Hooks[Access]
	ev    Access

	// Physical memory (phys.go).
	nodes   []*nodeMem
	devs    []*devMem
	regions []region // DRAM and device memory, by address
	// lastRegion is the region regionOf found last (checked, not
	// trusted).
	lastRegion int
	allocs     map[uint64]uint64 // AllocPages/AllocDevice start → rounded size

	// Kernel address space (kernel.go).
	slabs   map[uint64]*slab  // slab page PA → slab
	partial [][]*slab         // node*slabClasses + class → slabs with room
	large   map[uint64]uint64 // kmalloc of more than half a page: PA → size
	areas   []*area           // vmalloc-space areas, by address
	nextVA  uint64            // vmalloc-space bump pointer
	stacks  map[string]VirtAddr
	textPA  uint64

	// Content (access.go, cache.go, payload.go).
	ver    Version
	dram   spanMap[Version] // what DRAM holds
	latest spanMap[Version] // the latest write: the logical truth (kept only with keep)
	caches []*cache         // one per node: its last-level cache
	// keep says m.latest is kept: every write sets it and every read
	// is checked against it. Until the first access that can make a
	// copy stale (keepLatest says which), no byte can be: the latest
	// write of every byte is its coherent value (the dirty line that
	// holds it, else DRAM), which is what every reader obtains. So
	// m.latest stays empty, a write updates one map less and a read
	// skips the check; keepLatest builds it from DRAM and the dirty
	// lines when keeping it starts.
	keep bool
	// held has cache i's bit (heldBit) set when it may hold a line,
	// clear when it holds none: the accesses that look at every
	// cache skip the empty ones without touching them.
	held    uint64
	journal map[Version][]jseg
	// general makes the CPU accesses and device writes take their
	// general path where a faster one would do: tests run the same
	// accesses both ways and compare.
	general bool
	// hints is how many anonymous pages are marked for a NUMA hinting
	// fault (anon.go): 0, the common case, lets CPU accesses skip the
	// check altogether.
	hints uint64

	// Scratch, reused so that an access allocates nothing.
	// got is what the current reader obtained: spans in address order,
	// disjoint, merged, none of version 0 (gotAdd). A list, not a map:
	// it is built in address order and only walked.
	got []span[Version]
	// dirty holds a coherent device read's dirty cache lines, under
	// m.got's spans before overlay lays them over DRAM's (deviceRead).
	dirty, under []span[Version]
	// view holds the coherent values latestIn walks.
	view []span[Version]
	// wb holds the dirty pieces a flush writes back; wbTop those and a
	// device's write, as writeDRAM takes them; wbRun a run of them.
	wb, wbTop, wbRun []span[Version]
	// linePieces are the spans a fill or a cached write assigns.
	linePieces []span[lineState]
	segs       []PhysRange
	// remote counts, per home node, the bytes of the current CPU access
	// that land on another node than the CPU's (charge).
	remote []uint64
	// remoteAny says remote may hold a count other than 0: while it
	// does not, linearHit has nothing to clear and charge nothing to
	// add (a CPU's accesses to its own node's DRAM, one after another).
	remoteAny bool
	// local counts the bytes of the current CPU access in the CPU's own
	// node's DRAM (charge: those go over its DRAM bus).
	local uint64
	// faults counts the anonymous pages the current access faulted in
	// (present), for their cost (faultTime).
	faults uint64
	// faultEntry is the fixed cost of one anonymous page fault
	// (SetFaultCost); faultOn says faults cost time at all.
	faultEntry sim.Time
	faultOn    bool
	cand       []extent
	candGap    []bool // cand[i] is a run of missed lines, not a prefetch
	gap        []extent
}

// New builds the memory of spec: one DRAM range per NUMA node, a cache per
// node with the node's cache parameters, an empty kernel address space.
//
// Node i's DRAM starts after node i-1's, at the next multiple of 1 GiB;
// node 0 starts at physical 0. Each GPU's VRAM follows as device memory,
// at the next multiple of 1 TiB each. Kernel text occupies 64 KiB of node
// 0 at 16 MiB (where x86-64 loads the kernel) when node 0 is that large.
func New(spec *platform.Spec, eng *sim.Engine, opt Options) (*Memory, error) {
	if spec == nil || len(spec.Nodes) == 0 {
		return nil, fmt.Errorf("mem: a platform with at least one NUMA node: %w", ErrInvalid)
	}
	m := &Memory{
		spec:    spec,
		eng:     eng,
		opt:     opt,
		allocs:  map[uint64]uint64{},
		slabs:   map[uint64]*slab{},
		partial: make([][]*slab, len(spec.Nodes)*slabClasses),
		large:   map[uint64]uint64{},
		nextVA:  uint64(VmallocStart),
		stacks:  map[string]VirtAddr{},
		journal: map[Version][]jseg{},
		remote:  make([]uint64, len(spec.Nodes)),
	}
	if err := m.layout(); err != nil {
		return nil, err
	}
	for i, n := range spec.Nodes {
		c, err := newCache(n)
		if err != nil {
			return nil, fmt.Errorf("mem: node %d: %w", i, err)
		}
		c.bit = heldBit(i)
		m.caches = append(m.caches, c)
	}
	if err := m.placeText(); err != nil {
		return nil, err
	}
	return m, nil
}

// Payload reports whether payload mode is on.
func (m *Memory) Payload() bool { return m.opt.Payload }

// report delivers *a from the memory's own event struct, so that
// delivering allocates nothing.
func (m *Memory) report(a *Access) {
	if !m.Hooks.Active() {
		return
	}
	m.ev = *a
	m.emit()
}

// emit delivers m.ev, the access just made. The accesses on the hot
// paths build it there only when a hook listens (Hooks.Active): with
// none, an access builds no Access it would not return.
func (m *Memory) emit() {
	m.ev.Component = "mem"
	m.ev.Cause = sim.CauseAccess
	m.Hooks.Emit(&m.ev)
}

func (m *Memory) now() sim.Time {
	if m.eng == nil {
		return 0
	}
	return m.eng.Now()
}

// next is the version of a new write.
func (m *Memory) next() Version {
	m.ver++
	return m.ver
}

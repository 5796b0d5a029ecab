package mem

import (
	"fmt"
	"math/bits"
)

// Physical layout.
const (
	// dma32Limit is the end of ZONE_DMA32.
	dma32Limit = 4 << 30
	// nodeAlign is where each next node's DRAM may start.
	nodeAlign = 1 << 30
	// deviceAlign is where each device's memory starts.
	deviceAlign = 1 << 40
	// maxDRAM is the end of what the linear map can cover (x86-64's 64
	// TiB direct map with 4-level paging).
	maxDRAM = 64 << 40
)

// extent is [start, end) of physical addresses.
type extent struct{ start, end uint64 }

// freeList is the free memory of one zone: sorted, disjoint, merged free
// extents, allocated first-fit from the bottom or last-fit from the top.
// It costs memory per free extent, never per page (the counterpart of the
// buddy allocator's free_area lists, without the orders).
type freeList struct {
	lo, hi uint64 // the zone
	free   []extent
	avail  uint64
}

func newFreeList(lo, hi uint64) *freeList {
	return &freeList{lo: lo, hi: hi, free: []extent{{lo, hi}}, avail: hi - lo}
}

// alloc takes size bytes aligned to align (a power of two), the lowest
// such place, or the highest with top.
func (f *freeList) alloc(size, align uint64, top bool) (uint64, bool) {
	if f == nil || size > f.avail {
		return 0, false
	}
	if !top {
		for i, e := range f.free {
			a, ok := alignUp(e.start, align)
			if !ok || a >= e.end || e.end-a < size {
				continue
			}
			f.take(i, a, a+size)
			return a, true
		}
		return 0, false
	}
	for i := len(f.free) - 1; i >= 0; i-- {
		e := f.free[i]
		if e.end-e.start < size {
			continue
		}
		a := alignDown(e.end-size, align)
		if a < e.start {
			continue
		}
		f.take(i, a, a+size)
		return a, true
	}
	return 0, false
}

// take removes [s, e) from free extent i, which holds it.
func (f *freeList) take(i int, s, e uint64) {
	x := f.free[i]
	switch {
	case x.start == s && x.end == e:
		f.free = append(f.free[:i], f.free[i+1:]...)
	case x.start == s:
		f.free[i].start = e
	case x.end == e:
		f.free[i].end = s
	default:
		f.free[i].end = s
		f.free = append(f.free, extent{})
		copy(f.free[i+2:], f.free[i+1:])
		f.free[i+1] = extent{e, x.end}
	}
	f.avail -= e - s
}

// search is the index of the first free extent ending after x.
func (f *freeList) search(x uint64) int {
	lo, hi := 0, len(f.free)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if f.free[h].end <= x {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// release returns [s, e) to the zone; false if part of it is free
// already or outside the zone (a double or bad free).
func (f *freeList) release(s, e uint64) bool {
	if s < f.lo || e > f.hi || s >= e {
		return false
	}
	i := f.search(s)
	if i < len(f.free) && f.free[i].start < e {
		return false
	}
	joinL := i > 0 && f.free[i-1].end == s
	joinR := i < len(f.free) && f.free[i].start == e
	switch {
	case joinL && joinR:
		f.free[i-1].end = f.free[i].end
		f.free = append(f.free[:i], f.free[i+1:]...)
	case joinL:
		f.free[i-1].end = e
	case joinR:
		f.free[i].start = s
	default:
		f.free = append(f.free, extent{})
		copy(f.free[i+1:], f.free[i:])
		f.free[i] = extent{s, e}
	}
	f.avail += e - s
	return true
}

// reserve takes [s, e) if all of it is free.
func (f *freeList) reserve(s, e uint64) bool {
	i := f.search(s)
	if i == len(f.free) || f.free[i].start > s || f.free[i].end < e {
		return false
	}
	f.take(i, s, e)
	return true
}

// nodeMem is one NUMA node's DRAM (pg_data_t): its range and its two
// zones, either of which may be empty (nil).
type nodeMem struct {
	base, size uint64
	low, high  *freeList // below and above 4 GiB
}

// zones are the zones to try for z, in order of preference.
func (n *nodeMem) zones(z Zone) [2]*freeList {
	if z == ZoneDMA32 {
		return [2]*freeList{n.low, nil}
	}
	return [2]*freeList{n.high, n.low}
}

// zoneOf is the zone that holds pa.
func (n *nodeMem) zoneOf(pa uint64) *freeList {
	if pa < dma32Limit {
		return n.low
	}
	return n.high
}

// devMem is a device's own memory (a GPU's VRAM).
type devMem struct {
	name       string
	base, size uint64
	fl         *freeList
}

// region is a piece of the physical address space that is memory.
type region struct {
	start, end uint64
	node       int // -1 for device memory
	dev        int // index into devs, -1 for DRAM
}

// layout places DRAM and device memory.
func (m *Memory) layout() error {
	var base uint64
	for i, n := range m.spec.Nodes {
		if n.DRAM.V <= 0 {
			return fmt.Errorf("mem: node %d: DRAM %d bytes: %w", i, n.DRAM.V, ErrInvalid)
		}
		if n.MemcpyRate.V <= 0 {
			return fmt.Errorf("mem: node %d: memcpy rate %v: %w", i, float64(n.MemcpyRate.V), ErrInvalid)
		}
		size := alignDown(uint64(n.DRAM.V), PageSize)
		if size == 0 || base+size > maxDRAM || base+size < base {
			return fmt.Errorf("mem: node %d: %d bytes of DRAM at %#x do not fit the 64 TiB linear map: %w", i, n.DRAM.V, base, ErrInvalid)
		}
		end := base + size
		nm := &nodeMem{base: base, size: size}
		if base < dma32Limit {
			nm.low = newFreeList(base, min(end, dma32Limit))
		}
		if end > dma32Limit {
			nm.high = newFreeList(max(base, dma32Limit), end)
		}
		m.nodes = append(m.nodes, nm)
		m.regions = append(m.regions, region{start: base, end: end, node: i, dev: -1})
		base, _ = alignUp(end, nodeAlign)
	}
	for _, g := range m.spec.GPUs {
		size := alignDown(uint64(max(g.VRAM.V, 0)), PageSize)
		if size == 0 {
			continue
		}
		b, ok := alignUp(base, deviceAlign)
		if !ok || b+size < b {
			return fmt.Errorf("mem: %s: VRAM does not fit the physical address space: %w", g.Name, ErrInvalid)
		}
		m.regions = append(m.regions, region{start: b, end: b + size, node: -1, dev: len(m.devs)})
		m.devs = append(m.devs, &devMem{name: g.Name, base: b, size: size, fl: newFreeList(b, b+size)})
		base = b + size
	}
	return nil
}

// regionOf is the index of the region holding pa, or -1. Accesses come
// in runs on one region (a NIC's ring and buffers in one node's DRAM),
// and an access asks three or four times (its translation, its home
// node, its remote bytes): the region last found is checked first.
func (m *Memory) regionOf(pa uint64) int {
	if h := m.lastRegion; h < len(m.regions) && m.regions[h].start <= pa && pa < m.regions[h].end {
		return h
	}
	lo, hi := 0, len(m.regions)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if m.regions[h].end <= pa {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo < len(m.regions) && m.regions[lo].start <= pa {
		m.lastRegion = lo
		return lo
	}
	return -1
}

// memRange checks that [pa, pa+size) is memory (DRAM only with dramOnly)
// and returns its end.
func (m *Memory) memRange(pa PhysAddr, size uint64, dramOnly bool) (uint64, error) {
	end, ok := pa.Add(size)
	if !ok {
		return 0, fmt.Errorf("[%v +%#x] wraps: %w", pa, size, ErrBadAddr)
	}
	// Inside the region found last (a device's ring and buffers, one
	// access after another): the loop's one turn, without its call.
	if h := m.lastRegion; h < len(m.regions) && m.regions[h].start <= uint64(pa) && uint64(end) <= m.regions[h].end &&
		(!dramOnly || m.regions[h].node >= 0) {
		return uint64(end), nil
	}
	for x := uint64(pa); x < uint64(end); {
		r := m.regionOf(x)
		if r < 0 || dramOnly && m.regions[r].node < 0 {
			what := "memory"
			if dramOnly {
				what = "DRAM"
			}
			return 0, fmt.Errorf("[%v +%#x]: %v is not %s: %w", pa, size, PhysAddr(x), what, ErrBadAddr)
		}
		x = m.regions[r].end
	}
	return uint64(end), nil
}

// NodeRange is node's DRAM: [base, base+size).
func (m *Memory) NodeRange(node int) (base PhysAddr, size uint64) {
	if node < 0 || node >= len(m.nodes) {
		return 0, 0
	}
	return PhysAddr(m.nodes[node].base), m.nodes[node].size
}

// Nodes is the number of NUMA nodes.
func (m *Memory) Nodes() int { return len(m.nodes) }

// NodeOf is the NUMA node whose DRAM holds pa; false if pa is not DRAM.
func (m *Memory) NodeOf(pa PhysAddr) (int, bool) {
	if r := m.regionOf(uint64(pa)); r >= 0 && m.regions[r].node >= 0 {
		return m.regions[r].node, true
	}
	return 0, false
}

// DeviceRange is the device memory (VRAM) of the GPU named dev:
// [base, base+size); false if it has none.
func (m *Memory) DeviceRange(dev string) (base PhysAddr, size uint64, ok bool) {
	if d := m.dev(dev); d != nil {
		return PhysAddr(d.base), d.size, true
	}
	return 0, 0, false
}

// DeviceOf is the device whose memory holds pa; false if pa is not
// device memory.
func (m *Memory) DeviceOf(pa PhysAddr) (string, bool) {
	if r := m.regionOf(uint64(pa)); r >= 0 && m.regions[r].dev >= 0 {
		return m.devs[m.regions[r].dev].name, true
	}
	return "", false
}

func (m *Memory) dev(name string) *devMem {
	for _, d := range m.devs {
		if d.name == name {
			return d
		}
	}
	return nil
}

// pages rounds size up to whole pages.
func pages(size uint64) (uint64, error) {
	if size == 0 {
		return 0, fmt.Errorf("size 0: %w", ErrInvalid)
	}
	r, ok := alignUp(size, PageSize)
	if !ok {
		return 0, fmt.Errorf("size %#x: %w", size, ErrNoMemory)
	}
	return r, nil
}

// AllocPages allocates size bytes (rounded up to whole pages), physically
// contiguous, on node, from zone. ErrNoMemory when none is left.
// Allocation is first-fit from the lowest address of the zone, so it is
// deterministic; the result is page-aligned (AllocPagesAligned for more).
func (m *Memory) AllocPages(node int, size uint64, zone Zone) (PhysAddr, error) {
	return m.AllocPagesAligned(node, size, PageSize, zone)
}

// AllocPagesAligned is AllocPages with the start aligned to align, a
// power of two of at least a page (alloc_pages of an order gives its
// natural alignment; 64 KiB and 2 MiB are common needs).
func (m *Memory) AllocPagesAligned(node int, size, align uint64, zone Zone) (PhysAddr, error) {
	pa, n, err := m.allocRaw(node, size, align, zone, false)
	if err != nil {
		return 0, fmt.Errorf("alloc_pages(node %d, %#x, %v): %w", node, size, zone, err)
	}
	m.allocs[pa] = n
	return PhysAddr(pa), nil
}

// allocRaw allocates pages without recording them for FreePages.
func (m *Memory) allocRaw(node int, size, align uint64, zone Zone, top bool) (uint64, uint64, error) {
	if node < 0 || node >= len(m.nodes) {
		return 0, 0, fmt.Errorf("no node %d: %w", node, ErrInvalid)
	}
	if zone != ZoneNormal && zone != ZoneDMA32 {
		return 0, 0, fmt.Errorf("%v: %w", zone, ErrInvalid)
	}
	if align < PageSize || bits.OnesCount64(align) != 1 {
		return 0, 0, fmt.Errorf("alignment %#x: %w", align, ErrInvalid)
	}
	n, err := pages(size)
	if err != nil {
		return 0, 0, err
	}
	for _, f := range m.nodes[node].zones(zone) {
		if pa, ok := f.alloc(n, align, top); ok {
			return pa, n, nil
		}
	}
	return 0, 0, ErrNoMemory
}

// freeRaw returns DRAM pages that allocRaw gave.
func (m *Memory) freeRaw(pa, size uint64) bool {
	node, ok := m.NodeOf(PhysAddr(pa))
	if !ok {
		return false
	}
	return m.nodes[node].zoneOf(pa).release(pa, pa+size)
}

// FreePages frees what AllocPages returned (same size). Freeing anything
// else (a different size, a page twice, memory AllocPages did not give)
// is ErrBadAddr and changes nothing.
func (m *Memory) FreePages(pa PhysAddr, size uint64) error {
	n, err := pages(size)
	if err != nil {
		return fmt.Errorf("free_pages(%v, %#x): %w", pa, size, err)
	}
	got, ok := m.allocs[uint64(pa)]
	if _, dram := m.NodeOf(pa); !ok || !dram {
		return fmt.Errorf("free_pages(%v, %#x): not allocated by AllocPages: %w", pa, size, ErrBadAddr)
	}
	if got != n {
		return fmt.Errorf("free_pages(%v, %#x): allocated with %#x bytes: %w", pa, size, got, ErrBadAddr)
	}
	delete(m.allocs, uint64(pa))
	m.freeRaw(uint64(pa), n)
	return nil
}

// AllocDevice allocates size bytes (rounded up to whole pages) of the
// memory of device dev (cudaMalloc's backing store), first-fit, aligned
// to align (a power of two of at least a page; 0 means a page).
func (m *Memory) AllocDevice(dev string, size, align uint64) (PhysAddr, error) {
	if align == 0 {
		align = PageSize
	}
	d := m.dev(dev)
	if d == nil {
		return 0, fmt.Errorf("alloc on %s: no device memory: %w", dev, ErrInvalid)
	}
	if align < PageSize || bits.OnesCount64(align) != 1 {
		return 0, fmt.Errorf("alloc on %s: alignment %#x: %w", dev, align, ErrInvalid)
	}
	n, err := pages(size)
	if err != nil {
		return 0, fmt.Errorf("alloc on %s: %w", dev, err)
	}
	pa, ok := d.fl.alloc(n, align, false)
	if !ok {
		return 0, fmt.Errorf("alloc %#x bytes on %s: %w", size, dev, ErrNoMemory)
	}
	m.allocs[pa] = n
	return PhysAddr(pa), nil
}

// FreeDevice frees what AllocDevice returned (same size).
func (m *Memory) FreeDevice(pa PhysAddr, size uint64) error {
	n, err := pages(size)
	if err != nil {
		return fmt.Errorf("free %v: %w", pa, err)
	}
	r := m.regionOf(uint64(pa))
	got, ok := m.allocs[uint64(pa)]
	if r < 0 || m.regions[r].dev < 0 || !ok {
		return fmt.Errorf("free %v: not allocated by AllocDevice: %w", pa, ErrBadAddr)
	}
	if got != n {
		return fmt.Errorf("free %v, %#x bytes: allocated with %#x: %w", pa, size, got, ErrBadAddr)
	}
	delete(m.allocs, uint64(pa))
	m.devs[m.regions[r].dev].fl.release(uint64(pa), uint64(pa)+n)
	return nil
}

// NodeFree is the free DRAM of node below and above 4 GiB (numastat's
// free pages, by zone).
func (m *Memory) NodeFree(node int) (below4G, above4G uint64) {
	if node < 0 || node >= len(m.nodes) {
		return 0, 0
	}
	n := m.nodes[node]
	if n.low != nil {
		below4G = n.low.avail
	}
	if n.high != nil {
		above4G = n.high.avail
	}
	return below4G, above4G
}

package mem

import (
	"fmt"
	"math/bits"
	"slices"
)

// The kernel's virtual address space, laid out as x86-64 Linux with
// 4-level paging lays it out (Documentation/arch/x86/x86_64/mm.rst).
const (
	// LinearStart is the linear map (page_offset_base): LinearStart+pa
	// is the kernel address of physical address pa, for all DRAM.
	LinearStart VirtAddr = 0xffff888000000000
	// VmallocStart and VmallocEnd bound the vmalloc/ioremap space
	// (vmalloc_base, 32 TiB). Vmalloc areas, kernel stacks (VMAP_STACK)
	// and Remap mappings are all carved from it, each followed by an
	// unmapped guard page.
	VmallocStart VirtAddr = 0xffffc90000000000
	VmallocEnd   VirtAddr = 0xffffe90000000000
	// TextStart is the kernel image (__START_KERNEL_map + 16 MiB).
	TextStart VirtAddr = 0xffffffff81000000
	// TextSize is how much of the kernel image the model backs.
	TextSize = 16 * PageSize
	// ThreadSize is a kernel stack (THREAD_SIZE on x86-64).
	ThreadSize = 4 * PageSize
	// ZeroSizePtr is what kmalloc(0) returns (ZERO_SIZE_PTR): not
	// mapped, and Kfree takes it.
	ZeroSizePtr VirtAddr = 16
	// textPhys is where x86-64 loads the kernel (CONFIG_PHYSICAL_START).
	textPhys = 16 << 20
	// lowReserved is the low memory the kernel never allocates.
	lowReserved = 1 << 20
)

// ---- kmalloc ----

// slabClasses are kmalloc's size classes: 2^0 .. 2^11 bytes, of which
// those below a node's minimum (its cache line, at least 64 B) are
// unused. Larger requests take whole pages.
const slabClasses = 12

// slab is one page cut into objects of one size class (a SLUB slab of
// order 0); used is a bitmap of the objects handed out.
type slab struct {
	pa    uint64
	node  int
	class int
	n     int
	used  uint64
	count int
}

func (s *slab) size() uint64 { return 1 << s.class }

// minClass is the smallest kmalloc class on node: its cache line, so
// that two allocations never share a line (ARCH_DMA_MINALIGN), and at
// least 64 B so that a page holds at most 64 objects.
func (m *Memory) minClass(node int) int {
	return bits.Len64(max(m.caches[node].line, 64)) - 1
}

// Kmalloc allocates size bytes in the linear map on node, aligned to the
// node's cache line at least (ARCH_DMA_MINALIGN), physically contiguous.
// Requests up to half a page come from power-of-two size classes, each
// object aligned to its size; larger ones are whole pages
// (kmalloc_large). Kmalloc(node, 0) is ZeroSizePtr.
func (m *Memory) Kmalloc(node int, size uint64) (VirtAddr, error) {
	if node < 0 || node >= len(m.nodes) {
		return 0, fmt.Errorf("kmalloc(%d, node %d): no such node: %w", size, node, ErrInvalid)
	}
	if size == 0 {
		return ZeroSizePtr, nil
	}
	if size > PageSize/2 {
		pa, n, err := m.allocRaw(node, size, PageSize, ZoneNormal, false)
		if err != nil {
			return 0, fmt.Errorf("kmalloc(%d, node %d): %w", size, node, err)
		}
		m.large[pa] = n
		return m.PhysToVirt(PhysAddr(pa)), nil
	}
	class := max(bits.Len64(size-1), m.minClass(node))
	if class >= slabClasses {
		return m.Kmalloc(node, PageSize)
	}
	list := &m.partial[node*slabClasses+class]
	if len(*list) == 0 {
		pa, _, err := m.allocRaw(node, PageSize, PageSize, ZoneNormal, false)
		if err != nil {
			return 0, fmt.Errorf("kmalloc(%d, node %d): %w", size, node, err)
		}
		s := &slab{pa: pa, node: node, class: class, n: PageSize >> class}
		m.slabs[pa] = s
		*list = append(*list, s)
	}
	s := (*list)[len(*list)-1]
	i := bits.TrailingZeros64(^s.used)
	s.used |= 1 << i
	s.count++
	if s.count == s.n {
		*list = (*list)[:len(*list)-1]
	}
	return m.PhysToVirt(PhysAddr(s.pa + uint64(i)<<class)), nil
}

// Kfree frees a Kmalloc allocation. Freeing anything else, or twice, is
// ErrBadAddr; Kfree(0) and Kfree(ZeroSizePtr) do nothing, as kfree does.
func (m *Memory) Kfree(va VirtAddr) error {
	if va == 0 || va == ZeroSizePtr {
		return nil
	}
	c, pa, _ := m.Classify(va)
	if c != ClassLinear {
		return fmt.Errorf("kfree(%v): %v address, not kmalloc memory: %w", va, c, ErrBadAddr)
	}
	page := alignDown(uint64(pa), PageSize)
	if s := m.slabs[page]; s != nil {
		off := uint64(pa) - page
		i := off >> s.class
		if off&(s.size()-1) != 0 || s.used&(1<<i) == 0 {
			return fmt.Errorf("kfree(%v): not an allocated %d-byte object: %w", va, s.size(), ErrBadAddr)
		}
		list := &m.partial[s.node*slabClasses+s.class]
		if s.count == s.n {
			*list = append(*list, s)
		}
		s.used &^= 1 << i
		s.count--
		if s.count == 0 {
			*list = slices.DeleteFunc(*list, func(x *slab) bool { return x == s })
			delete(m.slabs, page)
			m.freeRaw(page, PageSize)
		}
		return nil
	}
	if n, ok := m.large[uint64(pa)]; ok {
		delete(m.large, uint64(pa))
		m.freeRaw(uint64(pa), n)
		return nil
	}
	return fmt.Errorf("kfree(%v): not a kmalloc allocation: %w", va, ErrBadAddr)
}

// ---- vmalloc space ----

// area is one mapping in the vmalloc space (vm_struct): a vmalloc
// allocation or kernel stack backed by scattered pages, or a Remap of a
// contiguous physical range.
type area struct {
	start  uint64 // page-aligned VA
	npages uint64
	class  Class
	attr   Attr
	pages  []uint64 // vmalloc, stack, anon: the PA of each page (anon: absent until touched)
	pa     uint64   // remap: the PA of the first page
	fault  FaultHandler
	// hint marks anonymous pages made PROT_NONE for NUMA hinting
	// (MarkHint), by page index; nil until the first mark. hintFn
	// is the kernel's handler of the fault a CPU access then takes.
	hint   []bool
	hintFn HintHandler
	// pins counts, per anonymous page, the pins held on it (PinPages:
	// get_user_pages with FOLL_PIN); nil until the first. A pinned
	// page does not migrate. gone marks an area UnmapAnon removed, so
	// that a pin released after it touches nothing.
	pins []uint32
	gone bool
}

func (a *area) end() uint64 { return a.start + a.npages*PageSize }

// phys is the physical address of va inside a, and how many bytes from
// va on are physically contiguous within a, looking no further than
// limit: the scan stops at the first page at or past it, so that a
// caller asking for a small range of a large contiguous area pays for
// the pages it asked for, not for the whole run (a 16 MiB read of a
// 1 GiB buffer walked all 262144 pages).
func (a *area) phys(va, limit uint64) (pa, run uint64) {
	off := va - a.start
	if a.class == ClassRemap {
		return a.pa + off, a.end() - va
	}
	i := off / PageSize
	pa = a.pages[i] + off%PageSize
	run = PageSize - off%PageSize
	for i+1 < a.npages && va+run < limit && a.pages[i+1] == a.pages[i]+PageSize {
		i++
		run += PageSize
	}
	return pa, run
}

// newArea reserves npages of vmalloc space and a guard page after them.
func (m *Memory) newArea(npages uint64, class Class) (*area, error) {
	end := m.nextVA + (npages+1)*PageSize
	if npages >= uint64(VmallocEnd-VmallocStart)/PageSize || end > uint64(VmallocEnd) {
		return nil, fmt.Errorf("vmalloc space exhausted: %w", ErrNoMemory)
	}
	a := &area{start: m.nextVA, npages: npages, class: class}
	m.nextVA = end
	return a, nil
}

// scatteredPages allocates n single pages on node, alternately the
// lowest and the highest free page, so that no two virtually consecutive
// pages are physically adjacent: Linux promises no contiguity for
// vmalloc, and the model makes its absence visible.
func (m *Memory) scatteredPages(node int, n uint64) ([]uint64, error) {
	pp := make([]uint64, 0, n)
	for k := uint64(0); k < n; k++ {
		pa, _, err := m.allocRaw(node, PageSize, PageSize, ZoneNormal, k%2 == 1)
		if err != nil {
			for _, p := range pp {
				m.freeRaw(p, PageSize)
			}
			return nil, err
		}
		pp = append(pp, pa)
	}
	return pp, nil
}

func (m *Memory) insertArea(a *area) {
	// The bump pointer only grows, so areas stay sorted by appending.
	m.areas = append(m.areas, a)
}

// areaAt is the index of the area whose pages hold va, or -1.
func (m *Memory) areaAt(va uint64) int {
	i, _ := slices.BinarySearchFunc(m.areas, va, func(a *area, x uint64) int {
		switch {
		case a.end() <= x:
			return -1
		case a.start > x:
			return 1
		}
		return 0
	})
	if i < len(m.areas) && m.areas[i].start <= va && va < m.areas[i].end() {
		return i
	}
	return -1
}

// Vmalloc allocates size bytes virtually contiguous, backed by pages
// that need not be physically contiguous. Here they never are: the pages
// alternate between the low and the high end of the node's free memory.
func (m *Memory) Vmalloc(node int, size uint64) (VirtAddr, error) {
	n, err := pages(size)
	if err == nil && (node < 0 || node >= len(m.nodes)) {
		err = fmt.Errorf("no node %d: %w", node, ErrInvalid)
	}
	if err != nil {
		return 0, fmt.Errorf("vmalloc(%#x, node %d): %w", size, node, err)
	}
	a, err := m.newArea(n/PageSize, ClassVmalloc)
	if err == nil {
		a.pages, err = m.scatteredPages(node, a.npages)
	}
	if err != nil {
		return 0, fmt.Errorf("vmalloc(%#x, node %d): %w", size, node, err)
	}
	m.insertArea(a)
	return VirtAddr(a.start), nil
}

// Vfree frees a Vmalloc allocation: va must be what Vmalloc returned.
func (m *Memory) Vfree(va VirtAddr) error {
	i := m.areaAt(uint64(va))
	if i < 0 || m.areas[i].class != ClassVmalloc || m.areas[i].start != uint64(va) {
		return fmt.Errorf("vfree(%v): not a vmalloc allocation: %w", va, ErrBadAddr)
	}
	for _, p := range m.areas[i].pages {
		m.freeRaw(p, PageSize)
	}
	m.areas = slices.Delete(m.areas, i, i+1)
	return nil
}

// Remap maps [pa, pa+size) at a new kernel virtual address with attr
// (vmap/ioremap-style; an Uncached remap first flushes the range from
// every cache); the range stays mapped until Unremap. The range
// must be memory; device memory only Uncached (it is not cacheable).
// The address keeps pa's offset in its page, as ioremap's does.
func (m *Memory) Remap(pa PhysAddr, size uint64, attr Attr) (VirtAddr, error) {
	if size == 0 || attr != Cached && attr != Uncached {
		return 0, fmt.Errorf("remap(%v, %#x, %v): %w", pa, size, attr, ErrInvalid)
	}
	end, err := m.memRange(pa, size, attr == Cached)
	if err != nil {
		return 0, fmt.Errorf("remap(%v, %#x, %v): %w", pa, size, attr, err)
	}
	first := alignDown(uint64(pa), PageSize)
	last, _ := alignUp(end, PageSize)
	a, err := m.newArea((last-first)/PageSize, ClassRemap)
	if err != nil {
		return 0, fmt.Errorf("remap(%v, %#x, %v): %w", pa, size, attr, err)
	}
	a.pa, a.attr = first, attr
	m.insertArea(a)
	if attr == Uncached {
		// A cached alias may still hold lines of these pages (dirty ones
		// from their last owner): uncached stores would go to DRAM under
		// them, and a snooping device would read the stale lines. The
		// kernel flushes a range whose memory type it changes
		// (change_page_attr's cpa_flush, arch_dma_prep_coherent); so does
		// Remap. The time is the caller's to charge (an allocation's).
		m.Flush(nil, PhysAddr(first), last-first)
	}
	return VirtAddr(a.start + uint64(pa) - first), nil
}

// Unremap removes a Remap mapping; va is what Remap returned (any
// address in its first page).
func (m *Memory) Unremap(va VirtAddr) error {
	i := m.areaAt(uint64(va))
	if i < 0 || m.areas[i].class != ClassRemap || m.areas[i].start != alignDown(uint64(va), PageSize) {
		return fmt.Errorf("unremap(%v): not a Remap mapping: %w", va, ErrBadAddr)
	}
	m.areas = slices.Delete(m.areas, i, i+1)
	return nil
}

// StackAddr is an address on the kernel stack of the process named proc
// (for the "DMA from the stack" bug); it is mapped and backed by RAM.
// Each name gets its own ThreadSize stack in the vmalloc space, on node
// 0, made on first use; the address is the stack's middle, so that a
// local buffer of up to ThreadSize/2 bytes fits. It is 0 (unmapped) if
// memory is exhausted.
func (m *Memory) StackAddr(proc string) VirtAddr {
	if va, ok := m.stacks[proc]; ok {
		return va
	}
	a, err := m.newArea(ThreadSize/PageSize, ClassStack)
	if err == nil {
		a.pages, err = m.scatteredPages(0, a.npages)
	}
	if err != nil {
		return 0
	}
	m.insertArea(a)
	va := VirtAddr(a.start + ThreadSize/2)
	m.stacks[proc] = va
	return va
}

// TextAddr is an address in kernel text/rodata: TextStart, backed by
// TextSize bytes of node 0.
func (m *Memory) TextAddr() VirtAddr { return TextStart }

// placeText reserves what x86-64 firmware and boot code keep (the first
// MiB: BIOS data, real-mode trampoline; so no allocation is ever at
// physical 0) and backs the kernel image at 16 MiB, when node 0 is that
// large; else the image goes wherever node 0 has room.
func (m *Memory) placeText() error {
	n := m.nodes[0]
	if textPhys+TextSize <= n.base+n.size && n.base <= textPhys {
		n.zoneOf(0).reserve(0, lowReserved)
		if f := n.zoneOf(textPhys); f != nil && f.reserve(textPhys, textPhys+TextSize) {
			m.textPA = textPhys
			return nil
		}
	}
	pa, _, err := m.allocRaw(0, TextSize, PageSize, ZoneDMA32, false)
	if err != nil {
		pa, _, err = m.allocRaw(0, TextSize, PageSize, ZoneNormal, false)
	}
	if err != nil {
		return fmt.Errorf("mem: kernel text needs %d bytes of node 0: %w", TextSize, err)
	}
	m.textPA = pa
	return nil
}

// Classify says what va points at, and its physical address and memory
// type when it is mapped.
func (m *Memory) Classify(va VirtAddr) (c Class, pa PhysAddr, attr Attr) {
	v := uint64(va)
	switch {
	case va >= LinearStart && v-uint64(LinearStart) < maxDRAM:
		p := PhysAddr(v - uint64(LinearStart))
		if _, ok := m.NodeOf(p); ok {
			return ClassLinear, p, Cached
		}
	case va >= VmallocStart && va < VmallocEnd:
		if i := m.areaAt(v); i >= 0 {
			a := m.areas[i]
			if a.class == ClassAnon && a.pages[(v-a.start)/PageSize] == absent {
				return ClassAnon, 0, Cached
			}
			p, _ := a.phys(v, v+1)
			return a.class, PhysAddr(p), a.attr
		}
	case va >= TextStart && v-uint64(TextStart) < TextSize:
		return ClassText, PhysAddr(m.textPA + v - uint64(TextStart)), Cached
	}
	return ClassInvalid, 0, Cached
}

// Translate is the physical layout of [va, va+size): its physically
// contiguous pieces in order, its class and memory type. Every byte must
// be mapped, by one mapping (an area's guard page ends it), else
// ErrBadAddr.
//
// An anonymous page not yet touched is not faulted in: Translate is
// ErrNotPresent there (a pinner calls Populate first, as
// get_user_pages faults pages in).
func (m *Memory) Translate(va VirtAddr, size uint64) ([]PhysRange, Class, Attr, error) {
	segs, c, attr, err := m.translate(va, size, nil, noFault)
	return segs, c, attr, err
}

// translate appends the pieces of [va, va+size) to dst. An absent
// anonymous page is faulted in for a CPU of node toucher (-1: no CPU,
// a pin), or is ErrNotPresent with noFault.
func (m *Memory) translate(va VirtAddr, size uint64, dst []PhysRange, toucher int) ([]PhysRange, Class, Attr, error) {
	end, ok := va.Add(size)
	if !ok || size == 0 {
		return dst, ClassInvalid, Cached, fmt.Errorf("[%v +%#x]: empty or wrapping range: %w", va, size, ErrBadAddr)
	}
	c, pa, attr := m.Classify(va)
	bad := func(at VirtAddr) error {
		return fmt.Errorf("[%v +%#x]: %v is not mapped in the same %v mapping: %w", va, size, at, c, ErrBadAddr)
	}
	switch c {
	case ClassInvalid:
		return dst, c, attr, fmt.Errorf("[%v +%#x]: %v is not mapped: %w", va, size, va, ErrBadAddr)
	case ClassLinear:
		if _, err := m.memRange(pa, size, true); err != nil {
			return dst, c, attr, fmt.Errorf("linear map [%v +%#x]: %w", va, size, err)
		}
		return append(dst, PhysRange{pa, size}), c, attr, nil
	case ClassText:
		if uint64(end-TextStart) > TextSize {
			return dst, c, attr, bad(TextStart + TextSize)
		}
		return append(dst, PhysRange{pa, size}), c, attr, nil
	}
	a := m.areas[m.areaAt(uint64(va))]
	if uint64(end) > a.end() {
		return dst, c, attr, bad(VirtAddr(a.end()))
	}
	if a.class == ClassAnon {
		for x := alignDown(uint64(va), PageSize); x < uint64(end); x += PageSize {
			if err := m.present(a, x, toucher); err != nil {
				return dst, c, attr, fmt.Errorf("[%v +%#x]: %w", va, size, err)
			}
		}
	}
	for x := uint64(va); x < uint64(end); {
		p, run := a.phys(x, uint64(end))
		run = min(run, uint64(end)-x)
		dst = append(dst, PhysRange{PhysAddr(p), run})
		x += run
	}
	return dst, c, attr, nil
}

// VirtToPhys is virt_to_phys: valid for the linear map only.
func (m *Memory) VirtToPhys(va VirtAddr) (PhysAddr, error) {
	c, pa, _ := m.Classify(va)
	if c != ClassLinear {
		return 0, fmt.Errorf("virt_to_phys(%v): %v address, not the linear map: %w", va, c, ErrBadAddr)
	}
	return pa, nil
}

// PhysToVirt is the linear-map address of pa (phys_to_virt): arithmetic,
// as in the kernel; it is mapped only if pa is DRAM.
func (m *Memory) PhysToVirt(pa PhysAddr) VirtAddr { return LinearStart + VirtAddr(pa) }

package mem

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// absent marks a page of an anonymous area that nothing has touched.
const absent = ^uint64(0)

// noFault is the toucher of a translation that must not fault pages in.
const noFault = -2

// FaultHandler places an absent page of an anonymous area: va is the
// page (page-aligned), node the NUMA node of the CPU touching it, -1 for
// a touch that is no CPU's (a pin through get_user_pages: Populate with
// node -1). It returns a page it allocated with AllocPages(n, PageSize,
// ...), which the area then owns (UnmapAnon frees it), or an error, which
// fails the access. It must not touch memory itself.
//
// It is the seam of the kernel's page fault (do_anonymous_page →
// alloc_pages_mpol): the kernel installs one per mapping, and it picks
// the node by the mapping's or the process's memory policy.
type FaultHandler func(va VirtAddr, node int) (PhysAddr, error)

// MapAnon reserves size bytes (rounded up to pages) of anonymous memory
// in the vmalloc space (the model's user addresses are kernel addresses,
// as Vmalloc's are for malloc): no page is there until the first CPU
// access or Populate, which calls fault to place it. A placed page reads
// as zeros (clear_page), its content version 0; placing it costs the
// faulting thread what SetFaultCost says (nothing without it).
func (m *Memory) MapAnon(size uint64, fault FaultHandler) (VirtAddr, error) {
	n, err := pages(size)
	if err == nil && fault == nil {
		err = fmt.Errorf("no fault handler: %w", ErrInvalid)
	}
	if err != nil {
		return 0, fmt.Errorf("mmap anon(%#x): %w", size, err)
	}
	a, err := m.newArea(n/PageSize, ClassAnon)
	if err != nil {
		return 0, fmt.Errorf("mmap anon(%#x): %w", size, err)
	}
	a.pages = make([]uint64, a.npages)
	for i := range a.pages {
		a.pages[i] = absent
	}
	a.fault = fault
	m.insertArea(a)
	return VirtAddr(a.start), nil
}

// UnmapAnon frees an anonymous area: va is what MapAnon returned. Its
// placed pages go back to the allocator.
func (m *Memory) UnmapAnon(va VirtAddr) error {
	i := m.areaAt(uint64(va))
	if i < 0 || m.areas[i].class != ClassAnon || m.areas[i].start != uint64(va) {
		return fmt.Errorf("munmap(%v): not an anonymous mapping: %w", va, ErrBadAddr)
	}
	var errs []error
	for _, p := range m.areas[i].pages {
		if p != absent {
			if err := m.FreePages(PhysAddr(p), PageSize); err != nil {
				errs = append(errs, err)
			}
		}
	}
	m.hints -= countHints(m.areas[i].hint)
	m.areas[i].gone = true
	m.areas = slices.Delete(m.areas, i, i+1)
	if len(errs) > 0 {
		return fmt.Errorf("munmap(%v): %w", va, errs[0])
	}
	return nil
}

// anonArea is the anonymous area holding va.
func (m *Memory) anonArea(call string, va VirtAddr) (*area, error) {
	i := m.areaAt(uint64(va))
	if i < 0 || m.areas[i].class != ClassAnon {
		return nil, fmt.Errorf("%s(%v): not anonymous memory: %w", call, va, ErrBadAddr)
	}
	return m.areas[i], nil
}

// present places the page of a holding x if it is absent (a page fault
// by a CPU of node toucher).
func (m *Memory) present(a *area, x uint64, toucher int) error {
	i := (x - a.start) / PageSize
	if a.pages[i] != absent {
		return nil
	}
	va := VirtAddr(a.start + i*PageSize)
	if toucher == noFault {
		return fmt.Errorf("%v: %w", va, ErrNotPresent)
	}
	pa, err := a.fault(va, toucher)
	if err != nil {
		return fmt.Errorf("page fault at %v: %w", va, err)
	}
	if got := m.allocs[uint64(pa)]; got != PageSize {
		return fmt.Errorf("page fault at %v: handler gave %v, not a page from AllocPages: %w", va, pa, ErrBadAddr)
	}
	m.clearPage(uint64(pa))
	a.pages[i] = uint64(pa)
	m.faults++
	return nil
}

// SetFaultCost makes every anonymous page fault a CPU access or a
// FaultIn takes cost the faulting thread time (Linux's
// do_anonymous_page): entry, the fixed part (the trap and return,
// the page allocation, the PTE and its accounting), then the zeroing of
// the page (clear_page) at the faulting CPU's node's streaming store
// rate (platform.Node.StreamCopyRate). Zeroing is the larger part on
// most machines. Without a call, faults cost nothing (the caller
// models them, or not).
func (m *Memory) SetFaultCost(entry sim.Time) {
	m.faultEntry, m.faultOn = entry, true
}

// faultTime is what n page faults by a CPU of node cost.
func (m *Memory) faultTime(node int, n uint64) sim.Time {
	if !m.faultOn || n == 0 {
		return 0
	}
	if node < 0 || node >= len(m.spec.Nodes) {
		node = 0
	}
	one := m.faultEntry + sim.TransferTime(PageSize, float64(m.spec.Nodes[node].StreamCopyRate()))
	return sim.Time(n) * one
}

// FaultIn is Populate by thread p, which pays each fault's cost
// (SetFaultCost): get_user_pages or MAP_POPULATE run in p's context.
// A nil p faults pages in for free.
func (m *Memory) FaultIn(p *sim.Proc, va VirtAddr, size uint64, node int) error {
	m.faults = 0
	err := m.Populate(va, size, node)
	if n := m.faults; p != nil && n > 0 {
		p.Sleep(m.faultTime(node, n))
	}
	return err
}

// clearPage makes the page at pa read as zeros: what its last owner left
// in DRAM and in any cache is gone.
func (m *Memory) clearPage(pa uint64) {
	for _, c := range m.caches {
		if c.lines.len() > 0 {
			m.discard(c, pa, pa+PageSize)
		}
	}
	m.dram.set(pa, pa+PageSize, 0)
	if m.keep {
		m.latest.set(pa, pa+PageSize, 0)
	}
}

// Populate faults in every absent page of [va, va+size) for a CPU of
// node (-1: no CPU), as get_user_pages does before it pins and as
// MAP_POPULATE does; pages already placed stay where they are. A
// failure leaves the pages before it placed.
func (m *Memory) Populate(va VirtAddr, size uint64, node int) error {
	if node < -1 || node >= len(m.nodes) {
		return fmt.Errorf("populate(%v, %#x): node %d: %w", va, size, node, ErrInvalid)
	}
	if _, _, _, err := m.translate(va, size, nil, node); err != nil {
		return fmt.Errorf("populate: %w", err)
	}
	return nil
}

// PageNode is where the page holding va lives: its node, and false when
// it is an anonymous page not yet placed. Memory that is not DRAM, or
// not mapped, is ErrBadAddr.
func (m *Memory) PageNode(va VirtAddr) (node int, present bool, err error) {
	// An anonymous page directly: Classify would also measure the
	// physically contiguous run from va, which costs the run's length.
	if i := m.areaAt(uint64(va)); i >= 0 && m.areas[i].class == ClassAnon {
		a := m.areas[i]
		pa := a.pages[(uint64(va)-a.start)/PageSize]
		if pa == absent {
			return -1, false, nil
		}
		if n, ok := m.NodeOf(PhysAddr(pa)); ok {
			return n, true, nil
		}
	}
	c, pa, _ := m.Classify(va)
	if c == ClassAnon && pa == 0 {
		return -1, false, nil
	}
	if c == ClassInvalid {
		return -1, false, fmt.Errorf("page node of %v: not mapped: %w", va, ErrBadAddr)
	}
	n, ok := m.NodeOf(pa)
	if !ok {
		return -1, false, fmt.Errorf("page node of %v: %v is not DRAM: %w", va, pa, ErrBadAddr)
	}
	return n, true, nil
}

// ---- page pins (get_user_pages with FOLL_PIN) ----

// PagePin is one pin of the anonymous pages of a range, as
// pin_user_pages takes it for a driver that will DMA to them
// (cuMemHostRegister, VFIO's MAP_DMA, ibv_reg_mr): until Release, the
// pages do not migrate (MovePage: ErrBusy), because the device holds
// their physical addresses. Pages of other memory (vmalloc, remaps)
// never migrate and are not counted.
type PagePin struct {
	m     *Memory
	parts []pinPart
}

type pinPart struct {
	a           *area
	first, npgs uint64
}

// PinPages pins every placed anonymous page of [va, va+size), which
// may span several areas; absent pages are skipped (Populate first, as
// get_user_pages faults them in before it pins). Memory no area maps
// (the linear map) is not counted: it never migrates. A range that
// overflows is ErrBadAddr.
func (m *Memory) PinPages(va VirtAddr, size uint64) (*PagePin, error) {
	end, ok := va.Add(size)
	if !ok {
		return nil, fmt.Errorf("pin_user_pages(%v, %#x): %w", va, size, ErrBadAddr)
	}
	pin := &PagePin{m: m}
	for x := alignDown(uint64(va), PageSize); x < uint64(end); {
		i := m.areaAt(x)
		if i < 0 {
			// Not an area's (the linear map): such memory never
			// migrates; go on at the next area, if any.
			j, _ := slices.BinarySearchFunc(m.areas, x, func(a *area, x uint64) int { return cmp.Compare(a.start, x) })
			if j == len(m.areas) {
				break
			}
			x = m.areas[j].start
			continue
		}
		a := m.areas[i]
		stop := min(a.end(), uint64(end))
		if a.class == ClassAnon {
			// One part per run of placed pages: absent ones (none after
			// Populate) are not pinned, so Release leaves them alone.
			for k := (x - a.start) / PageSize; k < (stop-a.start+PageSize-1)/PageSize; k++ {
				if a.pages[k] == absent {
					continue
				}
				if n := len(pin.parts); n > 0 && pin.parts[n-1].a == a && pin.parts[n-1].first+pin.parts[n-1].npgs == k {
					pin.parts[n-1].npgs++
				} else {
					pin.parts = append(pin.parts, pinPart{a, k, 1})
				}
			}
		}
		x = alignDown(stop+PageSize-1, PageSize)
	}
	for _, p := range pin.parts {
		if p.a.pins == nil {
			p.a.pins = make([]uint32, p.a.npages)
		}
		for k := p.first; k < p.first+p.npgs; k++ {
			p.a.pins[k]++
		}
	}
	return pin, nil
}

// Release drops the pin (unpin_user_pages): each page's count falls,
// and a page with none left may migrate again. Releasing twice, or nil,
// does nothing; pages of an area unmapped meanwhile are gone already.
func (pin *PagePin) Release() {
	if pin == nil {
		return
	}
	for _, p := range pin.parts {
		if p.a.gone {
			continue
		}
		for k := p.first; k < p.first+p.npgs; k++ {
			if p.a.pins[k] > 0 {
				p.a.pins[k]--
			}
		}
	}
	pin.parts = nil
}

// Pinned is how many pins the anonymous page holding va has (0 for
// any other memory).
func (m *Memory) Pinned(va VirtAddr) int {
	i := m.areaAt(uint64(va))
	if i < 0 || m.areas[i].pins == nil {
		return 0
	}
	a := m.areas[i]
	return int(a.pins[(uint64(va)-a.start)/PageSize])
}

// MovePage migrates the placed anonymous page holding va to dst, a page
// the caller allocated with AllocPages (on the target node), and returns
// the page it left, which the caller frees with FreePages (migrate_pages
// → move_to_new_folio: copy, then remap). The content moves as it is:
// every cache's lines of the old page are written back and dropped
// first, then DRAM's and the latest versions (and, in payload mode,
// their bytes) are carried to dst, so a later read gets the latest
// version, never a stale one, and the versions are the ones the writers
// made. p, a CPU on node, pays one page of CPU copy from the old
// page's node to the new one's, as CopyPhys charges it (Options.CopyTime,
// from DRAM, or a remote access's cost). Migration is the kernel's, not an access: no Access is
// reported.
func (m *Memory) MovePage(p *sim.Proc, node int, va VirtAddr, dst PhysAddr) (PhysAddr, error) {
	if node < 0 || node >= len(m.nodes) {
		return 0, fmt.Errorf("migrate %v: CPU of node %d: %w", va, node, ErrInvalid)
	}
	a, err := m.anonArea("migrate", va)
	if err != nil {
		return 0, err
	}
	i := (uint64(va) - a.start) / PageSize
	src := a.pages[i]
	if src == absent {
		return 0, fmt.Errorf("migrate %v: %w", va, ErrNotPresent)
	}
	if uint64(dst) == src {
		return 0, fmt.Errorf("migrate %v onto its own page %v: %w", va, dst, ErrInvalid)
	}
	if a.pins != nil && a.pins[i] > 0 {
		return 0, fmt.Errorf("migrate %v: %d pin(s): %w", va, a.pins[i], ErrBusy)
	}
	if m.allocs[uint64(dst)] != PageSize {
		return 0, fmt.Errorf("migrate %v to %v: not a page from AllocPages: %w", va, dst, ErrBadAddr)
	}
	d := uint64(dst)
	for _, c := range m.caches {
		if c.lines.len() > 0 {
			m.flush(c, src, src+PageSize)
			m.discard(c, d, d+PageSize)
		}
	}
	m.carry(&m.dram, src, d)
	if m.keep {
		m.carry(&m.latest, src, d)
	}
	a.pages[i] = d
	// The new page table entry is the VMA's normal protection
	// (remove_migration_pte): a NUMA hint on the old one is gone.
	m.clearHint(a, i)
	m.invariants()
	if p != nil {
		m.copyCost(p, node, PhysAddr(src), dst, PageSize, false)
	}
	return PhysAddr(src), nil
}

// carry copies the versions of the page at src to the page at dst in
// sm, and in payload mode gives each version its bytes at dst too.
func (m *Memory) carry(sm *spanMap[Version], src, dst uint64) {
	type piece struct {
		s, e uint64
		v    Version
	}
	var ps []piece
	sm.each(src, src+PageSize, func(s, e uint64, v Version) bool {
		ps = append(ps, piece{s, e, v})
		return true
	})
	sm.set(dst, dst+PageSize, 0)
	for _, x := range ps {
		sm.set(x.s-src+dst, x.e-src+dst, x.v)
		if !m.opt.Payload || x.v == 0 {
			continue
		}
		at := x.s - src + dst
		if m.journalHas(x.v, at, x.e-x.s) {
			continue
		}
		buf := make([]byte, x.e-x.s)
		for _, j := range m.journal[x.v] {
			js, je := j.pa, j.pa+uint64(len(j.data))
			if lo, hi := max(x.s, js), min(x.e, je); lo < hi {
				copy(buf[lo-x.s:hi-x.s], j.data[lo-js:hi-js])
			}
		}
		m.journal[x.v] = append(m.journal[x.v], jseg{at, buf})
	}
}

// journalHas reports whether version v already has bytes for [at, at+n).
func (m *Memory) journalHas(v Version, at, n uint64) bool {
	for _, j := range m.journal[v] {
		if j.pa <= at && at+n <= j.pa+uint64(len(j.data)) {
			return true
		}
	}
	return false
}

// Distance is the SLIT distance between nodes a and b (10 local).
func (m *Memory) Distance(a, b int) int { return m.spec.Distance(a, b) }

// NodeCPUs is the number of CPUs (cores) of node, 1 when the platform
// leaves it unset.
func (m *Memory) NodeCPUs(node int) int {
	if node < 0 || node >= len(m.nodes) {
		return 0
	}
	return max(m.spec.Nodes[node].Cores.V, 1)
}

// ---- NUMA hinting faults (the seam of automatic NUMA balancing) ----

// HintHandler is the kernel's NUMA hinting fault handler (do_numa_page
// in mm/memory.c): a CPU of node, in process p, accessed the page at va
// (page-aligned) that MarkHint had made PROT_NONE. The mark is already
// gone when it runs: whatever it does, the access then goes on. It may
// migrate the page (MovePage) and spend p's time (the fault, the copy);
// the access takes effect after it returns. p is nil for an access made
// outside any process.
type HintHandler func(p *sim.Proc, node int, va VirtAddr)

// SetHintHandler installs h as the NUMA hinting fault handler of the
// anonymous area that MapAnon returned at va (nil removes it; marked
// pages then fault into nothing).
func (m *Memory) SetHintHandler(va VirtAddr, h HintHandler) error {
	i := m.areaAt(uint64(va))
	if i < 0 || m.areas[i].class != ClassAnon || m.areas[i].start != uint64(va) {
		return fmt.Errorf("numa hint handler at %v: not an anonymous mapping: %w", va, ErrBadAddr)
	}
	m.areas[i].hintFn = h
	return nil
}

// MarkHint is change_prot_numa over [va, va+size) of one anonymous
// area (mm/mprotect.c, change_pte_range with MM_CP_PROT_NUMA): every
// placed page that is not marked yet and that mark accepts (told the
// page and its node; nil accepts all) is made PROT_NONE, so that the
// next CPU access to it takes a NUMA hinting fault. Absent pages and
// pages already marked are skipped, as change_pte_range skips them. It
// returns the pages it marked (the kernel's nr_pte_updates). Marking
// costs no time here: the scanner's cost is the caller's to model.
func (m *Memory) MarkHint(va VirtAddr, size uint64, mark func(va VirtAddr, node int) bool) (uint64, error) {
	a, err := m.anonArea("change_prot_numa", va)
	if err != nil {
		return 0, err
	}
	end, ok := va.Add(size)
	if !ok || uint64(end) > a.end() {
		return 0, fmt.Errorf("change_prot_numa(%v, %#x): beyond the mapping: %w", va, size, ErrBadAddr)
	}
	var n uint64
	for x := alignDown(uint64(va), PageSize); x < uint64(end); x += PageSize {
		i := (x - a.start) / PageSize
		if a.pages[i] == absent || a.hint != nil && a.hint[i] {
			continue
		}
		if mark != nil {
			node, _ := m.NodeOf(PhysAddr(a.pages[i]))
			if !mark(VirtAddr(x), node) {
				continue
			}
		}
		if a.hint == nil {
			a.hint = make([]bool, a.npages)
		}
		a.hint[i] = true
		n++
	}
	m.hints += n
	return n, nil
}

// Hinted reports whether the anonymous page holding va is marked for a
// NUMA hinting fault.
func (m *Memory) Hinted(va VirtAddr) bool {
	i := m.areaAt(uint64(va))
	if i < 0 || m.areas[i].class != ClassAnon || m.areas[i].hint == nil {
		return false
	}
	a := m.areas[i]
	return a.hint[(uint64(va)-a.start)/PageSize]
}

// clearHint removes page i's mark, if any.
func (m *Memory) clearHint(a *area, i uint64) {
	if a.hint != nil && a.hint[i] {
		a.hint[i] = false
		m.hints--
	}
}

// hintFaults takes the NUMA hinting faults of a CPU access by p (a CPU
// of node) to [va, va+size), before the access itself: each marked
// page, in address order, loses its mark and goes to its area's
// handler, as the faulting instruction would trap, the kernel handle
// it and the instruction restart. A range that is not one anonymous
// area's is left to the access to fail.
func (m *Memory) hintFaults(p *sim.Proc, node int, va VirtAddr, size uint64) {
	end, ok := va.Add(size)
	if !ok {
		return
	}
	i := m.areaAt(uint64(va))
	if i < 0 || m.areas[i].class != ClassAnon || m.areas[i].hint == nil || uint64(end) > m.areas[i].end() {
		return
	}
	a := m.areas[i]
	for x := alignDown(uint64(va), PageSize); x < uint64(end); x += PageSize {
		k := (x - a.start) / PageSize
		if !a.hint[k] {
			continue
		}
		m.clearHint(a, k)
		if a.hintFn != nil {
			// The handler may sleep: another process may unmap the
			// area meanwhile, so look it up again after.
			a.hintFn(p, node, VirtAddr(x))
			if j := m.areaAt(uint64(va)); j < 0 || m.areas[j] != a {
				return
			}
		}
	}
}

// countHints is how many pages of hint are marked.
func countHints(hint []bool) uint64 {
	var n uint64
	for _, h := range hint {
		if h {
			n++
		}
	}
	return n
}

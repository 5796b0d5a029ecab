package iommu

import "github.com/dmalab/dmalab/mem"

// IOTLB is an IOMMU unit's translation cache: set-associative with LRU
// replacement, tagged by domain. An entry holds one leaf of a domain's
// table whatever its size, so a 2 MiB page takes one entry where 4 KiB
// pages would take 512: huge pages miss less.
type IOTLB struct {
	sets, ways int
	// bits is log2(sets) when sets is a power of two.
	bits  uint
	e     []tlbEntry
	clock uint64
	stats IOTLBStats
}

// IOTLBStats counts lookups.
type IOTLBStats struct {
	Hits, Misses, Invalidations uint64
}

type tlbEntry struct {
	used  uint64 // LRU stamp; 0 for an invalid entry
	dom   int
	shift uint
	tag   uint64 // iova >> shift
	pa    mem.PhysAddr
	prot  Prot
}

func newIOTLB(entries, ways int) *IOTLB {
	t := &IOTLB{sets: entries / ways, ways: ways, e: make([]tlbEntry, entries)}
	for 1<<t.bits < t.sets {
		t.bits++
	}
	return t
}

// Stats are the counts so far.
func (t *IOTLB) Stats() IOTLBStats { return t.stats }

// setIndex is the set of the entry tagged tag (a page number in the
// entry's own page size) for domain dom: the page number's bits folded
// by XOR in slices as wide as the index, XORed with the domain id.
// Vendors do not publish their IOTLB's index function. Indexing each
// page size by its own page number keeps 2 MiB and 1 GiB entries from
// aliasing into one set (an index from 4 KiB page-number bits would put
// every 2 MiB-aligned page in set 0); folding the upper bits in keeps
// IOVAs at a power-of-two stride apart (dma-iommu aligns each IOVA to
// its size: the first pages of 64 KiB buffers are 16 pages apart) from
// sharing a set; the domain id spreads domains that use the same IOVAs
// (each device's allocator starts at the same top).
func (t *IOTLB) setIndex(dom int, tag uint64) int {
	x := tag ^ uint64(dom)
	if t.sets&(t.sets-1) == 0 {
		if t.bits == 0 {
			return 0
		}
		h := uint64(0)
		for ; x != 0; x >>= t.bits {
			h ^= x
		}
		return int(h & uint64(t.sets-1))
	}
	return int((x ^ x>>16 ^ x>>32) % uint64(t.sets))
}

func (t *IOTLB) set(dom int, tag uint64) []tlbEntry {
	s := t.setIndex(dom, tag)
	return t.e[s*t.ways : (s+1)*t.ways]
}

// lookup finds the entry translating iova for dom, probing each page
// size (hardware keeps one array per size or tags entries with theirs).
func (t *IOTLB) lookup(dom int, iova uint64) *tlbEntry {
	for i := len(pageSizes) - 1; i >= 0; i-- {
		shift := levelShift[pageSizes[i].level]
		tag := iova >> shift
		set := t.set(dom, tag)
		for j := range set {
			x := &set[j]
			if x.used != 0 && x.dom == dom && x.shift == shift && x.tag == tag {
				t.clock++
				x.used = t.clock
				t.stats.Hits++
				return x
			}
		}
	}
	t.stats.Misses++
	return nil
}

// insert caches the leaf mapping iova, replacing the set's least
// recently used entry.
func (t *IOTLB) insert(dom int, iova uint64, shift uint, pa mem.PhysAddr, prot Prot) {
	tag := iova >> shift
	set := t.set(dom, tag)
	v := &set[0]
	for j := range set {
		if set[j].used < v.used {
			v = &set[j]
		}
	}
	t.clock++
	*v = tlbEntry{used: t.clock, dom: dom, shift: shift, tag: tag, pa: pa, prot: prot}
}

// invalidateRange drops dom's entries overlapping [iova, iova+size).
func (t *IOTLB) invalidateRange(dom int, iova, size uint64) {
	t.stats.Invalidations++
	end := iova + size
	for i := range t.e {
		x := &t.e[i]
		if x.used == 0 || x.dom != dom {
			continue
		}
		s := x.tag << x.shift
		if s < end && iova < s+1<<x.shift {
			*x = tlbEntry{}
		}
	}
}

// invalidateDomain drops every entry of dom (a domain-selective flush,
// iommu_flush_iotlb_all).
func (t *IOTLB) invalidateDomain(dom int) {
	t.stats.Invalidations++
	for i := range t.e {
		if t.e[i].dom == dom {
			t.e[i] = tlbEntry{}
		}
	}
}

// walkCache is the unit's paging-structure caches (VT-d's PML4, PDPE
// and PDE caches; the SMMU's walk caches): per level above the leaves,
// the non-leaf entries of recent walks, tagged by domain and the IOVA
// bits that select them, fully associative with LRU replacement. A walk
// starts below the deepest level it finds cached, so a 4 KiB miss whose
// 2 MiB region was walked before reads one table, not four.
type walkCache struct {
	lv    [levels - 1][]pscEntry
	clock uint64
}

type pscEntry struct {
	used uint64 // LRU stamp; 0 for an invalid entry
	dom  int
	tag  uint64 // iova >> levelShift[level]
}

func newWalkCache(sizes [levels - 1]int) *walkCache {
	w := &walkCache{}
	for l, n := range sizes {
		w.lv[l] = make([]pscEntry, max(n, 0))
	}
	return w
}

// start is the level a walk for iova in dom begins reading at: one
// below the deepest cached non-leaf entry, 0 when none is cached.
func (w *walkCache) start(dom int, iova uint64) int {
	for l := len(w.lv) - 1; l >= 0; l-- {
		tag := iova >> levelShift[l]
		for i := range w.lv[l] {
			x := &w.lv[l][i]
			if x.used != 0 && x.dom == dom && x.tag == tag {
				w.clock++
				x.used = w.clock
				return l + 1
			}
		}
	}
	return 0
}

// fill caches the non-leaf entries of levels [from, to) a walk for iova
// read.
func (w *walkCache) fill(dom int, iova uint64, from, to int) {
	for l := from; l < to && l < len(w.lv); l++ {
		set := w.lv[l]
		if len(set) == 0 {
			continue
		}
		tag := iova >> levelShift[l]
		v := &set[0]
		for i := range set {
			if set[i].used != 0 && set[i].dom == dom && set[i].tag == tag {
				v = &set[i]
				break
			}
			if set[i].used < v.used {
				v = &set[i]
			}
		}
		w.clock++
		*v = pscEntry{used: w.clock, dom: dom, tag: tag}
	}
}

// invalidateDomain drops every entry of dom: a domain-selective
// invalidation flushes the paging-structure caches with the IOTLB.
func (w *walkCache) invalidateDomain(dom int) {
	for l := range w.lv {
		for i := range w.lv[l] {
			if w.lv[l][i].dom == dom {
				w.lv[l][i] = pscEntry{}
			}
		}
	}
}

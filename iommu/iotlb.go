package iommu

import "github.com/dmalab/dmalab/mem"

// IOTLB is an IOMMU unit's translation cache: set-associative with LRU
// replacement, tagged by domain. An entry holds one leaf of a domain's
// table whatever its size, so a 2 MiB page takes one entry where 4 KiB
// pages would take 512: huge pages miss less.
type IOTLB struct {
	sets, ways int
	e          []tlbEntry
	clock      uint64
	stats      IOTLBStats
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
	return &IOTLB{sets: entries / ways, ways: ways, e: make([]tlbEntry, entries)}
}

// Stats are the counts so far.
func (t *IOTLB) Stats() IOTLBStats { return t.stats }

func (t *IOTLB) set(dom int, tag uint64) []tlbEntry {
	s := int((tag ^ uint64(dom)*0x9e3779b97f4a7c15) % uint64(t.sets))
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

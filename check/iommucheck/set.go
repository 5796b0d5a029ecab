package iommucheck

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// call is a call with its time and process: what an origin names.
// Without the DMA layer's name for it (call empty) it is the domain's
// own iommu_map or iommu_unmap of the range given, whose name is only
// made when a diagnostic needs it: most mappings never appear in one.
type call struct {
	call string
	t    sim.Time
	proc string

	unmap bool
	iova  mem.DMAAddr
	pa    mem.PhysAddr
	size  uint64
	prot  iommu.Prot
}

// name is the call as a C programmer reads it, in domain d.
func (c *call) name(d *domainState) string {
	switch {
	case c.call != "":
		return c.call
	case c.unmap:
		return fmt.Sprintf("iommu_unmap(%s domain %d, %v, %#x)", d.unit, d.id, c.iova, c.size)
	}
	return fmt.Sprintf("iommu_map(%s domain %d, %v, %v, %#x, %v)", d.unit, d.id, c.iova, c.pa, c.size, c.prot)
}

// origin is the call with its time and process, as a diagnostic's
// Origin holds it.
func (c *call) origin(d *domainState) string { return check.Origin(c.name(d), c.t, c.proc) }

// rec is one mapping of a domain: [start, end) of IOVA space to pa with
// prot, made for dev (empty for iommu_map called directly) by made, and
// once gone, removed by undone.
type rec struct {
	start, end uint64
	pa         mem.PhysAddr
	prot       iommu.Prot
	dev        string
	made       call
	undone     call
	seq        uint64
}

// piece is the part [lo, hi) of r, with its own physical address.
func (r *rec) piece(lo, hi uint64) *rec {
	c := *r
	c.start, c.end, c.pa = lo, hi, r.pa+mem.PhysAddr(lo-r.start)
	return &c
}

// liveSet is a domain's live mappings. Maps and unmaps, the frequent
// events, go through byStart in constant time (an unmap of what one map
// made starts where it started); finding the mapping that holds an
// IOVA, which only a fault needs, sorts once per change.
type liveSet struct {
	byStart map[uint64]*rec
	sorted  []*rec
	dirty   bool
}

func (s *liveSet) add(r *rec) {
	if s.byStart == nil {
		s.byStart = make(map[uint64]*rec)
	}
	s.byStart[r.start] = r
	s.dirty = true
}

func (s *liveSet) sort() []*rec {
	if s.dirty {
		s.sorted = s.sorted[:0]
		for _, r := range s.byStart {
			s.sorted = append(s.sorted, r)
		}
		slices.SortFunc(s.sorted, func(a, b *rec) int {
			switch {
			case a.start < b.start:
				return -1
			case a.start > b.start:
				return 1
			}
			return 0
		})
		s.dirty = false
	}
	return s.sorted
}

// find is the mapping holding iova, or nil.
func (s *liveSet) find(iova uint64) *rec {
	rs := s.sort()
	i, _ := slices.BinarySearchFunc(rs, iova, func(r *rec, a uint64) int {
		if r.start <= a {
			return -1
		}
		return 1
	})
	if i > 0 && iova < rs[i-1].end {
		return rs[i-1]
	}
	return nil
}

// remove takes [lo, hi) out of the set and gives each piece removed to
// gone. A mapping the range covers in part keeps the rest.
func (s *liveSet) remove(lo, hi uint64, gone func(*rec)) {
	for cur := lo; cur < hi; {
		r := s.byStart[cur]
		if r == nil || r.end > hi {
			s.removeSlow(cur, hi, gone)
			return
		}
		delete(s.byStart, cur)
		s.dirty = true
		gone(r)
		cur = r.end
	}
}

// removeSlow is remove for a range that starts or ends inside a mapping
// (iommu_unmap of part of what one iommu_map made).
func (s *liveSet) removeSlow(lo, hi uint64, gone func(*rec)) {
	var hit []*rec
	for _, r := range s.sort() {
		if r.start < hi && r.end > lo {
			hit = append(hit, r)
		}
	}
	for _, r := range hit {
		delete(s.byStart, r.start)
		s.dirty = true
		if r.start < lo {
			s.add(r.piece(r.start, lo))
		}
		if r.end > hi {
			s.add(r.piece(hi, r.end))
		}
		gone(r.piece(max(r.start, lo), min(r.end, hi)))
	}
}

// goneMax is how many removed mappings a domain remembers, to name the
// mapping a fault or a stale hit concerns: more than a lazy domain's
// flush queue holds (256), so every IOVA a stale entry may still
// translate is known.
const goneMax = 1024

// goneRing is a domain's last goneMax removed mappings.
type goneRing struct {
	rs   []*rec
	next int
}

func (g *goneRing) push(r *rec) {
	if len(g.rs) < goneMax {
		g.rs = append(g.rs, r)
		return
	}
	g.rs[g.next] = r
	g.next = (g.next + 1) % goneMax
}

// find is the latest removed mapping that held iova, or nil.
func (g *goneRing) find(iova uint64) *rec {
	n := len(g.rs)
	for k := range n {
		// newest first: the slot before next, backwards
		if r := g.rs[(g.next-1-k+2*n)%n]; r.start <= iova && iova < r.end {
			return r
		}
	}
	return nil
}

// newest calls fn on the removed mappings, newest first, until it
// returns false.
func (g *goneRing) newest(fn func(*rec) bool) {
	n := len(g.rs)
	for k := range n {
		if !fn(g.rs[(g.next-1-k+2*n)%n]) {
			return
		}
	}
}

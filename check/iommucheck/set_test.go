package iommucheck

import (
	"slices"
	"testing"
)

// TestLiveSetRemove: an unmap takes whole mappings out by their start,
// and one that starts or ends inside a mapping leaves its other parts,
// at their own physical addresses.
func TestLiveSetRemove(t *testing.T) {
	type span struct{ start, end, pa uint64 }
	tests := []struct {
		name       string
		lo, hi     uint64
		gone, left []span
	}{
		{"whole first", 0x1000, 0x3000, []span{{0x1000, 0x3000, 0x10000}}, []span{{0x3000, 0x4000, 0x50000}}},
		{"both", 0x1000, 0x4000, []span{{0x1000, 0x3000, 0x10000}, {0x3000, 0x4000, 0x50000}}, nil},
		{"middle", 0x2000, 0x3000, []span{{0x2000, 0x3000, 0x11000}}, []span{{0x1000, 0x2000, 0x10000}, {0x3000, 0x4000, 0x50000}}},
		{"across", 0x2000, 0x4000, []span{{0x2000, 0x3000, 0x11000}, {0x3000, 0x4000, 0x50000}}, []span{{0x1000, 0x2000, 0x10000}}},
		{"nothing", 0x8000, 0x9000, nil, []span{{0x1000, 0x3000, 0x10000}, {0x3000, 0x4000, 0x50000}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s liveSet
			s.add(&rec{start: 0x1000, end: 0x3000, pa: 0x10000})
			s.add(&rec{start: 0x3000, end: 0x4000, pa: 0x50000})
			var gone []span
			s.remove(tc.lo, tc.hi, func(r *rec) { gone = append(gone, span{r.start, r.end, uint64(r.pa)}) })
			var left []span
			for _, r := range s.sort() {
				left = append(left, span{r.start, r.end, uint64(r.pa)})
			}
			if !slices.Equal(gone, tc.gone) || !slices.Equal(left, tc.left) {
				t.Errorf("gone %x left %x; want %x, %x", gone, left, tc.gone, tc.left)
			}
			for _, sp := range tc.left {
				if r := s.find(sp.end - 1); r == nil || r.start != sp.start {
					t.Errorf("find(%#x) = %v", sp.end-1, r)
				}
			}
			if r := s.find(0x5000); r != nil {
				t.Errorf("find beyond every mapping: %v", r)
			}
		})
	}
}

// TestGoneRingNewest: the latest removal of an IOVA is the one found,
// also once the ring has wrapped.
func TestGoneRingNewest(t *testing.T) {
	var g goneRing
	for i := range goneMax + 10 {
		g.push(&rec{start: 0x1000, end: 0x2000, seq: uint64(i)})
	}
	if r := g.find(0x1800); r == nil || r.seq != goneMax+9 {
		t.Errorf("find = %v, want the last pushed", r)
	}
	if g.find(0x2000) != nil {
		t.Error("found an IOVA no removed mapping held")
	}
}

package dmadebug

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// index is what itree and bindex share, for one brute-force test.
type index interface {
	insert(*inode)
	remove(*inode)
	overlaps(lo, hi uint64, fn func(*inode))
	covers(lo, hi uint64) (bool, uint64)
	count() int
}

type treeIndex struct{ itree }

func (t *treeIndex) overlaps(lo, hi uint64, fn func(*inode)) {
	t.itree.overlaps(lo, hi, func(n *inode) bool { fn(n); return true })
}
func (t *treeIndex) insert(n *inode) { t.itree.insert(n); t.verify() }
func (t *treeIndex) remove(n *inode) { t.itree.remove(n); t.verify() }
func (t *treeIndex) count() int      { return t.n }

type bucketIndex struct{ bindex }

func (x *bucketIndex) count() int { return x.n }

// TestIndexes checks both indexes against brute force over random
// inserts and removes: empty, nested, short and long intervals, narrow
// and wide queries, across chunk boundaries.
func TestIndexes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ix         index
		space, len uint64
	}{
		{"itree", &treeIndex{}, 1000, 50},
		{"bindex", &bucketIndex{}, 8 * chunkSize, 2 * chunkSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			var live []*inode
			for step := range 4000 {
				if len(live) > 0 && rng.IntN(3) == 0 {
					i := rng.IntN(len(live))
					tc.ix.remove(live[i])
					live = slices.Delete(live, i, i+1)
				} else {
					s := rng.Uint64N(tc.space)
					l := rng.Uint64N(tc.len)
					if rng.IntN(4) == 0 {
						l = rng.Uint64N(chunkSize / 4) // mostly short in a bindex
					}
					n := &inode{start: s, end: s + l, seq: uint64(step)}
					tc.ix.insert(n)
					live = append(live, n)
				}
				if tc.ix.count() != len(live) {
					t.Fatalf("step %d: n %d, want %d", step, tc.ix.count(), len(live))
				}
				lo := rng.Uint64N(tc.space)
				hi := lo + rng.Uint64N(tc.len)
				if rng.IntN(10) == 0 {
					lo, hi = 0, 1<<40 // wide: a bindex walks its buckets
				}
				var got, want []*inode
				tc.ix.overlaps(lo, hi, func(n *inode) { got = append(got, n) })
				for _, n := range live {
					if n.start < hi && n.end > lo && n.end > n.start {
						want = append(want, n)
					}
				}
				order := func(a, b *inode) int {
					if a.before(b) {
						return -1
					}
					return 1
				}
				slices.SortFunc(got, order)
				slices.SortFunc(want, order)
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: overlaps [%d,%d): %d intervals, want %d", step, lo, hi, len(got), len(want))
				}
				if hi-lo > 4*tc.len {
					continue
				}
				ok, gap := tc.ix.covers(lo, hi)
				wantOK, wantGap := true, uint64(0)
				for p := lo; p < hi; p++ {
					if !slices.ContainsFunc(live, func(n *inode) bool { return n.start <= p && p < n.end }) {
						wantOK, wantGap = false, p
						break
					}
				}
				if ok != wantOK || gap != wantGap {
					t.Fatalf("step %d: covers [%d,%d) = %v %d, want %v %d", step, lo, hi, ok, gap, wantOK, wantGap)
				}
			}
			for _, n := range live {
				tc.ix.remove(n)
			}
			if b, ok := tc.ix.(*bucketIndex); ok && (len(b.buckets) != 0 || b.long.root != nil) {
				t.Errorf("empty index keeps %d buckets", len(b.buckets))
			}
		})
	}
}

func TestBindexStarts(t *testing.T) {
	var x bindex
	a := &inode{start: chunkSize - 64, end: chunkSize, seq: 1}
	b := &inode{start: chunkSize, end: chunkSize + 64, seq: 2}
	long := &inode{start: chunkSize + 32, end: 4 * chunkSize, seq: 3}
	for _, n := range []*inode{a, b, long} {
		x.insert(n)
	}
	var got []uint64
	x.starts(chunkSize, chunkSize+64, func(n *inode) { got = append(got, n.seq) })
	slices.Sort(got)
	if !slices.Equal(got, []uint64{2, 3}) {
		t.Errorf("starts in [%#x, +64): %v, want [2 3]", chunkSize, got)
	}
}

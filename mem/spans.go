package mem

import "fmt"

// span is one piece of a spanMap: every address in [start, end) holds v.
type span[V comparable] struct {
	start, end uint64
	v          V
}

// spanMap is an interval map from addresses to values: disjoint spans
// in address order, where an address with no span holds the zero value
// of V. Writing splits the spans it overlaps; adjacent spans with equal
// values are merged, so a map's size is the number of distinct regions,
// never the number of bytes. Storing the zero value removes. The
// representation is canonical: one function from addresses to values
// has one set of spans.
//
// The spans are the bottom list of a skip list (Pugh, "Skip lists: a
// probabilistic alternative to balanced trees", CACM 1990), so that a
// lookup, and a write that touches k spans, cost O(log n + k) whatever
// the number n of spans and wherever the write lands. A sorted slice
// moved every span after an insert: a streaming ring of 16,384 buffers
// spent most of its time in memmove. A skip list rather than a B-tree
// or a balanced binary tree because a write replaces a run of
// consecutive spans, which in a skip list is relinking the run's
// neighbours at each level, with no rebalancing, no node splits or
// merges, and forward iteration is the bottom list. Levels are drawn
// from a generator private to the map with a fixed seed: the list's
// shape never depends on anything outside the map, and nothing a caller
// sees depends on the shape. Nodes and their forward pointers come from
// slabs and are reused through free lists, so that a map whose span
// count is steady allocates nothing.
type spanMap[V comparable] struct {
	head  [maxLevel]*spanNode[V] // the first node at each level
	level int                    // levels in use
	n     int                    // spans
	rng   uint64                 // xorshift state for levels

	free  [maxLevel + 1]*spanNode[V] // freed nodes by level, linked by next[0]
	slab  []spanNode[V]
	ptrs  []*spanNode[V]
	slabN int // the next slab's size

	// scratch holds the pieces update collects before it writes.
	scratch []span[V]
}

// spanNode is one span in the skip list, with its forward pointers, one
// per level it is on.
type spanNode[V comparable] struct {
	span[V]
	next []*spanNode[V]
}

const (
	// maxLevel bounds the levels: with p = 1/4, 4^20 spans.
	maxLevel = 20
	// rngSeed is every map's level generator's first state.
	rngSeed = 0x9e3779b97f4a7c15
)

// randomLevel draws a node's level: 1, and one more with probability
// 1/4 at a time, as Pugh recommends for speed and space.
func (m *spanMap[V]) randomLevel() int {
	if m.rng == 0 {
		m.rng = rngSeed
	}
	x := m.rng
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	m.rng = x
	h := 1
	for x&3 == 0 && h < maxLevel {
		h++
		x >>= 2
	}
	return h
}

// alloc returns a node of level h holding sp, from the free list or a
// slab.
func (m *spanMap[V]) alloc(sp span[V], h int) *spanNode[V] {
	if n := m.free[h]; n != nil {
		m.free[h] = n.next[0]
		n.next[0] = nil
		n.span = sp
		return n
	}
	if len(m.slab) == 0 {
		m.slabN = min(max(2*m.slabN, 8), 1024)
		m.slab = make([]spanNode[V], m.slabN)
	}
	if len(m.ptrs) < h {
		m.ptrs = make([]*spanNode[V], max(2*m.slabN, maxLevel))
	}
	n := &m.slab[0]
	m.slab = m.slab[1:]
	n.next, m.ptrs = m.ptrs[:h:h], m.ptrs[h:]
	n.span = sp
	return n
}

// release puts n on its level's free list.
func (m *spanMap[V]) release(n *spanNode[V]) {
	h := len(n.next)
	clear(n.next)
	n.span = span[V]{}
	n.next[0] = m.free[h]
	m.free[h] = n
}

// nextAt is the node after x at level l (x nil: the head).
func (m *spanMap[V]) nextAt(x *spanNode[V], l int) *spanNode[V] {
	if x == nil {
		return m.head[l]
	}
	return x.next[l]
}

// setNext makes y the node after x at level l (x nil: the head).
func (m *spanMap[V]) setNext(x *spanNode[V], l int, y *spanNode[V]) {
	if x == nil {
		m.head[l] = y
	} else {
		x.next[l] = y
	}
}

// search fills upd with, at each level in use, the last node ending at
// or before x (nil for the head), and returns the first node ending
// after x (nil when none).
func (m *spanMap[V]) search(x uint64, upd *[maxLevel]*spanNode[V]) *spanNode[V] {
	var p *spanNode[V]
	for l := m.level - 1; l >= 0; l-- {
		for q := m.nextAt(p, l); q != nil && q.end <= x; q = q.next[l] {
			p = q
		}
		upd[l] = p
	}
	return m.nextAt(p, 0)
}

// find is the first span that ends after x, nil when none.
func (m *spanMap[V]) find(x uint64) *spanNode[V] {
	var p *spanNode[V]
	for l := m.level - 1; l >= 0; l-- {
		for q := m.nextAt(p, l); q != nil && q.end <= x; q = q.next[l] {
			p = q
		}
	}
	return m.nextAt(p, 0)
}

// len is the number of spans.
func (m *spanMap[V]) len() int { return m.n }

// reset empties the map and keeps its storage.
func (m *spanMap[V]) reset() {
	for x := m.head[0]; x != nil; {
		next := x.next[0]
		m.release(x)
		x = next
	}
	m.head = [maxLevel]*spanNode[V]{}
	m.level, m.n = 0, 0
}

// get is the value at x.
func (m *spanMap[V]) get(x uint64) V {
	if n := m.find(x); n != nil && n.start <= x {
		return n.v
	}
	var zero V
	return zero
}

// set stores v over [start, end); the zero value removes.
func (m *spanMap[V]) set(start, end uint64, v V) {
	if start >= end {
		return
	}
	var zero V
	var upd [maxLevel]*spanNode[V]
	first := m.search(start, &upd)
	// The run of spans [start, end) overlaps: first and k spans in all,
	// last the last of them.
	k := 0
	last := first
	for x := first; x != nil && x.start < end; x = x.next[0] {
		last = x
		k++
	}
	var buf [3]span[V]
	pieces := buf[:0]
	if k > 0 && first.start < start {
		pieces = append(pieces, span[V]{first.start, start, first.v})
	}
	if v != zero {
		pieces = append(pieces, span[V]{start, end, v})
	}
	if k > 0 && last.end > end {
		pieces = append(pieces, span[V]{end, last.end, last.v})
	}
	// Merge the new pieces with each other and with the untouched
	// neighbours on either side.
	merged := pieces[:0]
	for _, p := range pieces {
		if n := len(merged); n > 0 && merged[n-1].end == p.start && merged[n-1].v == p.v {
			merged[n-1].end = p.end
			continue
		}
		merged = append(merged, p)
	}
	if len(merged) > 0 {
		// The node after the run: first itself when the run is empty.
		after := first
		if k > 0 {
			after = last.next[0]
		}
		if prev := upd[0]; prev != nil && prev.end == merged[0].start && prev.v == merged[0].v {
			merged[0].start = prev.start
			first = m.search(prev.start, &upd)
			if k == 0 {
				last = first
			}
			k++
		}
		if l := &merged[len(merged)-1]; after != nil && after.start == l.end && after.v == l.v {
			l.end = after.end
			if k == 0 {
				first = after
			}
			last = after
			k++
		}
	}
	m.replace(first, k, merged, &upd)
}

// replace puts pieces (in order, disjoint) in place of the k spans
// starting at first, which upd's nodes precede at every level: it
// rewrites as many of them as there are pieces, unlinks the rest and
// links new nodes for pieces left over.
func (m *spanMap[V]) replace(first *spanNode[V], k int, pieces []span[V], upd *[maxLevel]*spanNode[V]) {
	keep := min(k, len(pieces))
	if k > keep {
		// Unlink the run's spans after the first keep while the list is
		// still in order: at each level, from the last node before them,
		// skip every node that starts inside them.
		d := first
		for range keep {
			d = d.next[0]
		}
		from, to := d.start, d.end
		var pre [maxLevel]*spanNode[V]
		if keep > 0 {
			m.search(from, &pre)
		} else {
			pre = *upd
		}
		x := d
		for range k - keep {
			to = x.end
			x = x.next[0]
		}
		for l := 0; l < m.level; l++ {
			q := m.nextAt(pre[l], l)
			for q != nil && q.start < to && q.start >= from {
				q = q.next[l]
			}
			m.setNext(pre[l], l, q)
		}
		for y := d; y != x; {
			next := y.next[0]
			m.release(y)
			y = next
		}
		m.n -= k - keep
		for m.level > 0 && m.head[m.level-1] == nil {
			m.level--
		}
	}
	// Rewrite the kept spans in place: the order holds, since the
	// pieces cover what they covered.
	x := first
	for i := range keep {
		x.span = pieces[i]
		if i < keep-1 {
			x = x.next[0]
		}
	}
	if keep == len(pieces) {
		return
	}
	// Link the pieces left after the last one written (or where the run
	// was).
	if keep > 0 {
		m.search(x.end, upd)
	}
	for _, sp := range pieces[keep:] {
		h := m.randomLevel()
		for ; m.level < h; m.level++ {
			upd[m.level] = nil
		}
		n := m.alloc(sp, h)
		for l := range h {
			n.next[l] = m.nextAt(upd[l], l)
			m.setNext(upd[l], l, n)
			upd[l] = n
		}
		m.n++
	}
}

// remove makes [start, end) hold the zero value.
func (m *spanMap[V]) remove(start, end uint64) {
	var zero V
	m.set(start, end, zero)
}

// update replaces the value v of every span piece inside [start, end)
// with f(v); addresses holding the zero value are left alone. f sees
// the pieces in address order, each once.
func (m *spanMap[V]) update(start, end uint64, f func(V) V) {
	if start >= end {
		return
	}
	m.scratch = m.scratch[:0]
	m.each(start, end, func(s, e uint64, v V) bool {
		if w := f(v); w != v {
			m.scratch = append(m.scratch, span[V]{s, e, w})
		}
		return true
	})
	// The map is canonical: writing each changed piece gives the spans
	// of the function that results.
	for _, sp := range m.scratch {
		m.set(sp.start, sp.end, sp.v)
	}
}

// each calls f for every span piece inside [start, end), clipped to it,
// in address order, until f returns false. f must not change m.
func (m *spanMap[V]) each(start, end uint64, f func(s, e uint64, v V) bool) {
	for x := m.find(start); x != nil && x.start < end; x = x.next[0] {
		if !f(max(x.start, start), min(x.end, end), x.v) {
			return
		}
	}
}

// gaps calls f for every piece of [start, end) that holds the zero
// value, in address order. f must not change m.
func (m *spanMap[V]) gaps(start, end uint64, f func(s, e uint64)) {
	p := start
	for x := m.find(start); x != nil && x.start < end; x = x.next[0] {
		if x.start > p {
			f(p, x.start)
		}
		p = x.end
	}
	if p < end {
		f(p, end)
	}
}

// covered is the number of addresses in [start, end) holding a value
// other than zero.
func (m *spanMap[V]) covered(start, end uint64) uint64 {
	var n uint64
	m.each(start, end, func(s, e uint64, _ V) bool { n += e - s; return true })
	return n
}

// spans is every span in address order (a copy), for checks and tests.
func (m *spanMap[V]) spans() []span[V] {
	out := make([]span[V], 0, m.n)
	for x := m.head[0]; x != nil; x = x.next[0] {
		out = append(out, x.span)
	}
	return out
}

// check verifies the representation: sorted, disjoint, non-empty,
// non-zero, maximally merged; every level a sublist of the one below,
// in order; the count right.
func (m *spanMap[V]) check() error {
	var zero V
	s := m.spans()
	for i, sp := range s {
		if sp.start >= sp.end {
			return fmt.Errorf("span %d [%#x, %#x) is empty", i, sp.start, sp.end)
		}
		if sp.v == zero {
			return fmt.Errorf("span %d [%#x, %#x) holds the zero value", i, sp.start, sp.end)
		}
		if i > 0 {
			p := s[i-1]
			if p.end > sp.start {
				return fmt.Errorf("spans %d and %d overlap or are unsorted", i-1, i)
			}
			if p.end == sp.start && p.v == sp.v {
				return fmt.Errorf("spans %d and %d are equal and touch but are not merged", i-1, i)
			}
		}
	}
	if len(s) != m.n {
		return fmt.Errorf("%d spans counted, %d linked", m.n, len(s))
	}
	for l := 1; l < maxLevel; l++ {
		if l >= m.level {
			if m.head[l] != nil {
				return fmt.Errorf("level %d linked above the %d in use", l, m.level)
			}
			continue
		}
		below := m.head[l-1]
		for x := m.head[l]; x != nil; x = x.next[l] {
			for below != nil && below != x {
				below = below.next[l-1]
			}
			if below == nil {
				return fmt.Errorf("level %d: span [%#x, %#x) missing from level %d or out of order", l, x.start, x.end, l-1)
			}
		}
	}
	if m.level > 0 && m.head[m.level-1] == nil {
		return fmt.Errorf("top level %d empty", m.level-1)
	}
	return nil
}

// firstDiff is the first address in [start, end) where a and b differ,
// with their values there.
func firstDiff[V comparable](a, b *spanMap[V], start, end uint64) (at uint64, va, vb V, found bool) {
	na, nb := a.find(start), b.find(start)
	for x := start; x < end; {
		ya, ea := valueAt(na, x, end)
		yb, eb := valueAt(nb, x, end)
		if ya != yb {
			return x, ya, yb, true
		}
		x = min(ea, eb)
		for na != nil && na.end <= x {
			na = na.next[0]
		}
		for nb != nil && nb.end <= x {
			nb = nb.next[0]
		}
	}
	return 0, va, vb, false
}

// valueAt is the value at x, given n = the first span ending after x,
// and the address where that value may next change (at most end).
func valueAt[V comparable](n *spanNode[V], x, end uint64) (V, uint64) {
	var zero V
	if n == nil {
		return zero, end
	}
	if n.start <= x {
		return n.v, min(n.end, end)
	}
	return zero, min(n.start, end)
}

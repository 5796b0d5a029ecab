package mem

import (
	"fmt"
	"slices"
)

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
// The spans are kept in leaves, small sorted arrays of at most leafCap
// spans each, in address order, with an index of the leaves' last ends
// (a B+-tree of two levels). A lookup is a binary search of the index,
// then a scan of one leaf: a few dozen comparisons over contiguous memory,
// where the skip list this replaced followed some twenty pointers to
// scattered nodes. A write that touches k spans moves at most a leaf's
// spans, plus, when a leaf splits or empties, the index entries after
// it. A sorted slice of all spans moved every span after an insert: a
// streaming ring of 16,384 buffers holds tens of thousands of spans and
// spent most of its time in memmove. The index is one entry per leaf
// (a leaf holds leafCap/4 spans or more, but when the map has one leaf),
// so it moves leafCap/4 to leafCap times less, and only on a split or
// an emptied leaf.
//
// Accesses on a stream land near the last one, or near the one before
// (a buffer, then its descriptor): the map remembers where its last
// four lookups landed (leaf and span) and checks those first, starting
// a leaf's scan at the span it remembers. Nothing a caller
// sees depends on the leaves' shape. Leaves are reused through a free
// list, so that a map whose span count is steady allocates nothing.
//
// A lazy map (setLazy) removes in place where it can: a cut whose
// spans lie wholly inside the range it removes leaves them where they
// are, holding the void value, which every reader takes for the zero
// value (absent); an assignment whose pieces fall exactly on the spans
// already there, void or not, writes their values in place. A cache's
// lines are cut by a device's write and filled again, over the same
// range, by the driver's read: two value writes where a removal and an
// insertion each moved half a leaf. Void spans are not merged with
// anything, so that they keep the boundaries a refill may reuse; the
// live spans stay in the canonical form above, and everything a caller
// sees (spans, len, each, gaps, get, cut's pieces) is that of the live
// spans alone: as if the void ones were not there.
type spanMap[V comparable] struct {
	leaves []*spanLeaf[V] // in address order, none empty
	ends   []uint64       // ends[i] is the end of leaves[i]'s last span
	n      int            // live spans (void ones not counted)
	hint   [hints]int     // the leaves of the last lookups, latest first (checked, not trusted)
	hintAt [hints]int     // the index in its leaf of each hint's span
	free   []*spanLeaf[V]

	// lazy says removals may leave void spans, holding void, a value
	// never stored; voids counts them.
	lazy  bool
	void  V
	voids int

	// scratch holds the pieces update collects before it writes;
	// merged, what assign puts in place of the spans a write overlaps;
	// all, a leaf's spans and the pieces of a splice that overflows it.
	scratch, merged, all []span[V]
}

// hints is the number of lookups a map remembers: a packet's accesses
// go to a few streams in each map (the buffers, the descriptors, the
// packets sent, their completions).
const hints = 4

// leafCap is the most spans a leaf holds. Small enough that moving a
// leaf's spans to make room costs little (a span is 24 to 40 bytes),
// large enough that the index is short.
const leafCap = 32

// spanLeaf is a run of consecutive spans of a map, s[:n].
type spanLeaf[V comparable] struct {
	n int
	s [leafCap]span[V]
}

// setLazy makes m a lazy map whose void spans hold void, a value other
// than the zero value that is never stored. m must be empty.
func (m *spanMap[V]) setLazy(void V) {
	m.lazy, m.void = true, void
}

// isVoid says whether x is a void span (in a lazy map).
func (m *spanMap[V]) isVoid(x *span[V]) bool {
	return m.lazy && x.v == m.void
}

// seek is the position (leaf, index in it) of the first span that ends
// after x; (len(m.leaves), 0) when none does.
//
// The hints are the positions of the last lookups: a stream's next
// access lands in the same leaf, a span or two after the last one (the
// next buffer, the next descriptor), so that the scan starts there,
// not at the leaf's first span. A hint is checked, not trusted: its
// leaf must hold x's span, and the scan starts at its index only when
// the span before that index ends by x.
func (m *spanMap[V]) seek(x uint64) (int, int) {
	ends := m.ends
	for q := range hints {
		h := m.hint[q]
		if h >= len(ends) || ends[h] <= x || (h > 0 && ends[h-1] > x) {
			continue
		}
		l := m.leaves[h]
		i := m.hintAt[q]
		if i >= l.n || (i > 0 && l.s[i-1].end > x) {
			i = 0
		}
		// l's last span ends after x, so the scan stops inside l.
		for l.s[i].end <= x {
			i++
		}
		m.remember(q, h, i)
		return h, i
	}
	lo, hi := 0, len(ends)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ends[mid] <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(ends) {
		return lo, 0
	}
	// A scan, not a binary search: over at most leafCap spans in
	// order, its branch is mispredicted once, where it stops, where a
	// binary search's is at every other halving.
	l := m.leaves[lo]
	i := 0
	for l.s[i].end <= x {
		i++
	}
	m.remember(hints-1, lo, i)
	return lo, i
}

// remember makes (li, i) the first hint, moving the hints before slot q
// one down (the one in slot q is dropped or is this one).
func (m *spanMap[V]) remember(q, li, i int) {
	for ; q > 0; q-- {
		m.hint[q], m.hintAt[q] = m.hint[q-1], m.hintAt[q-1]
	}
	m.hint[0], m.hintAt[0] = li, i
}

// at is the span at position (li, i), nil at the end.
func (m *spanMap[V]) at(li, i int) *span[V] {
	if li == len(m.leaves) {
		return nil
	}
	return &m.leaves[li].s[i]
}

// next is the position after (li, i), which must hold a span.
func (m *spanMap[V]) next(li, i int) (int, int) {
	if i++; i == m.leaves[li].n {
		return li + 1, 0
	}
	return li, i
}

// prev is the position before (li, i), ok false at the first span.
func (m *spanMap[V]) prev(li, i int) (int, int, bool) {
	switch {
	case i > 0:
		return li, i - 1, true
	case li > 0:
		return li - 1, m.leaves[li-1].n - 1, true
	}
	return 0, 0, false
}

// len is the number of spans.
func (m *spanMap[V]) len() int { return m.n }

// reset empties the map and keeps its storage.
func (m *spanMap[V]) reset() {
	for _, l := range m.leaves {
		l.n = 0
		m.free = append(m.free, l)
	}
	clear(m.leaves)
	m.leaves, m.ends = m.leaves[:0], m.ends[:0]
	m.n, m.hint, m.hintAt, m.voids = 0, [hints]int{}, [hints]int{}, 0
}

// get is the value at x.
func (m *spanMap[V]) get(x uint64) V {
	if s := m.at(m.seek(x)); s != nil && s.start <= x && !m.isVoid(s) {
		return s.v
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
	li, i := m.seek(start)
	if v != zero && li < len(m.leaves) {
		// A write over exactly one span, whose neighbours do not hold
		// the new value, changes that span's value alone: a ring's
		// buffer written again, a descriptor's status.
		x := &m.leaves[li].s[i]
		if x.start == start && x.end == end {
			pli, pi, ok := m.prev(li, i)
			nli, ni := m.next(li, i)
			if p, a := m.at(pli, pi), m.at(nli, ni); (!ok || p.end != start || p.v != v) && (a == nil || a.start != end || a.v != v) {
				if m.isVoid(x) {
					m.n++
					m.voids--
				}
				x.v = v
				return
			}
		}
		if m.split(li, i, start, end, v) || m.join(li, i, start, end, v) {
			return
		}
	}
	one := [1]span[V]{{start, end, v}}
	pieces := one[:]
	if v == zero {
		pieces = pieces[:0]
	}
	m.assignAt(li, i, start, end, pieces)
}

// split is set(start, end, v), v not zero, inside the span at (li, i)
// (m.seek(start)), where it splits that span in two or three without a
// merge: a descriptor's status written into the descriptor the CPU
// wrote whole. It says whether it did; otherwise it changes nothing.
// The pieces take the span's place in its leaf, which must have room;
// the leaf's last end stays what it was.
func (m *spanMap[V]) split(li, i int, start, end uint64, v V) bool {
	l := m.leaves[li]
	x := &l.s[i]
	if x.start > start || x.end < end || x.v == v || m.isVoid(x) {
		return false
	}
	add := 0
	if x.start < start {
		add++
	} else if pli, pi, ok := m.prev(li, i); ok {
		if p := m.at(pli, pi); p.end == start && p.v == v {
			return false
		}
	}
	if end < x.end {
		add++
	} else if nli, ni := m.next(li, i); nli < len(m.leaves) {
		if a := m.at(nli, ni); a.start == end && a.v == v {
			return false
		}
	}
	if add == 0 || l.n+add > leafCap {
		return false
	}
	old := *x
	copy(l.s[i+1+add:], l.s[i+1:l.n])
	l.n += add
	m.n += add
	if old.start < start {
		l.s[i] = span[V]{old.start, start, old.v}
		i++
	}
	l.s[i] = span[V]{start, end, v}
	if end < old.end {
		l.s[i+1] = span[V]{end, old.end, old.v}
	}
	return true
}

// join is set(start, end, v), v not zero, over two or more whole spans
// of one leaf from (li, i) (m.seek(start)), none void, whose neighbours
// do not hold v: they become one span (the CPU writing a descriptor
// whose status the device wrote). It says whether it did; otherwise it
// changes nothing.
func (m *spanMap[V]) join(li, i int, start, end uint64, v V) bool {
	l := m.leaves[li]
	if l.s[i].start != start {
		return false
	}
	j := i
	for ; j < l.n && l.s[j].end < end; j++ {
		if m.isVoid(&l.s[j]) {
			return false
		}
	}
	if j == l.n || j == i || l.s[j].end != end || m.isVoid(&l.s[j]) {
		return false
	}
	if pli, pi, ok := m.prev(li, i); ok {
		if p := m.at(pli, pi); p.end == start && p.v == v {
			return false
		}
	}
	if nli, ni := m.next(li, j); nli < len(m.leaves) {
		if a := m.at(nli, ni); a.start == end && a.v == v {
			return false
		}
	}
	k := j - i + 1
	l.s[i] = span[V]{start, end, v}
	copy(l.s[i+1:], l.s[j+1:l.n])
	l.n -= k - 1
	m.n -= k - 1
	if l.n < leafCap/4 {
		m.fix(li)
	}
	return true
}

// assign makes [start, end) hold pieces, and the zero value where no
// piece is: pieces must be in address order, disjoint, inside [start,
// end), and hold no zero value; touching pieces may hold the same value
// (assign merges them). The addresses outside [start, end) keep their
// values. It is one search and one splice whatever the pieces, where a
// set per piece is a search and a splice each.
func (m *spanMap[V]) assign(start, end uint64, pieces []span[V]) {
	if start >= end {
		return
	}
	li, i := m.seek(start)
	m.assignAt(li, i, start, end, pieces)
}

// assignAt is assign given (li, i) = m.seek(start).
func (m *spanMap[V]) assignAt(li, i int, start, end uint64, pieces []span[V]) {
	// The run of spans [start, end) overlaps: k spans from (li, i),
	// kv of them void, first and last the first and last of them, (lj,
	// j) the position after them.
	k, kv := 0, 0
	var first, last span[V]
	lj, j := li, i
	for lj < len(m.leaves) {
		x := &m.leaves[lj].s[j]
		if x.start >= end {
			break
		}
		if k == 0 {
			first = *x
		}
		if m.isVoid(x) {
			kv++
		}
		last = *x
		k++
		lj, j = m.next(lj, j)
	}
	if k > 0 && k == len(pieces) && m.inPlace(li, i, lj, j, pieces) {
		return
	}
	// What replaces the run: the part of first before start, the pieces
	// merged where equal ones touch, the part of last after end (void
	// parts left out: they are absent).
	merged := m.merged[:0]
	add := func(p span[V]) {
		if n := len(merged); n > 0 && merged[n-1].end == p.start && merged[n-1].v == p.v {
			merged[n-1].end = p.end
			return
		}
		merged = append(merged, p)
	}
	if k > 0 && first.start < start && !(m.lazy && first.v == m.void) {
		add(span[V]{first.start, start, first.v})
	}
	for _, p := range pieces {
		add(p)
	}
	if k > 0 && last.end > end && !(m.lazy && last.v == m.void) {
		add(span[V]{end, last.end, last.v})
	}
	// Merge with the untouched neighbours on either side (live ones:
	// no piece holds the void value).
	if len(merged) > 0 {
		if pli, pi, ok := m.prev(li, i); ok {
			if p := m.at(pli, pi); p.end == merged[0].start && p.v == merged[0].v {
				merged[0].start = p.start
				li, i = pli, pi
				k++
			}
		}
		if a, l := m.at(lj, j), &merged[len(merged)-1]; a != nil && a.start == l.end && a.v == l.v {
			l.end = a.end
			k++
		}
	}
	m.merged = merged
	if k == 0 && len(merged) == 0 {
		return
	}
	m.n += len(merged) - (k - kv)
	m.voids -= kv
	m.splice(li, i, k, merged)
}

// inPlace writes pieces over the run of len(pieces) spans from (li, i)
// to (lj, j), value for value, and says so, when that leaves the map
// as assignAt's splice would: each piece has the bounds of its span,
// and no piece is to merge with the next one or with a live neighbour
// of the run. Otherwise it changes nothing.
func (m *spanMap[V]) inPlace(li, i, lj, j int, pieces []span[V]) bool {
	if pli, pi, ok := m.prev(li, i); ok {
		if p := m.at(pli, pi); p.end == pieces[0].start && p.v == pieces[0].v {
			return false
		}
	}
	if a, l := m.at(lj, j), &pieces[len(pieces)-1]; a != nil && a.start == l.end && a.v == l.v {
		return false
	}
	xl, xi := li, i
	for q := range pieces {
		p := &pieces[q]
		x := &m.leaves[xl].s[xi]
		if x.start != p.start || x.end != p.end {
			return false
		}
		if q > 0 && pieces[q-1].end == p.start && pieces[q-1].v == p.v {
			return false
		}
		xl, xi = m.next(xl, xi)
	}
	xl, xi = li, i
	for q := range pieces {
		x := &m.leaves[xl].s[xi]
		if m.isVoid(x) {
			m.n++
			m.voids--
		}
		x.v = pieces[q].v
		xl, xi = m.next(xl, xi)
	}
	return true
}

// splice puts pieces (in order, disjoint, fitting between the spans
// around) in place of the k spans from position (li, i).
func (m *spanMap[V]) splice(li, i, k int, pieces []span[V]) {
	if li == len(m.leaves) {
		// After the last span, so k is 0: append to the last leaf.
		if li == 0 {
			m.insertLeaf(0)
			li++
		}
		li--
		i = m.leaves[li].n
	}
	l := m.leaves[li]
	p := len(pieces)
	if i+k <= l.n && l.n-k+p <= leafCap {
		// Inside one leaf, which has room: the common case.
		old := l.n
		if p != k {
			copy(l.s[i+p:], l.s[i+k:l.n])
		}
		copy(l.s[i:], pieces)
		l.n += p - k
		// Where the run ended before the leaf's last span, that span
		// is still its last: its end in the index stands.
		if i+k < old && l.n >= leafCap/4 {
			return
		}
		m.fix(li)
		return
	}
	// Remove the run: the end of l, whole leaves after it, then the
	// start of the leaf after those.
	r := min(k, l.n-i)
	copy(l.s[i:], l.s[i+r:l.n])
	l.n -= r
	k -= r
	j := li + 1
	for k > 0 && k >= m.leaves[j].n {
		k -= m.leaves[j].n
		j++
	}
	if j > li+1 {
		for _, d := range m.leaves[li+1 : j] {
			d.n = 0
			m.free = append(m.free, d)
		}
		m.leaves = slices.Delete(m.leaves, li+1, j)
		m.ends = slices.Delete(m.ends, li+1, j)
	}
	if k > 0 {
		d := m.leaves[li+1]
		copy(d.s[:], d.s[k:d.n])
		d.n -= k
	}
	// Insert the pieces at i in l; when they do not fit, l and as many
	// new leaves after it as needed share l's spans and the pieces
	// evenly (each more than half full).
	c := 1
	if l.n+p <= leafCap {
		copy(l.s[i+p:], l.s[i:l.n])
		copy(l.s[i:], pieces)
		l.n += p
	} else {
		all := append(append(append(m.all[:0], l.s[:i]...), pieces...), l.s[i:l.n]...)
		m.all = all
		c = (len(all) + leafCap - 1) / leafCap
		for q := range c {
			part := all[q*len(all)/c : (q+1)*len(all)/c]
			d := l
			if q > 0 {
				d = m.insertLeaf(li + q)
			}
			d.n = copy(d.s[:], part)
			m.ends[li+q] = d.s[d.n-1].end
		}
	}
	// From the right, so that a leaf fix removes does not move the
	// ones left to fix: the leaf whose start was removed, then l.
	if k > 0 {
		m.fix(li + c)
	} else if li+1 < len(m.leaves) {
		m.fix(li + 1)
	}
	m.fix(li)
}

// insertLeaf puts an empty leaf at index li of the leaves and returns
// it; the caller fills it and its end.
func (m *spanMap[V]) insertLeaf(li int) *spanLeaf[V] {
	var l *spanLeaf[V]
	if n := len(m.free); n > 0 {
		l = m.free[n-1]
		m.free = m.free[:n-1]
	} else {
		l = new(spanLeaf[V])
	}
	m.leaves = slices.Insert(m.leaves, li, l)
	m.ends = slices.Insert(m.ends, li, 0)
	return l
}

// fix restores leaf li's end in the index after a change to it, and the
// leaves' invariant: none empty, none with fewer than leafCap/4 spans
// unless it is the only one. A small leaf is merged with a neighbour
// when both fit in one, else the two share their spans evenly.
func (m *spanMap[V]) fix(li int) {
	l := m.leaves[li]
	if l.n == 0 {
		m.free = append(m.free, l)
		m.leaves = slices.Delete(m.leaves, li, li+1)
		m.ends = slices.Delete(m.ends, li, li+1)
		return
	}
	m.ends[li] = l.s[l.n-1].end
	if l.n >= leafCap/4 || len(m.leaves) == 1 {
		return
	}
	a, b := li, li+1
	if b == len(m.leaves) {
		a, b = li-1, li
	}
	la, lb := m.leaves[a], m.leaves[b]
	if la.n+lb.n <= leafCap {
		copy(la.s[la.n:], lb.s[:lb.n])
		la.n += lb.n
		lb.n = 0
		m.ends[a] = m.ends[b]
		m.free = append(m.free, lb)
		m.leaves = slices.Delete(m.leaves, b, b+1)
		m.ends = slices.Delete(m.ends, b, b+1)
		return
	}
	h := (la.n + lb.n) / 2
	if d := la.n - h; d > 0 {
		copy(lb.s[d:], lb.s[:lb.n])
		copy(lb.s[:d], la.s[h:la.n])
		lb.n += d
	} else {
		d = -d
		copy(la.s[la.n:], lb.s[:d])
		copy(lb.s[:], lb.s[d:lb.n])
		lb.n -= d
	}
	la.n = h
	m.ends[a] = la.s[la.n-1].end
	m.ends[b] = lb.s[lb.n-1].end
}

// remove makes [start, end) hold the zero value.
func (m *spanMap[V]) remove(start, end uint64) {
	var zero V
	m.set(start, end, zero)
}

// cut calls f for every span piece inside [start, end), clipped to it,
// in address order, then makes [start, end) hold the zero value, and
// returns the number of addresses it removed: each, then remove, in one
// search. f must not change m. In a lazy map, when no live span
// reaches out of [start, end), the spans stay where they are, void.
func (m *spanMap[V]) cut(start, end uint64, f func(s, e uint64, v V)) uint64 {
	if start >= end {
		return 0
	}
	li, i := m.seek(start)
	var n uint64
	inside := m.lazy
	k := 0
	lj, j := li, i
	for lj < len(m.leaves) {
		x := &m.leaves[lj].s[j]
		if x.start >= end {
			break
		}
		if !m.isVoid(x) {
			s, e := max(x.start, start), min(x.end, end)
			f(s, e, x.v)
			n += e - s
			k++
			if x.start < start || x.end > end {
				inside = false
			}
		}
		lj, j = m.next(lj, j)
	}
	if n == 0 {
		return 0
	}
	if !inside {
		m.assignAt(li, i, start, end, nil)
		return n
	}
	for ; li != lj || i != j; li, i = m.next(li, i) {
		m.leaves[li].s[i].v = m.void
	}
	m.n -= k
	m.voids += k
	if m.voids > max(m.n, voidSlack) {
		m.compact()
	}
	return n
}

// voidSlack is the most void spans a lazy map holds before it compacts
// whatever its live spans (tests lower it, to compact often).
var voidSlack = leafCap * leafCap

// compact drops a lazy map's void spans, once they outnumber the live
// ones (and some leaves' worth): rebuilt, the leaves hold the live
// spans alone. A void span costs a pass over the map at most once, so
// that the map's size stays within a small factor of its live spans.
func (m *spanMap[V]) compact() {
	all := m.all[:0]
	for _, l := range m.leaves {
		for q := range l.s[:l.n] {
			if x := &l.s[q]; x.v != m.void {
				all = append(all, *x)
			}
		}
	}
	m.all = all
	n := len(all)
	m.reset()
	c := (n + leafCap*3/4 - 1) / (leafCap * 3 / 4)
	for q := range c {
		part := all[q*n/c : (q+1)*n/c]
		d := m.insertLeaf(q)
		d.n = copy(d.s[:], part)
		m.ends[q] = d.s[d.n-1].end
	}
	m.n = n
}

// update replaces the value v of every span piece inside [start, end)
// with f(v); addresses holding the zero value are left alone. f sees
// the pieces in address order, each once.
func (m *spanMap[V]) update(start, end uint64, f func(V) V) {
	if start >= end {
		return
	}
	var zero V
	m.scratch = m.scratch[:0]
	changed := false
	m.each(start, end, func(s, e uint64, v V) bool {
		w := f(v)
		changed = changed || w != v
		if w != zero {
			m.scratch = append(m.scratch, span[V]{s, e, w})
		}
		return true
	})
	// The pieces leave out what holds the zero value, which stays so.
	if changed {
		m.assign(start, end, m.scratch)
	}
}

// each calls f for every span piece inside [start, end), clipped to it,
// in address order, until f returns false. f must not change m.
func (m *spanMap[V]) each(start, end uint64, f func(s, e uint64, v V) bool) {
	m.eachAt(start, end, f)
}

// eachAt is each, returning m.seek(start): the position an assignment
// of [start, end) takes (assignAt) while m is unchanged, without a
// second search.
func (m *spanMap[V]) eachAt(start, end uint64, f func(s, e uint64, v V) bool) (int, int) {
	li0, i0 := m.seek(start)
	li, i := li0, i0
	for ; li < len(m.leaves); li, i = li+1, 0 {
		l := m.leaves[li]
		for ; i < l.n; i++ {
			x := &l.s[i]
			if x.start >= end {
				return li0, i0
			}
			if m.isVoid(x) {
				continue
			}
			if !f(max(x.start, start), min(x.end, end), x.v) {
				return li0, i0
			}
		}
	}
	return li0, i0
}

// gaps calls f for every piece of [start, end) that holds the zero
// value, in address order. f must not change m.
func (m *spanMap[V]) gaps(start, end uint64, f func(s, e uint64)) {
	p := start
	li, i := m.seek(start)
loop:
	for ; li < len(m.leaves); li, i = li+1, 0 {
		l := m.leaves[li]
		for ; i < l.n; i++ {
			x := &l.s[i]
			if x.start >= end {
				break loop
			}
			if m.isVoid(x) {
				continue
			}
			if x.start > p {
				f(p, x.start)
			}
			p = x.end
		}
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
	for _, l := range m.leaves {
		for q := range l.s[:l.n] {
			if x := &l.s[q]; !m.isVoid(x) {
				out = append(out, *x)
			}
		}
	}
	return out
}

// check verifies the representation: sorted, disjoint, non-empty,
// non-zero, the live spans maximally merged; void spans only in a lazy
// map; the leaves within their bounds and the index's ends theirs; the
// counts right.
func (m *spanMap[V]) check() error {
	var zero V
	voids := 0
	var all []span[V]
	for _, l := range m.leaves {
		all = append(all, l.s[:l.n]...)
	}
	for i, sp := range all {
		if sp.start >= sp.end {
			return fmt.Errorf("span %d [%#x, %#x) is empty", i, sp.start, sp.end)
		}
		if i > 0 && all[i-1].end > sp.start {
			return fmt.Errorf("spans %d and %d overlap or are unsorted", i-1, i)
		}
		if m.isVoid(&sp) {
			voids++
		}
	}
	if voids != m.voids {
		return fmt.Errorf("%d void spans counted, %d held", m.voids, voids)
	}
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
		return fmt.Errorf("%d spans counted, %d held", m.n, len(s))
	}
	if len(m.ends) != len(m.leaves) {
		return fmt.Errorf("%d leaves, %d ends", len(m.leaves), len(m.ends))
	}
	for i, l := range m.leaves {
		if l.n < 1 || l.n > leafCap || (l.n < leafCap/4 && len(m.leaves) > 1) {
			return fmt.Errorf("leaf %d holds %d spans", i, l.n)
		}
		if m.ends[i] != l.s[l.n-1].end {
			return fmt.Errorf("leaf %d ends at %#x, its index entry says %#x", i, l.s[l.n-1].end, m.ends[i])
		}
	}
	return nil
}

// firstDiff is the first address in [start, end) where a and b differ,
// with their values there. a is spans in address order, disjoint, as
// a map holds them (an address in no span holds the zero value).
func firstDiff[V comparable](a []span[V], b *spanMap[V], start, end uint64) (at uint64, va, vb V, found bool) {
	// A scan: a is what a reader obtained over [start, end) (or a
	// little more), so the first span ends after start.
	ia := 0
	for ia < len(a) && a[ia].end <= start {
		ia++
	}
	lb, ib := b.seek(start)
	for x := start; x < end; {
		var sa *span[V]
		if ia < len(a) {
			sa = &a[ia]
		}
		ya, ea := valueAt(sa, x, end)
		sb := b.at(lb, ib)
		yb, eb := valueAt(sb, x, end)
		if sb != nil && b.isVoid(sb) {
			var zero V
			yb = zero // a void span is absent
		}
		if ya != yb {
			return x, ya, yb, true
		}
		x = min(ea, eb)
		for ia < len(a) && a[ia].end <= x {
			ia++
		}
		for lb < len(b.leaves) && b.leaves[lb].s[ib].end <= x {
			lb, ib = b.next(lb, ib)
		}
	}
	return 0, va, vb, false
}

// valueAt is the value at x, given n = the first span ending after x
// (nil when none), and the address where that value may next change
// (at most end).
func valueAt[V comparable](n *span[V], x, end uint64) (V, uint64) {
	var zero V
	if n == nil {
		return zero, end
	}
	if n.start <= x {
		return n.v, min(n.end, end)
	}
	return zero, min(n.start, end)
}

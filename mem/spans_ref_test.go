package mem

import "fmt"

// This file is spanMap as it was before the skip list (which the leaves
// and index of spans.go then replaced), renamed: a sorted slice, whose
// inserts move the spans after them. It is the reference that
// TestSpanMapMatchesReference holds spanMap to.

// refSpanMap is an interval map from addresses to values: a sorted slice of
// disjoint spans, where an address with no span holds the zero value of
// V. Writing splits the spans it overlaps; adjacent spans with equal
// values are merged, so a map's size is the number of distinct regions,
// never the number of bytes. Storing the zero value removes.
//
// Lookups are binary searches; a change costs the spans it touches plus,
// when it changes the span count, a move of the spans after it.
type refSpanMap[V comparable] struct {
	s []span[V]
}

// find is the index of the first span that ends after x.
func (m *refSpanMap[V]) find(x uint64) int {
	lo, hi := 0, len(m.s)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if m.s[h].end <= x {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// len is the number of spans.
func (m *refSpanMap[V]) len() int { return len(m.s) }

// reset empties the map and keeps its storage.
func (m *refSpanMap[V]) reset() { m.s = m.s[:0] }

// get is the value at x.
func (m *refSpanMap[V]) get(x uint64) V {
	if i := m.find(x); i < len(m.s) && m.s[i].start <= x {
		return m.s[i].v
	}
	var zero V
	return zero
}

// set stores v over [start, end); the zero value removes.
func (m *refSpanMap[V]) set(start, end uint64, v V) {
	if start >= end {
		return
	}
	var zero V
	i := m.find(start)
	j := i
	for j < len(m.s) && m.s[j].start < end {
		j++
	}
	var buf [3]span[V]
	pieces := buf[:0]
	if i < j && m.s[i].start < start {
		pieces = append(pieces, span[V]{m.s[i].start, start, m.s[i].v})
	}
	if v != zero {
		pieces = append(pieces, span[V]{start, end, v})
	}
	if i < j && m.s[j-1].end > end {
		pieces = append(pieces, span[V]{end, m.s[j-1].end, m.s[j-1].v})
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
		if i > 0 && m.s[i-1].end == merged[0].start && m.s[i-1].v == merged[0].v {
			i--
			merged[0].start = m.s[i].start
		}
		last := &merged[len(merged)-1]
		if j < len(m.s) && m.s[j].start == last.end && m.s[j].v == last.v {
			last.end = m.s[j].end
			j++
		}
	}
	m.s = refReplace(m.s, i, j, merged)
}

// refReplace is slices.Replace without its generic-escape allocation of
// the inserted slice: s[i:j] becomes with.
func refReplace[V comparable](s []span[V], i, j int, with []span[V]) []span[V] {
	grow := len(with) - (j - i)
	switch {
	case grow > 0:
		n := len(s)
		for k := 0; k < grow; k++ {
			s = append(s, span[V]{})
		}
		copy(s[j+grow:], s[j:n])
	case grow < 0:
		copy(s[j+grow:], s[j:])
		s = s[:len(s)+grow]
	}
	copy(s[i:], with)
	return s
}

// remove makes [start, end) hold the zero value.
func (m *refSpanMap[V]) remove(start, end uint64) {
	var zero V
	m.set(start, end, zero)
}

// split makes x a span boundary.
func (m *refSpanMap[V]) split(x uint64) {
	i := m.find(x)
	if i < len(m.s) && m.s[i].start < x {
		s := m.s[i]
		m.s[i].end = x
		tail := [1]span[V]{{x, s.end, s.v}}
		m.s = refReplace(m.s, i+1, i+1, tail[:])
	}
}

// update replaces the value v of every span piece inside [start, end)
// with f(v); addresses holding the zero value are left alone.
func (m *refSpanMap[V]) update(start, end uint64, f func(V) V) {
	if start >= end {
		return
	}
	m.split(start)
	m.split(end)
	i := m.find(start)
	j := i
	for j < len(m.s) && m.s[j].start < end {
		m.s[j].v = f(m.s[j].v)
		j++
	}
	m.coalesce(max(i, 1)-1, min(j+1, len(m.s)))
}

// coalesce merges touching equal spans in s[lo:hi] and drops zero
// values there.
func (m *refSpanMap[V]) coalesce(lo, hi int) {
	var zero V
	w := lo
	for r := lo; r < hi; r++ {
		p := m.s[r]
		if p.v == zero {
			continue
		}
		if w > lo && m.s[w-1].end == p.start && m.s[w-1].v == p.v {
			m.s[w-1].end = p.end
			continue
		}
		m.s[w] = p
		w++
	}
	if w < hi {
		m.s = append(m.s[:w], m.s[hi:]...)
	}
}

// each calls f for every span piece inside [start, end), clipped to it,
// in address order, until f returns false. f must not change m.
func (m *refSpanMap[V]) each(start, end uint64, f func(s, e uint64, v V) bool) {
	for i := m.find(start); i < len(m.s) && m.s[i].start < end; i++ {
		sp := m.s[i]
		if !f(max(sp.start, start), min(sp.end, end), sp.v) {
			return
		}
	}
}

// gaps calls f for every piece of [start, end) that holds the zero
// value, in address order. f must not change m.
func (m *refSpanMap[V]) gaps(start, end uint64, f func(s, e uint64)) {
	x := start
	for i := m.find(start); i < len(m.s) && m.s[i].start < end; i++ {
		if m.s[i].start > x {
			f(x, m.s[i].start)
		}
		x = m.s[i].end
	}
	if x < end {
		f(x, end)
	}
}

// covered is the number of addresses in [start, end) holding a value
// other than zero.
func (m *refSpanMap[V]) covered(start, end uint64) uint64 {
	var n uint64
	m.each(start, end, func(s, e uint64, _ V) bool { n += e - s; return true })
	return n
}

// check verifies the representation: sorted, disjoint, non-empty,
// non-zero, maximally merged.
func (m *refSpanMap[V]) check() error {
	var zero V
	for i, sp := range m.s {
		if sp.start >= sp.end {
			return fmt.Errorf("span %d [%#x, %#x) is empty", i, sp.start, sp.end)
		}
		if sp.v == zero {
			return fmt.Errorf("span %d [%#x, %#x) holds the zero value", i, sp.start, sp.end)
		}
		if i > 0 {
			p := m.s[i-1]
			if p.end > sp.start {
				return fmt.Errorf("spans %d and %d overlap or are unsorted", i-1, i)
			}
			if p.end == sp.start && p.v == sp.v {
				return fmt.Errorf("spans %d and %d are equal and touch but are not merged", i-1, i)
			}
		}
	}
	return nil
}

// refFirstDiff is the first address in [start, end) where a and b differ,
// with their values there.
func refFirstDiff[V comparable](a, b *refSpanMap[V], start, end uint64) (at uint64, va, vb V, found bool) {
	ia, ib := a.find(start), b.find(start)
	for x := start; x < end; {
		ya, na := refValueAt(a, ia, x, end)
		yb, nb := refValueAt(b, ib, x, end)
		if ya != yb {
			return x, ya, yb, true
		}
		x = min(na, nb)
		for ia < len(a.s) && a.s[ia].end <= x {
			ia++
		}
		for ib < len(b.s) && b.s[ib].end <= x {
			ib++
		}
	}
	return 0, va, vb, false
}

// refValueAt is m's value at x, given i = the first span ending after x,
// and the address where that value may next change (at most end).
func refValueAt[V comparable](m *refSpanMap[V], i int, x, end uint64) (V, uint64) {
	var zero V
	if i >= len(m.s) {
		return zero, end
	}
	if m.s[i].start <= x {
		return m.s[i].v, min(m.s[i].end, end)
	}
	return zero, min(m.s[i].start, end)
}

package gpu

import "math/bits"

// extent is [start, end) of some address or index space.
type extent struct{ start, end uint64 }

// extents is a first-fit allocator over one range: the free extents,
// sorted, disjoint and never touching (release merges neighbours). It
// costs memory per free extent, never per byte, and hands out the same
// addresses for the same calls: the VA allocator of each GPU, the
// sub-allocator of a 2 MiB chunk and the BAR1 page allocator use it.
type extents struct {
	free []extent
	size uint64 // free bytes (or units)
}

func newExtents(lo, hi uint64) *extents {
	x := &extents{}
	if hi > lo {
		x.free = []extent{{lo, hi}}
		x.size = hi - lo
	}
	return x
}

// alloc takes size units aligned to align (a power of two) from the
// lowest free extent that holds them.
func (x *extents) alloc(size, align uint64) (uint64, bool) {
	if size == 0 {
		return 0, false
	}
	for i, f := range x.free {
		s, ok := alignUp(f.start, align)
		if !ok || s >= f.end || f.end-s < size {
			continue
		}
		x.take(i, s, s+size)
		return s, true
	}
	return 0, false
}

// take removes [s, e) from free extent i, which holds it.
func (x *extents) take(i int, s, e uint64) {
	f := x.free[i]
	x.size -= e - s
	switch {
	case s == f.start && e == f.end:
		x.free = append(x.free[:i], x.free[i+1:]...)
	case s == f.start:
		x.free[i].start = e
	case e == f.end:
		x.free[i].end = s
	default:
		x.free = append(x.free, extent{})
		copy(x.free[i+2:], x.free[i+1:])
		x.free[i] = extent{f.start, s}
		x.free[i+1] = extent{e, f.end}
	}
}

// takeAny takes n units, contiguous if some free extent holds them, else
// from the lowest extents in pieces; false (and nothing taken) when
// fewer than n are free.
func (x *extents) takeAny(n uint64) ([]extent, bool) {
	if n == 0 || n > x.size {
		return nil, false
	}
	if s, ok := x.alloc(n, 1); ok {
		return []extent{{s, s + n}}, true
	}
	var out []extent
	for n > 0 {
		f := x.free[0]
		e := f.start + min(n, f.end-f.start)
		x.take(0, f.start, e)
		out = append(out, extent{f.start, e})
		n -= e - f.start
	}
	return out, true
}

// release returns [s, e), which must be wholly allocated; false (and
// nothing changed) if any of it is free already.
func (x *extents) release(s, e uint64) bool {
	if e <= s {
		return false
	}
	// i is the first free extent that ends after s.
	lo, hi := 0, len(x.free)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if x.free[h].end <= s {
			lo = h + 1
		} else {
			hi = h
		}
	}
	i := lo
	if i < len(x.free) && x.free[i].start < e {
		return false
	}
	x.size += e - s
	joinLeft := i > 0 && x.free[i-1].end == s
	joinRight := i < len(x.free) && x.free[i].start == e
	switch {
	case joinLeft && joinRight:
		x.free[i-1].end = x.free[i].end
		x.free = append(x.free[:i], x.free[i+1:]...)
	case joinLeft:
		x.free[i-1].end = e
	case joinRight:
		x.free[i].start = s
	default:
		x.free = append(x.free, extent{})
		copy(x.free[i+1:], x.free[i:])
		x.free[i] = extent{s, e}
	}
	return true
}

// alignUp rounds x up to a multiple of a power of two a; false if that
// wraps.
func alignUp(x, a uint64) (uint64, bool) {
	s, c := bits.Add64(x, a-1, 0)
	return s &^ (a - 1), c == 0
}

func alignDown(x, a uint64) uint64 { return x &^ (a - 1) }

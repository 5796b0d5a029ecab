package dmadebug

// chunkShift sets the bucket granule of a bindex: 16 KiB. A mapping no
// longer than a chunk (a packet buffer, a page, most sg segments) is
// bucketed by the chunk its start falls in; longer ones (frames, GPU
// buffers: few) go to an itree. debug.c buckets its entries the same way,
// by dev_addr >> 13, in a fixed table of 16384 buckets.
const (
	chunkShift = 14
	chunkSize  = 1 << chunkShift
)

// bindex indexes intervals [start, end) for the look-ups the checker
// makes: the intervals starting in a range (exact handles, cache lines),
// the intervals overlapping a range, and coverage.
//
// Cost, for s short intervals per chunk and L long intervals: insert is
// one map look-up (two when the chunk had no bucket) or O(log L); remove
// is O(1), plus a map delete when a bucket empties, or O(log L). A query
// over [lo, hi) reads min(chunks spanned + 1, buckets) buckets and their
// O(s) intervals, plus O(log L + k) in the itree. Nothing is proportional
// to bytes, and memory is O(intervals).
//
// Queries visit intervals in no particular order (a wide query walks the
// bucket map, which Go orders at random): callers choose among them by a
// total order ((start, seq) or seq) so that results are deterministic.
type bindex struct {
	buckets map[uint64]*bucket
	long    itree
	n       int
	free    *bucket
}

// bucket lists the short intervals starting in one chunk, oldest first.
type bucket struct {
	key        uint64
	head, tail *inode
	next       *bucket // free list
}

func (x *bindex) insert(n *inode) {
	x.n++
	n.b, n.prev, n.next = nil, nil, nil
	if n.end-n.start > chunkSize {
		x.long.insert(n)
		return
	}
	if x.buckets == nil {
		x.buckets = make(map[uint64]*bucket)
	}
	k := n.start >> chunkShift
	b := x.buckets[k]
	if b == nil {
		if b = x.free; b != nil {
			x.free = b.next
			*b = bucket{}
		} else {
			b = new(bucket)
		}
		b.key = k
		x.buckets[k] = b
	}
	n.b = b
	n.prev = b.tail
	if b.tail != nil {
		b.tail.next = n
	} else {
		b.head = n
	}
	b.tail = n
}

func (x *bindex) remove(n *inode) {
	x.n--
	b := n.b
	if b == nil {
		x.long.remove(n)
		return
	}
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		b.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		b.tail = n.prev
	}
	n.b, n.prev, n.next = nil, nil, nil
	if b.head == nil {
		delete(x.buckets, b.key)
		b.next = x.free
		x.free = b
	}
}

// starts calls fn for every interval whose start is in [lo, hi).
func (x *bindex) starts(lo, hi uint64, fn func(*inode)) {
	if lo >= hi {
		return
	}
	x.short(lo>>chunkShift, (hi-1)>>chunkShift, func(n *inode) {
		if n.start >= lo && n.start < hi {
			fn(n)
		}
	})
	if x.long.n > 0 {
		x.long.overlaps(lo, hi, func(n *inode) bool {
			if n.start >= lo {
				fn(n)
			}
			return true
		})
	}
}

// overlaps calls fn for every non-empty interval that overlaps [lo, hi).
func (x *bindex) overlaps(lo, hi uint64, fn func(*inode)) {
	if lo >= hi {
		return
	}
	first := lo >> chunkShift
	if first > 0 {
		first-- // a short interval reaches at most one chunk past its own
	}
	x.short(first, (hi-1)>>chunkShift, func(n *inode) {
		if n.start < hi && n.end > lo && n.end > n.start {
			fn(n)
		}
	})
	if x.long.n > 0 {
		x.long.overlaps(lo, hi, func(n *inode) bool {
			fn(n)
			return true
		})
	}
}

// short calls fn for every short interval bucketed in chunks first..last.
func (x *bindex) short(first, last uint64, fn func(*inode)) {
	if last-first >= uint64(len(x.buckets)) {
		for _, b := range x.buckets {
			if b.key >= first && b.key <= last {
				for n := b.head; n != nil; n = n.next {
					fn(n)
				}
			}
		}
		return
	}
	for k := first; ; k++ {
		if b := x.buckets[k]; b != nil {
			for n := b.head; n != nil; n = n.next {
				fn(n)
			}
		}
		if k == last {
			return
		}
	}
}

// each calls fn for every interval.
func (x *bindex) each(fn func(*inode)) {
	for _, b := range x.buckets {
		for n := b.head; n != nil; n = n.next {
			fn(n)
		}
	}
	x.long.each(fn)
}

// reach is the furthest end among intervals that contain p; p or less
// when none does.
func (x *bindex) reach(p uint64) uint64 {
	var m uint64
	k := p >> chunkShift
	first := k
	if first > 0 {
		first--
	}
	for c := first; c <= k; c++ {
		if b := x.buckets[c]; b != nil {
			for n := b.head; n != nil; n = n.next {
				if n.start <= p && n.end > p && n.end > m {
					m = n.end
				}
			}
		}
	}
	if x.long.n > 0 {
		m = max(m, x.long.reach(p))
	}
	return m
}

// covers reports whether the union of the intervals covers [lo, hi); when
// not, gap is the first address not covered.
func (x *bindex) covers(lo, hi uint64) (ok bool, gap uint64) {
	for p := lo; p < hi; {
		r := x.reach(p)
		if r <= p {
			return false, p
		}
		p = r
	}
	return true, 0
}

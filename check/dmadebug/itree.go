package dmadebug

// An interval index: a treap ordered by (start, seq) whose nodes carry the
// largest end in their subtree (an augmented interval tree, CLRS 14.3).
// Insert is O(log n) expected: one descent that raises maxEnd on the way,
// then rotations up (fewer than 2 expected). Remove starts at the node
// itself (nodes know their parent): rotations down until it has one
// child (fewer than 2 expected), then maxEnd is fixed upward until an
// ancestor does not change, usually at once. Visiting the k intervals
// that overlap a range is O(log n + k); the furthest end among intervals
// that start at or before a point is O(log n). Priorities are a hash of
// the sequence number, so the shape, and every visit order, is
// deterministic.
//
// A bindex keeps its long intervals in one. Bounds are bare uint64
// because one index type serves both address spaces; the entry holds the
// typed addresses. Nodes are embedded in the entries, so indexing
// allocates nothing.

// inode is one interval [start, end) in an itree.
type inode struct {
	start, end uint64
	// off is where start falls in the mapping: 0 for an entry's first
	// physical range; an IOMMU-merged scatter-gather segment, contiguous
	// in bus addresses but not in memory, has more ranges (entry.more).
	off    uint64
	seq    uint64
	prio   uint64
	maxEnd uint64 // the largest end in this subtree
	left   *inode
	right  *inode
	parent *inode
	e      *entry
	// b, prev and next place a short interval in a bindex bucket.
	b          *bucket
	prev, next *inode
}

type itree struct {
	root *inode
	n    int
}

// checkInvariants verifies the order, heap, parent and maxEnd invariants
// after every change (TestITree calls verify itself).
const checkInvariants = false

// splitmix64 spreads sequence numbers into treap priorities.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (n *inode) before(m *inode) bool {
	return n.start < m.start || n.start == m.start && n.seq < m.seq
}

func (n *inode) fix() {
	m := n.end
	if n.left != nil && n.left.maxEnd > m {
		m = n.left.maxEnd
	}
	if n.right != nil && n.right.maxEnd > m {
		m = n.right.maxEnd
	}
	n.maxEnd = m
}

// insert adds n, whose start, end and seq are set.
func (t *itree) insert(n *inode) {
	n.prio = splitmix64(n.seq)
	n.left, n.right, n.parent = nil, nil, nil
	n.maxEnd = n.end
	t.n++
	p := t.root
	if p == nil {
		t.root = n
		return
	}
	for {
		if n.end > p.maxEnd {
			p.maxEnd = n.end
		}
		if n.before(p) {
			if p.left == nil {
				p.left = n
				break
			}
			p = p.left
		} else {
			if p.right == nil {
				p.right = n
				break
			}
			p = p.right
		}
	}
	n.parent = p
	for n.parent != nil && n.parent.prio < n.prio {
		t.rotateUp(n)
	}
	if checkInvariants {
		t.verify()
	}
}

// rotateUp makes n the parent of its parent.
func (t *itree) rotateUp(n *inode) {
	p, g := n.parent, n.parent.parent
	if p.left == n {
		p.left = n.right
		if n.right != nil {
			n.right.parent = p
		}
		n.right = p
	} else {
		p.right = n.left
		if n.left != nil {
			n.left.parent = p
		}
		n.left = p
	}
	p.parent, n.parent = n, g
	t.replace(g, p, n)
	p.fix()
	n.fix()
}

// replace puts n where old was below g (the root when g is nil).
func (t *itree) replace(g, old, n *inode) {
	switch {
	case g == nil:
		t.root = n
	case g.left == old:
		g.left = n
	default:
		g.right = n
	}
}

// remove takes n out; n must be in t.
func (t *itree) remove(n *inode) {
	for n.left != nil && n.right != nil {
		c := n.left
		if n.right.prio > c.prio {
			c = n.right
		}
		t.rotateUp(c)
	}
	child := n.left
	if child == nil {
		child = n.right
	}
	p := n.parent
	if child != nil {
		child.parent = p
	}
	t.replace(p, n, child)
	for ; p != nil; p = p.parent {
		old := p.maxEnd
		p.fix()
		if p.maxEnd == old {
			break
		}
	}
	n.left, n.right, n.parent = nil, nil, nil
	t.n--
	if checkInvariants {
		t.verify()
	}
}

// verify panics unless t is a treap ordered by (start, seq) with a max-heap
// of priorities, correct parents and correct maxEnd.
func (t *itree) verify() {
	var walk func(n, parent *inode) int
	walk = func(n, parent *inode) int {
		if n == nil {
			return 0
		}
		if n.parent != parent {
			panic("itree: wrong parent")
		}
		if parent != nil && parent.prio < n.prio {
			panic("itree: heap order")
		}
		if n.left != nil && !n.left.before(n) || n.right != nil && !n.before(n.right) {
			panic("itree: key order")
		}
		c := walk(n.left, n) + walk(n.right, n) + 1
		m := n.maxEnd
		n.fix()
		if n.maxEnd != m {
			panic("itree: stale maxEnd")
		}
		return c
	}
	if walk(t.root, nil) != t.n {
		panic("itree: wrong count")
	}
}

// overlaps calls fn, in (start, seq) order, for every interval that
// overlaps [lo, hi), until fn returns false.
func (t *itree) overlaps(lo, hi uint64, fn func(*inode) bool) {
	visit(t.root, lo, hi, fn)
}

func visit(t *inode, lo, hi uint64, fn func(*inode) bool) bool {
	if t == nil || t.maxEnd <= lo {
		return true
	}
	if !visit(t.left, lo, hi, fn) {
		return false
	}
	if t.start >= hi {
		return true // and so does everything to the right
	}
	if t.end > lo && t.end > t.start && !fn(t) {
		return false
	}
	return visit(t.right, lo, hi, fn)
}

// reach is the furthest end among intervals that start at or before p (0
// when there are none).
func (t *itree) reach(p uint64) uint64 {
	var m uint64
	for n := t.root; n != nil; {
		if n.start <= p {
			if n.end > m {
				m = n.end
			}
			if n.left != nil && n.left.maxEnd > m {
				m = n.left.maxEnd
			}
			n = n.right
		} else {
			n = n.left
		}
	}
	return m
}

// covers reports whether the union of the intervals covers [lo, hi); when
// not, gap is the first address not covered.
func (t *itree) covers(lo, hi uint64) (ok bool, gap uint64) {
	for p := lo; p < hi; {
		r := t.reach(p)
		if r <= p {
			return false, p
		}
		p = r
	}
	return true, 0
}

// each calls fn for every interval in (start, seq) order.
func (t *itree) each(fn func(*inode)) {
	var walk func(*inode)
	walk = func(n *inode) {
		if n == nil {
			return
		}
		walk(n.left)
		fn(n)
		walk(n.right)
	}
	walk(t.root)
}

package mem

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// refMem is a byte-by-byte, line-by-line reference of the content model
// over a small window of memory: no spans, no fill records. The span
// implementation must agree with it after every operation.
type refMem struct {
	base, line, pf, capacity int
	ver                      Version
	dram, latest             []Version
	nodes                    []*refCache
}

type refCache struct {
	present, dirty []bool
	seq            []uint64
	ver            []Version
	next           uint64
}

func newRef(base, size, line, pf, capacity, nodes int) *refMem {
	r := &refMem{base: base, line: line, pf: pf, capacity: capacity,
		dram: make([]Version, size), latest: make([]Version, size)}
	for range nodes {
		r.nodes = append(r.nodes, &refCache{
			present: make([]bool, size/line), dirty: make([]bool, size/line),
			seq: make([]uint64, size/line), ver: make([]Version, size)})
	}
	return r
}

func (r *refMem) cover(s, e int) (int, int) { return s / r.line, (e + r.line - 1) / r.line }

func (r *refMem) writeBack(c *refCache, l int) {
	if c.present[l] && c.dirty[l] {
		copy(r.dram[l*r.line:(l+1)*r.line], c.ver[l*r.line:(l+1)*r.line])
		c.dirty[l] = false
	}
}

func (r *refMem) drop(c *refCache, l int) { c.present[l], c.dirty[l] = false, false }

// fill brings the absent lines of [l0, l1) in, each run as one fill.
func (r *refMem) fill(c *refCache, l0, l1 int) {
	run := false
	for l := l0; l < l1; l++ {
		if c.present[l] {
			run = false
			continue
		}
		if !run {
			c.next++
			run = true
		}
		c.present[l], c.dirty[l], c.seq[l] = true, false, c.next
		copy(c.ver[l*r.line:(l+1)*r.line], r.dram[l*r.line:(l+1)*r.line])
	}
}

func (r *refMem) evict(c *refCache) {
	for {
		used, oldest := 0, -1
		for l, p := range c.present {
			if p {
				used += r.line
				if oldest < 0 || c.seq[l] < c.seq[oldest] {
					oldest = l
				}
			}
		}
		if used <= r.capacity {
			return
		}
		r.writeBack(c, oldest)
		r.drop(c, oldest)
	}
}

func (r *refMem) snoop(node, l0, l1 int, write bool) {
	for i, c := range r.nodes {
		if i == node {
			continue
		}
		for l := l0; l < l1; l++ {
			r.writeBack(c, l)
			if write {
				r.drop(c, l)
			}
		}
	}
}

// cpuRead returns what the CPU obtained.
func (r *refMem) cpuRead(node, s, e int, cached bool) []Version {
	if !cached {
		return append([]Version(nil), r.dram[s:e]...)
	}
	c := r.nodes[node]
	l0, l1 := r.cover(s, e)
	type rng struct{ a, b int }
	var cand []rng
	for l := l0; l < l1; {
		if c.present[l] {
			l++
			continue
		}
		g := l
		for l < l1 && !c.present[l] {
			l++
		}
		cand = append(cand, rng{g, l})
		page := (l - 1) * r.line / PageSize
		we := min(l+r.pf, (page+1)*PageSize/r.line)
		if we > l {
			cand = append(cand, rng{l, we})
		}
	}
	for _, x := range cand {
		r.snoop(node, x.a, x.b, false)
		r.fill(c, x.a, x.b)
	}
	got := append([]Version(nil), c.ver[s:e]...)
	r.evict(c)
	return got
}

func (r *refMem) cpuWrite(node, s, e int, cached bool) Version {
	r.ver++
	v := r.ver
	for i := s; i < e; i++ {
		r.latest[i] = v
	}
	if !cached {
		for i := s; i < e; i++ {
			r.dram[i] = v
		}
		return v
	}
	c := r.nodes[node]
	l0, l1 := r.cover(s, e)
	r.snoop(node, l0, l1, true)
	r.fill(c, l0, l1)
	for l := l0; l < l1; l++ {
		c.dirty[l] = true
	}
	for i := s; i < e; i++ {
		c.ver[i] = v
	}
	r.evict(c)
	return v
}

func (r *refMem) deviceRead(s, e int, coherent bool) []Version {
	got := append([]Version(nil), r.dram[s:e]...)
	if coherent {
		for _, c := range r.nodes {
			for i := s; i < e; i++ {
				if l := i / r.line; c.present[l] && c.dirty[l] {
					got[i-s] = c.ver[i]
				}
			}
		}
	}
	return got
}

func (r *refMem) deviceWrite(s, e int, coherent bool) Version {
	if coherent {
		l0, l1 := r.cover(s, e)
		r.snoop(-1, l0, l1, true)
	}
	r.ver++
	for i := s; i < e; i++ {
		r.dram[i], r.latest[i] = r.ver, r.ver
	}
	return r.ver
}

func (r *refMem) maintain(s, e int, wb, drop bool) {
	l0, l1 := r.cover(s, e)
	for _, c := range r.nodes {
		for l := l0; l < l1; l++ {
			if wb {
				r.writeBack(c, l)
			}
			if drop {
				r.drop(c, l)
			}
		}
	}
}

// stale is the Access fields the reference expects for got over [s, e).
func (r *refMem) stale(got []Version, s int) (bool, PhysAddr, Version, Version) {
	for i, g := range got {
		if g != r.latest[s+i] {
			return true, PhysAddr(r.base + s + i), g, r.latest[s+i]
		}
	}
	return false, 0, 0, 0
}

// expand is sm's values over [base, base+n), one per address.
func expand[V comparable](sm *spanMap[V], base, n int) []V {
	out := make([]V, n)
	sm.each(uint64(base), uint64(base+n), func(s, e uint64, v V) bool {
		for i := s; i < e; i++ {
			out[int(i)-base] = v
		}
		return true
	})
	return out
}

func (r *refMem) compare(m *Memory) error {
	n := len(r.dram)
	dram, latest := expand(&m.dram, r.base, n), expand(latestMap(m), r.base, n)
	for i := range n {
		pa := PhysAddr(r.base + i)
		if dram[i] != r.dram[i] {
			return fmt.Errorf("DRAM at %v: %d, want %d", pa, dram[i], r.dram[i])
		}
		if latest[i] != r.latest[i] {
			return fmt.Errorf("latest at %v: %d, want %d", pa, latest[i], r.latest[i])
		}
	}
	for node, c := range r.nodes {
		lines := expand(linesMap(m, m.caches[node]), r.base, n)
		for i, ls := range lines {
			got := lineWant{ls.ver, ls.seq() != 0, ls.dirty()}
			want := lineWant{}
			if l := i / r.line; c.present[l] {
				want = lineWant{c.ver[i], true, c.dirty[l]}
			}
			if got != want {
				return fmt.Errorf("node %d cache at %v: %+v, want %+v", node, PhysAddr(r.base+i), got, want)
			}
		}
	}
	return m.verify()
}

// TestContentAgainstReference runs random CPU, device and maintenance
// operations on two nodes with tiny caches (eviction all the time) and
// a prefetcher, and compares every byte of DRAM, latest and both caches
// and every read's staleness with the reference after each one.
func TestContentAgainstReference(t *testing.T) {
	const (
		window   = 3 * PageSize
		capacity = 1024
		pf       = 2
	)
	spec := testSpec(1*giB, 1*giB)
	for i := range spec.Nodes {
		spec.Nodes[i].Cache.Size.V = capacity
		spec.Nodes[i].Cache.Prefetch.V = pf
	}
	steps := 2000
	if testing.Short() {
		steps = 300
	}
	for seed := range uint64(3) {
		m := newMem(t, spec, Options{})
		base, err := m.AllocPages(0, window, ZoneNormal)
		if err != nil {
			t.Fatal(err)
		}
		uc, _ := m.Remap(base, window, Uncached)
		ref := newRef(int(base), window, 64, pf, capacity, 2)
		rnd := rand.New(rand.NewPCG(seed, 99))
		for step := range steps {
			s := rnd.IntN(window)
			e := s + 1 + rnd.IntN(min(window-s, 400))
			if rnd.IntN(4) == 0 {
				s, e = s&^63, min((e+63)&^63, window)
			}
			node := rnd.IntN(2)
			pa := base + PhysAddr(s)
			size := uint64(e - s)
			cached := rnd.IntN(5) != 0
			va := m.PhysToVirt(pa)
			if !cached {
				va = uc + VirtAddr(s)
			}
			var what string
			var a Access
			var wantGot []Version
			switch op := rnd.IntN(10); op {
			case 0, 1:
				what = fmt.Sprintf("read node %d [%d, %d) cached %v", node, s, e, cached)
				a = m.Read(nil, node, va, size)
				wantGot = ref.cpuRead(node, s, e, cached)
			case 2, 3:
				what = fmt.Sprintf("write node %d [%d, %d) cached %v", node, s, e, cached)
				if v, w := m.Write(nil, node, va, size), ref.cpuWrite(node, s, e, cached); v != w {
					t.Fatalf("seed %d step %d %s: version %d, want %d", seed, step, what, v, w)
				}
			case 4:
				coh := rnd.IntN(2) == 0
				what = fmt.Sprintf("device read [%d, %d) coherent %v", s, e, coh)
				a = m.DeviceRead("dev", coh, pa, size)
				wantGot = ref.deviceRead(s, e, coh)
			case 5:
				coh := rnd.IntN(2) == 0
				what = fmt.Sprintf("device write [%d, %d) coherent %v", s, e, coh)
				if v, w := m.DeviceWrite("dev", coh, pa, size), ref.deviceWrite(s, e, coh); v != w {
					t.Fatalf("seed %d step %d %s: version %d, want %d", seed, step, what, v, w)
				}
			case 6:
				what = fmt.Sprintf("clean [%d, %d)", s, e)
				m.Clean(nil, pa, size)
				ref.maintain(s, e, true, false)
			case 7:
				what = fmt.Sprintf("invalidate [%d, %d)", s, e)
				m.Invalidate(nil, pa, size)
				ref.maintain(s, e, false, true)
			case 8:
				what = fmt.Sprintf("flush [%d, %d)", s, e)
				m.Flush(nil, pa, size)
				ref.maintain(s, e, true, true)
			case 9:
				d := rnd.IntN(window - (e - s) + 1)
				what = fmt.Sprintf("copy node %d [%d, %d) to %d", node, s, e, d)
				m.CopyPhys(nil, node, base+PhysAddr(d), pa, size)
				ref.cpuRead(node, s, e, true)
				ref.cpuWrite(node, d, d+(e-s), true)
			}
			if wantGot != nil {
				st, at, got, want := ref.stale(wantGot, s)
				if a.Stale != st || a.StaleAt != at || a.Got != got || a.Want != want {
					t.Fatalf("seed %d step %d %s: stale %v at %v got %d want %d; reference %v at %v got %d want %d",
						seed, step, what, a.Stale, a.StaleAt, a.Got, a.Want, st, at, got, want)
				}
			}
			if err := ref.compare(m); err != nil {
				t.Fatalf("seed %d step %d %s: %v", seed, step, what, err)
			}
		}
	}
}

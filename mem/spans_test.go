package mem

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type sp = span[int]

func TestSpanMapSet(t *testing.T) {
	type op struct {
		s, e uint64
		v    int
	}
	tests := []struct {
		name string
		ops  []op
		want []sp
	}{
		{"empty", nil, nil},
		{"one", []op{{10, 20, 1}}, []sp{{10, 20, 1}}},
		{"zero length does nothing", []op{{10, 10, 1}}, nil},
		{"adjacent equal merge", []op{{10, 20, 1}, {20, 30, 1}}, []sp{{10, 30, 1}}},
		{"adjacent equal merge on the left", []op{{20, 30, 1}, {10, 20, 1}}, []sp{{10, 30, 1}}},
		{"adjacent different stay apart", []op{{10, 20, 1}, {20, 30, 2}}, []sp{{10, 20, 1}, {20, 30, 2}}},
		{"split in the middle", []op{{0, 100, 1}, {40, 60, 2}}, []sp{{0, 40, 1}, {40, 60, 2}, {60, 100, 1}}},
		{"overwrite restores and merges", []op{{0, 100, 1}, {40, 60, 2}, {40, 60, 1}}, []sp{{0, 100, 1}}},
		{"cover several", []op{{0, 10, 1}, {20, 30, 2}, {40, 50, 3}, {5, 45, 4}}, []sp{{0, 5, 1}, {5, 45, 4}, {45, 50, 3}}},
		{"zero removes", []op{{0, 100, 1}, {10, 20, 0}}, []sp{{0, 10, 1}, {20, 100, 1}}},
		{"zero removes all", []op{{0, 10, 1}, {20, 30, 2}, {0, 30, 0}}, nil},
		{"bridge a gap", []op{{0, 10, 1}, {20, 30, 1}, {10, 20, 1}}, []sp{{0, 30, 1}}},
		{"top of the address space", []op{{1<<64 - 16, 1<<64 - 1, 7}}, []sp{{1<<64 - 16, 1<<64 - 1, 7}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m spanMap[int]
			for _, o := range tc.ops {
				m.set(o.s, o.e, o.v)
				if err := m.check(); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(m.spans(), tc.want) {
				t.Errorf("spans %v, want %v", m.spans(), tc.want)
			}
			if m.len() != len(tc.want) {
				t.Errorf("len %d, want %d", m.len(), len(tc.want))
			}
		})
	}
}

func TestSpanMapUpdateGapsCovered(t *testing.T) {
	var m spanMap[int]
	m.set(0, 10, 1)
	m.set(20, 30, 2)
	m.update(5, 25, func(v int) int { return v * 10 })
	want := []sp{{0, 5, 1}, {5, 10, 10}, {20, 25, 20}, {25, 30, 2}}
	if !slices.Equal(m.spans(), want) {
		t.Fatalf("after update: %v, want %v", m.spans(), want)
	}
	m.update(0, 30, func(int) int { return 3 })
	if want := []sp{{0, 10, 3}, {20, 30, 3}}; !slices.Equal(m.spans(), want) {
		t.Fatalf("update to one value leaves %v, want %v (merged, gap kept)", m.spans(), want)
	}
	var gaps [][2]uint64
	m.gaps(0, 40, func(s, e uint64) { gaps = append(gaps, [2]uint64{s, e}) })
	if want := [][2]uint64{{10, 20}, {30, 40}}; !slices.Equal(gaps, want) {
		t.Errorf("gaps %v, want %v", gaps, want)
	}
	if got := m.covered(5, 25); got != 10 {
		t.Errorf("covered(5, 25) = %d, want 10", got)
	}
	if got := m.get(25); got != 3 {
		t.Errorf("get(25) = %d", got)
	}
	if got := m.get(15); got != 0 {
		t.Errorf("get in a gap = %d, want 0", got)
	}
	m.update(0, 30, func(int) int { return 0 })
	if m.len() != 0 {
		t.Errorf("update to zero leaves %v", m.spans())
	}
}

func TestFirstDiff(t *testing.T) {
	var a, b spanMap[int]
	a.set(0, 100, 1)
	b.set(0, 50, 1)
	b.set(50, 100, 2)
	if at, va, vb, ok := firstDiff(a.spans(), &b, 0, 100); !ok || at != 50 || va != 1 || vb != 2 {
		t.Errorf("firstDiff = %d %d %d %v, want 50 1 2 true", at, va, vb, ok)
	}
	if _, _, _, ok := firstDiff(a.spans(), &b, 10, 50); ok {
		t.Error("equal on [10, 50) but a difference was found")
	}
	a.remove(20, 30)
	if at, va, vb, ok := firstDiff(a.spans(), &b, 10, 50); !ok || at != 20 || va != 0 || vb != 1 {
		t.Errorf("gap: firstDiff = %d %d %d %v, want 20 0 1 true", at, va, vb, ok)
	}
}

// TestSpanMapAgainstBytes runs random operations on a spanMap and on a
// plain array of values and compares them after each step.
func TestSpanMapAgainstBytes(t *testing.T) {
	const n = 300
	r := rand.New(rand.NewPCG(1, 2))
	var m spanMap[int]
	var ref [n]int
	for step := range 20000 {
		s := uint64(r.IntN(n))
		e := s + uint64(r.IntN(n-int(s))+1)
		v := r.IntN(4)
		switch r.IntN(3) {
		case 0:
			m.set(s, e, v)
			for i := s; i < e; i++ {
				ref[i] = v
			}
		case 1:
			m.update(s, e, func(x int) int { return (x + v) % 4 })
			for i := s; i < e; i++ {
				if ref[i] != 0 {
					ref[i] = (ref[i] + v) % 4
				}
			}
		case 2:
			m.remove(s, e)
			for i := s; i < e; i++ {
				ref[i] = 0
			}
		}
		if err := m.check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		for i := range uint64(n) {
			if got := m.get(i); got != ref[i] {
				t.Fatalf("step %d: at %d got %d, want %d", step, i, got, ref[i])
			}
		}
		// The span count is the number of runs of equal non-zero values.
		runs := 0
		for i := range n {
			if ref[i] != 0 && (i == 0 || ref[i-1] != ref[i]) {
				runs++
			}
		}
		if m.len() != runs {
			t.Fatalf("step %d: %d spans for %d runs", step, m.len(), runs)
		}
	}
}

// TestSpanMapMatchesReference runs seeded random operation sequences
// (set, remove, cut, a cut refilled over the same spans, assign,
// update, reset) on pairs of spanMaps and of the sorted-slice maps they
// replaced (spans_ref_test.go) and requires the same spans, the same
// answers to every query and the same calls of update's function, after
// each step; with plain maps and with lazy ones (void spans holding -1,
// compacted as soon as they outnumber the live ones).
func TestSpanMapMatchesReference(t *testing.T) {
	tests := []spanMapCase{
		{"dense", 1, 200, 0, 3, 6000},
		{"sparse", 2, 1 << 20, 0, 50, 6000},
		{"many spans", 3, 1 << 16, 0, 1000, 6000},
		{"top of the address space", 4, 1 << 12, 1<<64 - 1<<12, 5, 4000},
	}
	defer func(v int) { voidSlack = v }(voidSlack)
	for _, lazy := range []bool{false, true} {
		for _, tc := range tests {
			if lazy {
				tc.name += ", lazy"
			}
			t.Run(tc.name, func(t *testing.T) { spanMapAgainstReference(t, tc, lazy) })
		}
	}
}

// spanMapCase is a workload of TestSpanMapMatchesReference.
type spanMapCase struct {
	name   string
	seed   uint64
	space  uint64 // addresses used: small ones merge and split often
	base   uint64
	values int
	steps  int
}

func spanMapAgainstReference(t *testing.T, tc spanMapCase, lazy bool) {
	r := rand.New(rand.NewPCG(tc.seed, 17))
	var m [2]spanMap[int]
	var ref [2]refSpanMap[int]
	if lazy {
		voidSlack = 8
		for k := range m {
			m[k].setLazy(-1)
		}
	}
	rng := func() (uint64, uint64) {
		s := r.Uint64N(tc.space)
		// Mostly short ranges, so that spans pile up; at times
		// long ones that cover many.
		n := r.Uint64N(min(tc.space-s, max(1, tc.space>>(2+r.IntN(14))))) + 1
		return tc.base + s, tc.base + s + n
	}
	for step := range tc.steps {
		k := r.IntN(2)
		s, e := rng()
		v := r.IntN(tc.values + 1)
		switch op := r.IntN(1000); {
		case op < 560:
			m[k].set(s, e, v)
			ref[k].set(s, e, v)
		case op < 600:
			// A set over whole spans (void ones too), from a span's
			// start to the end of the same span or of one to three
			// spans on: split and join's cases.
			var sp []span[int] // void ones too
			for _, l := range m[k].leaves {
				sp = append(sp, l.s[:l.n]...)
			}
			if len(sp) > 0 {
				q := r.IntN(len(sp))
				w := min(q+r.IntN(4), len(sp)-1)
				s, e = sp[q].start, sp[w].end
				if r.IntN(3) == 0 {
					s += (e - s) / 3
				}
			}
			m[k].set(s, e, v)
			ref[k].set(s, e, v)
		case op < 630:
			m[k].remove(s, e)
			ref[k].remove(s, e)
		case op < 660:
			// A cut refilled over the same spans, with new values: a
			// lazy map's in-place path (cut's void spans, assign's
			// values written over them), and at times a piece left
			// out or two merged.
			var got []span[int]
			m[k].cut(s, e, func(ps, pe uint64, v int) { got = append(got, span[int]{ps, pe, v}) })
			ref[k].remove(s, e)
			for q := range got {
				got[q].v = 1 + (got[q].v+q+r.IntN(2))%tc.values
			}
			if len(got) > 1 && r.IntN(4) == 0 {
				got = slices.Delete(got, 0, 1)
			}
			m[k].assign(s, e, got)
			for _, p := range got {
				ref[k].set(p.start, p.end, p.v)
			}
		case op < 700:
			// cut is each then remove, in one search.
			var got, want []span[int]
			var n, wn uint64
			n = m[k].cut(s, e, func(ps, pe uint64, v int) { got = append(got, span[int]{ps, pe, v}) })
			ref[k].each(s, e, func(ps, pe uint64, v int) bool {
				want = append(want, span[int]{ps, pe, v})
				wn += pe - ps
				return true
			})
			ref[k].remove(s, e)
			if !slices.Equal(got, want) || n != wn {
				t.Fatalf("step %d: cut saw %v (%d), the reference %v (%d)", step, got, n, want, wn)
			}
		case op < 800:
			// Pieces inside [s, e), in order, some touching,
			// some holding the same value.
			var pieces []span[int]
			for x := s; x < e; {
				n := r.Uint64N(min(e-x, 1+(e-s)/4)) + 1
				if w := r.IntN(tc.values + 1); w != 0 && r.IntN(3) > 0 {
					pieces = append(pieces, span[int]{x, x + n, w})
				}
				x += n
			}
			m[k].assign(s, e, pieces)
			ref[k].remove(s, e)
			for _, p := range pieces {
				ref[k].set(p.start, p.end, p.v)
			}
		case op < 999:
			var got, want []int
			f := func(seen *[]int) func(int) int {
				return func(x int) int {
					*seen = append(*seen, x)
					if x%3 == 0 {
						return 0
					}
					return (x + v) % (tc.values + 1)
				}
			}
			m[k].update(s, e, f(&got))
			ref[k].update(s, e, f(&want))
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: update saw %v, the reference %v", step, got, want)
			}
		default:
			m[k].reset()
			ref[k].reset()
		}
		if lazy && r.IntN(50) == 0 {
			m[k].compact() // not only when the voids outnumber the live spans
		}
		for i := range m {
			if err := m[i].check(); err != nil {
				t.Fatalf("step %d: map %d: %v", step, i, err)
			}
			if got, want := m[i].spans(), ref[i].s; !slices.Equal(got, want) {
				t.Fatalf("step %d: map %d: spans %v, want %v", step, i, got, want)
			}
			if m[i].len() != ref[i].len() {
				t.Fatalf("step %d: map %d: len %d, want %d", step, i, m[i].len(), ref[i].len())
			}
		}
		compareQueries(t, step, &m, &ref, rng)
	}
}

// compareQueries asks both pairs the same queries over a random range.
func compareQueries(t *testing.T, step int, m *[2]spanMap[int], ref *[2]refSpanMap[int], rng func() (uint64, uint64)) {
	t.Helper()
	s, e := rng()
	for i := range m {
		if got, want := m[i].get(s), ref[i].get(s); got != want {
			t.Fatalf("step %d: get(%d) = %d, want %d", step, s, got, want)
		}
		type piece struct {
			s, e uint64
			v    int
		}
		var got, want []piece
		stop := int(s % 5) // sometimes stop early
		m[i].each(s, e, func(ps, pe uint64, v int) bool { got = append(got, piece{ps, pe, v}); return len(got) != stop })
		ref[i].each(s, e, func(ps, pe uint64, v int) bool { want = append(want, piece{ps, pe, v}); return len(want) != stop })
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: each(%d, %d) = %v, want %v", step, s, e, got, want)
		}
		got, want = got[:0], want[:0]
		m[i].gaps(s, e, func(ps, pe uint64) { got = append(got, piece{ps, pe, 0}) })
		ref[i].gaps(s, e, func(ps, pe uint64) { want = append(want, piece{ps, pe, 0}) })
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: gaps(%d, %d) = %v, want %v", step, s, e, got, want)
		}
		if got, want := m[i].covered(s, e), ref[i].covered(s, e); got != want {
			t.Fatalf("step %d: covered(%d, %d) = %d, want %d", step, s, e, got, want)
		}
	}
	at, va, vb, ok := firstDiff(m[0].spans(), &m[1], s, e)
	rat, rva, rvb, rok := refFirstDiff(&ref[0], &ref[1], s, e)
	if at != rat || va != rva || vb != rvb || ok != rok {
		t.Fatalf("step %d: firstDiff(%d, %d) = %d %d %d %v, want %d %d %d %v", step, s, e, at, va, vb, ok, rat, rva, rvb, rok)
	}
}

// TestSpanMapSteadyAllocs: a map whose span count stays the same, as a
// ring's buffers rewritten in turn, allocates nothing per write.
func TestSpanMapSteadyAllocs(t *testing.T) {
	var m spanMap[Version]
	const bufs, size = 4096, 1500
	v := Version(1)
	write := func(i int) {
		s := uint64(i%bufs) * 2 * size
		m.set(s, s+size, v)
		v++
	}
	for i := range 2 * bufs {
		write(i)
	}
	i := 0
	if a := testing.AllocsPerRun(1000, func() { write(i); i++ }); a != 0 {
		t.Errorf("%.1f allocations per write, want 0", a)
	}
	if m.len() != bufs {
		t.Errorf("%d spans, want %d", m.len(), bufs)
	}
}

// TestOverlay: laying a coherent device read's dirty pieces over DRAM's
// versions (Memory.overlay, on lists) gives the spans that writing both
// into a map does, on random lists.
func TestOverlay(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 17))
	pieces := func(zero bool) []span[Version] {
		var out []span[Version]
		for x := r.Uint64N(8); x < 200; {
			n := r.Uint64N(12) + 1
			if r.IntN(3) > 0 {
				v := Version(r.IntN(4))
				if v == 0 && !zero {
					v = 1
				}
				out = append(out, span[Version]{x, x + n, v})
			}
			x += n
		}
		return out
	}
	for step := range 3000 {
		var m Memory
		var ref spanMap[Version]
		for _, p := range pieces(false) {
			m.gotAdd(p.start, p.end, p.v)
			ref.set(p.start, p.end, p.v)
		}
		top := pieces(true)
		for _, p := range top {
			ref.set(p.start, p.end, p.v)
		}
		m.overlay(top)
		if got, want := m.got, ref.spans(); !slices.Equal(got, want) {
			t.Fatalf("step %d: overlay %v, want %v", step, got, want)
		}
	}
}

// TestSpanMapLazyVoids walks a lazy map through a ring's cases by hand:
// a cut inside live spans leaves them void and unseen; a refill over
// the same spans writes them in place; a set ending on a void span, or
// splitting one, makes it live; a cut that reaches out of its range
// removes as a plain map does. After each step the map must equal a
// plain map given the same operations, void count included in check.
func TestSpanMapLazyVoids(t *testing.T) {
	var lazy, plain spanMap[int]
	lazy.setLazy(-1)
	step := func(what string, f func(m *spanMap[int])) {
		t.Helper()
		f(&lazy)
		f(&plain)
		if err := lazy.check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got, want := lazy.spans(), plain.spans(); !slices.Equal(got, want) || lazy.len() != plain.len() {
			t.Fatalf("%s: spans %v (%d), want %v (%d)", what, got, lazy.len(), want, plain.len())
		}
	}
	nop := func(uint64, uint64, int) {}
	step("fill", func(m *spanMap[int]) {
		for i := range uint64(8) {
			m.set(i*10, i*10+6, int(i)+1)
			m.set(i*10+6, i*10+10, int(i)+20)
		}
	})
	step("cut two spans", func(m *spanMap[int]) { m.cut(10, 20, nop) })
	if lazy.voids != 2 {
		t.Fatalf("%d void spans after a cut inside live ones, want 2", lazy.voids)
	}
	step("refill in place", func(m *spanMap[int]) { m.assign(10, 20, []span[int]{{10, 16, 7}, {16, 20, 8}}) })
	if lazy.voids != 0 {
		t.Fatalf("%d void spans after the refill, want 0", lazy.voids)
	}
	step("cut again", func(m *spanMap[int]) { m.cut(36, 40, nop) })
	step("set ending on a void span", func(m *spanMap[int]) { m.set(30, 40, 9) })
	step("cut two more", func(m *spanMap[int]) { m.cut(40, 50, nop) })
	step("set over a live span and void ones", func(m *spanMap[int]) { m.set(26, 50, 9) })
	step("cut a third", func(m *spanMap[int]) { m.cut(50, 60, nop) })
	step("split a void span", func(m *spanMap[int]) { m.set(52, 54, 3) })
	step("cut reaching out", func(m *spanMap[int]) { m.cut(63, 75, nop) })
	step("set over voids and a gap", func(m *spanMap[int]) { m.set(0, 80, 5) })
	if lazy.voids != 0 {
		t.Fatalf("%d void spans after a set over all, want 0", lazy.voids)
	}
}

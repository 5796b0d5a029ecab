package uvm

import (
	"math/rand/v2"
	"testing"
)

// prefetchPagesPerPage is PrefetchPages walking the tree from every
// faulted page, as the driver does: the reference the region skip must
// match.
func prefetchPagesPerPage(in PrefetchInput) PageMask {
	n := min(max(in.Pages, 0), PagesPerBlock)
	var out PageMask
	if n == 0 {
		return out
	}
	block := rangeMask(0, n)
	faulted := and(in.Faulted, block)
	if in.FirstTouchPreferred {
		out = block
	} else {
		tree := or(and(in.Resident, block), faulted)
		growBigPages(&tree, &faulted, &in.Thrashing, n)
		migrate := andNot(faulted, in.Thrashing)
		for pg := migrate.First(); pg >= 0; pg = migrate.Next(pg + 1) {
			first, end := prefetchRegion(&tree, n, pg, in.Threshold)
			out.SetRange(first, end)
			if end == n {
				break
			}
		}
	}
	out.AndNot(&faulted)
	out.AndNot(&in.Resident)
	out.AndNot(&in.Thrashing)
	return out
}

// randomMask sets each page with probability p, in runs as faults come.
func randomMask(r *rand.Rand, p float64) PageMask {
	var m PageMask
	for pg := 0; pg < PagesPerBlock; {
		run := 1 + r.IntN(64)
		if r.Float64() < p {
			m.SetRange(pg, min(pg+run, PagesPerBlock))
		}
		pg += run
	}
	return m
}

// TestPrefetchPagesSkipsRegions: skipping the faulted pages of a chosen
// region gives the decision of a walk from every faulted page.
func TestPrefetchPagesSkipsRegions(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 3))
	for i := range 20000 {
		in := PrefetchInput{
			Pages:     PagesPerBlock - r.IntN(4)*r.IntN(200),
			Resident:  randomMask(r, r.Float64()),
			Faulted:   randomMask(r, r.Float64()),
			Threshold: []int{1, 25, 51, 75, 99, 100}[r.IntN(6)],
		}
		if r.IntN(4) == 0 {
			in.Thrashing = randomMask(r, 0.1)
		}
		in.Resident.AndNot(&in.Faulted)
		if got, want := PrefetchPages(in), prefetchPagesPerPage(in); got != want {
			t.Fatalf("case %d %+v: got %v, want %v", i, in, got.Pages(), want.Pages())
		}
	}
}

// TestNextClear: the first clear page at or above i.
func TestNextClear(t *testing.T) {
	var full PageMask
	full.SetRange(0, PagesPerBlock)
	for _, c := range []struct {
		m       PageMask
		i, want int
	}{
		{PageMask{}, 0, 0},
		{PageMask{}, 511, 511},
		{rangeMask(0, 64), 0, 64},
		{rangeMask(3, 200), 3, 200},
		{rangeMask(3, 200), 1, 1},
		{full, 0, PagesPerBlock},
		{full, 300, PagesPerBlock},
		{rangeMask(100, 512), 130, PagesPerBlock},
	} {
		if got := c.m.NextClear(c.i); got != c.want {
			t.Errorf("%v.NextClear(%d) = %d, want %d", c.m.Pages(), c.i, got, c.want)
		}
	}
}

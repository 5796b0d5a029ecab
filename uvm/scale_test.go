package uvm

import (
	"fmt"
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

// selectResidencyPerPage is uvm_va_block_select_residency page by page,
// as the driver decides: the reference selectResidency's masks must
// match.
func (d *Driver) selectResidencyPerPage(b *vaBlock, requester Processor, pages, writes PageMask, pins []pinnedFault) residencySelection {
	var sel residencySelection
	hints := map[int]thrashHint{}
	for _, r := range pins {
		hints[r.page] = r.hint
	}
	for pg := pages.First(); pg >= 0; pg = pages.Next(pg + 1) {
		pol := b.alloc.policyAt(b.addr(pg))
		hint := hints[pg]
		write := writes.Test(pg)
		to, dup := requester, false
		pl := pol.preferred
		closest := d.closest(b.holders(pg), requester)
		switch {
		case pol.readMostly:
			dup = !write
		case requester == pl:
		case hint.kind == hintPin:
			to = hint.residency
		case closest == NoProcessor:
			if pl != NoProcessor && d.canAccess(requester, pl) {
				to = pl
			}
		case pol.accessedBy.Has(requester) && d.canAccess(requester, closest):
			to = closest
		case closest != requester && pl != NoProcessor && d.canAccess(requester, pl):
			to = pl
		}
		fallback := !d.hasMemory(to)
		if fallback {
			to, dup = CPU, false
		}
		var m PageMask
		m.Set(pg)
		sel.dest.add(to, m)
		if dup {
			sel.dup.Set(pg)
		}
		switch {
		case hint.kind == hintPin:
			sel.pinned.Set(pg)
			sel.pinProcs |= hint.processors
		case to != requester && !fallback:
			sel.advice.Set(pg)
		}
	}
	return sel
}

// TestSelectResidencyMasks: selectResidency over masks chooses for each
// page what the per-page rules choose, on random blocks: one to three
// GPUs (some without memory) linked by PCIe or NVLink, random policy
// spans, holders, writes and pins, and the same without pins.
func TestSelectResidencyMasks(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 4))
	links := []Link{LinkNone, LinkPCIe, LinkNVLink}
	for i := range 3000 {
		ngpu := 1 + r.IntN(3)
		cfg := Config{Params: testParams()}
		for range ngpu {
			cfg.GPUs = append(cfg.GPUs, GPUConfig{Generation: PascalPlus, ManagedMemory: int64(r.IntN(3)) * BlockSize,
				CPULink: links[1+r.IntN(2)]})
		}
		cfg.Peers = make([][]Link, ngpu)
		for x := range ngpu {
			cfg.Peers[x] = make([]Link, ngpu)
			for y := range x {
				l := links[r.IntN(3)]
				cfg.Peers[x][y], cfg.Peers[y][x] = l, l
			}
		}
		d, _ := newDriver(t, cfg)
		procs := ngpu + 1
		a := mustAlloc(t, d, 2*BlockSize)
		for range r.IntN(6) {
			first := r.IntN(2 * PagesPerBlock)
			end := first + 1 + r.IntN(2*PagesPerBlock-first)
			q := Processor(r.IntN(procs))
			a.updatePolicy(a.Base+Addr(first)*PageSize, a.Base+Addr(end)*PageSize, func(pol *policy) {
				switch r.IntN(3) {
				case 0:
					pol.readMostly = !pol.readMostly
				case 1:
					pol.preferred = q
				case 2:
					pol.accessedBy = pol.accessedBy.With(q)
				}
			})
		}
		b := d.block(a, uint64(a.Base)/BlockSize+uint64(r.IntN(2)))
		for q := range procs {
			if r.IntN(2) == 0 {
				*b.residentMask(Processor(q)) = randomMask(r, r.Float64())
			}
		}
		requester := Processor(r.IntN(procs))
		pages, writes := randomMask(r, r.Float64()), randomMask(r, r.Float64())
		var pins []pinnedFault
		for pg := pages.First(); pg >= 0; pg = pages.Next(pg + 1) {
			if r.IntN(20) == 0 {
				pins = append(pins, pinnedFault{page: pg, hint: thrashHint{kind: hintPin,
					residency: Processor(r.IntN(procs)), processors: ProcSet(r.IntN(1 << procs))}})
			}
		}
		var got residencySelection
		d.selectResidency(b, requester, pages, writes, pins, &got)
		want := d.selectResidencyPerPage(b, requester, pages, writes, pins)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("case %d: got %+v\nwant %+v", i, got, want)
		}
		// The same without pins, the usual case (no thrashing).
		got = residencySelection{}
		d.selectResidency(b, requester, pages, writes, nil, &got)
		want = d.selectResidencyPerPage(b, requester, pages, writes, nil)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("case %d without pins: got %+v\nwant %+v", i, got, want)
		}
	}
}

// TestGrowBigPagesLanes: growing faults to big pages a mask word's lane
// at a time gives what counting each big page's faulted and thrashing
// pages gives, partial blocks included.
func TestGrowBigPagesLanes(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 5))
	for i := range 20000 {
		n := PagesPerBlock - r.IntN(4)*r.IntN(200)
		tree, faulted, thrashing := randomMask(r, r.Float64()), randomMask(r, r.Float64()*0.3), randomMask(r, r.Float64()*0.2)
		want := tree
		for first := 0; first < n; first += pagesPerBigPage {
			end := min(first+pagesPerBigPage, n)
			if faulted.CountRange(first, end) > 0 && thrashing.CountRange(first, end) == 0 {
				want.SetRange(first, end)
			}
		}
		f := and(faulted, rangeMask(0, n))
		got := tree
		growBigPages(&got, &f, &thrashing, n)
		if got != want {
			t.Fatalf("case %d (n %d): got %v, want %v", i, n, got.Pages(), want.Pages())
		}
	}
}

package mem

import (
	"errors"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// MarkHint marks placed pages only, once each, and only those the
// filter accepts; a CPU access then calls the handler once per marked
// page of its range, in address order, before the access, and clears
// the marks; an access to unmarked pages calls nothing and costs what
// it did before any page was marked.
func TestNUMAHintSeam(t *testing.T) {
	m := newMem(t, testSpec(64*miB, 64*miB), Options{})
	var placed []int
	va, err := m.MapAnon(4*PageSize, onNode(m, 0, &placed))
	if err != nil {
		t.Fatal(err)
	}
	page := func(i int) VirtAddr { return va + VirtAddr(i*PageSize) }
	cost := func(i int) sim.Time { // one remote-free read of page i by a fresh process
		var d sim.Time
		m.eng.Spawn("r", func(p *sim.Proc) {
			t0 := p.Now()
			m.Read(p, 0, page(i), 64)
			d = p.Now() - t0
		})
		m.eng.Run()
		return d
	}
	if err := m.Populate(page(0), 3*PageSize, 0); err != nil { // page 3 stays absent
		t.Fatal(err)
	}
	before := cost(2)

	n, err := m.MarkHint(va, 4*PageSize, func(at VirtAddr, node int) bool { return at != page(1) && node == 0 })
	if err != nil || n != 2 {
		t.Fatalf("MarkHint = %d, %v; want 2 (page 1 refused, page 3 absent)", n, err)
	}
	if again, _ := m.MarkHint(va, 4*PageSize, nil); again != 1 {
		t.Fatalf("second MarkHint = %d, want 1 (page 1; 0 and 2 already marked)", again)
	}
	for i, want := range []bool{true, true, true, false} {
		if m.Hinted(page(i)) != want {
			t.Errorf("page %d hinted = %v, want %v", i, !want, want)
		}
	}
	if _, err := m.MarkHint(va, 5*PageSize, nil); !errors.Is(err, ErrBadAddr) {
		t.Errorf("MarkHint beyond the mapping: %v, want ErrBadAddr", err)
	}

	var faults []VirtAddr
	const faultCost = 3 * sim.Microsecond
	if err := m.SetHintHandler(va, func(p *sim.Proc, node int, at VirtAddr) {
		if m.Hinted(at) {
			t.Errorf("handler at %v: still marked", at)
		}
		faults = append(faults, at)
		p.Sleep(faultCost)
	}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetHintHandler(va+PageSize, nil); !errors.Is(err, ErrBadAddr) {
		t.Errorf("handler not at a mapping's start: %v", err)
	}
	var took sim.Time
	m.eng.Spawn("w", func(p *sim.Proc) {
		t0 := p.Now()
		m.Write(p, 0, page(1)-8, 16) // pages 0 and 1
		took = p.Now() - t0
	})
	m.eng.Run()
	if !slices.Equal(faults, []VirtAddr{page(0), page(1)}) {
		t.Fatalf("faults %v, want pages 0 and 1", faults)
	}
	if took < 2*faultCost {
		t.Errorf("access with two faults took %v, want at least %v", took, 2*faultCost)
	}
	if m.Hinted(page(0)) || m.Hinted(page(1)) || !m.Hinted(page(2)) {
		t.Error("marks after the write: want only page 2's left")
	}
	// Unmarked pages: no fault, the same cost as before any mark.
	if got := cost(0); got != before || len(faults) != 2 {
		t.Errorf("unmarked read cost %v (was %v), faults %d", got, before, len(faults))
	}
	// Migration drops the mark (the new PTE is normal).
	dst, _ := m.AllocPages(1, PageSize, ZoneNormal)
	old, err := m.MovePage(nil, 0, page(2), dst)
	if err != nil || m.Hinted(page(2)) {
		t.Fatalf("MovePage: %v, hinted after %v", err, m.Hinted(page(2)))
	}
	_ = m.FreePages(old, PageSize)
	if m.hints != 0 {
		t.Errorf("hint count %d after every mark went, want 0", m.hints)
	}
	if _, err := m.MarkHint(va, PageSize, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.UnmapAnon(va); err != nil || m.hints != 0 {
		t.Errorf("unmap: %v, hint count %d, want 0", err, m.hints)
	}
}

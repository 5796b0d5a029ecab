package kernel

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Pinned pages (a driver's pin_user_pages) stay where they are on every
// migration path, with each path's error; after the unpin they move.
func TestPinnedPagesDoNotMigrate(t *testing.T) {
	k, m := numaMachine(t, false, twoNodes)
	p, _ := k.NewProcess("app", 0)
	va, _ := p.MmapAnon(4 * mem.PageSize)
	m.Write(nil, 0, va, 4*mem.PageSize) // all four on node 0
	// Pages 1 and 2 registered (cuMemHostRegister's pin), page 2 twice
	// (a second driver).
	pin1, err := p.PinPages(va+mem.PageSize, 2*mem.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	pin2, _ := p.PinPages(va+2*mem.PageSize, mem.PageSize)
	if got := []int{m.Pinned(va), m.Pinned(va + mem.PageSize), m.Pinned(va + 2*mem.PageSize)}; !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("pin counts %v", got)
	}
	tests := []struct {
		name string
		move func() error
		want []int // nodes after
	}{
		{"move_pages", func() error {
			st, err := p.MovePages(nil, p, []mem.VirtAddr{va, va + mem.PageSize}, []int{1, 1}, MPOLMFMove)
			if want := []int{1, -int(syscall.EBUSY)}; !slices.Equal(st, want) {
				t.Errorf("move_pages status %v, want %v", st, want)
			}
			return err
		}, []int{1, 0, 0, 0}},
		{"migrate_pages", func() error {
			left, err := p.MigratePages(nil, p, []int{0}, []int{1})
			if left != 2 {
				t.Errorf("migrate_pages left %d, want the 2 pinned", left)
			}
			return err
		}, []int{1, 0, 0, 1}},
		{"mbind MOVE|STRICT", func() error {
			err := p.Mbind(nil, va, 4*mem.PageSize, MPOLBind, 0, []int{1}, MPOLMFMove|MPOLMFStrict)
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("mbind MOVE|STRICT over pinned pages: %v, want EIO", err)
			}
			return nil
		}, []int{1, 0, 0, 1}},
		{"mbind MOVE", func() error {
			return p.Mbind(nil, va, 4*mem.PageSize, MPOLBind, 0, []int{1}, MPOLMFMove)
		}, []int{1, 0, 0, 1}},
	}
	for _, tc := range tests {
		if err := tc.move(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := nodesOf(t, m, va, 4); !slices.Equal(got, tc.want) {
			t.Errorf("%s: pages on %v, want %v", tc.name, got, tc.want)
		}
	}
	if f := k.VMStat().PgmigrateFail; f != 1+2+2+2 {
		t.Errorf("pgmigrate_fail %d, want 7 (move_pages 1, then 2 per call over both pinned pages)", f)
	}
	pin1.Release()
	pin1.Release() // twice is nothing
	if err := p.Mbind(nil, va, 4*mem.PageSize, MPOLBind, 0, []int{1}, MPOLMFMove|MPOLMFStrict); !errors.Is(err, syscall.EIO) {
		t.Errorf("page 2 still pinned once: %v, want EIO", err)
	}
	if got := nodesOf(t, m, va, 4); !slices.Equal(got, []int{1, 1, 0, 1}) {
		t.Errorf("after the first unpin: %v, want page 1 moved", got)
	}
	pin2.Release()
	if err := p.Mbind(nil, va, 4*mem.PageSize, MPOLBind, 0, []int{1}, MPOLMFMove|MPOLMFStrict); err != nil {
		t.Errorf("nothing pinned: %v", err)
	}
	if got := nodesOf(t, m, va, 4); !slices.Equal(got, []int{1, 1, 1, 1}) {
		t.Errorf("after both unpins: %v", got)
	}
	// A pin released after munmap touches nothing; a new mapping at the
	// same place starts unpinned.
	pin3, _ := p.PinPages(va, 4*mem.PageSize)
	var th *sim.Proc
	th = p.Spawn("t", func(*sim.Proc) {
		if err := p.Munmap(th, va); err != nil {
			t.Error(err)
		}
	})
	k.Engine().Run()
	pin3.Release()
	if n := m.Pinned(va); n != 0 {
		t.Errorf("pin count %d after munmap", n)
	}
}

// An anonymous page fault costs the faulting thread the fixed entry and
// the clearing of the page at its node's streaming rate; a touch of a
// placed page costs only the access, and a pin's faults cost the
// pinning thread the same.
func TestAnonFaultCost(t *testing.T) {
	const pages = 8
	k, m := numaMachine(t, false, twoNodes)
	p, _ := k.NewProcess("app", 0)
	va, _ := p.MmapAnon(2 * pages * mem.PageSize)
	// numaMachine's nodes: 10 GB/s memcpy, no stream rate of their own.
	const rate = 10e9
	access := sim.TransferTime(pages*mem.PageSize, rate)
	fault := DefaultFaultEntry + sim.TransferTime(mem.PageSize, rate)
	var first, again, pin sim.Time
	p.Spawn("main", func(th *sim.Proc) {
		t0 := th.Now()
		m.Write(th, 0, va, pages*mem.PageSize)
		t1 := th.Now()
		m.Write(th, 0, va, pages*mem.PageSize)
		t2 := th.Now()
		if err := p.Populate(th, va, 2*pages*mem.PageSize); err != nil {
			t.Error(err)
		}
		first, again, pin = t1-t0, t2-t1, th.Now()-t2
	})
	k.Engine().Run()
	if want := pages*fault + access; first != want {
		t.Errorf("first touch of %d pages %v, want %v (%v per fault)", pages, first, want, fault)
	}
	if again != access {
		t.Errorf("second touch %v, want the access alone %v", again, access)
	}
	if want := pages * fault; pin != want {
		t.Errorf("populating %d more pages %v, want %v", pages, pin, want)
	}
}

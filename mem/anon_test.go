package mem

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// onNode is a fault handler that places every page on node, and counts.
func onNode(m *Memory, node int, calls *[]int) FaultHandler {
	return func(va VirtAddr, toucher int) (PhysAddr, error) {
		*calls = append(*calls, toucher)
		return m.AllocPages(node, PageSize, ZoneNormal)
	}
}

func TestAnonFirstTouch(t *testing.T) {
	errFull := errors.New("full")
	for _, tc := range []struct {
		name    string
		touch   func(m *Memory, va VirtAddr) error
		toucher int // what the handler saw, -3 for no call
		err     error
	}{
		{"read", func(m *Memory, va VirtAddr) error { return m.Read(nil, 1, va+10, 20).Err }, 1, nil},
		{"write", func(m *Memory, va VirtAddr) error {
			if m.Write(nil, 0, va, 8) == 0 {
				return errors.New("write failed")
			}
			return nil
		}, 0, nil},
		{"populate (a pin)", func(m *Memory, va VirtAddr) error { return m.Populate(va, PageSize, -1) }, -1, nil},
		{"translate does not fault", func(m *Memory, va VirtAddr) error {
			_, _, _, err := m.Translate(va, 8)
			return err
		}, -3, ErrNotPresent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t, testSpec(64*miB, 64*miB), Options{})
			var calls []int
			va, err := m.MapAnon(2*PageSize, onNode(m, 1, &calls))
			if err != nil {
				t.Fatal(err)
			}
			if c, pa, _ := m.Classify(va); c != ClassAnon || pa != 0 {
				t.Fatalf("absent page: %v %v", c, pa)
			}
			err = tc.touch(m, va)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if tc.toucher == -3 {
				if len(calls) != 0 {
					t.Fatalf("handler called: %v", calls)
				}
				return
			}
			if len(calls) != 1 || calls[0] != tc.toucher {
				t.Fatalf("handler calls %v, want one by %d", calls, tc.toucher)
			}
			if n, present, err := m.PageNode(va); err != nil || !present || n != 1 {
				t.Errorf("page node %d present %v err %v", n, present, err)
			}
			if _, present, _ := m.PageNode(va + PageSize); present {
				t.Error("the untouched page was placed")
			}
			verified(t, m)
		})
	}
	t.Run("handler fails", func(t *testing.T) {
		m := newMem(t, testSpec(64*miB), Options{})
		va, _ := m.MapAnon(PageSize, func(VirtAddr, int) (PhysAddr, error) { return 0, errFull })
		if a := m.Read(nil, 0, va, 8); !errors.Is(a.Err, errFull) {
			t.Errorf("read: %v", a.Err)
		}
	})
}

func TestAnonPageReadsZerosAndMoves(t *testing.T) {
	m := newMem(t, testSpec(64*miB, 64*miB), Options{Payload: true})
	// A page written, freed, then handed to anonymous memory reads zeros.
	pa, _ := m.AllocPages(0, PageSize, ZoneNormal)
	old := bytes.Repeat([]byte{0xee}, PageSize)
	m.WriteBytes(nil, 0, m.PhysToVirt(pa), old)
	if err := m.FreePages(pa, PageSize); err != nil {
		t.Fatal(err)
	}
	var calls []int
	va, _ := m.MapAnon(PageSize, onNode(m, 0, &calls))
	buf := make([]byte, PageSize)
	if a := m.ReadBytes(nil, 0, va, buf); a.Err != nil || a.Phys != pa || !bytes.Equal(buf, make([]byte, PageSize)) {
		t.Fatalf("fresh page at %v (reused %v): %v, bytes %x...", a.Phys, pa, a.Err, buf[:4])
	}
	// Written by node 1 (dirty in its cache), then moved to node 1.
	data := bytes.Repeat([]byte{7}, 100)
	v := m.WriteBytes(nil, 1, va+50, data)
	dst, _ := m.AllocPages(1, PageSize, ZoneNormal)
	eng := sim.New(1)
	m.eng = eng
	var left PhysAddr
	var err error
	eng.Spawn("migrate", func(p *sim.Proc) { left, err = m.MovePage(p, 1, va, dst) })
	eng.Run()
	if err != nil || left != pa || eng.Now() != sim.TransferTime(PageSize, 10e9) {
		t.Fatalf("MovePage: %v, left %v, took %v", err, left, eng.Now())
	}
	verified(t, m)
	a := m.ReadBytes(nil, 0, va+50, buf[:100])
	if a.Phys != dst+50 || a.Stale || !bytes.Equal(buf[:100], data) || m.Latest(dst+50) != v {
		t.Errorf("after the move: at %v, stale %v, bytes %x..., version %d want %d", a.Phys, a.Stale, buf[:4], m.Latest(dst+50), v)
	}
	if _, err := m.MovePage(nil, 0, va, dst+8*PageSize); !errors.Is(err, ErrBadAddr) {
		t.Errorf("move to a page not allocated: %v", err)
	}
	if _, err := m.MovePage(nil, 0, va, dst); !errors.Is(err, ErrInvalid) {
		t.Errorf("move onto itself: %v", err)
	}
	if err := m.UnmapAnon(va); err != nil {
		t.Fatal(err)
	}
	if err := m.FreePages(left, PageSize); err != nil {
		t.Errorf("the page left behind is the caller's to free: %v", err)
	}
	if err := m.UnmapAnon(va); !errors.Is(err, ErrBadAddr) {
		t.Errorf("second unmap: %v", err)
	}
}

// A pinned page refuses MovePage (ErrBusy) until its last pin goes; a
// pin spans areas and skips absent pages and memory of no area.
func TestPinnedPageDoesNotMove(t *testing.T) {
	m := newMem(t, testSpec(64*miB, 64*miB), Options{})
	var calls []int
	va, err := m.MapAnon(3*PageSize, onNode(m, 0, &calls))
	if err != nil {
		t.Fatal(err)
	}
	m.Write(nil, 0, va, 2*PageSize) // page 2 stays absent
	a, _ := m.PinPages(va, 3*PageSize)
	b, _ := m.PinPages(va, PageSize)
	if got := []int{m.Pinned(va), m.Pinned(va + PageSize), m.Pinned(va + 2*PageSize)}; got[0] != 2 || got[1] != 1 || got[2] != 0 {
		t.Fatalf("pin counts %v, want [2 1 0]", got)
	}
	move := func() error {
		dst, err := m.AllocPages(1, PageSize, ZoneNormal)
		if err != nil {
			t.Fatal(err)
		}
		old, err := m.MovePage(nil, 0, va, dst)
		if err != nil {
			_ = m.FreePages(dst, PageSize)
			return err
		}
		return m.FreePages(old, PageSize)
	}
	a.Release()
	if err := move(); !errors.Is(err, ErrBusy) {
		t.Errorf("move with one pin left: %v, want ErrBusy", err)
	}
	b.Release()
	if err := move(); err != nil {
		t.Errorf("move with no pin: %v", err)
	}
	if n, _, _ := m.PageNode(va); n != 1 {
		t.Errorf("page on node %d after the move, want 1", n)
	}
}

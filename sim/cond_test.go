package sim

import "testing"

// TestCondWaitAllocates: a process that waits on one condition over and
// over, woken by Broadcast each time, allocates nothing per wait once
// running (the condition keeps its list of waiters); and the waiters
// woken in one Broadcast, some waiting again at once, resume in the order
// they began to wait.
func TestCondWaitAllocates(t *testing.T) {
	e := New(1)
	defer e.Close()
	c := NewCond("c")
	n, seen := 0, 0
	pred := func() bool { return n > seen }
	e.Spawn("waiter", func(p *Proc) {
		for {
			p.WaitUntil(c, pred)
			seen = n
		}
	})
	e.Run()
	allocs := testing.AllocsPerRun(1000, func() {
		n++
		c.Broadcast()
		e.Run()
	})
	if allocs != 0 || seen != n {
		t.Fatalf("%.1f allocations per wait, want 0; woken %d times of %d", allocs, seen, n)
	}

	var order []int
	round := 0
	for i := range 3 {
		e.Spawn("w", func(p *Proc) {
			for k := 1; k <= 2; k++ {
				p.WaitUntil(c, func() bool { return round >= k })
				order = append(order, i)
			}
		})
	}
	e.Run()
	for range 2 {
		round++
		c.Broadcast()
		e.Run()
	}
	if got := order; len(got) != 6 || got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 0 || got[4] != 1 || got[5] != 2 {
		t.Fatalf("resumes in order %v, want [0 1 2 0 1 2]", got)
	}
}

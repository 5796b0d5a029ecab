package sim

import "testing"

// TestCPUWork: every Sleep and Charge of a process reaches the engine's
// CPU hooks as a span, and the spans add up to CPUTime; waiting is not
// CPU work.
func TestCPUWork(t *testing.T) {
	e := New(1)
	var got []CPUWork
	e.CPU.Hook(func(w *CPUWork) { got = append(got, *w) })
	c := e.NewCompletion()
	p := e.Spawn("driver", func(p *Proc) {
		p.Sleep(3 * Microsecond) // 0 → 3 µs
		p.Wait(c)                // idle until 10 µs
		p.Charge(2 * Microsecond)
		p.Sleep(0) // nothing to report
	})
	e.At(10*Microsecond, c.Complete)
	e.Run()
	want := []CPUWork{
		{Header: Header{Time: 0, Proc: "driver", Component: "cpu", Cause: CauseCall}, End: 3 * Microsecond},
		{Header: Header{Time: 8 * Microsecond, Proc: "driver", Component: "cpu", Cause: CauseTransfer}, End: 10 * Microsecond, Charged: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d spans %+v, want %+v", len(got), got, want)
	}
	var sum Time
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("span %d: %+v, want %+v", i, got[i], want[i])
		}
		sum += got[i].End - got[i].Time
	}
	if sum != p.CPUTime() {
		t.Errorf("spans add up to %v, CPUTime %v", sum, p.CPUTime())
	}
}

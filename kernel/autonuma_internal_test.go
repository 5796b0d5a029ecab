package kernel

import (
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// update_task_scan_period's branches, with one scan window (no resident
// memory): task_scan_min 1 s, task_scan_max 60 s, a 2 s period in
// slots of 200 ms.
func TestAdaptScanPeriod(t *testing.T) {
	ms := sim.Millisecond
	for _, tc := range []struct {
		name                  string
		period                sim.Time
		remote, local, failed uint64
		shared, private       uint64
		want                  sim.Time
		keepsLocality         bool
	}{
		{"no local or shared fault: doubles", 2000 * ms, 10, 0, 0, 0, 10, 4000 * ms, true},
		{"a failed migration: doubles", 2000 * ms, 0, 10, 1, 5, 5, 4000 * ms, true},
		{"doubling stops at task_scan_max", 40000 * ms, 10, 0, 0, 0, 10, 60000 * ms, true},
		{"private ≥ 7/10: grows by (ps-7) slots", 2000 * ms, 5, 5, 0, 0, 10, 2600 * ms, false},
		{"private exactly 7/10: grows by one slot", 2000 * ms, 5, 5, 0, 3, 7, 2200 * ms, false},
		{"local ≥ 7/10, shared: grows", 2000 * ms, 2, 8, 0, 10, 0, 2200 * ms, false},
		{"remote and shared: shrinks by (7-max) slots", 2000 * ms, 7, 3, 0, 6, 4, 1400 * ms, false},
		{"shrinking stops at task_scan_min", 2000 * ms, 10, 0, 0, 10, 0, 1000 * ms, false},
		{"growth stops at task_scan_max", 59000 * ms, 0, 10, 0, 0, 10, 60000 * ms, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := New(sim.New(1), 2)
			k.SetNUMABalancing(true, AutoNUMA{})
			p, err := k.NewProcess("app", 0)
			if err != nil {
				t.Fatal(err)
			}
			mm := p.numa()
			mm.period = tc.period
			mm.locality = [3]uint64{tc.remote, tc.local, tc.failed}
			mm.types = [2]uint64{tc.shared, tc.private}
			mm.adapt()
			if mm.period != tc.want {
				t.Errorf("period %v, want %v", mm.period, tc.want)
			}
			if kept := mm.locality != [3]uint64{}; kept != tc.keepsLocality {
				t.Errorf("locality after: %v (kept %v, want %v)", mm.locality, kept, tc.keepsLocality)
			}
		})
	}
}

// task_scan_min and task_scan_max scale with the scan windows and stop
// at the floor of MAX_SCAN_WINDOW.
func TestScanBounds(t *testing.T) {
	k := New(sim.New(1), 2)
	k.SetNUMABalancing(true, AutoNUMA{})
	p, _ := k.NewProcess("app", 0)
	mm := p.numa()
	for _, tc := range []struct {
		windows  uint64
		min, max sim.Time
	}{
		{1, sim.Second, 60 * sim.Second},
		{4, 250 * sim.Millisecond, 15 * sim.Second},
		{100, 100 * sim.Millisecond, 600 * sim.Millisecond}, // floor: 1000 ms / (2560/256)
	} {
		if lo, hi := mm.scanMin(tc.windows), mm.scanMax(tc.windows); lo != tc.min || hi != tc.max {
			t.Errorf("%d windows: [%v, %v], want [%v, %v]", tc.windows, lo, hi, tc.min, tc.max)
		}
	}
}

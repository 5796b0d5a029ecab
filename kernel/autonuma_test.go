package kernel_test

import (
	"reflect"
	"testing"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// balanced is a 2s-4gpu-pcie kernel with numa_balancing as on says.
func balanced(t *testing.T, on bool, cfg kernel.AutoNUMA) (*sim.Engine, *mem.Memory, *kernel.Kernel) {
	t.Helper()
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	eng := sim.New(1)
	m, err := mem.New(spec, eng, mem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(eng, m.Nodes())
	k.SetMemory(m)
	k.SetNUMABalancing(on, cfg)
	return eng, m, k
}

// nodeCount is how many pages of [va, va+size) are on each node.
func nodeCount(t *testing.T, m *mem.Memory, va mem.VirtAddr, size uint64) [2]int {
	t.Helper()
	var c [2]int
	for off := uint64(0); off < size; off += mem.PageSize {
		n, ok, err := m.PageNode(va + mem.VirtAddr(off))
		if err != nil || !ok {
			t.Fatalf("page at +%#x: %v %v", off, ok, err)
		}
		c[n]++
	}
	return c
}

// ftRun is what firstTouchRun saw: the process, the buffer, the
// workers, the pages migrated by 2 s, the local share of the workers'
// bytes after 2 s, and when the run ended.
type ftRun struct {
	p         *kernel.Process
	va        mem.VirtAddr
	workers   []*sim.Proc
	migrated3 uint64
	local3    float64
	end       sim.Time
}

// firstTouchRun is the first-touch pitfall: main (node 0) writes size
// bytes, then workers bound to node 1's CPUs read their own slices in
// one read of the slice at a time until until.
func firstTouchRun(t *testing.T, eng *sim.Engine, m *mem.Memory, k *kernel.Kernel, size uint64, nworkers int, until sim.Time) *ftRun {
	const after = 2 * sim.Second
	t.Helper()
	r := &ftRun{}
	p, err := k.NewProcess("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	if r.va, err = p.MmapAnon(size); err != nil {
		t.Fatal(err)
	}
	var local, total uint64
	p.Spawn("main", func(th *sim.Proc) {
		m.Write(th, p.ThreadNode(th), r.va, size)
		slice := size / uint64(nworkers)
		node1 := k.CPUsOfNode(1)
		for w := range nworkers {
			var wt *sim.Proc
			wt = p.Spawn("worker", func(th *sim.Proc) {
				base := r.va + mem.VirtAddr(uint64(w)*slice)
				for th.Now() < until {
					n, _, _ := m.PageNode(base)
					a := m.Read(th, p.ThreadNode(th), base, slice)
					if th.Now() >= after {
						total += a.Size
						if n == p.ThreadNode(th) {
							local += a.Size
						}
					}
				}
			})
			if err := p.SetThreadAffinity(wt, node1[w]); err != nil {
				t.Error(err)
			}
			r.workers = append(r.workers, wt)
		}
	})
	eng.At(after, func() { r.migrated3 = k.VMStat().NumaPagesMigrated })
	eng.Run()
	r.end = eng.Now()
	if total > 0 {
		r.local3 = float64(local) / float64(total)
	}
	return r
}

// AutoNUMA converges on a stable pattern: every page the node-1
// workers use moves to node 1 within the first scans, after which
// their accesses are all local and migrations stop; the counters add
// up.
func TestAutoNUMAConverges(t *testing.T) {
	const size = 16 << 20
	eng, m, k := balanced(t, true, kernel.AutoNUMA{})
	// Scans at 1 s (every page migrates), then, the period doubled by
	// faults all remote and private, at 3 s (all local).
	r := firstTouchRun(t, eng, m, k, size, 2, 3500*sim.Millisecond)
	pages := uint64(size / mem.PageSize)
	if c := nodeCount(t, m, r.va, size); c != [2]int{0, int(pages)} {
		t.Fatalf("pages by node %v, want all %d on node 1", c, pages)
	}
	vm := k.VMStat()
	if vm.NumaPagesMigrated != pages || r.migrated3 != pages {
		t.Errorf("numa_pages_migrated %d (at 2 s %d), want %d, no more after convergence", vm.NumaPagesMigrated, r.migrated3, pages)
	}
	if r.local3 != 1 {
		t.Errorf("local share after 2 s %.3f, want 1", r.local3)
	}
	// Counters are consistent with one another and with the tasks'.
	if vm.PgmigrateSuccess != vm.NumaPagesMigrated || vm.PgmigrateFail != 0 {
		t.Errorf("pgmigrate_success %d fail %d, numa_pages_migrated %d", vm.PgmigrateSuccess, vm.PgmigrateFail, vm.NumaPagesMigrated)
	}
	if vm.NumaHintFaults > vm.NumaPTEUpdates || vm.NumaHintFaultsLocal > vm.NumaHintFaults ||
		vm.NumaPagesMigrated > vm.NumaHintFaults-vm.NumaHintFaultsLocal {
		t.Errorf("inconsistent vmstat %+v", vm)
	}
	var faults, local, migrated uint64
	for _, w := range r.workers {
		st := r.p.TaskNUMA(w)
		faults += st.HintFaults
		local += st.HintFaultsLocal
		migrated += st.PagesMigrated
		if st.Preferred != 1 {
			t.Errorf("%s preferred node %d, want 1", w.Name(), st.Preferred)
		}
		if st.FaultTime <= 0 {
			t.Errorf("%s spent no time in faults", w.Name())
		}
	}
	if faults != vm.NumaHintFaults || local != vm.NumaHintFaultsLocal || migrated != vm.NumaPagesMigrated {
		t.Errorf("tasks' faults %d local %d migrated %d; vmstat %+v", faults, local, migrated, vm)
	}
	// Each migration allocated a page on node 1 for a node-1 CPU.
	if s := k.NUMAStat(1); s.NumaHit != pages || s.LocalNode != pages {
		t.Errorf("node 1 numastat %+v, want %d hits, all local", s, pages)
	}
	sc := r.p.NUMAScan()
	if sc.Running || sc.Scans < 2 || sc.Seq < 2 {
		t.Errorf("scanner at the end %+v: want stopped after at least two passes", sc)
	}
	// The scanner stops with the last thread: nothing ran past it.
	if r.end >= 3500*sim.Millisecond+sc.Period {
		t.Errorf("run ended at %v, scanner kept it going", r.end)
	}
}

// Off, nothing changes: no scan, no fault, no migration, and the run
// is the same as on a kernel never told of balancing.
func TestAutoNUMAOffChangesNothing(t *testing.T) {
	const size = 16 << 20
	eng, m, k := balanced(t, false, kernel.AutoNUMA{})
	r := firstTouchRun(t, eng, m, k, size, 2, 2*sim.Second)
	if vm := k.VMStat(); vm != (kernel.VMStat{}) {
		t.Errorf("vmstat %+v with balancing off", vm)
	}
	if c := nodeCount(t, m, r.va, size); c[1] != 0 {
		t.Errorf("pages by node %v, want all on node 0", c)
	}
	if sc := r.p.NUMAScan(); sc.Scans != 0 || sc.Running {
		t.Errorf("scanner %+v with balancing off", sc)
	}
	eng2, m2, k2 := balanced(t, false, kernel.AutoNUMA{})
	_ = eng2
	spec, _ := platform.Preset("2s-4gpu-pcie")
	eng3 := sim.New(1)
	m3, _ := mem.New(spec, eng3, mem.Options{})
	k3 := kernel.New(eng3, m3.Nodes())
	k3.SetMemory(m3)
	r2 := firstTouchRun(t, eng2, m2, k2, size, 2, 2*sim.Second)
	r3 := firstTouchRun(t, eng3, m3, k3, size, 2, 2*sim.Second)
	if r.end != r2.end || r.end != r3.end || r.local3 != r3.local3 {
		t.Errorf("end %v / %v / %v (never told), local %v / %v", r.end, r2.end, r3.end, r.local3, r3.local3)
	}
}

// Deterministic: the same run twice gives the same counters, tasks and
// end time.
func TestAutoNUMADeterministic(t *testing.T) {
	run := func() (kernel.VMStat, []kernel.TaskNUMA, sim.Time) {
		eng, m, k := balanced(t, true, kernel.AutoNUMA{ScanSizeMB: 2})
		r := firstTouchRun(t, eng, m, k, 8<<20, 3, 3*sim.Second)
		var ts []kernel.TaskNUMA
		for _, w := range r.workers {
			ts = append(ts, r.p.TaskNUMA(w))
		}
		return k.VMStat(), ts, r.end
	}
	v1, t1, e1 := run()
	v2, t2, e2 := run()
	if v1 != v2 || !reflect.DeepEqual(t1, t2) || e1 != e2 {
		t.Errorf("two runs differ:\n%+v %v %v\n%+v %v %v", v1, t1, e1, v2, t2, e2)
	}
	if v1.NumaPagesMigrated == 0 {
		t.Error("nothing migrated")
	}
}

// The two-stage filter: a page that threads on node 0 and node 1 use in
// turn, each use after a scan, never moves; once the node-1 thread
// faults on it twice in a row, it does. Each use comes 1.5 s after the
// one before: a fault may push the next scan to a period (1 s) after
// it (update_task_scan_period's numa_next_scan), never further.
func TestAutoNUMATwoStageFilter(t *testing.T) {
	sec := sim.Second
	eng, m, k := balanced(t, true, kernel.AutoNUMA{ScanDelay: sec, ScanPeriodMin: sec, ScanPeriodMax: sec})
	p, _ := k.NewProcess("app", 0)
	va, err := p.MmapAnon(mem.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	var moves []int
	use := func(th *sim.Proc, i int) {
		th.Sleep(sim.Time(i+1)*3*sec/2 - th.Now())
		m.Read(th, p.ThreadNode(th), va, 64)
		n, _, _ := m.PageNode(va)
		moves = append(moves, n)
	}
	m.Write(nil, 0, va, 8) // first touch on node 0
	const rounds = 6       // uses 0, 2, 4, ... by a (node 0); 1, 3, 5, ... by b (node 1)
	a := p.Spawn("a", func(th *sim.Proc) {
		for r := range rounds {
			use(th, 2*r)
		}
	})
	b := p.Spawn("b", func(th *sim.Proc) {
		for r := range rounds {
			use(th, 2*r+1)
		}
		use(th, 2*rounds) // twice in a row from node 1
		use(th, 2*rounds+1)
	})
	_ = p.SetThreadAffinity(a, k.CPUsOfNode(0)[0])
	_ = p.SetThreadAffinity(b, k.CPUsOfNode(1)[0])
	eng.Run()
	vm := k.VMStat()
	for i, n := range moves[:2*rounds] {
		if n != 0 {
			t.Fatalf("use %d: page on node %d, want it kept on node 0 (uses %v)", i, n, moves)
		}
	}
	// The first of b's two uses in a row migrates (its last_cpupid is
	// b's own, node 1's); after it, the process is single-threaded and
	// its page on its node, which the scanner leaves alone.
	if moves[2*rounds] != 1 || vm.NumaPagesMigrated != 1 {
		t.Errorf("after two node-1 faults in a row: node %d, migrated %d; want node 1, 1", moves[2*rounds], vm.NumaPagesMigrated)
	}
	if vm.NumaHintFaults != 2*rounds+1 {
		t.Errorf("hint faults %d, want one per use but the last (%d)", vm.NumaHintFaults, 2*rounds+1)
	}
}

// The scan period adapts end to end: private pages already local make
// it grow (update_task_scan_period's first branch; the formula's other
// branches are TestAdaptScanPeriod's).
func TestAutoNUMAScanPeriodAdapts(t *testing.T) {
	const size = 16 << 20
	eng, m, k := balanced(t, true, kernel.AutoNUMA{ScanSizeMB: 8})
	p, _ := k.NewProcess("app", 0)
	va, _ := p.MmapAnon(size)
	for w := range 2 {
		th := p.Spawn("worker", func(th *sim.Proc) {
			half := va + mem.VirtAddr(uint64(w)*size/2)
			m.Write(th, p.ThreadNode(th), half, size/2) // first touch: local
			for th.Now() < 5*sim.Second {
				m.Read(th, p.ThreadNode(th), half, size/2)
			}
		})
		_ = p.SetThreadAffinity(th, k.CPUsOfNode(1)[w])
	}
	eng.Run()
	// Two 8 MiB windows: the pass ends with the second scan (2 s), the
	// third scan (3 s) starts a new sequence, and its first fault
	// adapts the period to faults all private and local: +3 slots.
	sc := p.NUMAScan()
	if vm := k.VMStat(); vm.NumaHintFaultsLocal != vm.NumaHintFaults || vm.NumaPagesMigrated != 0 {
		t.Errorf("vmstat %+v: want every fault local, nothing migrated", vm)
	}
	if sc.Period != 1300*sim.Millisecond {
		t.Errorf("period %v, want 1.3 s (1 s + 3 slots of 100 ms)", sc.Period)
	}
}

// A registered (pinned) buffer does not move under AutoNUMA: each
// misplaced fault's migration fails (pgmigrate_fail); once unpinned, it
// migrates.
func TestAutoNUMAPinnedStays(t *testing.T) {
	const size = 1 << 20
	eng, m, k := balanced(t, true, kernel.AutoNUMA{})
	p, _ := k.NewProcess("app", 0)
	va, _ := p.MmapAnon(size)
	var pin *mem.PagePin
	var atUnpin [2]int
	var failAtUnpin uint64
	p.Spawn("main", func(th *sim.Proc) {
		m.Write(th, p.ThreadNode(th), va, size)
		var err error
		if pin, err = p.PinPages(va, size); err != nil {
			t.Error(err)
		}
		var wt *sim.Proc
		wt = p.Spawn("worker", func(th *sim.Proc) {
			for th.Now() < 8*sim.Second {
				m.Read(th, p.ThreadNode(th), va, size)
			}
		})
		if err := p.SetThreadAffinity(wt, k.CPUsOfNode(1)[0]); err != nil {
			t.Error(err)
		}
	})
	eng.At(4*sim.Second, func() {
		atUnpin = nodeCount(t, m, va, size)
		failAtUnpin = k.VMStat().PgmigrateFail
		pin.Release()
	})
	eng.Run()
	pages := size / mem.PageSize
	if atUnpin != [2]int{pages, 0} {
		t.Errorf("pinned pages by node %v, want all %d on node 0", atUnpin, pages)
	}
	if failAtUnpin < uint64(pages) {
		t.Errorf("pgmigrate_fail %d while pinned, want at least %d", failAtUnpin, pages)
	}
	if c := nodeCount(t, m, va, size); c != [2]int{0, pages} {
		t.Errorf("after unpin pages by node %v, want all on node 1", c)
	}
	if vm := k.VMStat(); vm.NumaPagesMigrated != uint64(pages) {
		t.Errorf("numa_pages_migrated %d, want %d (after the unpin only)", vm.NumaPagesMigrated, pages)
	}
}

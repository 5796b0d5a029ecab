package kernel

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Automatic NUMA balancing (numa_balancing=1), as Linux does it:
//
//   - The scanner (task_numa_work, kernel/sched/fair.c): scan_delay
//     after a process starts, and then every scan period, it makes the
//     next scan_size MiB of the process's anonymous memory PROT_NONE
//     (change_prot_numa), resuming where it stopped; at the end of the
//     address space it starts over and the scan sequence
//     (mm->numa_scan_seq) advances.
//   - A CPU access to such a page takes a NUMA hinting fault
//     (do_numa_page, mm/memory.c), which costs the thread
//     AutoNUMA.HintFaultCost. The fault asks the page's policy where
//     the page belongs (mpol_misplaced, mm/mempolicy.c): only pages
//     under the default policy are candidates (MPOL_F_MOF), and for
//     them the answer is the faulting CPU's node, filtered by
//     should_numa_migrate_memory: early in a task's life (no preferred
//     node yet, or scan sequence ≤ 4) a first or private fault
//     migrates at once; after that, the page's last_cpupid must show
//     the same node on two consecutive faults (the "two-stage filter":
//     a page used from two nodes in turn does not move).
//   - A misplaced page migrates to the faulting CPU's node
//     (migrate_misplaced_folio, mm/migrate.c): a page allocated there,
//     the content copied by the faulting thread at the CPU copy cost
//     (mem.MovePage: a flow over the socket link), the old page freed.
//     A target node without a free page fails the migration.
//   - Each fault is recorded for the task (task_numa_fault): by the
//     page's node (numa_faults), private or shared (last_cpupid's task
//     the same or not), local or remote (the page's node before
//     migration against the CPU's). Once per scan sequence, a task's
//     faults decay by half and its preferred node becomes the node with
//     the most (task_numa_placement), and the scan period adapts
//     (update_task_scan_period): it doubles when no fault was local or
//     shared, or a migration failed; otherwise it grows by slots of a
//     tenth when at least 7 in 10 faults were private or local, and
//     shrinks by them when neither was, between task_scan_min and
//     task_scan_max (the sysctls divided by the address space's scan
//     windows).
//
// Simplified: the model keeps one scan period per process (Linux keeps
// one per thread, whichever thread's tick comes first scanning for the
// whole mm), adapted from all its threads' faults; there are no NUMA
// groups (a shared fault migrates as when the task has none); the task
// is never moved to its preferred node (numa_migrate_preferred: the
// model's threads run where affinity put them), the preferred node is
// only recorded; the scanner's own time (walking page tables, the TLB
// flush) is not charged to any thread; huge pages, memory tiering
// (numa_balancing=2) and the rate limit of promotion are not modelled.

// AutoNUMA is automatic NUMA balancing's tuning: the sysctls of
// /proc/sys/kernel/numa_balancing_* (debugfs sched/numa_balancing/ since
// Linux 5.13), and the cost of a hinting fault.
type AutoNUMA struct {
	// ScanDelay is numa_balancing_scan_delay_ms: the first scan of a
	// process comes this long after it starts, and it is the first
	// scan period (p->numa_scan_period at fork). Linux: 1000 ms.
	ScanDelay sim.Time
	// ScanPeriodMin and ScanPeriodMax are numa_balancing_scan_period_
	// min_ms and _max_ms, the bounds of the time to scan the whole
	// address space: the period between two scans is bounded by them
	// divided by the scan windows of the address space. Linux: 1000 ms
	// and 60000 ms.
	ScanPeriodMin, ScanPeriodMax sim.Time
	// ScanSizeMB is numa_balancing_scan_size_mb: how much of the
	// address space one scan marks. Linux: 256.
	ScanSizeMB uint64
	// HintFaultCost is what one NUMA hinting fault costs the faulting
	// thread, migration's copy aside: the trap, handle_mm_fault, the
	// page-table lock, mpol_misplaced and restoring the PTE. Assumed:
	// 1 µs, the order of a minor page fault on a current x86 core;
	// nothing public measures do_numa_page alone.
	HintFaultCost sim.Time
}

// DefaultAutoNUMA is Linux's defaults (kernel/sched/fair.c:
// sysctl_numa_balancing_scan_delay = 1000, _scan_period_min = 1000,
// _scan_period_max = 60000, _scan_size = 256) and the assumed fault
// cost.
func DefaultAutoNUMA() AutoNUMA {
	return AutoNUMA{
		ScanDelay:     1000 * sim.Millisecond,
		ScanPeriodMin: 1000 * sim.Millisecond,
		ScanPeriodMax: 60000 * sim.Millisecond,
		ScanSizeMB:    256,
		HintFaultCost: 1 * sim.Microsecond,
	}
}

// VMStat is the NUMA balancing and migration lines of /proc/vmstat
// (count_vm_numa_event, count_vm_events), in pages or faults.
type VMStat struct {
	// NumaPTEUpdates (numa_pte_updates): pages the scanner made
	// PROT_NONE.
	NumaPTEUpdates uint64
	// NumaHintFaults (numa_hint_faults): NUMA hinting faults taken.
	NumaHintFaults uint64
	// NumaHintFaultsLocal (numa_hint_faults_local): those whose page was
	// on the faulting CPU's node.
	NumaHintFaultsLocal uint64
	// NumaPagesMigrated (numa_pages_migrated): pages the faults
	// migrated.
	NumaPagesMigrated uint64
	// PgmigrateSuccess (pgmigrate_success): every page migrated, by
	// NUMA balancing, mbind, move_pages or migrate_pages.
	PgmigrateSuccess uint64
	// PgmigrateFail (pgmigrate_fail): migrations that found no page on
	// the target node (AutoNUMA's), or a pinned page (every path).
	PgmigrateFail uint64
}

// SetNUMABalancing is writing /proc/sys/kernel/numa_balancing (on: 1,
// off: 0) with the tuning cfg. Processes whose threads start after it
// is on are scanned; turning it off stops their scanners at their next
// wake-up and leaves marked pages to fault without effect. A zero field
// of cfg takes DefaultAutoNUMA's.
func (k *Kernel) SetNUMABalancing(on bool, cfg AutoNUMA) {
	d := DefaultAutoNUMA()
	cfg.ScanDelay = cmp.Or(cfg.ScanDelay, d.ScanDelay)
	cfg.ScanPeriodMin = cmp.Or(cfg.ScanPeriodMin, d.ScanPeriodMin)
	cfg.ScanPeriodMax = max(cmp.Or(cfg.ScanPeriodMax, d.ScanPeriodMax), cfg.ScanPeriodMin)
	cfg.ScanSizeMB = cmp.Or(cfg.ScanSizeMB, d.ScanSizeMB)
	cfg.HintFaultCost = cmp.Or(cfg.HintFaultCost, d.HintFaultCost)
	k.balancing, k.autonuma = on, cfg
}

// NUMABalancing is whether automatic NUMA balancing is on, and its
// tuning.
func (k *Kernel) NUMABalancing() (bool, AutoNUMA) { return k.balancing, k.autonuma }

// VMStat is the kernel's /proc/vmstat NUMA counters.
func (k *Kernel) VMStat() VMStat { return k.vm }

// TaskNUMA is one thread's NUMA balancing state (the numa_* fields of
// its task_struct, /proc/<pid>/task/<tid>/sched).
type TaskNUMA struct {
	// Faults is numa_faults of memory, by node: the hinting faults on
	// pages of that node (after migration), private and shared,
	// halved at each scan sequence the task sees.
	Faults []uint64
	// Preferred is numa_preferred_nid: the node with the most Faults
	// at the last placement, -1 before any.
	Preferred int
	// HintFaults and HintFaultsLocal count the task's hinting faults,
	// all and those on its own node's pages.
	HintFaults, HintFaultsLocal uint64
	// PagesMigrated is numa_pages_migrated: pages its faults moved.
	PagesMigrated uint64
	// FaultTime is the time the task spent in hinting faults, the
	// migrations' copies included.
	FaultTime sim.Time
}

// NUMAScan is a process's scanner state (its mm's numa_* fields).
type NUMAScan struct {
	// Period is the scan period now (numa_scan_period); Next the time
	// of the next scan (numa_next_scan).
	Period, Next sim.Time
	// Seq is numa_scan_seq: the passes over the address space begun.
	Seq int
	// Offset is numa_scan_offset: where the next scan starts.
	Offset mem.VirtAddr
	// Scans is how many scans ran.
	Scans int
	// Running is whether the scanner is active (a thread of the
	// process lives and balancing is on).
	Running bool
}

// cpupid is a page's last_cpupid: the task and node of its last NUMA
// hinting fault (folio_xchg_last_cpupid); task nil is unset.
type cpupid struct {
	task *numaTask
	node int
}

// numaTask is a task's NUMA fault statistics.
type numaTask struct {
	st  TaskNUMA
	buf []uint64 // faults since the last placement, by node
	seq int      // numa_scan_seq at the last placement
}

// numaMM is a process's automatic NUMA balancing: the scanner and the
// fault statistics that adapt its period.
type numaMM struct {
	p       *Process
	period  sim.Time
	next    sim.Time
	seq     int
	placed  int // the scan sequence the period was last adapted at
	offset  mem.VirtAddr
	scans   int
	scanner *sim.Proc
	wake    *sim.Completion
	timer   sim.Handle
	live    []*sim.Proc
	tasks   map[*sim.Proc]*numaTask
	// locality is numa_faults_locality since the last adaptation:
	// remote, local, failed migrations; types the faults shared and
	// private.
	locality [3]uint64
	types    [2]uint64
}

// numa is p's balancing state, made on first use.
func (p *Process) numa() *numaMM {
	if p.nmm == nil {
		cfg := p.k.autonuma
		p.nmm = &numaMM{p: p, period: cfg.ScanDelay, placed: 0, tasks: map[*sim.Proc]*numaTask{}}
	}
	return p.nmm
}

// task is t's statistics (nil t: the process's own, for accesses made
// outside its threads).
func (mm *numaMM) task(t *sim.Proc) *numaTask {
	nt := mm.tasks[t]
	if nt == nil {
		nt = &numaTask{st: TaskNUMA{Faults: make([]uint64, mm.p.k.nodes), Preferred: -1}, buf: make([]uint64, mm.p.k.nodes), seq: mm.seq}
		mm.tasks[t] = nt
	}
	return nt
}

// threadStarted is told of each thread p spawns: with balancing on,
// the first live one starts the scanner, scan_delay from now
// (init_numa_balancing's numa_next_scan), and the last to exit stops it.
func (p *Process) threadStarted(t *sim.Proc) {
	if !p.k.balancing {
		return
	}
	mm := p.numa()
	mm.live = append(mm.live, t)
	mm.task(t)
	t.Exited().OnComplete(func() {
		mm.live = slices.DeleteFunc(mm.live, func(x *sim.Proc) bool { return x == t })
		if len(mm.live) == 0 {
			mm.stop()
		}
	})
	if mm.scanner == nil {
		if mm.scans == 0 {
			mm.next = p.k.eng.Now() + p.k.autonuma.ScanDelay
		} else {
			mm.next = p.k.eng.Now() + mm.period
		}
		mm.scanner = p.k.eng.Spawn("numa_scan/"+p.name, mm.run)
	}
}

// run is the scanner: it sleeps until the next scan is due, scans, and
// sets the next one a period later (task_numa_work).
func (mm *numaMM) run(s *sim.Proc) {
	for {
		mm.arm()
		s.Wait(mm.wake)
		if mm.scanner != s {
			return
		}
		if !mm.p.k.balancing || mm.p.exited {
			mm.scanner = nil
			return
		}
		mm.next = s.Now() + mm.period
		mm.scan()
	}
}

// arm sets the wake-up for mm.next.
func (mm *numaMM) arm() {
	eng := mm.p.k.eng
	mm.wake = eng.NewNamedCompletion("numa_next_scan")
	w := mm.wake
	mm.timer = eng.At(max(mm.next, eng.Now()), w.Complete)
}

// rearm moves a pending wake-up to mm.next (the period changed).
func (mm *numaMM) rearm() {
	if mm.scanner == nil || mm.wake == nil || mm.wake.Done() {
		return
	}
	eng := mm.p.k.eng
	if eng.Cancel(mm.timer) {
		w := mm.wake
		mm.timer = eng.At(max(mm.next, eng.Now()), w.Complete)
	}
}

// stop ends the scanner: no thread of the process is left to run it.
func (mm *numaMM) stop() {
	if mm.scanner == nil {
		return
	}
	mm.scanner = nil
	mm.p.k.eng.Cancel(mm.timer)
	if !mm.wake.Done() {
		mm.wake.Complete()
	}
}

// hpage is HPAGE_SIZE on x86-64, the alignment of a scan's end.
const hpage = 2 << 20

// scan is one task_numa_work: change_prot_numa over the next scan_size
// MiB of anonymous mappings holding present pages (up to eight times
// that of virtual space when the ranges hold none to mark), from the
// scan offset; at the end of the mappings the offset returns to 0 and
// the scan sequence advances.
func (mm *numaMM) scan() {
	p, k := mm.p, mm.p.k
	mm.scans++
	maps := slices.Clone(p.anon)
	slices.SortFunc(maps, func(a, b *anonMap) int { return cmp.Compare(a.start, b.start) })
	first := func(at mem.VirtAddr) int {
		return slices.IndexFunc(maps, func(am *anonMap) bool { return am.end() > at })
	}
	pages := int64(k.autonuma.ScanSizeMB << (20 - 12))
	virt := pages * 8
	start := mm.offset
	i := first(start)
	if i < 0 {
		mm.reset()
		start, i = 0, first(0)
	}
	target := -1
	if len(mm.live) == 1 {
		// A single-threaded process's pages already on its node are
		// left alone (change_pte_range's target_node).
		target = p.ThreadNode(mm.live[0])
	}
	for ; i >= 0 && i < len(maps); i++ {
		am := maps[i]
		for {
			start = max(start, am.start)
			end := min(alignUp(start+mem.VirtAddr(pages)*mem.PageSize, hpage), am.end())
			n, err := k.mem.MarkHint(start, uint64(end-start), func(va mem.VirtAddr, node int) bool {
				return node != target && am.migrateOnFault(p, uint64(va-am.start)/mem.PageSize)
			})
			if err != nil {
				break
			}
			k.vm.NumaPTEUpdates += n
			if n > 0 {
				pages -= int64((end - start) / mem.PageSize)
			}
			virt -= int64((end - start) / mem.PageSize)
			start = end
			if pages <= 0 || virt <= 0 {
				mm.offset = start
				return
			}
			if end == am.end() {
				break
			}
		}
	}
	mm.reset()
}

// reset is reset_ptenuma_scan: the next scan starts over, a new pass.
func (mm *numaMM) reset() {
	mm.offset = 0
	mm.seq++
}

func alignUp(va mem.VirtAddr, to uint64) mem.VirtAddr {
	return mem.VirtAddr((uint64(va) + to - 1) / to * to)
}

func (am *anonMap) end() mem.VirtAddr { return am.start + mem.VirtAddr(am.npages*mem.PageSize) }

// migrateOnFault is vma_policy_mof for page i: only the default policy
// (no range policy, and the process's MPOL_DEFAULT) migrates on fault,
// MPOL_F_MOF being what default_policy has and set_mempolicy without
// MPOL_F_NUMA_BALANCING does not give.
func (am *anonMap) migrateOnFault(p *Process, i uint64) bool {
	return (am.pols == nil || am.pols[i] == nil) && p.Policy.Mode == MPOLDefault
}

// nrScanPages is numa_balancing_scan_size in pages.
func (mm *numaMM) nrScanPages() uint64 { return mm.p.k.autonuma.ScanSizeMB << (20 - 12) }

// windows is task_nr_scan_windows: the resident anonymous pages in
// scan-size windows, at least one.
func (mm *numaMM) windows() uint64 {
	var rss uint64
	for _, am := range mm.p.anon {
		for i := range am.npages {
			if _, present, err := mm.p.k.mem.PageNode(am.start + mem.VirtAddr(i*mem.PageSize)); err == nil && present {
				rss++
			}
		}
	}
	n := mm.nrScanPages()
	if rss == 0 {
		rss = n
	}
	return (rss + n - 1) / n
}

// maxScanWindow is MAX_SCAN_WINDOW: never more than 2560 MB of PTEs a
// second.
const maxScanWindow = 2560

// scanMin is task_scan_min; scanMax task_scan_max (without NUMA
// groups).
func (mm *numaMM) scanMin(windows uint64) sim.Time {
	cfg := mm.p.k.autonuma
	w := uint64(1)
	if cfg.ScanSizeMB < maxScanWindow {
		w = maxScanWindow / cfg.ScanSizeMB
	}
	floor := sim.Second / sim.Time(w)
	return max(floor, cfg.ScanPeriodMin/sim.Time(windows))
}

func (mm *numaMM) scanMax(windows uint64) sim.Time {
	return max(mm.scanMin(windows), mm.p.k.autonuma.ScanPeriodMax/sim.Time(windows))
}

// Period slots of update_task_scan_period: the period changes in
// tenths, and 7 of 10 is the threshold.
const (
	numaPeriodSlots     = 10
	numaPeriodThreshold = 7
)

// adapt is update_task_scan_period, with the process's faults since the
// last adaptation.
func (mm *numaMM) adapt() {
	w := mm.windows()
	smin, smax := mm.scanMin(w), mm.scanMax(w)
	remote, local, failed := mm.locality[0], mm.locality[1], mm.locality[2]
	shared, private := mm.types[0], mm.types[1]
	mm.types = [2]uint64{}
	if local+shared == 0 || failed > 0 {
		// No local or shared fault, or a migration failed: scan
		// slower. Linux leaves numa_faults_locality as it is here.
		mm.period = min(smax, 2*mm.period)
		mm.next = mm.p.k.eng.Now() + mm.period
		mm.rearm()
		return
	}
	slot := (mm.period + numaPeriodSlots - 1) / numaPeriodSlots
	lr := int64(local * numaPeriodSlots / (local + remote))
	ps := int64(private * numaPeriodSlots / (private + shared))
	var diff int64
	switch {
	case ps >= numaPeriodThreshold:
		diff = max(ps-numaPeriodThreshold, 1) * int64(slot)
	case lr >= numaPeriodThreshold:
		diff = max(lr-numaPeriodThreshold, 1) * int64(slot)
	default:
		diff = -(numaPeriodThreshold - max(lr, ps)) * int64(slot)
	}
	mm.period = min(max(mm.period+sim.Time(diff), smin), smax)
	mm.locality = [3]uint64{}
}

// placement is task_numa_placement, once per scan sequence a task sees:
// its faults decay by half, the buffered ones are added, the node with
// the most becomes its preferred node; the first task to see a new
// sequence adapts the process's scan period.
func (mm *numaMM) placement(nt *numaTask) {
	if nt.seq == mm.seq {
		return
	}
	nt.seq = mm.seq
	best, most := -1, uint64(0)
	for n := range nt.st.Faults {
		nt.st.Faults[n] = nt.st.Faults[n]/2 + nt.buf[n]
		nt.buf[n] = 0
		if nt.st.Faults[n] > most {
			best, most = n, nt.st.Faults[n]
		}
	}
	if best >= 0 {
		nt.st.Preferred = best
	}
	if mm.placed != mm.seq {
		mm.placed = mm.seq
		mm.adapt()
	}
}

// shouldMigrate is should_numa_migrate_memory for a fault of task nt
// on a CPU of node dst, the page's last_cpupid being last; it records
// this fault as the page's last.
func (mm *numaMM) shouldMigrate(nt *numaTask, last *cpupid, dst int) bool {
	prev := *last
	*last = cpupid{nt, dst}
	// Early in the task's life, a first or private fault migrates.
	if (nt.st.Preferred < 0 || nt.seq <= 4) && (prev.task == nil || prev.task == nt) {
		return true
	}
	// The two-stage filter: two faults in a row from dst's node.
	if prev.task != nil && prev.node != dst {
		return false
	}
	// Private faults migrate; so do shared ones, the model having no
	// NUMA groups (!ng: "a shared fault, but p->numa_group has not been
	// set up yet").
	return true
}

// numaHintFault is do_numa_page: thread t (a CPU of node) accessed the
// PROT_NONE page at va of am.
func (p *Process) numaHintFault(am *anonMap, t *sim.Proc, node int, va mem.VirtAddr) {
	k := p.k
	mm := p.numa()
	nt := mm.task(t)
	t0 := k.eng.Now()
	if t != nil {
		t.Sleep(k.autonuma.HintFaultCost)
	}
	cur, present, err := k.mem.PageNode(va)
	if err != nil || !present {
		return
	}
	i := uint64(va-am.start) / mem.PageSize
	local := cur == node
	k.vm.NumaHintFaults++
	nt.st.HintFaults++
	if local {
		k.vm.NumaHintFaultsLocal++
		nt.st.HintFaultsLocal++
	}
	if am.last == nil {
		am.last = make([]cpupid, am.npages)
	}
	prev := am.last[i]
	target := -1
	if am.migrateOnFault(p, i) && mm.shouldMigrate(nt, &am.last[i], node) && cur != node {
		target = node
	}
	failed := false
	memNode := cur
	if target >= 0 {
		err := p.migrateBy(t, p, va, func() (mem.PhysAddr, error) { return k.allocOn(target, node) })
		if err == nil {
			memNode = target
			k.vm.NumaPagesMigrated++
			nt.st.PagesMigrated++
		} else {
			// migrateBy counted a pinned page's failure already.
			failed = true
			if !errors.Is(err, mem.ErrBusy) {
				k.vm.PgmigrateFail++
			}
		}
	}
	// task_numa_fault.
	priv := prev.task == nil || prev.task == nt
	mm.placement(nt)
	if failed {
		mm.locality[2]++
	}
	nt.buf[memNode]++
	if local {
		mm.locality[1]++
	} else {
		mm.locality[0]++
	}
	if priv {
		mm.types[1]++
	} else {
		mm.types[0]++
	}
	nt.st.FaultTime += k.eng.Now() - t0
}

// TaskNUMA is thread t's NUMA balancing statistics (zero before its
// first hinting fault).
func (p *Process) TaskNUMA(t *sim.Proc) TaskNUMA {
	if p.nmm == nil || p.nmm.tasks[t] == nil {
		return TaskNUMA{Faults: make([]uint64, p.k.nodes), Preferred: -1}
	}
	nt := p.nmm.tasks[t]
	st := nt.st
	st.Faults = slices.Clone(st.Faults)
	for n, b := range nt.buf {
		st.Faults[n] += b
	}
	return st
}

// NUMAScan is p's scanner state.
func (p *Process) NUMAScan() NUMAScan {
	if p.nmm == nil {
		return NUMAScan{Period: p.k.autonuma.ScanDelay}
	}
	mm := p.nmm
	return NUMAScan{Period: mm.period, Next: mm.next, Seq: mm.seq, Offset: mm.offset, Scans: mm.scans, Running: mm.scanner != nil}
}

// String is a TaskNUMA in a line.
func (s TaskNUMA) String() string {
	return fmt.Sprintf("faults %v preferred %d hint %d (local %d) migrated %d in %v", s.Faults, s.Preferred, s.HintFaults, s.HintFaultsLocal, s.PagesMigrated, s.FaultTime)
}

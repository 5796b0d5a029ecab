package uvm

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// CPUAccess is a CPU thread's access to [addr, addr+size), a read or a
// write, page by page in address order as a loop over the range would
// touch them. On Pascal-plus every page the CPU may not access raises a
// CPU fault (uvm_vm_fault), serviced in the thread: it migrates the page
// to system memory, with what the prefetcher adds (the same tree, with
// 64 KiB big pages; Linux's fault-around does not apply, as UVM's
// vm_operations have no map_pages), unless the CPU can map where the
// page is (AccessedBy, a preferred location, a pin on an NVLink-C2C
// system). On pre-Pascal and Tegra, touching managed memory while a
// kernel runs is ErrConcurrentAccess. The faults of a block nobody has
// touched are serviced at once when nothing else can run meanwhile and
// nobody watches (firstTouch): same times, state and counters.
func (d *Driver) CPUAccess(p *sim.Proc, addr Addr, size int64, write bool) (Access, error) {
	a, err := d.find(addr, size)
	if err != nil {
		return Access{}, d.fail(p, CPU, addr, err)
	}
	if !d.gen.ConcurrentAccess() {
		for _, g := range d.gpus {
			if g.kernels > 0 {
				return Access{}, d.fail(p, CPU, addr,
					fmt.Errorf("%v +%#x while a kernel runs on %s (%v): %w", addr, size, g.cfg.Name, d.gen, ErrConcurrentAccess))
			}
		}
	}
	end := addr + Addr(size)
	switch d.gen {
	case PrePascal:
		return d.legacyCPUAccess(p, a, addr, end, write)
	case Tegra:
		return d.tegraCPUAccess(a, addr, end, write), nil
	}
	start := p.Now()
	var acc Access
	for num := uint64(addr) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
		lo, hi := spanPages(Addr(num*BlockSize), addr, end)
		want := rangeMask(lo, hi)
		if n, ok := d.firstTouch(p, a, num, lo, hi); ok {
			acc.Faults += n
			continue
		}
		for {
			missing := want
			if b := d.blockAt(num); b != nil {
				ok := b.accessible(CPU, write)
				missing.AndNot(&ok)
			}
			pg := missing.First()
			if pg < 0 {
				break
			}
			acc.Faults++
			if !d.cpuFault(p, a, num, pg, write) {
				return acc, d.fail(p, CPU, addr, ErrInvalidAddress)
			}
		}
	}
	acc.Stall = p.Now() - start
	d.stall(p, CPU, addr, end, acc.Stall)
	d.describe(&acc, CPU, addr, end)
	return acc, nil
}

// cpuFault services one CPU fault on page pg of block num
// (uvm_va_block_cpu_fault); false if the memory was freed meanwhile.
func (d *Driver) cpuFault(p *sim.Proc, a *Allocation, num uint64, pg int, write bool) bool {
	d.stats.CPUFaults++
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindFault, Processor: CPU,
			Addr: Addr(num*BlockSize) + Addr(pg)*PageSize, Write: write})
	}
	p.Sleep(d.p.CPUFaultCost)
	if a.freed {
		return false
	}
	b := d.block(a, num)
	d.lock(p, b)
	if ok := b.accessible(CPU, write); ok.Test(pg) {
		d.unlock(b)
		return true
	}
	h := d.thrashingHint(p, b, pg, CPU, p.Now())
	if h.kind == hintThrottle {
		// Throttling a CPU is sleeping in the fault handler.
		d.unlock(b)
		sleepUntil(p, h.until)
		return true
	}
	var pages, writes PageMask
	pages.Set(pg)
	if write {
		writes.Set(pg)
	}
	var pins []pinnedFault
	if h.kind == hintPin {
		pins = []pinnedFault{{page: pg, hint: h}}
	}
	d.serviceFaults(p, b, CPU, pages, writes, pins)
	d.unlock(b)
	return true
}

// sleepUntil blocks p, idle, until t.
func sleepUntil(p *sim.Proc, t sim.Time) {
	if t <= p.Now() {
		return
	}
	c := p.Engine().NewNamedCompletion("uvm throttle")
	p.Engine().At(t, c.Complete)
	p.Wait(c)
}

// firstTouch services at once the CPU faults of a loop touching pages
// [lo, hi) of block num of a, which nobody has touched yet, when that is
// what servicing them one by one would do with nothing else running
// meanwhile: the block has only the default policy, no process waits
// for a block lock (each fault's unlock would wake it), nobody watches
// the driver's events, and the faults' sleeps would all run inline
// (sim.Proc.SleepAlone). Each of those faults populates the faulted
// page and what the prefetcher adds on the CPU, with the same sleeps;
// their sequence depends only on the span and the block's size, so it
// is worked out once per (lo, hi, pages) and kept. It reports the
// faults, and false when it did nothing (the caller then faults page by
// page).
func (d *Driver) firstTouch(p *sim.Proc, a *Allocation, num uint64, lo, hi int) (int, bool) {
	if d.stepwise || d.blockAt(num) != nil || d.chunkWaiters > 0 || d.observed() || a.freed {
		return 0, false
	}
	start := Addr(num * BlockSize)
	pages := int(min(a.policies[len(a.policies)-1].end, start+BlockSize)-start) / PageSize
	end := start + Addr(pages)*PageSize
	for i := range a.policies {
		if s := &a.policies[i]; s.start < end && s.end > start && s.policy != defaultPolicy {
			return 0, false
		}
	}
	key := firstTouchKey{lo, hi, pages}
	ft, ok := d.firstTouches[key]
	if !ok {
		ft = d.planFirstTouch(lo, hi, pages)
		if d.firstTouches == nil {
			d.firstTouches = map[firstTouchKey]firstTouchPlan{}
		}
		d.firstTouches[key] = ft
	}
	if !p.SleepAlone(uint64(3*ft.faults), ft.sleep) {
		return 0, false
	}
	b := d.block(a, num)
	*d.residentMask(b, CPU) = ft.resident
	d.stats.CPUFaults += int64(ft.faults)
	d.stats.PopulatedBytes += int64(ft.resident.Count()) * PageSize
	d.firstTouched++
	return ft.faults, true
}

type firstTouchKey struct{ lo, hi, pages int }

// firstTouchPlan is what CPU faults on pages [lo, hi) of an untouched
// block do, one after the other: their count, the pages they populate
// on the CPU and the time their three sleeps take (cpuFault's fault
// cost, makeResident's zeroing and mapping).
type firstTouchPlan struct {
	faults   int
	resident PageMask
	sleep    sim.Time
}

// planFirstTouch follows cpuFault and serviceFaults for a CPU fault on
// a block that only the CPU holds, with the default policy and no
// thrashing history: the page goes to the CPU (selectResidency's first
// touch), with the prefetcher's region; all of them are populated.
func (d *Driver) planFirstTouch(lo, hi, pages int) firstTouchPlan {
	var ft firstTouchPlan
	want := rangeMask(lo, hi)
	for {
		missing := andNot(want, ft.resident)
		pg := missing.First()
		if pg < 0 {
			return ft
		}
		var faulted PageMask
		faulted.Set(pg)
		var prefetched PageMask
		if !d.p.DisablePrefetch {
			prefetched = PrefetchPages(PrefetchInput{Pages: pages, Resident: ft.resident, Faulted: faulted, Threshold: d.p.PrefetchThreshold})
		}
		all := or(faulted, prefetched)
		n := sim.Time(all.Count())
		ft.faults++
		ft.sleep += d.p.CPUFaultCost + n*d.p.CPUZeroPageCost + n*d.p.CPUMapPageCost
		ft.resident.Or(&all)
	}
}

package uvm

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// Prefetch is cuMemPrefetchAsync(addr, size, dst): the range migrates to
// dst block by block at full bandwidth, not fault by fault (uvm_migrate);
// untouched pages are populated there, read-mostly pages duplicated. A
// GPU with no managed memory means system memory. It blocks p until the
// data is there (the caller makes it asynchronous by giving it its own
// process). Pre-Pascal and Tegra GPUs: ErrNotSupported.
func (d *Driver) Prefetch(p *sim.Proc, addr Addr, size int64, dst Processor) error {
	if !d.gen.ConcurrentAccess() {
		return d.fail(p, dst, addr, fmt.Errorf("cuMemPrefetchAsync on %v: %w", d.gen, ErrNotSupported))
	}
	if err := d.checkProcessor(dst); err != nil {
		return d.fail(p, dst, addr, err)
	}
	a, err := d.find(addr, size)
	if err != nil {
		return d.fail(p, dst, addr, err)
	}
	if !d.hasMemory(dst) {
		dst = CPU
	}
	end := addr + Addr(size)
	for num := uint64(addr) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
		if a.freed {
			return d.fail(p, dst, addr, ErrInvalidAddress)
		}
		b := d.block(a, num)
		lo, hi := b.pageSpan(addr, end)
		d.lock(p, b)
		p.Sleep(d.p.PrefetchBlockCost)
		m := rangeMask(lo, hi)
		// Read-mostly pages someone holds are duplicated.
		var dup PageMask
		if a.anyReadMostly() {
			held, rm := b.anyResident(), b.readMostly()
			dup = and(m, and(held, rm))
		}
		d.makeResident(p, b, dst, []causeMask{{m, CausePrefetch}}, dup)
		d.unlock(b)
	}
	return nil
}

func (d *Driver) checkProcessor(x Processor) error {
	if x < CPU || int(x) > len(d.gpus) {
		return fmt.Errorf("processor %v: %w", x, ErrInvalidValue)
	}
	return nil
}

// Advice is a cuMemAdvise advice (CUmem_advise).
type Advice int

const (
	AdviseSetReadMostly          Advice = 1 // CU_MEM_ADVISE_SET_READ_MOSTLY
	AdviseUnsetReadMostly        Advice = 2 // CU_MEM_ADVISE_UNSET_READ_MOSTLY
	AdviseSetPreferredLocation   Advice = 3 // CU_MEM_ADVISE_SET_PREFERRED_LOCATION
	AdviseUnsetPreferredLocation Advice = 4 // CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION
	AdviseSetAccessedBy          Advice = 5 // CU_MEM_ADVISE_SET_ACCESSED_BY
	AdviseUnsetAccessedBy        Advice = 6 // CU_MEM_ADVISE_UNSET_ACCESSED_BY
)

var adviceNames = [...]string{"", "SetReadMostly", "UnsetReadMostly", "SetPreferredLocation",
	"UnsetPreferredLocation", "SetAccessedBy", "UnsetAccessedBy"}

func (a Advice) String() string {
	if a > 0 && int(a) < len(adviceNames) {
		return adviceNames[a]
	}
	return fmt.Sprintf("Advice(%d)", int(a))
}

// Advise is cuMemAdvise(addr, size, advice, proc) on whole pages of one
// allocation (proc matters for the location and AccessedBy advice):
//
//   - SetReadMostly: from now on a read fault copies the page to the
//     reader instead of moving it; a write invalidates the other copies.
//     UnsetReadMostly collapses the copies at once, keeping the one on
//     the preferred location, else the CPU's, else the lowest GPU's.
//   - SetPreferredLocation: the pages stay on proc; others map them
//     remotely when they can (a GPU maps system memory and, with peer
//     access, a peer's memory; the CPU maps GPU memory only over NVLink
//     to the CPU) and migrate them otherwise.
//   - SetAccessedBy: proc keeps a mapping wherever the pages live, when
//     it can, so that its accesses do not fault; it is mapped now to the
//     pages resident elsewhere. UnsetAccessedBy drops those mappings.
//
// It blocks p only to take the blocks' locks.
func (d *Driver) Advise(p *sim.Proc, addr Addr, size int64, advice Advice, proc Processor) error {
	if advice < AdviseSetReadMostly || advice > AdviseUnsetAccessedBy {
		return d.fail(p, proc, addr, fmt.Errorf("cuMemAdvise(%v): %w", advice, ErrInvalidValue))
	}
	start := addr &^ (PageSize - 1)
	end := addr + Addr(size)
	if size > 0 {
		end = (end + PageSize - 1) &^ (PageSize - 1)
	}
	a, err := d.find(start, int64(end-start))
	if err != nil || size <= 0 {
		if err == nil {
			err = fmt.Errorf("cuMemAdvise size %d: %w", size, ErrInvalidValue)
		}
		return d.fail(p, proc, addr, err)
	}
	if advice == AdviseSetPreferredLocation || advice == AdviseSetAccessedBy || advice == AdviseUnsetAccessedBy {
		if err := d.checkProcessor(proc); err != nil {
			return d.fail(p, proc, addr, err)
		}
	}
	switch advice {
	case AdviseSetReadMostly:
		a.updatePolicy(start, end, func(pol *policy) { pol.readMostly = true })
	case AdviseUnsetReadMostly:
		a.updatePolicy(start, end, func(pol *policy) { pol.readMostly = false })
	case AdviseSetPreferredLocation:
		a.updatePolicy(start, end, func(pol *policy) { pol.preferred = proc })
	case AdviseUnsetPreferredLocation:
		a.updatePolicy(start, end, func(pol *policy) { pol.preferred = NoProcessor })
	case AdviseSetAccessedBy:
		a.updatePolicy(start, end, func(pol *policy) { pol.accessedBy = pol.accessedBy.With(proc) })
	case AdviseUnsetAccessedBy:
		a.updatePolicy(start, end, func(pol *policy) { pol.accessedBy = pol.accessedBy.Without(proc) })
	}
	if !d.gen.ConcurrentAccess() {
		return nil
	}
	for _, b := range d.touched(start, end) {
		lo, hi := b.pageSpan(start, end)
		m := rangeMask(lo, hi)
		d.lock(p, b)
		switch advice {
		case AdviseUnsetReadMostly:
			d.collapse(p, b, m)
		case AdviseSetAccessedBy:
			d.mapAccessedBy(p, b, m)
		case AdviseUnsetAccessedBy:
			if r := b.remote[proc]; r != nil {
				pinned := d.pinnedPages(b)
				drop := andNot(m, pinned)
				r.AndNot(&drop)
			}
		}
		d.unlock(b)
	}
	return nil
}

func (d *Driver) pinnedPages(b *vaBlock) PageMask {
	if b.thrash == nil {
		return PageMask{}
	}
	return b.thrash.pinned
}

// collapse keeps one copy of each read-duplicated page of m.
func (d *Driver) collapse(p *sim.Proc, b *vaBlock, m PageMask) {
	s := b.shared()
	m.And(&s)
	for pg := m.First(); pg >= 0; pg = m.Next(pg + 1) {
		h := b.holders(pg)
		keep := b.alloc.policyAt(b.addr(pg)).preferred
		if !h.Has(keep) {
			keep = h.First()
		}
		for q := range Processor(len(b.resident)) {
			if q == keep || !h.Has(q) {
				continue
			}
			r := b.resident[q]
			r.Clear(pg)
			if q.IsGPU() && r.Empty() {
				if c := b.chunk[q.GPUIndex()]; c != nil {
					d.freeChunk(c)
				}
			}
		}
		d.stats.Revocations++
		if d.observed() {
			d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindRevoke, Processor: keep,
				Addr: b.addr(pg), Bytes: PageSize, Cause: CauseAdvice})
		}
	}
	d.mapAccessedBy(p, b, m)
}

package uvm

import (
	"sort"

	"github.com/dmalab/dmalab/sim"
)

// selectResidency is where the faulted pages of b should live after
// requester's fault, and which are read-duplicating copies
// (uvm_va_block_select_residency, Pascal-plus), per page:
//
//   - ReadMostly: a read (or prefetch) duplicates on the requester; a
//     write takes the requester a copy of its own, the others invalidated.
//   - The requester is the preferred location: it gets the page.
//   - A pinned thrashing page goes where it is pinned.
//   - Untouched: the preferred location if the requester can map it,
//     else the requester (first touch).
//   - AccessedBy the requester, and it can map the page where it is:
//     stay there, mapped remotely.
//   - Resident elsewhere and a preferred location the requester can map:
//     the preferred location (mapped remotely from the requester).
//   - Otherwise the requester: migrate.
//
// A choice without memory (a GPU with no managed memory) falls back to
// the CPU, and the requester maps system memory.
//
// The rules depend on a page only through its policy, its pin and the
// set of processors holding it, so they are applied to masks: per
// policy span, the pages nobody holds, then those by their closest
// holder. Pages are the faulted pages, writes those written; pins the
// faulted pages with a pin hint.
func (d *Driver) selectResidency(b *vaBlock, requester Processor, pages, writes PageMask, pins []pinnedFault, sel *residencySelection) {
	for _, r := range pins {
		sel.pinned.Set(r.page)
		sel.pinProcs |= r.hint.processors
	}
	a := b.alloc
	lo, hi := b.start, b.addr(b.pages)
	i := sort.Search(len(a.policies), func(i int) bool { return a.policies[i].end > lo })
	for ; i < len(a.policies) && a.policies[i].start < hi; i++ {
		s := &a.policies[i]
		first, end := b.pageSpan(s.start, s.end)
		span := and(pages, rangeMask(first, end))
		if !span.Empty() {
			d.selectSpan(b, requester, span, writes, pins, &s.policy, sel)
		}
	}
}

// selectSpan is selectResidency for pages of one policy.
func (d *Driver) selectSpan(b *vaBlock, requester Processor, pages, writes PageMask, pins []pinnedFault, pol *policy, sel *residencySelection) {
	if pol.readMostly {
		d.choose(sel, requester, requester, pages, andNot(pages, writes))
		return
	}
	pl := pol.preferred
	if requester == pl || pl == NoProcessor && pol.accessedBy == 0 && len(pins) == 0 {
		// The requester's own preferred location; or no advice and no
		// pin, where every rule below sends the pages to the requester,
		// wherever they are.
		d.choose(sel, requester, requester, pages, PageMask{})
		return
	}
	for _, r := range pins {
		if pages.Test(r.page) {
			var m PageMask
			m.Set(r.page)
			d.choose(sel, requester, r.hint.residency, m, PageMask{})
		}
	}
	rest := andNot(pages, sel.pinned)
	held := and(rest, b.anyResident())
	if none := andNot(rest, held); !none.Empty() {
		to := requester
		if pl != NoProcessor && d.canAccess(requester, pl) {
			to = pl
		}
		d.choose(sel, requester, to, none, PageMask{})
	}
	d.byClosest(b, held, requester, func(closest Processor, m PageMask) {
		to := requester
		switch {
		case pol.accessedBy.Has(requester) && d.canAccess(requester, closest):
			to = closest
		case closest != requester && pl != NoProcessor && d.canAccess(requester, pl):
			to = pl
		}
		d.choose(sel, requester, to, m, PageMask{})
	})
}

// choose sends pages m to processor to (to the CPU when to has no
// memory), dup of them read-duplicated.
func (d *Driver) choose(sel *residencySelection, requester, to Processor, m, dup PageMask) {
	if !d.hasMemory(to) {
		sel.dest.add(CPU, m)
		return
	}
	sel.dest.add(to, m)
	sel.dup.Or(&dup)
	if to != requester {
		// Moved by advice, unless a pin sent them.
		adv := andNot(m, sel.pinned)
		sel.advice.Or(&adv)
	}
}

// byClosest calls f with the pages of m (each held somewhere) grouped by
// their holder closest to processor to (closest): to itself, the GPUs
// it reaches over NVLink, the CPU, then any other by number.
func (d *Driver) byClosest(b *vaBlock, m PageMask, to Processor, f func(Processor, PageMask)) {
	visit := func(q Processor) {
		if m.Empty() || int(q) >= len(b.resident) || b.resident[q] == nil {
			return
		}
		on := and(m, *b.resident[q])
		if on.Empty() {
			return
		}
		m.AndNot(&on)
		f(q, on)
	}
	visit(to)
	if to != CPU {
		for q := GPU(0); int(q) <= len(d.gpus); q++ {
			if q != to && d.fastAccess(to, q) {
				visit(q)
			}
		}
	}
	visit(CPU)
	for q := range Processor(len(b.resident)) {
		visit(q)
	}
}

// residencySelection is where a service sends its faulted pages.
type residencySelection struct {
	// dest are the pages by destination.
	dest procPages
	// dup are the pages read-duplicated; pinned those with a pin hint,
	// whose thrashing processors pinProcs map them; advice those a
	// policy sent away from the requester.
	dup, pinned, advice PageMask
	pinProcs            ProcSet
}

// procPages are page masks by processor, in processor order. A service
// involves few processors, so a short list serves better than a mask
// for each of up to MaxGPUs+1.
type procPages []procMask

type procMask struct {
	proc Processor
	mask PageMask
}

// takeProcPages is an empty procPages from the driver's spares. Services
// of different blocks interleave (each blocks in its migrations), so
// each takes its own and gives it back with putProcPages when done.
func (d *Driver) takeProcPages() procPages {
	if n := len(d.spare); n > 0 {
		l := d.spare[n-1]
		d.spare = d.spare[:n-1]
		return l[:0]
	}
	return make(procPages, 0, 4)
}

func (d *Driver) putProcPages(l procPages) { d.spare = append(d.spare, l) }

// add adds pages m to processor p's.
func (l *procPages) add(p Processor, m PageMask) {
	if m.Empty() {
		return
	}
	s := *l
	i := 0
	for i < len(s) && s[i].proc < p {
		i++
	}
	if i < len(s) && s[i].proc == p {
		s[i].mask.Or(&m)
		return
	}
	s = append(s, procMask{})
	copy(s[i+1:], s[i:])
	s[i] = procMask{p, m}
	*l = s
}

// pinnedFault is a faulted page of a block with a pin hint: it goes
// where the hint pins it.
type pinnedFault struct {
	page int
	hint thrashHint
}

// causeMask is a set of pages with one reason to move.
type causeMask struct {
	mask  PageMask
	cause Cause
}

// serviceFaults makes the faulted pages of b accessible to requester
// (uvm_va_block_service_locked): residency (selectResidency), the
// prefetcher when all go to one processor, migration and mapping. pages
// are the faulted pages, writes those written, pins those with a pin
// hint. b is locked by p.
func (d *Driver) serviceFaults(p *sim.Proc, b *vaBlock, requester Processor, pages, writes PageMask, pins []pinnedFault) {
	n := len(b.resident)
	sel := residencySelection{dest: d.takeProcPages()}
	defer func() { d.putProcPages(sel.dest) }()
	d.selectResidency(b, requester, pages, writes, pins, &sel)
	dup, pinned, advice, pinProcs := sel.dup, sel.pinned, sel.advice, sel.pinProcs
	firstFault := pages.First()
	var prefetched PageMask
	dests := sel.dest
	if len(dests) == 1 && !d.p.DisablePrefetch {
		to := dests[0].proc
		all := b.anyResident()
		prefetched = PrefetchPages(PrefetchInput{
			Pages:               b.pages,
			Resident:            b.residentOn(to),
			Faulted:             dests[0].mask,
			Thrashing:           d.thrashingPages(b),
			Threshold:           d.p.PrefetchThreshold,
			FirstTouchPreferred: all.Empty() && b.alloc.policyAt(b.addr(firstFault)).preferred == to,
		})
		if b.alloc.anyReadMostly() {
			// Prefetched read-mostly pages someone holds are
			// duplicated.
			rm := b.readMostly()
			rd := and(prefetched, and(rm, all))
			dup.Or(&rd)
		}
	}
	for _, dm := range dests {
		to, faulted := dm.proc, dm.mask
		groups := [4]causeMask{
			{andNot(andNot(faulted, pinned), advice), CauseFault},
			{and(faulted, advice), CauseAdvice},
			{and(faulted, pinned), CauseThrashing},
		}
		ng := 3
		if len(dests) == 1 {
			groups[3] = causeMask{prefetched, CausePrefetcher}
			ng = 4
		}
		d.makeResident(p, b, to, groups[:ng], and(dup, or(faulted, prefetched)))
		if to != requester {
			cause := CauseFault
			switch {
			case !and(faulted, pinned).Empty():
				cause = CauseThrashing
			case !and(faulted, advice).Empty():
				cause = CauseAdvice
			}
			m := faulted
			if len(dests) == 1 {
				m.Or(&prefetched)
			}
			d.mapRemote(p, b, requester, to, m, cause)
		}
		if pm := and(faulted, pinned); !pm.Empty() {
			for x := range Processor(n) {
				if pinProcs.Has(x) && x != to && x != requester && d.canAccess(x, to) {
					d.mapRemote(p, b, x, to, pm, CauseThrashing)
				}
			}
		}
	}
}

// makeResident makes the pages of groups resident on dest
// (uvm_va_block_make_resident): copied from their closest holder, or
// populated when nobody holds them. Pages in dup are read-duplicated (the
// other copies stay); the rest end up on dest alone. Remote mappings of
// pages whose residency changed are dropped, and AccessedBy processors
// are mapped to the new location. b is locked by p.
func (d *Driver) makeResident(p *sim.Proc, b *vaBlock, dest Processor, groups []causeMask, dup PageMask) {
	var all PageMask
	for i := range groups {
		all.Or(&groups[i].mask)
	}
	if all.Empty() {
		return
	}
	if dest.IsGPU() {
		d.ensureChunk(p, d.gpus[dest.GPUIndex()], b)
	}
	have := b.residentOn(dest)
	need := andNot(all, have)
	exclusive := andNot(all, dup)
	// Exclusive pages that had several copies lose the others: a write
	// to read-duplicated memory.
	revoked := and(exclusive, b.shared())

	// Sources: each page from its closest holder.
	src := d.takeProcPages()
	defer func() { d.putProcPages(src) }()
	held := and(need, b.anyResident())
	populate := andNot(need, held)
	if q := b.soleHolder(held); q != NoProcessor {
		// One processor holds every page that has a copy: it is each
		// page's closest holder.
		src.add(q, held)
	} else {
		d.byClosest(b, held, dest, src.add)
	}
	if !populate.Empty() {
		bytes := int64(populate.Count()) * PageSize
		if dest == CPU {
			p.Sleep(sim.Time(populate.Count()) * d.p.CPUZeroPageCost)
		}
		d.stats.PopulatedBytes += bytes
		d.migrated(p, b, groups, populate, NoProcessor, dest, false)
	}
	var copied PageMask
	for i := range src {
		s := &src[i]
		d.move(p, b, s.proc, dest, s.mask)
		d.migrated(p, b, groups, s.mask, s.proc, dest, !and(s.mask, dup).Empty())
		copied.Or(&s.mask)
	}

	// Pages new in system memory are mapped into the process one by one
	// (the CPU's copy can be read only then).
	if dest == CPU && !need.Empty() {
		p.Sleep(sim.Time(need.Count()) * d.p.CPUMapPageCost)
	}

	// The pages' residency changes: new copies on dest, and the other
	// copies of exclusive pages go.
	var changed = need
	for q, r := range b.resident {
		if r == nil || Processor(q) == dest {
			continue
		}
		lost := and(*r, exclusive)
		if lost.Empty() {
			continue
		}
		changed.Or(&lost)
		r.AndNot(&lost)
		if Processor(q).IsGPU() && r.Empty() {
			if c := b.chunk[Processor(q).GPUIndex()]; c != nil {
				d.freeChunk(c)
			}
		}
	}
	d.residentMask(b, dest).Or(&all)
	if dest.IsGPU() && !need.Empty() {
		d.gpus[dest.GPUIndex()].lru.toBack(b.chunk[dest.GPUIndex()])
	}
	b.dropRemote(&changed)
	d.revoke(p, b, revoked, dest)
	d.mapAccessedBy(p, b, changed)

	// Thrashing detection sees the copies made for faults and the
	// prefetcher; user migrations and duplication reset it.
	var detect, reset PageMask
	for i := range groups {
		g := &groups[i]
		switch g.cause {
		case CauseFault, CausePrefetcher, CauseAdvice:
			if copied.Empty() {
				continue
			}
			m := and(g.mask, copied)
			em := andNot(m, dup)
			detect.Or(&em)
			dm := and(m, dup)
			reset.Or(&dm)
		case CausePrefetch:
			reset.Or(&g.mask)
		}
	}
	if !reset.Empty() {
		d.thrashingReset(b, reset)
	}
	if !detect.Empty() {
		d.thrashingMigration(p, b, detect, dest, d.eng.Now())
	}
}

// migrated accounts pages of b that moved from src to dest (src
// NoProcessor: populated), one event per cause.
func (d *Driver) migrated(p *sim.Proc, b *vaBlock, groups []causeMask, pages PageMask, src, dest Processor, dup bool) {
	if src == NoProcessor && !d.observed() {
		// Populated pages count in no migration statistic.
		return
	}
	for i := range groups {
		g := &groups[i]
		m := and(g.mask, pages)
		if m.Empty() {
			continue
		}
		bytes := int64(m.Count()) * PageSize
		if src != NoProcessor {
			d.stats.Migrations[g.cause]++
			d.stats.MigratedBytes[g.cause] += bytes
			if dup {
				d.stats.DuplicatedBytes += bytes
			}
		}
		if d.observed() {
			d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindMigration, From: src, To: dest,
				Addr: b.addr(m.First()), Bytes: bytes, Cause: g.cause, Duplicate: dup && src != NoProcessor})
		}
	}
}

// mapRemote maps pages m of b, resident on to alone, in processor x's
// page tables.
func (d *Driver) mapRemote(p *sim.Proc, b *vaBlock, x, to Processor, m PageMask, cause Cause) {
	on := b.residentOn(to)
	m.And(&on)
	s := b.shared()
	m.AndNot(&s)
	if m.Empty() || x == to {
		return
	}
	r := b.remoteMask(x)
	fresh := andNot(m, *r)
	r.Or(&m)
	if fresh.Empty() {
		return
	}
	d.stats.RemoteMaps += int64(fresh.Count())
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindRemoteMap, Processor: x, To: to,
			Addr: b.addr(fresh.First()), Bytes: int64(fresh.Count()) * PageSize, Cause: cause})
	}
}

// mapAccessedBy maps the AccessedBy processors of pages m of b wherever
// each page now lives alone, when they can.
func (d *Driver) mapAccessedBy(p *sim.Proc, b *vaBlock, m PageMask) {
	if m.Empty() {
		return
	}
	a := b.alloc
	lo, hi := b.addr(m.First()), b.addr(b.pages)
	for i := range a.policies {
		s := &a.policies[i]
		if s.accessedBy == 0 || s.end <= lo || s.start >= hi {
			continue
		}
		first, end := b.pageSpan(s.start, s.end)
		span := and(m, rangeMask(first, end))
		if span.Empty() {
			continue
		}
		for to := range Processor(len(b.resident)) {
			on := and(span, b.residentOn(to))
			if on.Empty() {
				continue
			}
			for x := range Processor(len(b.resident)) {
				if s.accessedBy.Has(x) && x != to && d.canAccess(x, to) {
					d.mapRemote(p, b, x, to, on, CauseAdvice)
				}
			}
		}
	}
}

// ensureChunk gives b a root chunk of g, evicting the least recently
// used chunk nobody holds locked when g's managed memory is full
// (uvm_pmm_gpu_alloc_user with UVM_PMM_ALLOC_FLAGS_EVICT,
// pick_root_chunk_to_evict).
func (d *Driver) ensureChunk(p *sim.Proc, g *gpuState, b *vaBlock) {
	gi := g.id.GPUIndex()
	if b.chunk[gi] != nil {
		return
	}
	for g.free == 0 {
		victim := d.victim(g, b)
		if victim == nil {
			d.chunkWaiters++
			p.WaitUntil(d.unlocked, func() bool { return g.free > 0 || d.victim(g, b) != nil })
			d.chunkWaiters--
			continue
		}
		d.evict(p, victim, g)
	}
	g.free--
	var c *chunk
	if n := len(d.spareChunks); n > 0 {
		c, d.spareChunks = d.spareChunks[n-1], d.spareChunks[:n-1]
		*c = chunk{block: b, gpu: g}
	} else {
		c = &chunk{block: b, gpu: g}
	}
	g.lru.pushBack(c)
	b.chunk[gi] = c
}

// victim is the least recently used chunk of g whose block nobody holds
// (a chunk in use by a migration is pinned and off the list in PMM).
func (d *Driver) victim(g *gpuState, except *vaBlock) *vaBlock {
	for c := g.lru.head; c != nil; c = c.next {
		if c.block != except && !c.block.locked {
			return c.block
		}
	}
	return nil
}

// evict moves everything vb holds on g, and only there, to system memory
// and frees vb's chunk (evict_root_chunk: the root chunk's pages go to
// the CPU one VA block at a time).
func (d *Driver) evict(p *sim.Proc, vb *vaBlock, g *gpuState) {
	d.lock(p, vb)
	on := vb.residentOn(g.id)
	var others PageMask
	for q, r := range vb.resident {
		if r != nil && Processor(q) != g.id {
			others.Or(r)
		}
	}
	only := andNot(on, others)
	bytes := int64(only.Count()) * PageSize
	if bytes > 0 {
		d.move(p, vb, g.id, CPU, only)
		d.stats.Migrations[CauseEviction]++
		d.stats.MigratedBytes[CauseEviction] += bytes
		if d.observed() {
			d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindMigration, From: g.id, To: CPU,
				Addr: vb.addr(only.First()), Bytes: bytes, Cause: CauseEviction})
		}
	}
	d.residentMask(vb, CPU).Or(&only)
	if m := vb.resident[g.id]; m != nil && len(d.spareMasks) < maxSpareMasks {
		// Nothing else holds the mask (every use of a block's masks
		// is within a call): it serves the next residentMask.
		d.spareMasks = append(d.spareMasks, m)
	}
	vb.resident[g.id] = nil
	vb.dropRemote(&on)
	d.mapAccessedBy(p, vb, on)
	d.freeChunk(vb.chunk[g.id.GPUIndex()])
	d.stats.Evictions++
	d.stats.EvictedBytes += bytes
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindEviction, From: g.id, To: CPU,
			Addr: vb.start, Bytes: bytes})
	}
	d.unlock(vb)
}

func (d *Driver) freeChunk(c *chunk) {
	g := c.gpu
	g.lru.remove(c)
	g.free++
	c.block.chunk[g.id.GPUIndex()] = nil
	// Nothing else points to c now: the next ensureChunk reuses it.
	*c = chunk{}
	d.spareChunks = append(d.spareChunks, c)
}

// plainService reports whether a fault service of block b for GPU
// requester without pins can be servicePlain's: a machine of one GPU
// with memory of its own, and one policy over the whole block, the
// default. That is the common case of a kernel faulting memory nobody
// advised (every batch of a sweep over managed memory), and there the
// general path's residency selection, cause groups and remote mappings
// all come down to "the faulted pages and the prefetcher's go to the
// GPU".
func (d *Driver) plainService(b *vaBlock, requester Processor) bool {
	if d.general || len(b.resident) != 2 || !requester.IsGPU() || !d.hasMemory(requester) {
		return false
	}
	a := b.alloc
	lo, hi := b.start, b.addr(b.pages)
	i := 0
	if len(a.policies) > 1 {
		i = sort.Search(len(a.policies), func(i int) bool { return a.policies[i].end > lo })
	}
	s := &a.policies[i]
	return s.start <= lo && s.end >= hi && s.policy == defaultPolicy
}

// servicePlain is serviceFaults and makeResident for the faulted pages
// need of b, for GPU to, when plainService holds and no page has a pin:
// selectResidency sends every page to the requester with nothing
// duplicated and no advice, so there is one destination, the
// prefetcher runs, and the requester maps nothing remotely; the pages
// come from the CPU, the only other holder, or are populated. Each step
// is makeResident's with its masks worked out for one GPU and the CPU:
// the same statistics, events, sleeps and migrations in the same order.
// TestPlainServiceSameRun compares the two. It returns the number of
// pages that became resident on to.
func (d *Driver) servicePlain(p *sim.Proc, b *vaBlock, to Processor, need PageMask) int {
	d.plainServices++
	gpu := b.residentOn(to)
	var prefetched PageMask
	if !d.p.DisablePrefetch {
		prefetched = d.prefetches.prefetch(PrefetchInput{
			Pages:     b.pages,
			Resident:  gpu,
			Faulted:   need,
			Thrashing: d.thrashingPages(b),
			Threshold: d.p.PrefetchThreshold,
			// No preferred location: FirstTouchPreferred is false.
		})
	}
	// migrated's groups, made only for events.
	groups := func() []causeMask {
		return []causeMask{{need, CauseFault}, {cause: CauseAdvice}, {cause: CauseThrashing}, {prefetched, CausePrefetcher}}
	}
	all := or(need, prefetched)
	// ensureChunk may evict other blocks and wait, but b is locked:
	// its residency stays as it was.
	d.ensureChunk(p, d.gpus[to.GPUIndex()], b)
	cpu := b.residentOn(CPU)
	fresh := andNot(all, gpu)
	// Pages on both (read-duplicated under an earlier policy) lose the
	// CPU's copy: every page here ends on the GPU alone.
	revoked := and(all, and(cpu, gpu))
	held := and(fresh, cpu)
	if populate := andNot(fresh, held); !populate.Empty() {
		d.stats.PopulatedBytes += int64(populate.Count()) * PageSize
		if d.observed() {
			d.migrated(p, b, groups(), populate, NoProcessor, to, false)
		}
	}
	if !held.Empty() {
		d.move(p, b, CPU, to, held)
		if d.observed() {
			d.migrated(p, b, groups(), held, CPU, to, false)
		} else {
			// migrated without events: of the four groups only the
			// faulted and the prefetched pages can have any.
			d.countMigration(and(need, held), CauseFault)
			d.countMigration(and(prefetched, held), CausePrefetcher)
		}
	}
	changed := fresh
	if r := b.resident[CPU]; r != nil {
		if lost := and(*r, all); !lost.Empty() {
			changed.Or(&lost)
			r.AndNot(&lost)
		}
	}
	d.residentMask(b, to).Or(&all)
	if !fresh.Empty() {
		d.gpus[to.GPUIndex()].lru.toBack(b.chunk[to.GPUIndex()])
	}
	b.dropRemote(&changed)
	d.revoke(p, b, revoked, to)
	// No page of the block was AccessedBy, but advice given while the
	// pages moved may have made some.
	d.mapAccessedBy(p, b, changed)
	// Thrashing detection sees the pages copied, faulted and
	// prefetched alike; nothing is duplicated, so nothing is reset.
	if !held.Empty() {
		d.thrashingMigration(p, b, held, to, d.eng.Now())
	}
	return fresh.Count()
}

// countMigration counts a migration of pages m for cause, as migrated
// does when nobody watches; none when m is empty.
func (d *Driver) countMigration(m PageMask, cause Cause) {
	if m.Empty() {
		return
	}
	d.stats.Migrations[cause]++
	d.stats.MigratedBytes[cause] += int64(m.Count()) * PageSize
}

// revoke counts the read-duplicated copies that a migration of b to dest
// took away (the pages of revoked, which dest now holds alone) and
// reports them, one KindRevoke event from the first such page.
func (d *Driver) revoke(p *sim.Proc, b *vaBlock, revoked PageMask, dest Processor) {
	if revoked.Empty() {
		return
	}
	d.stats.Revocations += int64(revoked.Count())
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindRevoke, Processor: dest,
			Addr: b.addr(revoked.First()), Bytes: int64(revoked.Count()) * PageSize})
	}
}

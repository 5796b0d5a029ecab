package uvm

import (
	"cmp"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// Access says how an access to managed memory was served. The caller (a
// kernel or CPU model) charges the data path: local memory, or the
// route to Where when RemoteBytes is not zero.
type Access struct {
	// Where is the processor whose memory served the first byte.
	Where Processor
	// RemoteBytes are the bytes served from another processor's memory
	// through a remote mapping (zero-copy system memory, a peer GPU).
	RemoteBytes int64
	// Faults are the faults the access raised: GPU fault-buffer entries
	// (re-faults after a replay included) or CPU page faults.
	Faults int
	// Stall is how long the access waited for faults to be serviced,
	// throttling included.
	Stall sim.Time
}

// faultRun is a run of replayable fault-buffer entries
// (uvm_fault_buffer_entry_t): one per 4 KiB page from addr on, pages of
// them, all in one VA block, posted together by one access. The buffer
// holds runs rather than an entry per page, so that a kernel faulting a
// large buffer costs the model its blocks, not its pages; a batch still
// fetches FaultBatchCount entries, splitting a run where it ends.
type faultRun struct {
	addr  Addr // page aligned
	pages int
	alloc *Allocation
	write bool
	w     *faultWaiter
	// pos is the fetch order of the run's first entry within its batch:
	// entries of one address sort in that order (a stable sort).
	pos int
}

// faultWaiter is a faulting access waiting for the replay of its
// entries: done completes once all are serviced (at retryAt when a
// throttled one may not refault earlier).
type faultWaiter struct {
	done    sim.Completion // in the waiter, sparing an allocation
	pending int
	retryAt sim.Time
	// last is the sort key (address, fetch order) of the waiter's last
	// entry in the batch being serviced; seen whether it has one there.
	// Waiters complete in the order of their last entries in the batch
	// sorted by address, as they would walking entries one by one.
	lastAddr Addr
	lastPos  int
	seen     bool
}

// GPUAccess is one access of a warp or thread block on GPU gpu to
// [addr, addr+size), a read or a write. On a Pascal-plus GPU every page
// the GPU may not access as asked raises a fault; the access waits until
// the bottom half has serviced them and replayed, and faults again if a
// page is still not accessible (throttled, or taken away meanwhile).
// Many concurrent callers make many faults, which the driver batches.
// On pre-Pascal and Tegra GPUs managed memory never faults, but must be
// accessed between KernelLaunch and KernelComplete.
func (d *Driver) GPUAccess(p *sim.Proc, gpu int, addr Addr, size int64, write bool) (Access, error) {
	return d.gpuAccess(p, gpu, addr, size, 0, 0, write)
}

// GPUAccessStrided is GPUAccess of a strided walk: elem bytes every
// stride bytes from addr, inside [addr, addr+size). Only the pages the
// elements touch fault: a warp raises faults for the pages its loads and
// stores name (the fault buffer's entries are per faulting address,
// uvm_fault_buffer_entry_t), so a 4-byte read every 64 KiB faults one
// page in 16, and what else moves is the prefetcher's choice. A stride
// of at most elem (or at most a page, where every page is touched) is
// GPUAccess of the region.
func (d *Driver) GPUAccessStrided(p *sim.Proc, gpu int, addr Addr, size, stride, elem int64, write bool) (Access, error) {
	if elem <= 0 || stride <= elem || stride <= PageSize {
		return d.gpuAccess(p, gpu, addr, size, 0, 0, write)
	}
	return d.gpuAccess(p, gpu, addr, size, stride, elem, write)
}

// CopyEngineAccess is a copy engine of GPU gpu reading (or, write,
// writing) [addr, addr+size) of managed memory, as cuMemcpy's copy does:
// the engine walks the range in address order, and each page the GPU
// may not access as asked raises a non-replayable fault, which stops the
// engine's channel until it is serviced (uvm_gpu_non_replayable_faults.c:
// "fault and switch", one fault at a time, each with its own batch id).
// Its service is a replayable fault's (service_managed_fault_in_block_locked
// calls uvm_va_block_service_locked, with the prefetch hint), so here
// each is one fault of a batch of its own: the batch overhead, one entry,
// the block, the pages migrated with the prefetcher's region. The pages
// end where the policy puts them (the GPU by default; they stay and are
// mapped under AccessedBy or a CPU preferred location).
func (d *Driver) CopyEngineAccess(p *sim.Proc, gpu int, addr Addr, size int64, write bool) (Access, error) {
	g, err := d.gpu(gpu)
	if err != nil {
		return Access{}, d.fail(p, NoProcessor, addr, err)
	}
	if _, err := d.find(addr, size); err != nil {
		return Access{}, d.fail(p, g.id, addr, err)
	}
	var acc Access
	end := addr + Addr(size)
	for a := addr &^ (PageSize - 1); a < end; a += PageSize {
		num := uint64(a) / BlockSize
		pg := int(uint64(a)%BlockSize) / PageSize
		if b := d.blockAt(num); b != nil {
			ok := b.accessible(g.id, write)
			if ok.Test(pg) {
				continue
			}
		}
		f, err := d.gpuAccess(p, gpu, max(a, addr), 1, 0, 0, write)
		acc.Faults += f.Faults
		acc.Stall += f.Stall
		if err != nil {
			return acc, err
		}
	}
	d.describe(&acc, g.id, addr, end)
	return acc, nil
}

// touchedPages is the pages of the block at bstart that elements of elem
// bytes every stride bytes from start, inside [start, end), touch.
func touchedPages(bstart, start, end Addr, stride, elem int64) PageMask {
	var m PageMask
	bend := bstart + BlockSize
	k := int64(0)
	if bstart > start {
		// The first element that may overlap the block.
		k = (int64(bstart-start) - elem + 1 + stride - 1) / stride
		k = max(k, 0)
	}
	for e := start + Addr(k*stride); e < end && e < bend; e += Addr(stride) {
		lo := max(e, bstart)
		hi := min(e+Addr(elem), end, bend)
		if hi <= lo {
			continue
		}
		m.SetRange(int(lo-bstart)/PageSize, int(hi-bstart+PageSize-1)/PageSize)
	}
	return m
}

func (d *Driver) gpuAccess(p *sim.Proc, gpu int, addr Addr, size, stride, elem int64, write bool) (Access, error) {
	g, err := d.gpu(gpu)
	if err != nil {
		return Access{}, d.fail(p, NoProcessor, addr, err)
	}
	a, err := d.find(addr, size)
	if err != nil {
		return Access{}, d.fail(p, g.id, addr, err)
	}
	end := addr + Addr(size)
	switch d.gen {
	case PrePascal:
		return d.legacyGPUAccess(p, g, a, addr, end)
	case Tegra:
		return d.tegraGPUAccess(p, g, a, addr, end, write)
	}
	start := p.Now()
	var acc Access
	for {
		var w *faultWaiter
		for num := uint64(addr) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
			lo, hi := spanPages(Addr(num*BlockSize), addr, end)
			missing := rangeMask(lo, hi)
			if stride > 0 {
				missing = touchedPages(Addr(num*BlockSize), addr, end, stride, elem)
			}
			if b := d.blockAt(num); b != nil {
				ok := b.accessible(g.id, write)
				missing.AndNot(&ok)
			}
			for pg := missing.First(); pg >= 0; {
				end := missing.NextClear(pg + 1)
				if w == nil {
					w = new(faultWaiter)
					d.eng.InitCompletion(&w.done, "", "uvm fault replay")
				}
				d.post(p, g, faultRun{addr: Addr(num*BlockSize) + Addr(pg)*PageSize, pages: end - pg, alloc: a, write: write, w: w})
				acc.Faults += end - pg
				pg = missing.Next(end)
			}
		}
		if w == nil {
			break
		}
		d.kick(g)
		p.Wait(&w.done)
		if a.freed {
			return acc, d.fail(p, g.id, addr, ErrInvalidAddress)
		}
	}
	acc.Stall = p.Now() - start
	d.stall(p, g.id, addr, end, acc.Stall)
	d.describe(&acc, g.id, addr, end)
	return acc, nil
}

// spanPages is the pages [lo, hi) of the block at bstart that [start,
// end) touches.
func spanPages(bstart, start, end Addr) (int, int) {
	lo := max(start, bstart)
	hi := min(end, bstart+BlockSize)
	return int(lo-bstart) / PageSize, int(hi-bstart+PageSize-1) / PageSize
}

// describe fills where an access of x to [start, end) was served from:
// Where the first page someone holds, RemoteBytes the bytes of pages x
// does not hold (of the first and last page, those in the range).
func (d *Driver) describe(acc *Access, x Processor, start, end Addr) {
	acc.Where = NoProcessor
	for num := uint64(start) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
		b := d.blockAt(num)
		if b == nil {
			continue
		}
		lo, hi := spanPages(Addr(num*BlockSize), start, end)
		span := rangeMask(lo, hi)
		local := b.residentOn(x)
		if acc.Where == NoProcessor {
			held := and(span, b.anyResident())
			if pg := held.First(); pg >= 0 {
				acc.Where = x
				if !local.Test(pg) {
					acc.Where = b.holders(pg).First()
				}
			}
		}
		far := andNot(span, local)
		if far.Empty() {
			continue
		}
		bytes := int64(far.Count()) * PageSize
		if far.Test(lo) {
			bytes -= int64(max(start, b.addr(lo)) - b.addr(lo))
		}
		if far.Test(hi - 1) {
			bytes -= int64(b.addr(hi) - min(end, b.addr(hi)))
		}
		acc.RemoteBytes += bytes
	}
}

// post puts a run of entries in g's fault buffer, one fault event per
// page.
func (d *Driver) post(p *sim.Proc, g *gpuState, r faultRun) {
	r.w.pending += r.pages
	g.queue = append(g.queue, r)
	g.queued += r.pages
	d.stats.GPUFaults += int64(r.pages)
	if d.observed() {
		for i := range r.pages {
			d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindFault, Processor: g.id, Addr: r.addr + Addr(i)*PageSize, Write: r.write})
		}
	}
}

// kick raises g's fault interrupt: the bottom half runs unless it
// already does.
func (d *Driver) kick(g *gpuState) {
	if g.servicing {
		return
	}
	g.servicing = true
	if g.bhFn == nil {
		g.bhFn = func(p *sim.Proc) { d.bottomHalf(p, g) }
	}
	// The bottom half waits for each migration it starts, and nothing
	// it runs meanwhile runs the engine: its sleeps and waits run the
	// events due before it goes on rather than switching coroutines
	// (sim.Proc.RunAhead), some two switches per migrated block.
	d.eng.Spawn(g.bh, g.bhFn).RunAhead()
}

// bottomHalf services g's fault buffer until it is empty
// (uvm_parent_gpu_service_replayable_faults, re-run as long as the
// interrupt fires): each run at most MaxBatchesPerService batches, or
// MaxThrottlePerService batches with throttled faults.
func (d *Driver) bottomHalf(p *sim.Proc, g *gpuState) {
	for g.queued > 0 {
		d.stats.ServicePasses++
		batches, throttled := 0, 0
		for batches < d.p.MaxBatchesPerService && throttled < d.p.MaxThrottlePerService && g.queued > 0 {
			if d.serviceBatch(p, g) {
				throttled++
			}
			batches++
		}
	}
	g.queue, g.qhead = g.queue[:0], 0
	g.servicing = false
}

// fetch takes the next n entries of g's fault buffer into g.batch, in
// the order they were posted, splitting the run where the batch ends.
func (g *gpuState) fetch(n int) {
	g.batch = g.batch[:0]
	for pos := 0; pos < n; {
		r := &g.queue[g.qhead]
		take := *r
		take.pos = pos
		if r.pages > n-pos {
			take.pages = n - pos
			r.addr += Addr(take.pages) * PageSize
			r.pages -= take.pages
		} else {
			*r = faultRun{}
			g.qhead++
		}
		g.batch = append(g.batch, take)
		pos += take.pages
	}
	g.queued -= n
	if g.qhead > 1024 && g.qhead*2 > len(g.queue) {
		g.queue = append(g.queue[:0], g.queue[g.qhead:]...)
		g.qhead = 0
	}
}

// serviceBatch fetches up to FaultBatchCount entries, coalesces them by
// page, services them block by block in address order, and replays
// (policy UVM_PERF_FAULT_REPLAY_POLICY_BATCH_FLUSH: a replay after every
// batch). It reports whether some fault was throttled.
func (d *Driver) serviceBatch(p *sim.Proc, g *gpuState) bool {
	p.Sleep(d.p.FaultBatchOverhead)
	n := min(g.queued, d.p.FaultBatchCount)
	g.fetch(n)
	batch := g.batch
	p.Sleep(sim.Time(n) * d.p.FaultEntryCost)
	// Runs lie in one block each: sorted by block they are serviced in
	// the order a sort of the entries by address would give.
	slices.SortStableFunc(batch, func(x, y faultRun) int { return cmp.Compare(x.addr/BlockSize, y.addr/BlockSize) })

	coalesced, blocks, throttled := 0, 0, false
	for i := 0; i < len(batch); {
		num := uint64(batch[i].addr) / BlockSize
		j := i
		for j < len(batch) && uint64(batch[j].addr)/BlockSize == num {
			j++
		}
		c, t, serviced := d.serviceBlockBatch(p, g, num, batch[i:j])
		coalesced += c
		throttled = throttled || t
		if serviced {
			blocks++
		}
		i = j
	}
	d.stats.Batches++
	d.stats.CoalescedFaults += int64(coalesced)
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindBatch, Processor: g.id, Count: n, Coalesced: coalesced, Blocks: blocks})
	}
	d.replay(g)
	return throttled
}

// replay completes the waiters whose last entries were in the batch, in
// the order of those entries sorted by address (stable: by fetch order
// among entries of one page).
func (d *Driver) replay(g *gpuState) {
	waiters := g.waiters[:0]
	for i := range g.batch {
		r := &g.batch[i]
		w := r.w
		w.pending -= r.pages
		last, pos := r.addr+Addr(r.pages-1)*PageSize, r.pos+r.pages-1
		switch {
		case !w.seen:
			w.seen = true
			waiters = append(waiters, w)
		case last < w.lastAddr || last == w.lastAddr && pos < w.lastPos:
			continue
		}
		w.lastAddr, w.lastPos = last, pos
	}
	slices.SortFunc(waiters, func(x, y *faultWaiter) int {
		if c := cmp.Compare(x.lastAddr, y.lastAddr); c != 0 {
			return c
		}
		return cmp.Compare(x.lastPos, y.lastPos)
	})
	now := d.eng.Now()
	for _, w := range waiters {
		w.seen = false
		if w.pending > 0 {
			continue
		}
		if w.retryAt > now {
			d.eng.At(w.retryAt, w.done.Complete)
		} else {
			w.done.Complete()
		}
	}
	clear(waiters)
	g.waiters = waiters[:0]
	clear(g.batch)
}

// serviceBlockBatch services the runs of block num in one batch:
// service_fault_batch_block over their entries coalesced by page. It
// reports the entries coalesced (those beyond the first of each page),
// whether a fault was throttled and whether the block needed service at
// all.
func (d *Driver) serviceBlockBatch(p *sim.Proc, g *gpuState, num uint64, runs []faultRun) (coalesced int, throttled, serviced bool) {
	var faulted, writes PageMask
	entries := 0
	for _, r := range runs {
		lo := int(uint64(r.addr)%BlockSize) / PageSize
		faulted.SetRange(lo, lo+r.pages)
		if r.write {
			writes.SetRange(lo, lo+r.pages)
		}
		entries += r.pages
	}
	coalesced = entries - faulted.Count()
	a := runs[0].alloc
	if a.freed {
		return coalesced, false, false
	}
	b := d.block(a, num)
	d.lock(p, b)
	defer d.unlock(b)
	readable, writable := b.access(g.id)
	// A page is stale when the GPU may already access it as asked: it
	// may write it, or every entry of the page is a read and it may
	// read it.
	stale := and(faulted, or(writable, andNot(readable, writes)))
	nstale := 0
	for _, r := range runs {
		lo := int(uint64(r.addr)%BlockSize) / PageSize
		nstale += stale.CountRange(lo, lo+r.pages)
	}
	d.stats.StaleFaults += int64(nstale)
	need := andNot(faulted, stale)
	if need.Empty() {
		return coalesced, false, false
	}
	p.Sleep(d.p.BlockServiceCost)
	noHistory := d.p.DisableThrashing || b.thrash == nil || b.thrash.pages == nil
	if noHistory && d.plainService(b, g.id) {
		// The pages that became resident on the GPU are those
		// servicePlain made fresh there: chargePages's count.
		fresh := d.servicePlain(p, b, g.id, need)
		d.chargeCount(p, fresh)
		return coalesced, false, true
	}
	before := b.residentOn(g.id)
	defer d.chargePages(p, b, g.id, &before)
	now := p.Now()
	if noHistory {
		// No page of the block has a thrashing history: every hint is
		// none (thrashingHint's first test).
		d.serviceFaults(p, b, g.id, need, writes, nil)
		return coalesced, false, true
	}
	// The bottom half services one batch at a time, so the pins can
	// live in g's scratch space until serviceFaults returns.
	pins := g.pins[:0]
	for pg := need.First(); pg >= 0; pg = need.Next(pg + 1) {
		hint := d.thrashingHint(p, b, pg, g.id, now)
		switch hint.kind {
		case hintThrottle:
			throttled = true
			need.Clear(pg)
			for _, e := range runs {
				lo := int(e.addr-b.start) / PageSize
				if pg >= lo && pg < lo+e.pages {
					e.w.retryAt = max(e.w.retryAt, hint.until)
				}
			}
		case hintPin:
			pins = append(pins, pinnedFault{page: pg, hint: hint})
		}
	}
	g.pins = pins
	if !need.Empty() {
		d.serviceFaults(p, b, g.id, need, writes, pins)
	}
	return coalesced, throttled, true
}

// chargePages charges the fault service's per-page work for the pages
// of b that became resident on x since before (faulted and prefetched
// alike). It runs before the block is unlocked: the work is done under
// the block lock.
func (d *Driver) chargePages(p *sim.Proc, b *vaBlock, x Processor, before *PageMask) {
	if d.p.FaultPageCost == 0 {
		return
	}
	moved := andNot(b.residentOn(x), *before)
	d.chargeCount(p, moved.Count())
}

// chargeCount is chargePages for n pages.
func (d *Driver) chargeCount(p *sim.Proc, n int) {
	if n > 0 && d.p.FaultPageCost != 0 {
		p.Sleep(sim.Time(n) * d.p.FaultPageCost)
	}
}

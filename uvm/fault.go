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

// faultEntry is one replayable fault-buffer entry (uvm_fault_buffer_entry_t).
type faultEntry struct {
	addr  Addr // page aligned
	alloc *Allocation
	write bool
	w     *faultWaiter
}

// faultWaiter is a faulting access waiting for the replay of its
// entries: done completes once all are serviced (at retryAt when a
// throttled one may not refault earlier).
type faultWaiter struct {
	done    *sim.Completion
	pending int
	retryAt sim.Time
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
			if b := d.blocks[num]; b != nil {
				ok := b.accessible(g.id, write)
				missing.AndNot(&ok)
			}
			for pg := missing.First(); pg >= 0; pg = missing.Next(pg + 1) {
				if w == nil {
					w = &faultWaiter{done: d.eng.NewNamedCompletion("uvm fault replay")}
				}
				d.post(p, g, &faultEntry{addr: Addr(num*BlockSize) + Addr(pg)*PageSize, alloc: a, write: write, w: w})
				acc.Faults++
			}
		}
		if w == nil {
			break
		}
		d.kick(g)
		p.Wait(w.done)
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

// describe fills where an access of x to [start, end) was served from.
func (d *Driver) describe(acc *Access, x Processor, start, end Addr) {
	acc.Where = NoProcessor
	for num := uint64(start) / BlockSize; num <= (uint64(end)-1)/BlockSize; num++ {
		b := d.blocks[num]
		lo, hi := spanPages(Addr(num*BlockSize), start, end)
		if b == nil {
			continue
		}
		local := b.residentOn(x)
		for pg := lo; pg < hi; pg++ {
			where := x
			if !local.Test(pg) {
				where = b.holders(pg).First()
				pa := b.addr(pg)
				acc.RemoteBytes += int64(min(end, pa+PageSize) - max(start, pa))
			}
			if acc.Where == NoProcessor {
				acc.Where = where
			}
		}
	}
}

// post puts an entry in g's fault buffer.
func (d *Driver) post(p *sim.Proc, g *gpuState, e *faultEntry) {
	e.w.pending++
	g.queue = append(g.queue, e)
	d.stats.GPUFaults++
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindFault, Processor: g.id, Addr: e.addr, Write: e.write})
	}
}

// kick raises g's fault interrupt: the bottom half runs unless it
// already does.
func (d *Driver) kick(g *gpuState) {
	if g.servicing {
		return
	}
	g.servicing = true
	d.eng.Spawn(g.bh, func(p *sim.Proc) { d.bottomHalf(p, g) })
}

// bottomHalf services g's fault buffer until it is empty
// (uvm_parent_gpu_service_replayable_faults, re-run as long as the
// interrupt fires): each run at most MaxBatchesPerService batches, or
// MaxThrottlePerService batches with throttled faults.
func (d *Driver) bottomHalf(p *sim.Proc, g *gpuState) {
	for g.qhead < len(g.queue) {
		d.stats.ServicePasses++
		batches, throttled := 0, 0
		for batches < d.p.MaxBatchesPerService && throttled < d.p.MaxThrottlePerService && g.qhead < len(g.queue) {
			if d.serviceBatch(p, g) {
				throttled++
			}
			batches++
		}
	}
	g.queue, g.qhead = g.queue[:0], 0
	g.servicing = false
}

// serviceBatch fetches up to FaultBatchCount entries, coalesces them by
// page, services them block by block in address order, and replays
// (policy UVM_PERF_FAULT_REPLAY_POLICY_BATCH_FLUSH: a replay after every
// batch). It reports whether some fault was throttled.
func (d *Driver) serviceBatch(p *sim.Proc, g *gpuState) bool {
	p.Sleep(d.p.FaultBatchOverhead)
	n := min(len(g.queue)-g.qhead, d.p.FaultBatchCount)
	batch := slices.Clone(g.queue[g.qhead : g.qhead+n])
	clear(g.queue[g.qhead : g.qhead+n])
	g.qhead += n
	if g.qhead > 1024 && g.qhead*2 > len(g.queue) {
		g.queue = append(g.queue[:0], g.queue[g.qhead:]...)
		g.qhead = 0
	}
	p.Sleep(sim.Time(n) * d.p.FaultEntryCost)
	slices.SortStableFunc(batch, func(x, y *faultEntry) int { return cmp.Compare(x.addr, y.addr) })

	coalesced, blocks, throttled := 0, 0, false
	for i := 0; i < len(batch); {
		num := uint64(batch[i].addr) / BlockSize
		j := i
		for j < len(batch) && uint64(batch[j].addr)/BlockSize == num {
			j++
		}
		for k := i + 1; k < j; k++ {
			if batch[k].addr == batch[k-1].addr {
				coalesced++
			}
		}
		if a := batch[i].alloc; !a.freed {
			t, serviced := d.serviceBlockBatch(p, g, d.block(a, num), batch[i:j])
			throttled = throttled || t
			if serviced {
				blocks++
			}
		}
		i = j
	}
	d.stats.Batches++
	d.stats.CoalescedFaults += int64(coalesced)
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now(), Proc: procName(p)}, Kind: KindBatch, Processor: g.id, Count: n, Coalesced: coalesced, Blocks: blocks})
	}
	now := d.eng.Now()
	for _, e := range batch {
		w := e.w
		if w.pending--; w.pending > 0 {
			continue
		}
		if w.retryAt > now {
			d.eng.At(w.retryAt, w.done.Complete)
		} else {
			w.done.Complete()
		}
	}
	return throttled
}

// serviceBlockBatch services the entries of one block (sorted by
// address): service_fault_batch_block. It reports whether a fault was
// throttled and whether the block needed service at all.
func (d *Driver) serviceBlockBatch(p *sim.Proc, g *gpuState, b *vaBlock, es []*faultEntry) (throttled, serviced bool) {
	d.lock(p, b)
	defer d.unlock(b)
	var reqs []faultReq
	var stale int
	readable, writable := b.accessible(g.id, false), b.accessible(g.id, true)
	for i := 0; i < len(es); {
		pg := int(es[i].addr-b.start) / PageSize
		j, write := i, false
		for j < len(es) && es[j].addr == es[i].addr {
			write = write || es[j].write
			j++
		}
		if writable.Test(pg) || (!write && readable.Test(pg)) {
			stale += j - i
		} else {
			reqs = append(reqs, faultReq{page: pg, write: write})
		}
		i = j
	}
	d.stats.StaleFaults += int64(stale)
	if len(reqs) == 0 {
		return false, false
	}
	p.Sleep(d.p.BlockServiceCost)
	now := p.Now()
	kept := reqs[:0]
	for _, r := range reqs {
		r.hint = d.thrashingHint(p, b, r.page, g.id, now)
		if r.hint.kind == hintThrottle {
			throttled = true
			for _, e := range es {
				if int(e.addr-b.start)/PageSize == r.page {
					e.w.retryAt = max(e.w.retryAt, r.hint.until)
				}
			}
			continue
		}
		kept = append(kept, r)
	}
	if len(kept) > 0 {
		d.serviceFaults(p, b, g.id, kept)
	}
	return throttled, true
}

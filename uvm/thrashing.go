package uvm

import (
	"github.com/dmalab/dmalab/sim"
)

// Thrashing detection and mitigation (uvm_perf_thrashing.c), per page:
//
//   - Detection: a page's migrations due to faults or the prefetcher
//     each within ThrashingLapse of the previous one are counted; at
//     ThrashingThreshold the page is thrashing. A migration after a
//     longer gap resets a thrashing page that is not pinned. Per-page
//     state exists only once a block saw two migrations to different
//     processors within a lapse.
//   - Mitigation, on the next fault on a thrashing page: a throttling
//     period starts (ThrashingNap lapses); one processor, alternating
//     between periods, may keep working, the others are throttled (a
//     GPU's fault waits, a CPU thread sleeps) until the period ends.
//     A page is pinned instead when its preferred location is reachable
//     by every thrashing processor, when they all reach its current
//     location over NVLink with native atomics, or after
//     ThrashingPinThreshold throttling periods. A pinned page stays where
//     it is pinned and the other processors map it remotely, for
//     ThrashingPin lapses, after which the remote mappings go.
//   - A block with no thrashing event for ThrashingEpoch lapses and no
//     pinned page forgets its state (at most ThrashingMaxResets times).
//
// Not modelled: revocation thrashing (system-wide atomics downgrading
// mappings) and the per-processor procfs statistics.

// hintKind is uvm_perf_thrashing_hint_type_t.
type hintKind uint8

const (
	hintNone hintKind = iota
	hintThrottle
	hintPin
)

// thrashHint is uvm_perf_thrashing_hint_t: for a pin, where and who maps
// it; for a throttle, until when.
type thrashHint struct {
	kind       hintKind
	residency  Processor
	processors ProcSet
	until      sim.Time
}

// pageThrashing is page_thrashing_info_t.
type pageThrashing struct {
	last          sim.Time
	seen          bool
	events        uint8
	pinned        bool
	pinnedAt      Processor
	pinDeadline   sim.Time
	throttleEnd   sim.Time // -1: no throttling period
	throttleCount uint8
	processors    ProcSet
	throttled     ProcSet
	doNotThrottle Processor
}

// blockThrashing is block_thrashing_info_t.
type blockThrashing struct {
	pages         []pageThrashing
	thrashing     PageMask
	pinned        PageMask
	numThrashing  int
	numPinned     int
	resets        int
	lastProc      Processor
	last          sim.Time
	seen          bool
	lastThrashing sim.Time
	thrashingSeen bool
}

func (bt *blockThrashing) initPages(n int) {
	bt.pages = make([]pageThrashing, n)
	for i := range bt.pages {
		bt.pages[i] = pageThrashing{pinnedAt: NoProcessor, doNotThrottle: NoProcessor, throttleEnd: -1}
	}
}

// thrashingPages are b's thrashing pages (uvm_perf_thrashing_get_thrashing_pages).
func (d *Driver) thrashingPages(b *vaBlock) PageMask {
	if d.p.DisableThrashing || b.thrash == nil {
		return PageMask{}
	}
	return b.thrash.thrashing
}

func (d *Driver) lapse(n int) sim.Time { return sim.Time(n) * d.p.ThrashingLapse }

// thrashingMigration records that pages m of b migrated to dst because
// of faults or the prefetcher (thrashing_event_cb).
func (d *Driver) thrashingMigration(p *sim.Proc, b *vaBlock, m PageMask, dst Processor, now sim.Time) {
	if d.p.DisableThrashing {
		return
	}
	bt := b.thrash
	if bt == nil {
		if n := len(d.freeThrash); n > 0 {
			bt = d.freeThrash[n-1]
			d.freeThrash[n-1] = nil
			d.freeThrash = d.freeThrash[:n-1]
			*bt = blockThrashing{lastProc: NoProcessor}
		} else {
			bt = &blockThrashing{lastProc: NoProcessor}
		}
		b.thrash = bt
	}
	defer func() { bt.last, bt.seen, bt.lastProc = now, true, dst }()
	if bt.pages == nil {
		if !bt.seen || bt.lastProc == dst || now-bt.last > d.p.ThrashingLapse {
			return
		}
		bt.initPages(b.pages)
	}
	for pg := m.First(); pg >= 0; pg = m.Next(pg + 1) {
		pt := &bt.pages[pg]
		pt.processors = pt.processors.With(dst)
		last, seen := pt.last, pt.seen
		pt.last, pt.seen = now, true
		if !seen {
			continue
		}
		switch {
		case now-last <= d.p.ThrashingLapse:
			if pt.events < 7 {
				pt.events++
			}
			if int(pt.events) == d.p.ThrashingThreshold {
				if !bt.thrashing.Test(pg) {
					bt.thrashing.Set(pg)
					bt.numThrashing++
				}
				d.stats.Thrashing++
				if d.observed() {
					d.emit(Event{Header: sim.Header{Time: now, Proc: procName(p)}, Kind: KindThrashing, Processor: dst,
						Addr: b.addr(pg), Bytes: PageSize, Processors: pt.processors})
				}
			}
			if int(pt.events) >= d.p.ThrashingThreshold {
				bt.lastThrashing, bt.thrashingSeen = now, true
			}
		case int(pt.events) >= d.p.ThrashingThreshold && !pt.pinned:
			d.resetThrashingPage(b, pg)
		}
	}
}

// thrashingReset forgets the thrashing state of pages m of b: user
// commands and read duplication take precedence over the heuristics
// (thrashing_reset_pages_in_region).
func (d *Driver) thrashingReset(b *vaBlock, m PageMask) {
	if b.thrash == nil || b.thrash.pages == nil {
		return
	}
	m.And(&b.thrash.thrashing)
	for pg := m.First(); pg >= 0; pg = m.Next(pg + 1) {
		d.resetThrashingPage(b, pg)
	}
}

// resetThrashingPage is thrashing_reset_page: throttling ends, a pin is
// dropped (its remote mappings stay until the next migration).
func (d *Driver) resetThrashingPage(b *vaBlock, pg int) {
	bt := b.thrash
	pt := &bt.pages[pg]
	if pt.pinned {
		bt.numPinned--
		bt.pinned.Clear(pg)
	}
	*pt = pageThrashing{pinnedAt: NoProcessor, doNotThrottle: NoProcessor, throttleEnd: -1}
	if bt.thrashing.Test(pg) {
		bt.thrashing.Clear(pg)
		bt.numThrashing--
	}
}

// thrashingHint is what to do about requester's fault on page pg of b
// (uvm_perf_thrashing_get_hint); it updates the page's throttling and
// pinning state.
func (d *Driver) thrashingHint(p *sim.Proc, b *vaBlock, pg int, requester Processor, now sim.Time) thrashHint {
	var h thrashHint
	if d.p.DisableThrashing || b.thrash == nil || b.thrash.pages == nil {
		return h
	}
	bt := b.thrash
	if bt.thrashingSeen && now-bt.lastThrashing > d.lapse(d.p.ThrashingEpoch) &&
		bt.numPinned == 0 && bt.resets < d.p.ThrashingMaxResets {
		bt.resets++
		bt.pages = nil
		bt.numThrashing = 0
		bt.thrashing = PageMask{}
		bt.lastProc, bt.seen, bt.thrashingSeen = NoProcessor, false, false
		return h
	}
	pt := &bt.pages[pg]
	if int(pt.events) < d.p.ThrashingThreshold {
		return h
	}
	switch {
	case pt.throttled.Has(requester) && now < pt.throttleEnd && requester != pt.doNotThrottle:
		h.kind = hintThrottle
	default:
		if pt.throttled.Has(requester) {
			d.endThrottle(pt, requester)
		}
		if now-pt.last > d.p.ThrashingLapse && !pt.pinned {
			return h
		}
		pt.processors = pt.processors.With(requester)
		d.throttleUpdate(pt, requester, now)
		h = d.migrationThrashingHint(b, pg, pt, requester)
	}
	switch h.kind {
	case hintPin:
		d.pin(p, b, pg, pt, h.residency, now)
		h.processors = pt.processors
	case hintThrottle:
		if !pt.throttled.Has(requester) {
			pt.throttled = pt.throttled.With(requester)
			if !pt.pinned && pt.throttleCount < 255 {
				pt.throttleCount++
			}
		}
		h.until = pt.throttleEnd
		d.stats.Throttles++
		if d.observed() {
			d.emit(Event{Header: sim.Header{Time: now, Proc: procName(p)}, Kind: KindThrottle, Processor: requester,
				Addr: b.addr(pg), Until: h.until, Processors: pt.processors})
		}
	}
	return h
}

func (d *Driver) endThrottle(pt *pageThrashing, x Processor) {
	pt.throttled = pt.throttled.Without(x)
	if pt.throttled == 0 {
		pt.throttleEnd = -1
	}
}

// throttleUpdate starts a throttling period when none is running and
// picks the processor not to throttle in it, alternating between
// periods (thrashing_throttle_update).
func (d *Driver) throttleUpdate(pt *pageThrashing, requester Processor, now sim.Time) {
	if now > pt.throttleEnd {
		pt.throttleEnd = now + d.lapse(d.p.ThrashingNap)
		if pt.doNotThrottle == requester {
			pt.doNotThrottle = NoProcessor
		} else {
			pt.doNotThrottle = requester
		}
	} else if pt.doNotThrottle == NoProcessor {
		pt.doNotThrottle = requester
	}
}

// migrationThrashingHint is get_hint_for_migration_thrashing.
func (d *Driver) migrationThrashingHint(b *vaBlock, pg int, pt *pageThrashing, requester Processor) thrashHint {
	pl := b.alloc.policyAt(b.addr(pg)).preferred
	closest := d.closest(b.holders(pg), requester)
	if closest == NoProcessor {
		closest = CPU
	}
	pin := func(at Processor) thrashHint {
		if !d.hasMemory(at) {
			at = CPU
		}
		return thrashHint{kind: hintPin, residency: at}
	}
	throttle := thrashHint{kind: hintThrottle}
	switch {
	case pl != NoProcessor && d.allCanAccess(pt.processors, pl):
		return pin(pl)
	case !(pl != NoProcessor && pt.processors.Has(pl)) && d.allFast(pt.processors, closest):
		if closest != CPU {
			return pin(closest)
		}
		if requester.IsGPU() {
			return pin(requester)
		}
	case requester == pl:
		switch {
		case pt.pinned:
			if pl == pt.pinnedAt || pl == pt.doNotThrottle {
				return pin(pl)
			}
			return throttle
		case pl != pt.doNotThrottle:
			return throttle
		case int(pt.throttleCount) >= d.p.ThrashingPinThreshold:
			return pin(pl)
		}
	case pt.pinned:
		switch {
		case requester == pt.doNotThrottle:
			if d.allCanAccess(pt.processors, requester) {
				return pin(requester)
			}
			common := d.commonLocations(pt.processors)
			if common == 0 {
				return pin(requester)
			}
			return pin(d.closest(common, requester))
		case d.canAccess(requester, pt.pinnedAt):
			return pin(pt.pinnedAt)
		}
		return throttle
	case requester != pt.doNotThrottle:
		return throttle
	case int(pt.throttleCount) >= d.p.ThrashingPinThreshold:
		return pin(requester)
	}
	return thrashHint{}
}

func (d *Driver) allCanAccess(s ProcSet, to Processor) bool {
	for x := range Processor(len(d.gpus) + 1) {
		if s.Has(x) && !d.canAccess(x, to) {
			return false
		}
	}
	return true
}

func (d *Driver) allFast(s ProcSet, to Processor) bool {
	for x := range Processor(len(d.gpus) + 1) {
		if s.Has(x) && !d.fastAccess(x, to) {
			return false
		}
	}
	return true
}

// commonLocations are the processors whose memory every processor of s
// can map.
func (d *Driver) commonLocations(s ProcSet) ProcSet {
	var out ProcSet
	for m := range Processor(len(d.gpus) + 1) {
		if d.hasMemory(m) && d.allCanAccess(s, m) {
			out = out.With(m)
		}
	}
	return out
}

// pin pins page pg of b at residency (thrashing_pin_page) and arms the
// unpin timer the first time.
func (d *Driver) pin(p *sim.Proc, b *vaBlock, pg int, pt *pageThrashing, residency Processor, now sim.Time) {
	bt := b.thrash
	if !pt.pinned || !b.holders(pg).Has(residency) {
		pt.throttled, pt.throttleEnd = 0, -1
	}
	fresh := !pt.pinned || pt.pinnedAt != residency
	if !pt.pinned {
		if d.p.ThrashingPin > 0 {
			pt.pinDeadline = now + d.lapse(d.p.ThrashingPin)
			deadline := pt.pinDeadline
			b.pinTimer = true
			d.eng.At(deadline, func() { d.unpinTimer(b, pg, deadline) })
		}
		pt.throttleCount = 0
		pt.pinned = true
		bt.numPinned++
		bt.pinned.Set(pg)
	}
	pt.pinnedAt = residency
	if fresh {
		d.stats.Pins++
		if d.observed() {
			until := pt.pinDeadline
			if d.p.ThrashingPin == 0 {
				until = sim.Forever
			}
			d.emit(Event{Header: sim.Header{Time: now, Proc: procName(p)}, Kind: KindPin, Processor: residency, To: residency,
				Addr: b.addr(pg), Bytes: PageSize, Until: until, Processors: pt.processors})
		}
	}
}

// unpinTimer ends a pin at its deadline (thrashing_unpin_pages): the
// processors without a copy that are not AccessedBy lose their remote
// mappings, so their next access faults and migrates, and the page's
// thrashing state is forgotten. A busy block is retried a timer
// granularity later.
func (d *Driver) unpinTimer(b *vaBlock, pg int, deadline sim.Time) {
	if b.dead || b.thrash == nil || b.thrash.pages == nil {
		return
	}
	pt := &b.thrash.pages[pg]
	if !pt.pinned || pt.pinDeadline != deadline {
		return
	}
	if b.locked {
		d.eng.After(d.p.UnpinGranularity, func() { d.unpinTimer(b, pg, deadline) })
		return
	}
	keep := b.alloc.policyAt(b.addr(pg)).accessedBy
	for x, r := range b.remote {
		if r != nil && !keep.Has(Processor(x)) {
			r.Clear(pg)
		}
	}
	at := pt.pinnedAt
	d.resetThrashingPage(b, pg)
	d.stats.Unpins++
	if d.observed() {
		d.emit(Event{Header: sim.Header{Time: d.eng.Now()}, Kind: KindUnpin, Processor: at, To: at, Addr: b.addr(pg), Bytes: PageSize})
	}
}

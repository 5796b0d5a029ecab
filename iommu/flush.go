package iommu

import (
	"errors"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// flushQueue is the domain's iova_fq (drivers/iommu/dma-iommu.c): in
// lazy mode the IOVAs unmapped but still possibly in the IOTLB, freed
// only after the next invalidation, which comes when the queue is full
// or when its timer fires (FlushTimeout after the first entry).
type flushQueue struct {
	entries []fqEntry
	timer   sim.Handle
	armed   bool
}

type fqEntry struct {
	iova mem.DMAAddr
	size uint64
	cpu  int
}

// queue is queue_iova: a full queue is flushed first, synchronously,
// at the cost of one invalidation to p.
func (d *Domain) queue(p *sim.Proc, cpu int, iova mem.DMAAddr, size uint64) {
	if len(d.fq.entries) >= d.unit.params.FlushQueueSize {
		d.flush(p)
	}
	d.fq.entries = append(d.fq.entries, fqEntry{iova: iova, size: size, cpu: cpu})
	if !d.fq.armed {
		d.fq.armed = true
		d.fq.timer = d.unit.eng.After(d.unit.params.FlushTimeout, func() {
			d.fq.armed = false
			d.flush(nil)
		})
	}
}

// flush is fq_flush_iotlb then fq_ring_free: one domain-wide
// invalidation, then every queued IOVA freed. An IOVA the allocator does
// not know (a driver unmapped at an address it was not given) is freed
// silently by Linux; here the flush event's Warn names it.
func (d *Domain) flush(p *sim.Proc) {
	n := len(d.fq.entries)
	if n == 0 {
		return
	}
	d.unit.tlb.invalidateDomain(d.id)
	d.unit.psc.invalidateDomain(d.id)
	proc := ""
	if p != nil {
		p.Sleep(d.unit.params.InvalidateCost)
		proc = p.Name()
	}
	d.invalidateATCs(p, 0, 0)
	var errs []error
	for _, e := range d.fq.entries {
		errs = append(errs, d.iovad.Free(e.cpu, e.iova, e.size))
	}
	d.fq.entries = d.fq.entries[:0]
	if d.unit.Hooks.Active() {
		e := Event{Op: OpFlush, Domain: d.id, Entries: n}
		if err := errors.Join(errs...); err != nil {
			e.Warn = err.Error()
		}
		d.unit.emit(e, proc, sim.CauseTranslate)
	}
}

// Flush empties the flush queue now (iommu_dma_flush_iotlb_all), p
// paying the invalidation.
func (d *Domain) Flush(p *sim.Proc) { d.flush(p) }

// Pending is the number of IOVAs waiting in the flush queue.
func (d *Domain) Pending() int { return len(d.fq.entries) }

// invalidateATCs sends an ATS invalidation of [iova, iova+size) (size 0:
// everything of the domain) to every device attached with ATS and waits
// for their completions, p paying one round (the requests go out
// together, as Linux queues a Device-TLB invalidation per device before
// one wait descriptor).
func (d *Domain) invalidateATCs(p *sim.Proc, iova, size uint64) {
	sent := false
	for _, t := range d.attached {
		if t.atc == nil || t.dev.Translator() != dma.Translator(t) {
			continue
		}
		if size == 0 {
			t.atc.invalidateDomain(0)
		} else {
			t.atc.invalidateRange(0, iova, size)
		}
		sent = true
		d.unit.stats.ATSInvalidations++
		if d.unit.Hooks.Active() {
			proc := ""
			if p != nil {
				proc = p.Name()
			}
			d.unit.emit(Event{Op: OpATSInvalidate, Domain: d.id, Device: t.dev.Name(), IOVA: mem.DMAAddr(iova), Size: size}, proc, sim.CauseTranslate)
		}
	}
	if sent && p != nil {
		p.Sleep(d.unit.params.ATSInvalidateCost)
	}
}

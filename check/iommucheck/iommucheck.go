package iommucheck

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Pack checks the devices behind the IOMMU units it is attached to.
type Pack struct {
	chk   *check.Checker
	units []*unitState
	seq   uint64

	// dma is set once WatchDMA hooked the DMA layer: its calls then
	// name the mappings.
	dma bool
	// maps are, per device, the mappings the DMA layer's call in
	// progress made, waiting for its event (which comes after them) to
	// name them.
	maps map[string][]*rec
	// unmaps is, per device, the DMA layer's unmap call whose event came
	// first and whose domain unmap follows; freed are the mappings a
	// dma_free_coherent removed before its event named it.
	unmaps map[string]call
	freed  map[string][]*rec

	// vfioDevs are the devices user space owns now, with the space
	// each belongs to; vfioSpaces the spaces by name (WatchVFIO).
	vfioDevs   map[string]*vfioSpace
	vfioSpaces map[string]*vfioSpace

	// lastStale is the last stale hit reported: the IOMMU reports one
	// per page an access crosses, all at the access's instant, and the
	// pack one per access and mapping.
	lastStale staleKey
}

type staleKey struct {
	d   *domainState
	dev string
	t   sim.Time
	r   *rec
}

// unitState is what the pack knows of one unit's domains, by id.
type unitState struct {
	name    string
	domains map[int]*domainState
}

type domainState struct {
	unit string
	id   int
	live liveSet
	gone goneRing
}

// New returns a Pack that records on c, hooked to nothing.
func New(c *check.Checker) *Pack {
	return &Pack{chk: c, maps: map[string][]*rec{}, unmaps: map[string]call{}, freed: map[string][]*rec{}}
}

// Attach makes a Pack on c and hooks it to unit u.
func Attach(c *check.Checker, u *iommu.Unit) *Pack {
	x := New(c)
	x.AttachUnit(u)
	return x
}

// AttachUnit hooks the pack to one more unit. Mappings made before are
// unknown to it: an unmap of one removes nothing it knows.
func (x *Pack) AttachUnit(u *iommu.Unit) {
	us := &unitState{name: u.Name(), domains: map[int]*domainState{}}
	x.units = append(x.units, us)
	u.Hooks.Hook(func(e *iommu.Event) { x.iommu(us, e) })
}

// WatchDMA hooks the pack to the DMA layer: a mapping's origin is then
// the DMA API call that made it, and a driver unbind checks the
// device's domain for IOVA mappings left behind (iova-leak, which needs
// it).
func (x *Pack) WatchDMA(d *dma.DMA) {
	x.dma = true
	d.Hooks.Hook(x.dmaEvent)
}

func (us *unitState) domain(id int) *domainState {
	d := us.domains[id]
	if d == nil {
		d = &domainState{unit: us.name, id: id}
		us.domains[id] = d
	}
	return d
}

// iommu checks one event of unit us.
func (x *Pack) iommu(us *unitState, e *iommu.Event) {
	switch e.Op {
	case iommu.OpMap:
		if e.Warn != "" {
			return // the map failed: nothing mapped
		}
		x.seq++
		r := &rec{start: uint64(e.IOVA), end: uint64(e.IOVA) + e.Size, pa: e.Phys, prot: e.Prot, dev: e.Device, seq: x.seq,
			made: call{t: e.Time, proc: e.Proc, iova: e.IOVA, pa: e.Phys, size: e.Size, prot: e.Prot}}
		us.domain(e.Domain).live.add(r)
		if x.dma && e.Device != "" {
			x.maps[e.Device] = append(x.maps[e.Device], r)
		}
	case iommu.OpUnmap:
		undone := call{t: e.Time, proc: e.Proc, unmap: true, iova: e.IOVA, size: e.Size}
		named := false
		if c, ok := x.unmaps[e.Device]; ok && e.Device != "" && c.proc == e.Proc {
			undone, named = c, true
			delete(x.unmaps, e.Device)
		}
		d := us.domain(e.Domain)
		d.live.remove(uint64(e.IOVA), uint64(e.IOVA)+e.Unmapped, func(r *rec) {
			r.undone = undone
			d.gone.push(r)
			if x.dma && !named && e.Device != "" {
				x.freed[e.Device] = append(x.freed[e.Device], r)
			}
		})
	case iommu.OpFault:
		x.fault(us, e)
	case iommu.OpStaleHit:
		x.staleHit(us, e)
	}
}

// dmaEvent names the mappings the DMA layer's calls made and removed,
// and checks unbinds.
func (x *Pack) dmaEvent(ev *dma.Event) {
	switch ev.Op {
	case dma.OpMap, dma.OpAllocCoherent:
		// The call reports as it returns: the domain's maps came first.
		for _, r := range x.maps[ev.Device] {
			r.made = call{call: ev.Call, t: ev.Time, proc: ev.Proc}
		}
		delete(x.maps, ev.Device)
		// An unmap call still waiting unmapped nothing (an empty sg
		// list): it must not name a later one; nor may a free's.
		delete(x.unmaps, ev.Device)
		delete(x.freed, ev.Device)
	case dma.OpUnmap:
		delete(x.freed, ev.Device)
		// The call reports as it starts: the domain's unmap follows,
		// unless the direction is invalid and nothing is unmapped.
		if ev.Dir >= dma.Bidirectional && ev.Dir <= dma.FromDevice {
			x.unmaps[ev.Device] = call{call: ev.Call, t: ev.Time, proc: ev.Proc}
		}
	case dma.OpFreeCoherent:
		// dma_free_coherent reports after its unmap.
		for _, r := range x.freed[ev.Device] {
			r.undone = call{call: ev.Call, t: ev.Time, proc: ev.Proc}
		}
		delete(x.freed, ev.Device)
	case dma.OpUnbind:
		delete(x.unmaps, ev.Device)
		x.unbind(ev)
	}
}

func (x *Pack) diag(k cls, e *iommu.Event, buf, msg, orig string) {
	proc := e.Proc
	if proc == "" {
		proc = e.Device // the device's own access
	}
	x.chk.Record(classes[k], check.Diagnostic{
		Time: e.Time, Proc: proc, Device: e.Device, Buffer: buf, Message: msg, Origin: orig,
	})
}

func (r *rec) String() string {
	return fmt.Sprintf("%v mapping %v +%d (%v)", r.prot, mem.DMAAddr(r.start), r.end-r.start, r.pa)
}

func verb(write bool) string {
	if write {
		return "writes"
	}
	return "reads"
}

// fault reports an access the IOMMU blocked.
func (x *Pack) fault(us *unitState, e *iommu.Event) {
	d := us.domain(e.Domain)
	a := uint64(e.IOVA)
	where := fmt.Sprintf("%s domain %d", us.name, e.Domain)
	if errors.Is(e.Reason, iommu.ErrPermission) {
		need := "write"
		if !e.Write {
			need = "read"
		}
		msg := fmt.Sprintf("%s %s %v, mapped in %s without %s permission: blocked, no byte changed", e.Device, verb(e.Write), e.IOVA, where, need)
		orig := ""
		if r := d.live.find(a); r != nil {
			msg += fmt.Sprintf("; its %v", r)
			orig = r.made.origin(d)
		}
		x.diag(cPermission, e, e.IOVA.String(), msg, orig)
		return
	}
	r := d.gone.find(a)
	if r == nil && x.vfioFault(us, e) {
		return
	}
	msg := fmt.Sprintf("%s %s %v, not mapped in %s: blocked, no byte changed", e.Device, verb(e.Write), e.IOVA, where)
	orig := ""
	if r != nil {
		msg += fmt.Sprintf("; its %v was unmapped by %s", r, r.undone.origin(d))
		orig = r.made.origin(d)
	} else {
		msg += " (no mapping there among the last unmaps the pack remembers)"
	}
	x.diag(cFault, e, e.IOVA.String(), msg, orig)
}

// staleHit reports an access a stale IOTLB entry let through.
func (x *Pack) staleHit(us *unitState, e *iommu.Event) {
	d := us.domain(e.Domain)
	r := d.gone.find(uint64(e.IOVA))
	k := staleKey{d, e.Device, e.Time, r}
	if r != nil && k == x.lastStale {
		return // the next page of the same access
	}
	x.lastStale = k
	msg := fmt.Sprintf("%s %s %v through a stale IOTLB entry of %s domain %d (lazy invalidation, before the flush): it reached %v, no longer mapped for it",
		e.Device, verb(e.Write), e.IOVA, us.name, e.Domain, e.Phys)
	orig := ""
	if r != nil {
		msg += fmt.Sprintf("; its %v was made by %s", r, r.made.origin(d))
		orig = r.undone.origin(d)
	}
	x.diag(cStaleIOTLB, e, e.IOVA.String(), msg, orig)
}

// unbind reports, per domain, the IOVA mappings made for the unbound
// device that are still there, naming the oldest.
func (x *Pack) unbind(ev *dma.Event) {
	for _, us := range x.units {
		for _, d := range us.sortedDomains() {
			var old *rec
			n, bytes := 0, uint64(0)
			for _, r := range d.live.byStart {
				if r.dev != ev.Device {
					continue
				}
				n++
				bytes += r.end - r.start
				if old == nil || r.seq < old.seq {
					old = r
				}
			}
			if n == 0 {
				continue
			}
			x.chk.Record(classes[cLeak], check.Diagnostic{
				Time: ev.Time, Proc: ev.Proc, Device: ev.Device,
				Buffer: fmt.Sprintf("%v +%d", mem.DMAAddr(old.start), old.end-old.start),
				Message: fmt.Sprintf("driver unbound from %s with %s (%d bytes of IOVA space) still in %s domain %d; the oldest is the %v",
					ev.Device, check.Plural(n, "IOVA mapping"), bytes, us.name, d.id, old),
				Origin: old.made.origin(d),
			})
		}
	}
}

// sortedDomains are the unit's domains by id: diagnostics come in the
// same order on every run.
func (us *unitState) sortedDomains() []*domainState {
	ds := make([]*domainState, 0, len(us.domains))
	for _, d := range us.domains {
		ds = append(ds, d)
	}
	slices.SortFunc(ds, func(a, b *domainState) int { return a.id - b.id })
	return ds
}

package rcachecheck

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/cuda"
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/regcache"
	"github.com/dmalab/dmalab/sim"
)

// Registration-cache class codes. They never change.
const (
	// StaleRegion mirrors UCX/Open MPI rcache bugs where memory freed
	// and allocated again at the same address was served from a stale
	// registration (the NIC then DMAs to the old, freed pages).
	StaleRegion = "regcache-stale-region"
	// UnpinInUse mirrors an unpin (ibv_dereg_mr, nvidia_p2p_put_pages)
	// of a region a transfer still holds.
	UnpinInUse = "regcache-unpin-in-use"
	// FreedPinned mirrors caches whose lingering pins keep freed memory
	// alive (free(3) or munmap returning while a registration still
	// holds the pages).
	FreedPinned = "regcache-freed-pinned"
)

type cls uint8

const (
	cStale cls = iota
	cUnpinInUse
	cFreedPinned
	nClasses
)

var infos = [nClasses]check.ClassInfo{
	cStale: {Code: StaleRegion, Severity: check.Error,
		Summary: "a registration-cache Get served a region whose buffer ID no longer matches the memory at its address, or a region was used after its memory was freed",
		Source:  "dmalab"},
	cUnpinInUse: {Code: UnpinInUse, Severity: check.Error,
		Summary: "a registration-cache region unpinned while a Get still holds it (reference count above zero)",
		Source:  "dmalab"},
	cFreedPinned: {Code: FreedPinned, Severity: check.Warning,
		Summary: "memory freed while a pin from the registration cache still covers it, and never unpinned by the end of the run",
		Source:  "dmalab"},
}

// classes rank after GPUDirect (500).
var classes = check.Register("regcache", 600, infos[:]...)

// Classes lists the pack's classes, in the order `dmalab check
// --classes` prints them.
func Classes() []check.ClassInfo { return check.Infos(classes[:]) }

// memEvent is memory going from under a pin: freed, unmapped, or its
// pin revoked by the driver; with the call's provenance.
type memEvent struct {
	r      regcache.Range
	t      sim.Time
	proc   string
	origin string // check.Origin of the call
}

// pin is one live pin seen through the wrapper.
type pin struct {
	r      regcache.Range
	bid    uint64
	origin string // the pin call, its time and thread
	// freed: the memory under it was freed or unmapped while pinned;
	// revoked: the driver released the pin itself (nvidia_p2p's free
	// callback, cuMemHostUnregister by someone else, the process's
	// exit), so it no longer holds the pages.
	freed, revoked *memEvent
}

// gone is the first event that took the pin's memory, nil if none.
func (p *pin) gone() *memEvent {
	if p.freed != nil {
		return p.freed
	}
	return p.revoked
}

// handle is what the wrapper's Pin gives the cache: the Pinner's
// handle and the pack's record of the pin.
type handle struct {
	h any
	p *pin
}

// Pack watches one registration cache.
type Pack struct {
	chk *check.Checker
	p   regcache.Pinner
	// Clock gives the virtual time of events that come without a
	// thread (nil: the engine's clock when Attach knows it, else 0).
	Clock func() sim.Time
	call  string // the pin call's name, for origins
	pins  []*pin // live, in pin order
	refs  map[*regcache.Region]int
}

// Attach makes a Pack on c and returns it with a Pinner wrapping p: give
// the wrapper to regcache.New so the pack sees every pin and unpin.
//
// For the model's Pinners the pack also hears the frees itself, from
// the same events the drivers emit: for a regcache.GPUPinner, cuMemFree
// (cuda.Driver.Hooks, process exit included) and nvidia_p2p's free
// callbacks (nvp2p.Driver.Hooks); for a regcache.HostPinner, free(3),
// munmap and exit of its process (kernel.AddressSpace.OnUnmap) and
// cuMemHostUnregister (cuda.Driver.Hooks). Other Pinners (real
// hardware) report frees with Freed, or through the Watch methods.
func Attach(c *check.Checker, p regcache.Pinner) (*Pack, regcache.Pinner) {
	x := &Pack{chk: c, p: p, call: "pin", refs: map[*regcache.Region]int{}}
	switch m := p.(type) {
	case *regcache.GPUPinner:
		x.call = "nvidia_p2p_get_pages"
		x.WatchCUDA(m.Ctx.Driver())
		x.WatchP2P(m.P2P)
	case *regcache.HostPinner:
		x.call = "cuMemHostRegister"
		x.WatchCUDA(m.Ctx.Driver())
		x.WatchProcess(m.Ctx.Process().KernelProcess())
	}
	c.AtEnd(x.Finish)
	return x, pinner{x}
}

// WatchCUDA makes the pack hear the frees of d: cuMemFree and
// cuMemFreeHost free the memory under a pin; cuMemHostUnregister of a
// range the cache registered, by anyone but the cache (the program,
// cuCtxDestroy, the exit's teardown), revokes the pin.
func (x *Pack) WatchCUDA(d *cuda.Driver) {
	if x.Clock == nil {
		eng := d.Machine().Engine
		x.Clock = eng.Now
	}
	d.Hooks.Hook(func(o *cuda.Observation) {
		if o.Op != cuda.OpFree || o.Err != nil {
			return
		}
		r := regcache.Range{Addr: uint64(o.Target.Base), Len: o.Target.Size}
		if r.Len == 0 {
			r = regcache.Range{Addr: uint64(o.Addr), Len: 1}
		}
		ev := &memEvent{r: r, t: o.Time, proc: o.Proc,
			origin: check.Origin(fmt.Sprintf("%s(%v)", o.Call, o.Addr), o.Time, o.Proc)}
		x.event(ev, o.Call == "cuMemHostUnregister")
	})
}

// WatchP2P makes the pack hear nvidia_p2p's free callbacks: the driver
// revokes the pin (the memory is being freed, or its process exits).
func (x *Pack) WatchP2P(d *nvp2p.Driver) {
	d.Hooks.Hook(func(e *nvp2p.Event) {
		if e.Op != nvp2p.OpFreeCallback {
			return
		}
		r := regcache.Range{Addr: uint64(e.Addr), Len: e.Size}
		x.event(&memEvent{r: r, t: e.Time, proc: e.Proc,
			origin: check.Origin(fmt.Sprintf("free_callback(%v, %d)", e.Addr, e.Size), e.Time, e.Proc)}, true)
	})
}

// WatchProcess makes the pack hear the unmaps of kp's address space
// (free(3), munmap, the mappings its exit closes): the memory under a
// pin is gone, the pin still holds the pages.
func (x *Pack) WatchProcess(kp *kern.Process) {
	kp.MM.OnUnmap(func(t *sim.Proc, v kern.VMA) {
		now, by := x.now(t), kp.Name()
		call := "munmap"
		if t != nil {
			by = t.Name()
		}
		if kp.Exited() {
			call = "exit_mmap"
		}
		x.event(&memEvent{r: regcache.Range{Addr: uint64(v.Start), Len: v.Size}, t: now, proc: by,
			origin: check.Origin(fmt.Sprintf("%s(%v, %#x) of %s", call, v.Start, v.Size, v.Name), now, by)}, false)
	})
}

// event marks the live pins under ev.r freed or revoked; the first of
// each kind is kept.
func (x *Pack) event(ev *memEvent, revoked bool) {
	for _, p := range x.pins {
		if !overlaps(p.r, ev.r) {
			continue
		}
		switch {
		case revoked && p.revoked == nil:
			p.revoked = ev
		case !revoked && p.freed == nil:
			p.freed = ev
		}
	}
}

func overlaps(a, b regcache.Range) bool { return a.Addr < b.End() && b.Addr < a.End() }

func (x *Pack) now(ctx any) sim.Time {
	if t, ok := ctx.(*sim.Proc); ok && t != nil {
		return t.Now()
	}
	if x.Clock == nil {
		return 0
	}
	return x.Clock()
}

func procOf(ctx any) string {
	if t, ok := ctx.(*sim.Proc); ok && t != nil {
		return t.Name()
	}
	return ""
}

// pinOf is the pack's record of r's pin.
func (x *Pack) pinOf(r *regcache.Region) *pin {
	if h, ok := r.Handle.(*handle); ok {
		return h.p
	}
	return nil
}

func (x *Pack) record(k cls, ctx any, r regcache.Range, p *pin, msg string) {
	d := check.Diagnostic{Time: x.now(ctx), Proc: procOf(ctx), Device: "regcache",
		Buffer: fmt.Sprintf("va:%#x +%d", r.Addr, r.Len), Message: msg}
	if p != nil {
		d.Origin = p.origin
	}
	x.chk.Record(classes[k], d)
}

func bufferOf(p *pin) string {
	if p == nil || p.bid == 0 {
		return ""
	}
	return fmt.Sprintf(" (buffer %d)", p.bid)
}

// Got tells the pack that a Get in thread ctx returned r. The pack asks
// the Pinner for the buffer ID now at r's address: a mismatch is a
// stale region, and so is a region whose memory was freed, unmapped or
// unregistered since it was pinned.
func (x *Pack) Got(ctx any, r *regcache.Region) {
	x.refs[r]++
	p := x.pinOf(r)
	if x.p.Traits().BufferIDs {
		if bid, err := x.p.BufferID(ctx, r.Addr); err == nil && bid != r.BufferID {
			x.record(cStale, ctx, r.Range, p, fmt.Sprintf("Get served a region pinned for buffer %d, but the memory at %#x is now buffer %d", r.BufferID, r.Addr, bid))
			return
		}
	}
	x.Used(ctx, r)
}

// Put tells the pack that r is being released: call it before the
// cache's Put, whose last release may unpin an invalidated region.
func (x *Pack) Put(r *regcache.Region) {
	if x.refs[r] > 0 {
		x.refs[r]--
	}
}

// Used tells the pack that a transfer in thread ctx used r: a use after
// its memory was freed (or its pin revoked) is a stale region.
func (x *Pack) Used(ctx any, r *regcache.Region) {
	p := x.pinOf(r)
	if p == nil {
		return
	}
	if ev := p.gone(); ev != nil {
		x.record(cStale, ctx, r.Range, p, fmt.Sprintf("region%s used after its memory %v went: %s", bufferOf(p), ev.r, ev.origin))
	}
}

// Freed tells the pack that memory r was freed, for a Pinner whose
// frees the pack does not hear itself (real hardware): ctx is the
// freeing thread, call names the free.
func (x *Pack) Freed(ctx any, r regcache.Range, call string) {
	now, by := x.now(ctx), procOf(ctx)
	x.event(&memEvent{r: r, t: now, proc: by, origin: check.Origin(call, now, by)}, false)
}

// Finish reports pins still live over freed memory that the driver
// did not revoke.
func (x *Pack) Finish(now sim.Time) {
	for _, p := range x.pins {
		if p.freed == nil || p.revoked != nil {
			continue
		}
		x.chk.Record(classes[cFreedPinned], check.Diagnostic{Time: p.freed.t, Proc: p.freed.proc, Device: "regcache",
			Buffer: fmt.Sprintf("va:%#x +%d", p.r.Addr, p.r.Len),
			Message: fmt.Sprintf("memory freed by %s while the cache's pin%s held it; still pinned at the end of the run (%v)",
				p.freed.origin, bufferOf(p), now),
			Origin: p.origin})
	}
}

// pinner wraps the cache's Pinner to observe pins and unpins.
type pinner struct{ x *Pack }

func (w pinner) Traits() regcache.Traits { return w.x.p.Traits() }

func (w pinner) BufferID(ctx any, addr uint64) (uint64, error) { return w.x.p.BufferID(ctx, addr) }

func (w pinner) Pin(ctx any, r regcache.Range, inval func(regcache.Range)) (any, error) {
	x := w.x
	now, by := x.now(ctx), procOf(ctx)
	// Recorded from before the call: a free while it pins (it sleeps)
	// marks it too.
	p := &pin{r: r, origin: check.Origin(fmt.Sprintf("%s(%#x, %d)", x.call, r.Addr, r.Len), now, by)}
	if x.p.Traits().BufferIDs {
		p.bid, _ = x.p.BufferID(ctx, r.Addr)
	}
	x.pins = append(x.pins, p)
	h, err := x.p.Pin(ctx, r, inval)
	if err != nil {
		x.forget(p)
		return h, err
	}
	return &handle{h: h, p: p}, nil
}

func (x *Pack) forget(p *pin) {
	if i := slices.Index(x.pins, p); i >= 0 {
		x.pins = slices.Delete(x.pins, i, i+1)
	}
}

func (w pinner) Unpin(ctx any, r regcache.Range, h any) error {
	x := w.x
	var p *pin
	if hh, ok := h.(*handle); ok {
		p, h = hh.p, hh.h
	}
	// Sum over every region of the pin, so the map's order cannot
	// change the message: the run stays deterministic.
	held := 0
	for reg, n := range x.refs {
		if reg.Range == r && (p == nil || x.pinOf(reg) == p) {
			held += n
		}
	}
	if held > 0 {
		verb := "hold"
		if held == 1 {
			verb = "holds"
		}
		x.record(cUnpinInUse, ctx, r, p, fmt.Sprintf("region%s unpinned while %s still %s it", bufferOf(p), check.Plural(held, "Get"), verb))
	}
	// Forget it first: the unpin's own driver event (cuMemHostUnregister)
	// is not someone else's.
	if p == nil {
		if i := slices.IndexFunc(x.pins, func(q *pin) bool { return q.r == r }); i >= 0 {
			p = x.pins[i]
		}
	}
	x.forget(p)
	return x.p.Unpin(ctx, r, h)
}

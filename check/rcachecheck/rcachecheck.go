package rcachecheck

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
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
	// alive (cuMemFree returning while a pin holds the pages).
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

// pin is one live pin seen through the wrapper.
type pin struct {
	r     regcache.Range
	bid   uint64
	freed bool // memory under it freed while pinned
	freeT sim.Time
}

// Pack watches one registration cache.
type Pack struct {
	chk *check.Checker
	p   regcache.Pinner
	// Clock gives the virtual time of events (nil: time 0), since the
	// Pinner contract carries no sim types.
	Clock    func() sim.Time
	pins     []*pin
	refs     map[*regcache.Region]int
	freed    []regcache.Range
	reported map[string]bool
}

// Attach makes a Pack on c and returns it with a Pinner wrapping p: give
// the wrapper to regcache.New so the pack sees every pin and unpin.
func Attach(c *check.Checker, p regcache.Pinner) (*Pack, regcache.Pinner) {
	x := &Pack{chk: c, p: p, refs: map[*regcache.Region]int{}, reported: map[string]bool{}}
	c.AtEnd(x.Finish)
	return x, pinner{x}
}

func (x *Pack) now() sim.Time {
	if x.Clock == nil {
		return 0
	}
	return x.Clock()
}

func (x *Pack) record(k cls, r regcache.Range, msg string) {
	x.chk.Record(classes[k], check.Diagnostic{Time: x.now(), Device: "regcache", Buffer: fmt.Sprintf("va:%#x +%d", r.Addr, r.Len), Message: msg})
}

// Got tells the pack that a Get returned r. The pack asks the Pinner
// for the buffer ID now at r's address: a mismatch is a stale region.
func (x *Pack) Got(ctx any, r *regcache.Region) {
	x.refs[r]++
	if x.p.Traits().BufferIDs {
		if bid, err := x.p.BufferID(ctx, r.Addr); err == nil && bid != r.BufferID {
			x.record(cStale, r.Range, fmt.Sprintf("Get served a region pinned for buffer %d, but the memory at %#x is now buffer %d", r.BufferID, r.Addr, bid))
			return
		}
	}
	x.Used(r)
}

// Put tells the pack that r was released by a Put.
func (x *Pack) Put(r *regcache.Region) {
	if x.refs[r] > 0 {
		x.refs[r]--
	}
}

// Used tells the pack that a transfer used r: a use after its memory
// was freed is a stale region.
func (x *Pack) Used(r *regcache.Region) {
	for _, f := range x.freed {
		if f.Addr < r.End() && r.Addr < f.End() {
			x.record(cStale, r.Range, fmt.Sprintf("region used after its memory %v was freed", f))
			return
		}
	}
}

// Freed tells the pack that memory r was freed (cuMemFree, free). A
// later allocation at the same address clears it through Allocated.
func (x *Pack) Freed(r regcache.Range) {
	x.freed = append(x.freed, r)
	for _, p := range x.pins {
		if p.r.Addr < r.End() && r.Addr < p.r.End() && !p.freed {
			p.freed, p.freeT = true, x.now()
		}
	}
}

// Allocated tells the pack that r was allocated again: uses of it are
// no longer of freed memory (a region still pinned for the old buffer
// is caught by Got's buffer-ID check).
func (x *Pack) Allocated(r regcache.Range) {
	out := x.freed[:0]
	for _, f := range x.freed {
		if !(f.Addr < r.End() && r.Addr < f.End()) {
			out = append(out, f)
		}
	}
	x.freed = out
}

// Finish reports pins still live over freed memory.
func (x *Pack) Finish(now sim.Time) {
	for _, p := range x.pins {
		if p.freed {
			x.chk.Record(classes[cFreedPinned], check.Diagnostic{Time: p.freeT, Device: "regcache",
				Buffer:  fmt.Sprintf("va:%#x +%d", p.r.Addr, p.r.Len),
				Message: fmt.Sprintf("memory freed while pinned, and the pin was still live at the end of the run (%v)", now)})
		}
	}
}

// pinner wraps the cache's Pinner to observe pins and unpins.
type pinner struct{ x *Pack }

func (w pinner) Traits() regcache.Traits { return w.x.p.Traits() }

func (w pinner) BufferID(ctx any, addr uint64) (uint64, error) { return w.x.p.BufferID(ctx, addr) }

func (w pinner) Pin(ctx any, r regcache.Range, inval func(regcache.Range)) (any, error) {
	h, err := w.x.p.Pin(ctx, r, inval)
	if err == nil {
		var bid uint64
		if w.x.p.Traits().BufferIDs {
			bid, _ = w.x.p.BufferID(ctx, r.Addr)
		}
		w.x.pins = append(w.x.pins, &pin{r: r, bid: bid})
	}
	return h, err
}

func (w pinner) Unpin(ctx any, r regcache.Range, h any) error {
	x := w.x
	// Sum over every region of r, so the map's order cannot change
	// the message: the run stays deterministic.
	held := 0
	for reg, n := range x.refs {
		if reg.Range == r {
			held += n
		}
	}
	if held > 0 {
		x.record(cUnpinInUse, r, fmt.Sprintf("unpinned while %d Get(s) still hold the region", held))
	}
	for i, p := range x.pins {
		if p.r == r {
			x.pins = append(x.pins[:i], x.pins[i+1:]...)
			break
		}
	}
	return x.p.Unpin(ctx, r, h)
}

package fabric

import (
	"fmt"
	"math"

	"github.com/dmalab/dmalab/sim"
)

// routeInfo is what Start derives from a route's hops: the resources its
// flow loads, the link directions it counts on, its share, its latency,
// and the rate and loads of a flow alone on its resources. A model sends
// flows over a few routes again and again (a NIC's wire, a DMA engine's
// route to memory), so the fabric keeps the last few (Fabric.infos) and
// a flow over one of them shares it: nothing of it is derived again, and
// nothing of it is copied into the flow or its group. It never changes
// once made (a link's ends, capacity and latency never do), and the
// flows and groups that hold it keep it alive.
type routeInfo struct {
	hops  []Hop // its own copy
	loads []load
	dirs  []dirLoad // the link directions its hops carry, for the counters
	share float64
	lat   sim.Time // the route's latency × the latency factor
	// unitLoads: every load's weight is 1 (group.unitLoads).
	unitLoads bool
	// summable: every term weight × share is a small integer, so that an
	// uncapped flow's loads go in the kept sums (countLoads).
	summable bool
	// The filling of a flow alone on its resources, uncapped (shareAlone):
	// its distinct resources in first-load order, the level it freezes
	// at (the lowest capacity / summed weights of them), its rate there,
	// and the utilisation that freeze leaves on each resource
	// (lonePeak, (capacity − rem) / capacity as clearRes computes it).
	// resLoads counts the route's loads on each of res (more than 1 where
	// it crosses a resource twice): a started group is alone on its
	// resources when their counts of loads (resource.nAll) are its own
	// (loneChanges).
	res      []int32
	level    float64
	loneX    float64
	resLoads []int32
	lonePeak []float64
	// lonePeaked: shareAlone has raised the peaks of res to lonePeak,
	// which they so never fall below again.
	lonePeaked bool
	// resDirs are the link directions of res (both for a Shared link's
	// one resource), whose counters a lone group's recompute clears.
	resDirs []*dirState
	// The same for the last batch of flows over the route alone on its
	// resources, uncapped (shareAlone): its size (0 for none yet) and
	// level, a pure function of the size. (The utilisations its freeze
	// leaves are not kept: shareAlone raised the peaks to them.)
	batchN     int
	batchLevel float64
	// The rates that countBatch left on the counters of the route's link
	// directions (by dirs), cleared before, for the last batch alone on
	// its resources that shareAlone counted: its size (0 for none yet)
	// and rate, of which they are a function. A batch of eight writes
	// over six hops so sets six counters, not 48 terms.
	countN     int
	countX     float64
	countRates []float64

	// buf backs the slices above for a route of up to infoInline hops,
	// so that deriving one (a model that looks a route up per flow, or
	// has more routes than the caches keep, derives one per flow) is one
	// allocation.
	buf struct {
		hops  [infoInline]Hop
		loads [2 * infoInline]load
		dirs  [infoInline]dirLoad
		res   [2 * infoInline]int32
		cnt   [2 * infoInline]int32
		peak  [2 * infoInline]float64
		rdirs [4 * infoInline]*dirState
		rates [infoInline]float64
	}
}

// infoInline is the longest route whose routeInfo's slices are held in
// the routeInfo itself: a host-to-host route of a two-level tree has
// four hops. Longer routes take their slices apart (six allocations);
// they are the ones a machine's devices keep and the caches find.
const infoInline = 4

// inlineOr returns an empty slice of capacity n: buf's array when n fits
// in it, a new one otherwise.
func inlineOr[T any](buf []T, n int) []T {
	if n <= len(buf) {
		return buf[:0:n]
	}
	return make([]T, 0, n)
}

// Bounds of the routeInfo caches: the last few routes by content
// (Fabric.recent), enough for the routes a device's stream takes in turn
// (a NIC's wire, its descriptor fetch, its writes), and by the address
// of their hops (Fabric.infoByHops, by a hash of the hops' links,
// directions, weights and load marks) up to infoMapMax, then afresh: a
// model that keeps its routes (a route table, a DMA engine's channel) or
// looks them up per flow passes equal hops each time. A miss costs a derivation, as every
// flow did before the caches; results never depend on them.
const (
	infoRecent = 4
	infoMapMax = 1 << 12
)

// info returns the routeInfo of r's hops: a kept one with equal hops, or
// one made and kept now. It panics, naming the flow, on a hop with a nil
// link or a link of another fabric, a bad direction, a negative or
// non-finite weight.
func (f *Fabric) info(name string, r Route) *routeInfo {
	// The last one found first: flows come in runs over one route (a
	// packet's flows on the wire, a batch's writes).
	if ri := f.lastInfo; ri != nil && sameHops(ri.hops, r.Hops) {
		return ri
	}
	for _, ri := range f.recent {
		if ri != nil && sameHops(ri.hops, r.Hops) {
			f.lastInfo = ri
			return ri
		}
	}
	// The caller may have changed its hops since, or built equal ones
	// afresh (a route looked up per flow): found by content.
	key := hopsKey(r.Hops)
	ri := f.infoByHops[key]
	if ri == nil || !sameHops(ri.hops, r.Hops) {
		ri = f.newInfo(name, r)
		if len(f.infoByHops) >= infoMapMax {
			clear(f.infoByHops)
		}
		f.infoByHops[key] = ri
	}
	f.recent[f.recentNext] = ri
	f.recentNext = (f.recentNext + 1) % infoRecent
	f.lastInfo = ri
	return ri
}

// hopsKey hashes hops' content (FNV-1a over each hop's link index,
// direction, weight bits and load mark): equal hops, equal keys. Two
// routes with one key are told apart by sameHops; the later replaces the
// earlier in the map.
func hopsKey(hops []Hop) uint64 {
	const prime = 1099511628211
	k := uint64(14695981039346656037)
	for _, h := range hops {
		idx := uint64(0)
		if h.Link != nil {
			idx = uint64(h.Link.index) + 1
		}
		load := uint64(0)
		if h.Load {
			load = 1
		}
		for _, x := range [...]uint64{idx, uint64(h.Dir), math.Float64bits(h.Weight), load} {
			k = (k ^ x) * prime
		}
	}
	return k
}

// newInfo derives r's routeInfo.
func (f *Fabric) newInfo(name string, r Route) *routeInfo {
	ri := &routeInfo{}
	ri.hops = append(inlineOr(ri.buf.hops[:], len(r.Hops)), r.Hops...)
	nl := len(r.Hops)
	if f.fac.Cross > 0 {
		nl *= 2
	}
	ri.loads = inlineOr(ri.buf.loads[:], nl)
	ri.dirs = inlineOr(ri.buf.dirs[:], len(r.Hops))
	ri.countRates = inlineOr(ri.buf.rates[:], len(r.Hops))
	for i, h := range r.Hops {
		switch w := h.Weight; {
		case h.Link == nil || h.Link.fab != f:
			panic(fmt.Sprintf("fabric: flow %q: hop %d: link is nil or of another fabric", name, i))
		case h.Dir != AtoB && h.Dir != BtoA:
			panic(fmt.Sprintf("fabric: flow %q: hop %d over %s: bad direction %v", name, i, h.Link.name, h.Dir))
		case w < 0 || math.IsNaN(w) || math.IsInf(w, 0):
			panic(fmt.Sprintf("fabric: flow %q: hop %d over %s: weight %v must be finite and not negative", name, i, h.Link.name, w))
		}
		w := h.weight()
		ri.loads = append(ri.loads, load{h.Link.res[h.Dir], w})
		if c := f.fac.Cross; c > 0 {
			// On a Shared link the reverse direction is the same
			// resource, which so sees (1+Cross)×Weight.
			ri.loads = append(ri.loads, load{h.Link.res[h.Dir.Reverse()], c * w})
		}
		ri.dirs = append(ri.dirs, dirLoad{st: &h.Link.dir[h.Dir], w: w})
	}
	lat := r.Latency()
	ri.share = f.share(r, lat)
	if f.fac.Latency != 1 {
		lat = sim.Time(math.Round(float64(lat) * f.fac.Latency))
	}
	ri.lat = lat
	ri.unitLoads, ri.summable = true, true
	for _, ld := range ri.loads {
		ri.unitLoads = ri.unitLoads && ld.w == 1
		if t := ld.w * ri.share; !(t == math.Trunc(t) && t <= summedTermMax) {
			ri.summable = false
		}
	}
	// A flow alone: the filling sums each resource's weights in load
	// order (ld.w × share × 1 each, as for a group of one flow), and
	// freezes the flow at the lowest level of its resources.
	ri.level = math.Inf(1)
	ri.res = inlineOr(ri.buf.res[:], len(ri.loads))
	ri.resLoads = inlineOr(ri.buf.cnt[:], len(ri.loads))
	for i, ld := range ri.loads {
		if seenLoad(ri.loads[:i], ld.r) {
			continue
		}
		w, c := 0.0, int32(0)
		for _, l := range ri.loads[i:] {
			if l.r == ld.r {
				w += l.w * ri.share * 1
				c++
			}
		}
		ri.res = append(ri.res, ld.r)
		ri.resLoads = append(ri.resLoads, c)
		ri.level = min(ri.level, f.res[ld.r].cap/w)
	}
	ri.loneX = ri.level * ri.share
	ri.lonePeak = ri.peaks(f, ri.rems(f, ri.loneX, 1, inlineOr(ri.buf.peak[:], len(ri.res))))
	ri.resDirs = inlineOr(ri.buf.rdirs[:], 2*len(ri.res))
	for _, r := range ri.res {
		// In clearDirs's order.
		res := &f.res[r]
		if res.dirs == 2 {
			ri.resDirs = append(ri.resDirs, &res.link.dir[0], &res.link.dir[1])
		} else {
			ri.resDirs = append(ri.resDirs, &res.link.dir[res.dirs])
		}
	}
	return ri
}

// peaks makes the capacities rems left on the route's distinct
// resources their utilisations, by clearRes's operations, in place.
func (ri *routeInfo) peaks(f *Fabric, rems []float64) []float64 {
	for j, r := range ri.res {
		c := f.res[r].cap
		rems[j] = (c - rems[j]) / c
	}
	return rems
}

// rems are the capacities that the freeze of k flows over the route at
// rate x leaves on its distinct resources, by the filling's operations
// (freeze, freezeScanned) in load order, appended to rems.
func (ri *routeInfo) rems(f *Fabric, x, k float64, rems []float64) []float64 {
	rems = rems[:len(ri.res)]
	for j, r := range ri.res {
		rem := f.res[r].cap
		for _, l := range ri.loads {
			if l.r == r {
				rem -= l.w * x * k
			}
		}
		rems[j] = rem
	}
	return rems
}

// seenLoad reports whether loads has one on resource r.
func seenLoad(loads []load, r int32) bool {
	for _, l := range loads {
		if l.r == r {
			return true
		}
	}
	return false
}

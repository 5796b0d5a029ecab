package fabric

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dmalab/dmalab/sim"
)

// ErrNoRoute is wrapped by Route when the two nodes are not connected.
var ErrNoRoute = errors.New("no route")

// Hop is one link crossed in one direction by a flow.
type Hop struct {
	Link *Link
	Dir  Dir
	// Weight is the bytes this hop carries per byte of the flow; 0 means
	// 1. A copy that reads and writes the same HBM crosses it with weight 2.
	Weight float64
	// Load marks a hop that only loads the link (a read's requests going
	// the other way from its data): it takes capacity like any hop but
	// adds nothing to the route's latency, which is the data's.
	Load bool
}

func (h Hop) weight() float64 {
	if h.Weight == 0 {
		return 1
	}
	return h.Weight
}

// Route is the hops a flow loads. It is usually a path from Fabric.Route,
// but any list of hops is valid: hops need not be contiguous, and a link
// may appear more than once (its loads add up).
type Route struct{ Hops []Hop }

// Latency is the sum of the hops' link latencies, before the latency
// factor.
func (r Route) Latency() sim.Time {
	var t sim.Time
	for _, h := range r.Hops {
		if !h.Load {
			t += h.Link.latency
		}
	}
	return t
}

// String writes the route as "a -l1-> b -l2-> c", with "×w" after a link
// whose weight is not 1, and "(empty)" for no hops.
func (r Route) String() string {
	if len(r.Hops) == 0 {
		return "(empty)"
	}
	var b strings.Builder
	var at *Node
	for _, h := range r.Hops {
		from := h.Link.From(h.Dir)
		if from != at {
			if at != nil {
				b.WriteString(" | ")
			}
			b.WriteString(from.name)
		}
		fmt.Fprintf(&b, " -%s", h.Link.name)
		if w := h.weight(); w != 1 {
			fmt.Fprintf(&b, "×%g", w)
		}
		b.WriteString("-> ")
		at = h.Link.To(h.Dir)
		b.WriteString(at.name)
	}
	return b.String()
}

// Bounds of the route caches. A cached distance array costs 16 bytes per
// node, so caching one per destination grows with the square of the nodes
// (340 MB at 4,000); 64 arrays cover every destination of the built-in
// machines and cost 64 × 16 bytes per node beyond. Routes themselves are
// kept up to 16,384 pairs, then the cache starts afresh: a route is a pure
// function of the topology, so eviction changes cost, never results.
const (
	towardCacheMax = 64
	routeCacheMax  = 1 << 14
)

// towardEntry is one cached distance array: per node, the best
// (hops, latency) to dst.
type towardEntry struct {
	dst  int
	dist []pathCost
}

// pathCost orders paths: fewer hops first, then lower latency.
type pathCost struct {
	hops int // -1: unreachable
	lat  sim.Time
}

// Route returns the path from one node to another with the fewest hops;
// among those, the lowest latency; among those, the one whose links, read
// from the source, come earliest in creation order. Routes are cached
// (a bounded number) until the next Connect; the caller owns the returned hops. from == to
// gives an empty route. An unreachable pair is an error that names both
// ends and wraps ErrNoRoute.
func (f *Fabric) Route(from, to *Node) (Route, error) {
	if from == nil || to == nil || from.fab != f || to.fab != f {
		return Route{}, fmt.Errorf("fabric: route from %v to %v: both ends must be nodes of this fabric", from, to)
	}
	if from == to {
		return Route{}, nil
	}
	key := [2]int{from.index, to.index}
	if r, ok := f.routes[key]; ok {
		return Route{Hops: append([]Hop(nil), r.Hops...)}, nil
	}
	dist := f.distancesTo(to)
	if dist[from.index].hops < 0 {
		return Route{}, fmt.Errorf("fabric: route from %q to %q: %w", from.name, to.name, ErrNoRoute)
	}
	// Walk forward taking, at each node, the earliest-created link that
	// stays on an optimal path; this picks the lexicographically smallest
	// link sequence among the optimal paths.
	var hops []Hop
	for u := from; u != to; {
		du := dist[u.index]
		for _, l := range u.links {
			d := AtoB
			if l.a != u {
				d = BtoA
			}
			v := l.To(d)
			if v == u {
				continue
			}
			if dv := dist[v.index]; dv.hops == du.hops-1 && dv.lat+l.latency == du.lat {
				hops = append(hops, Hop{Link: l, Dir: d, Weight: 1})
				u = v
				break
			}
		}
	}
	if len(f.routes) >= routeCacheMax {
		clear(f.routes)
	}
	f.routes[key] = Route{Hops: hops}
	return Route{Hops: append([]Hop(nil), hops...)}, nil
}

// distancesTo returns, per node, the best (hops, latency) to dst, by a
// breadth-first search from dst: the hop count is the BFS layer, and the
// latency is minimised over the previous layer, which is exact because
// links within one layer never lie on a fewest-hop path. O(nodes + links).
func (f *Fabric) distancesTo(dst *Node) []pathCost {
	// An array shorter than the node count predates a Node call; it is
	// stale and goes like any other.
	if len(f.toward) > 0 && len(f.toward[0].dist) != len(f.nodes) {
		f.toward, f.towardNext = f.toward[:0], 0
	}
	for _, e := range f.toward {
		if e.dst == dst.index {
			return e.dist
		}
	}
	var dist []pathCost
	if len(f.toward) < towardCacheMax {
		dist = make([]pathCost, len(f.nodes))
		f.toward = append(f.toward, towardEntry{dst: dst.index, dist: dist})
	} else {
		// Reuse the oldest entry's array: its slot is the next to go.
		e := &f.toward[f.towardNext]
		f.towardNext = (f.towardNext + 1) % towardCacheMax
		e.dst, dist = dst.index, e.dist
		clear(dist)
	}
	for i := range dist {
		dist[i].hops = -1
	}
	dist[dst.index] = pathCost{}
	layer := []*Node{dst}
	for h := 1; len(layer) > 0; h++ {
		var next []*Node
		for _, u := range layer {
			for _, l := range u.links {
				v := l.a
				if v == u {
					v = l.b
				}
				lat := dist[u.index].lat + l.latency
				switch dv := &dist[v.index]; {
				case dv.hops < 0:
					*dv = pathCost{hops: h, lat: lat}
					next = append(next, v)
				case dv.hops == h && lat < dv.lat:
					dv.lat = lat
				}
			}
		}
		layer = next
	}
	return dist
}

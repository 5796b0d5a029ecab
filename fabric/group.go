package fabric

import (
	"cmp"
	"math"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// group is the active flows with the same hops, cap and share. Max-min
// filling gives them the same rate whatever else loads their links (they
// freeze at the same step, at the same level), so the fabric fills over
// groups, each counted as many times as it has flows, and keeps progress
// per group: a flow's remaining bytes are the group's reference left plus
// the flow's own offset, and its members are ordered by offset, so the
// group's next end is its first member's. A recompute so costs
// O(groups·hops), not O(flows·hops), and an end O(log members).
type group struct {
	groupFields
}

// groupFields are a group's fields that join sets anew, all of them.
type groupFields struct {
	ri         *routeInfo // its members' (loads, dirs, hops)
	hops       []Hop      // ri.hops
	loads      []load     // ri.loads
	dirs       []dirLoad  // ri.dirs: the link directions its hops carry, for the counters
	cap, share float64
	hash       uint64 // groupHash, set while hashed
	seq        uint64 // creation order: the filling visits groups in it
	sameHash   *group // the next registered group with the same hash

	members []*Flow // a min-heap by (offset, seq)
	n       int     // len(members)

	rate float64
	// left is the reference remaining at fab.last: a member's remaining
	// is left + its offset. A group created for a flow starts with that
	// flow's bytes and offset 0, so that a group of one flow computes its
	// progress and end bit for bit as a flow alone did.
	left float64
	// setAt and leftAt are when the rate was last set and left then: a
	// member's end is computed from them, so that it stays exact while
	// the rate holds, free of the rounding that advancing left adds.
	setAt  sim.Time
	leftAt float64
	next   sim.Time // the first member's end; sim.Forever while unrated
	// newTop: the first member changed since next and topOffset were
	// computed.
	newTop bool
	// hashed: registered in Fabric.groupByHash (see Fabric.hashed).
	hashed bool
	// unitLoads: every load's weight is 1, so that a term w×a×b of the
	// freeze is a×b bit for bit, computed once for all the loads.
	unitLoads bool
	// topOffset is the first member's offset as of next: the recompute
	// computes the ends of groups whose rate changed from it, without
	// reading the member (a cache miss per group, as flows lie scattered).
	topOffset float64

	// Recompute scratch.
	mark     uint64 // the recompute epoch whose component holds it
	frozenAt uint64 // the recompute epoch whose filling froze it
	// changed: this recompute set a new rate (kept to its end only
	// while Hooks are active, for the FlowRate events).
	changed bool
	// lone is the count of the recompute whose loneChanges found it a
	// started flow's group.
	lone uint64
	// born is Fabric.recomputes when it was made: while no recompute
	// has run since, its flows became active at this instant and have
	// no rate yet.
	born uint64
	// batch: the group stands for as many groups of one flow as it has
	// flows (batchJoin), and the filling and the counters sum its flows
	// one by one, as they would those groups, not × n.
	batch bool
}

// reps is how a group's flows enter a filling's and the counters' sums:
// reps times a term × k, one after the other. A group's n flows enter
// once, × n (exact for a group of one, which so sums as a flow); a
// batch's one by one, as n groups of one would.
func (g *group) reps() (int, float64) {
	if g.batch {
		return g.n, 1
	}
	return 1, float64(g.n)
}

// dirLoad is a hop's link direction and weight, what the link counters
// add a group's rate to.
type dirLoad struct {
	st *dirState
	w  float64
}

// groupMin is the number of active flows from which a flow joins an
// existing group of its kind rather than forming its own. Below it every
// group has one flow, and the sums of the filling are those of a filling
// over flows, bit for bit; a run with as many flows at once gains from
// the grouping and its rates agree with that filling to rounding (1e-12
// relative). (A variable so that tests can group every flow.)
var groupMin = 256

// endOf is fl's end at the group's current rate.
func (g *group) endOf(fl *Flow) sim.Time { return g.endAt(fl.offset) }

// endAt is the end at the group's current rate of a member with offset
// off.
func (g *group) endAt(off float64) sim.Time {
	if g.rate == 0 {
		return sim.Forever
	}
	return endTime(g.setAt, g.leftAt+off, g.rate)
}

// join puts the newly active fl into the group of its kind, creating one
// if needed (or, below groupMin active flows, always).
//
// Only a flow that joins above groupMin looks groups up by hash, so the
// groups are registered in Fabric.groupByHash only from the first such
// join on (hashAll), not while the fabric carries a few flows: a stream
// of packets, each flow alone, would otherwise add and delete a map
// entry per flow for nothing.
func (f *Fabric) join(fl *Flow) *group {
	var h uint64
	if f.nActive > groupMin {
		if !f.hashed {
			f.hashAll()
		}
		h = groupHash(fl.route.Hops, fl.cap, fl.share)
		for g := f.groupByHash[h]; g != nil; g = g.sameHash {
			if g.cap == fl.cap && g.share == fl.share && (g.ri == fl.ri || sameHops(g.hops, fl.route.Hops)) {
				// left is as of fab.last: the offset makes fl's
				// remaining its bytes now.
				left := g.left
				if dt := f.eng.Now() - f.last; dt > 0 {
					left -= g.rate * float64(dt) / float64(sim.Second)
				}
				fl.g, fl.offset = g, float64(fl.bytes)-left
				g.push(fl)
				return g
			}
		}
	}
	// (batchJoin's test that the last group was made at this instant
	// written in: most joins fail it, and so make no call.)
	if n := len(f.groups); n > 0 && f.groups[n-1].born == f.recomputes {
		if g := f.batchJoin(fl); g != nil {
			return g
		}
	}
	f.groupSeq++
	g := f.freeGroups.take()
	if checkFreed && !freedGroup(g) {
		panic("fabric: a freed group holds state of its past life")
	}
	if resetGroups {
		g.groupFields = groupFields{members: g.members[:0]}
	}
	// The fields that a freed group holds otherwise than a new one; the
	// others are as a new group's (freedGroup says why).
	ri := fl.ri
	g.ri, g.hops, g.loads, g.dirs, g.unitLoads = ri, ri.hops, ri.loads, ri.dirs, ri.unitLoads
	g.cap, g.share, g.seq, g.born = fl.cap, fl.share, f.groupSeq, f.recomputes
	g.rate, g.left, g.leftAt, g.setAt = 0, float64(fl.bytes), float64(fl.bytes), f.eng.Now()
	g.next, g.members = sim.Forever, g.members[:0]
	if f.hashed {
		if f.nActive <= groupMin {
			// Not computed for a lookup.
			h = groupHash(g.hops, g.cap, g.share)
		}
		g.hash = h
		f.register(g)
	}
	f.groups = append(f.groups, g)
	fl.g, fl.offset = g, 0
	// push's work for a group's first member, without the call.
	g.members = append(g.members, fl)
	g.n, g.newTop = 1, true
	return g
}

// batchJoin puts fl, which becomes active below groupMin, in the group
// made last if that group would be one just like fl's: made at this
// instant (no recompute since), for flows of fl's route, size and share,
// uncapped. Such groups, made one after the other, freeze at the same
// filling step, one after the other, at the same rate, and end at the
// same instant; so one group that sums its flows one by one (a batch)
// gives every rate, end and counter that they would, bit for bit, for
// the cost of one: a DMA engine that starts a burst of writes at once
// shares one group where it had a group per write. It returns nil when
// fl needs a group of its own.
//
// Groups are looked up by hash only once the fabric has held more than
// groupMin active flows (hashAll), where a flow would join the last
// of those groups; hashAll so splits batches first (split), and no
// batch is made while groups are registered.
func (f *Fabric) batchJoin(fl *Flow) *group {
	if f.hashed || fl.cap != 0 || len(f.groups) == 0 || !batchJoins {
		return nil
	}
	g := f.groups[len(f.groups)-1]
	if g.born != f.recomputes || g.ri != fl.ri || g.cap != 0 || g.share != fl.share ||
		g.left != float64(fl.bytes) || g.n == 0 || g.n > 1 && !g.batch {
		return nil
	}
	if !g.batch {
		g.batch = true
		f.batches++
	}
	f.batched++
	fl.g, fl.offset = g, 0
	g.push(fl)
	return g
}

// batchJoins turns on batchJoin. (A variable so that tests can give
// every flow below groupMin a group of its own.)
var batchJoins = true

// split makes batch g the groups of one flow it stands for: g keeps its
// first flow, and a group for each of the others, in activation order,
// follows it in f.groups and in the members of each of its resources,
// as they would have been made.
func (f *Fabric) split(g *group) {
	flows := slices.Clone(g.members)
	slices.SortFunc(flows, func(a, b *Flow) int { return cmp.Compare(a.seq, b.seq) })
	g.batch = false
	f.batches--
	g.members = append(g.members[:0], flows[0])
	g.n = 1
	parts := make([]*group, 0, len(flows))
	parts = append(parts, g)
	for _, fl := range flows[1:] {
		f.groupSeq++
		p := f.freeGroups.take()
		members := p.members[:0]
		p.groupFields = g.groupFields
		p.seq = f.groupSeq
		p.members = append(members, fl)
		fl.g = p
		parts = append(parts, p)
	}
	i := slices.Index(f.groups, g)
	f.groups = slices.Insert(f.groups, i+1, parts[1:]...)
	for _, r := range g.ri.res {
		res := &f.res[r]
		at := slices.Index(res.members, g)
		c := 0
		for at+c < len(res.members) && res.members[at+c] == g {
			c++
		}
		block := make([]*group, 0, c*len(parts))
		for _, p := range parts {
			for range c {
				block = append(block, p)
			}
		}
		res.members = slices.Replace(res.members, at, at+c, block...)
		res.nAll += int32(c * (len(parts) - 1))
	}
}

// register makes g, whose hash is set, the first of the registered
// groups with its hash.
func (f *Fabric) register(g *group) {
	g.sameHash = f.groupByHash[g.hash]
	f.groupByHash[g.hash] = g
	g.hashed = true
}

// hashAll registers every group with flows, in creation order, and every
// group created from now on. Each hash's chain so lists its groups
// newest first, as registering each group at its creation and
// unregistering it at its end would have left it: a lookup finds the
// same group either way.
func (f *Fabric) hashAll() {
	f.hashed = true
	for i := 0; i < len(f.groups); i++ {
		if g := f.groups[i]; g.batch {
			f.split(g)
		}
	}
	for _, g := range f.groups {
		if g.n > 0 && !g.hashed {
			g.hash = groupHash(g.hops, g.cap, g.share)
			f.register(g)
		}
	}
}

// unregister forgets the emptied g, registered (hashed), as a group
// flows may join. (onTimerWork gives it back to f.freeGroups, and calls
// this only for a registered group: below groupMin none is.) When the
// last registered group goes, groups are registered again only from the
// next join above groupMin.
func (f *Fabric) unregister(g *group) {
	g.hashed = false
	p := f.groupByHash[g.hash]
	if p == g {
		if g.sameHash == nil {
			delete(f.groupByHash, g.hash)
			if len(f.groupByHash) == 0 {
				f.hashed = false
			}
		} else {
			f.groupByHash[g.hash] = g.sameHash
		}
		return
	}
	for p.sameHash != g {
		p = p.sameHash
	}
	p.sameHash = g.sameHash
}

// groupHash is the hash of the groups of flows with these hops, cap and
// share.
func groupHash(hops []Hop, cap, share float64) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) { h = (h ^ v) * 1099511628211 }
	for _, hp := range hops {
		mix(uint64(hp.Link.index)<<2 | uint64(hp.Dir)<<1 | b2u(hp.Load))
		mix(math.Float64bits(hp.Weight))
	}
	mix(math.Float64bits(cap))
	mix(math.Float64bits(share))
	return h
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func sameHops(a, b []Hop) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (g *group) less(a, b *Flow) bool {
	if a.offset != b.offset {
		return a.offset < b.offset
	}
	return a.seq < b.seq
}

func (g *group) push(fl *Flow) {
	h := append(g.members, fl)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !g.less(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	g.members = h
	g.n = len(h)
	g.newTop = g.newTop || h[0] == fl
}

// pop takes the member with the least remaining bytes out of g.
func (g *group) pop() *Flow {
	h := g.members
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = nil
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && g.less(h[c+1], h[c]) {
			c++
		}
		if !g.less(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	g.members = h
	g.n = n
	g.newTop = true
	return top
}

// resetGroups makes join clear every field of a group it takes from
// the free ones, as it once did. (A variable so that tests can check that
// the fields join leaves as a freed group has them change nothing.)
var resetGroups = false

// checkFreed makes join check every freed group it reuses (freedGroup),
// and Start every released flow. (A variable for tests.)
var checkFreed = false

// freedGroup reports whether g, emptied, has the fields that join does
// not set as a new group has them, or as good as: n 0, its members none
// (push sets n and newTop); not hashed (unregister clears it) nor a
// batch (onTimer clears it when the batch empties); no changed rate
// (every recompute clears it for the groups whose rate it set, and a
// group's rate is set only by a recompute). Its hash and sameHash are
// set by register before any use, its topOffset when newTop is handled,
// before any use. Its mark, frozenAt (recompute epochs) and lone (a
// count of recomputes) are older than the recompute that freed it, which
// neither marked it (it had no flows) nor, being past, will any later
// one: the values the checks compare them with only grow.
func freedGroup(g *group) bool {
	return g.n == 0 && len(g.members) == 0 && !g.hashed && !g.batch && !g.changed
}

// countLoads adds (sign +1) or takes away (−1) flow fl, which joins or
// leaves its group, to or from the sums that a filling starts from
// (resource.wAll, resource.nAll), or counts it as a flow whose loads the
// filling must sum itself (Fabric.unsummed): one with a cap, or with a
// term ld.w × share that is not a small integer. Sums of small integers
// are exact in any order, so the kept sums are bit for bit those that a
// filling summing group by group in creation order would reach.
func (f *Fabric) countLoads(fl *Flow, sign int32) {
	if sign > 0 {
		fl.summed = fl.cap == 0 && fl.ri.summable
	}
	if !fl.summed {
		f.unsummed += int(sign)
		return
	}
	for _, ld := range fl.loads {
		f.res[ld.r].wAll += float64(sign) * (ld.w * fl.share)
	}
}

// summedTermMax bounds the terms of the kept sums: 2^20 per flow keeps
// every partial sum below 2^53, and so exact, up to 2^33 flows.
const summedTermMax = 1 << 20

// pool holds the flows or groups given back, of which the first ready
// may be reused now; the others wait for the next recompute (release),
// which drops the fabric's last references to them: it purges emptied
// groups from the resources' members, and no list of the fabric holds a
// flow that ended before it. A recompute so makes them all reusable at
// once, without moving them from list to list.
type pool[T any] struct {
	items []*T
	ready int
}

// put gives x back; it is reusable after the next recompute.
func (p *pool[T]) put(x *T) { p.items = append(p.items, x) }

// waiting counts those given back since the last recompute.
func (p *pool[T]) waiting() int { return len(p.items) - p.ready }

// release makes every one given back reusable: the recompute calls it
// once done.
func (p *pool[T]) release() { p.ready = len(p.items) }

// take returns the last reusable one, or a new T when there is none: the
// caller sets every field that needs it. The last item takes its place
// (a waiting one stays waiting: it leaves the reusable range with it).
func (p *pool[T]) take() *T {
	if p.ready == 0 {
		return new(T)
	}
	i, n := p.ready-1, len(p.items)-1
	x := p.items[i]
	p.items[i] = p.items[n]
	p.items[n] = nil
	p.items = p.items[:n]
	p.ready = i
	return x
}

// live keeps the groups of gs that still have flows, in order, in gs's
// storage, and clears the rest of it so that emptied groups are not held.
func live(gs []*group) []*group {
	kept := gs[:0]
	for _, g := range gs {
		if g.n > 0 {
			kept = append(kept, g)
		}
	}
	// A loop, not clear: the tail is a group or two, and clear's call
	// into the runtime costs more.
	for i := len(kept); i < len(gs); i++ {
		gs[i] = nil
	}
	return kept
}

package fabric

import (
	"fmt"
	"math"

	"github.com/dmalab/dmalab/sim"
)

// Factors are LV08's global corrections, by their SimGrid names
// (network/bandwidth-factor, network/latency-factor, network/crosstraffic).
type Factors struct {
	// Bandwidth scales every link's capacity; 0 means 1.
	Bandwidth float64
	// Latency scales every route's latency; 0 means 1.
	Latency float64
	// Cross is the load a flow puts on the reverse direction of each hop,
	// per byte it carries forward (TCP ACKs, PCIe flow-control and
	// completion traffic); 0 means none.
	Cross float64
	// WeightS is LV08's network/weight-S, in bytes (20537 in SimGrid's
	// LV08 model). Positive, it makes the sharing weighted max-min as
	// SimGrid's does: a flow's sharing penalty is its route's latency in
	// seconds (before the latency factor) plus WeightS / capacity for
	// each link its route crosses (not for Load hops), and its share of
	// a bottleneck is inversely proportional to its penalty, so flows on
	// short, fast routes get more (TCP's RTT unfairness). 0, the
	// default, is plain max-min: equal shares whatever the route.
	WeightS float64
}

// withDefaults returns f with zero factors set to 1, and panics on
// factors that would make a rate or a latency meaningless.
func (f Factors) withDefaults() Factors {
	if f.Bandwidth == 0 {
		f.Bandwidth = 1
	}
	if f.Latency == 0 {
		f.Latency = 1
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"bandwidth", f.Bandwidth}, {"latency", f.Latency}, {"cross", f.Cross}, {"weight-S", f.WeightS}} {
		if v.v < 0 || math.IsNaN(v.v) || math.IsInf(v.v, 0) {
			panic(fmt.Sprintf("fabric: %s factor %v must be finite and not negative", v.name, v.v))
		}
	}
	return f
}

// Sharing says how a link's two directions use its capacity.
type Sharing uint8

const (
	// FullDuplex links have two independent directions, each with the
	// link's capacity (PCIe, NVLink, UPI).
	FullDuplex Sharing = iota
	// Shared links are one resource for both directions (a memory bus,
	// DRAM channels, HBM, a half-duplex link).
	Shared
)

func (s Sharing) String() string {
	switch s {
	case FullDuplex:
		return "full-duplex"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("Sharing(%d)", uint8(s))
}

// Dir is a direction of travel over a link, relative to its ends.
type Dir uint8

const (
	AtoB Dir = iota // from the link's A end to its B end
	BtoA            // from B to A
)

// Reverse is the opposite direction.
func (d Dir) Reverse() Dir { return 1 - d }

func (d Dir) String() string {
	switch d {
	case AtoB:
		return "A→B"
	case BtoA:
		return "B→A"
	}
	return fmt.Sprintf("Dir(%d)", uint8(d))
}

// Fabric is a set of links between nodes and the flows moving over them.
type Fabric struct {
	eng *sim.Engine
	fac Factors

	nodes      []*Node
	nodeByName map[string]*Node // lookup only, never iterated
	links      []*Link
	linkByName map[string]*Link // lookup only, never iterated
	res        []resource
	fst        []fillState // the filling's state of each resource, by index as res

	// Hooks receives every Event from now on, in the order they happen,
	// inside the fabric's event handling: a hook may Start flows (they
	// take effect through events) but must not block. The event is
	// valid only during the call.
	Hooks sim.Hooks[Event]
	ev    Event

	// groups are the groups of active flows (flows past their latency),
	// in creation order; nActive counts their flows.
	groups      []*group
	nActive     int
	groupByHash map[uint64]*group // chained by group.sameHash; lookup only, never iterated
	groupSeq    uint64
	// freeGroups are the groups emptied, reusable once a recompute has
	// run since (pool.ready).
	freeGroups pool[group]
	// last is when the active flows' progress and the link counters were
	// last brought up to date.
	last sim.Time
	// pending: a recompute event is scheduled at the current instant
	// (recomputeEv); dirty: the event under way asked for one, which tail
	// schedules or runs.
	pending, dirty bool
	recomputeEv    sim.Handle
	// inlined counts the events tail ran at once.
	inlined uint64
	// rateChanged: the filling under way set some group a new rate.
	rateChanged bool
	// hashed: groupByHash holds every group with flows (hashAll), as it
	// must once a flow may join an existing group (above groupMin).
	hashed bool
	// unsummed counts the active flows outside the kept sums of the
	// resources (countLoads); while there are any, the filling sums the
	// loads of every group of the component itself.
	unsummed   int
	recomputes uint64
	// nLone counts the groups of the started flows when loneChanges
	// holds; lones counts the recomputes that took shareLone.
	nLone int
	lones uint64
	// loneWithin is withinAll, as loneChanges found it; counted: this
	// recompute's shareLone counted its groups' flows and rates on the
	// link counters; purged: its loneChanges purged every changed
	// resource.
	loneWithin, counted, purged bool
	// loneStarted counts the started flows' groups that loneChanges
	// listed first in someGroups; the groups alone on their resources,
	// not started, that it found on changed resources follow them.
	loneStarted int
	// batched counts the flows that joined a batch (batchJoin), batches
	// the batches with flows.
	batched uint64
	batches int
	// timer is the one completion event: at timerAt, the earliest end of
	// an active flow. timerDue: a recompute armed it at timerAt, and
	// tail schedules it.
	timer    sim.Handle
	timerAt  sim.Time
	timerDue bool

	recomputeFn, timerFn, activateFn func() // method values, made once
	latent                           latentQueue

	// changedRes are the resources whose flows changed since the last
	// recompute (a flow became active on them or ended), startedFlows the
	// flows that became active: the recompute shares anew only the
	// component of resources and flows they reach.
	changedRes   []int32
	startedFlows []*Flow
	actSeq       uint64 // activation counter, for Flow.seq

	// Scratch reused by each recompute, so that it does not allocate.
	epoch      uint64
	comp       []int32  // resources of the component, in discovery order
	compGroups []*group // its groups, in creation order: groups itself when it holds them all, else someGroups
	someGroups []*group
	heap       []levelEntry // resources with unfrozen flows, by level
	live       []int32      // the same, unordered, when scan
	levels     []float64    // their levels, by position in live
	deadBits   []uint64     // positions in live of the resources left with no unfrozen loads in the last step
	dead       bool         // some bit of deadBits is set
	// allRes are the resources of the last discovered component when it
	// held every active flow, at epoch allEpoch (0: it did not).
	allRes   []int32
	allEpoch uint64
	scan     bool    // fill scans live instead of keeping heap
	moved    []int32 // resources whose level changed in this filling step
	capped   []*group
	// used are the link directions that carried flows at the last
	// recompute, or still do; dirState.inUsed marks them.
	used   []*dirState
	ending []*Flow

	// freeFlows are the flows given back (Release), reusable once a
	// recompute has run since.
	freeFlows pool[Flow]

	// routes caches finished routes by (from, to) node index, at most
	// routeCacheMax of them; toward holds the distance arrays of at most
	// towardCacheMax destinations, oldest replaced first. Both are
	// cleared by Connect.
	routes map[[2]int]Route
	// recent are the routeInfos of the last routes flows took that
	// were not among them, the oldest replaced first (recentNext);
	// infoByHops those of routes by their hops' content (hopsKey).
	recent     [infoRecent]*routeInfo
	recentNext int
	lastInfo   *routeInfo            // the last found
	infoByHops map[uint64]*routeInfo // lookup only, never iterated
	toward     []towardEntry
	towardNext int
}

// New returns an empty fabric on eng.
func New(eng *sim.Engine, f Factors) *Fabric {
	fab := &Fabric{
		eng:         eng,
		fac:         f.withDefaults(),
		nodeByName:  make(map[string]*Node),
		linkByName:  make(map[string]*Link),
		routes:      make(map[[2]int]Route),
		groupByHash: make(map[uint64]*group),
		infoByHops:  make(map[uint64]*routeInfo),
		last:        eng.Now(),
	}
	fab.recomputeFn, fab.timerFn, fab.activateFn = fab.recomputeEvent, fab.onTimer, fab.activateNext
	return fab
}

// Factors are the fabric's factors, with defaults filled in.
func (f *Fabric) Factors() Factors { return f.fac }

// Engine is the engine the fabric runs on.
func (f *Fabric) Engine() *sim.Engine { return f.eng }

// Node is a vertex of the topology: an endpoint, a switch, a memory.
type Node struct {
	fab   *Fabric
	name  string
	index int
	links []*Link // in creation order
}

// Name is the node's name, unique in its fabric.
func (n *Node) Name() string { return n.name }

func (n *Node) String() string { return n.name }

// Links are the links with n at one end, in creation order.
func (n *Node) Links() []*Link { return n.links }

// Node returns the node called name, creating it if needed.
func (f *Fabric) Node(name string) *Node {
	if n := f.nodeByName[name]; n != nil {
		return n
	}
	n := &Node{fab: f, name: name, index: len(f.nodes)}
	f.nodes = append(f.nodes, n)
	f.nodeByName[name] = n
	return n
}

// Nodes are the fabric's nodes in creation order.
func (f *Fabric) Nodes() []*Node { return f.nodes }

// Link is a capacity that flows share: one resource per direction
// (FullDuplex) or one for both (Shared).
type Link struct {
	fab      *Fabric
	name     string
	a, b     *Node
	capacity float64
	latency  sim.Time
	sharing  Sharing
	index    int
	// res is the resource that carries each direction of travel; the two
	// are the same for a Shared link.
	res [2]int32
	// dir are the traffic counters per direction of travel.
	dir [2]dirState
}

// dirState counts the flows travelling one way over a link.
type dirState struct {
	bytes float64
	busy  sim.Time
	// rate (payload bytes/s, weights included, cross traffic not) and n
	// (hops of transferring flows) hold since the last recompute.
	rate   float64
	n      int32
	inUsed bool // in Fabric.used
}

// resource is one capacity that progressive filling shares.
type resource struct {
	link *Link
	cap  float64 // effective: capacity × bandwidth factor
	peak float64 // highest load/cap seen

	// dirs are the link directions it carries: 0 (AtoB), 1 (BtoA), or 2
	// for both (a Shared link).
	dirs uint8
	// members are the groups of active flows loading it, once per load,
	// in creation order; emptied groups are dropped when the recompute that
	// follows their end visits the resource.
	members     []*group
	changedMark bool // in Fabric.changedRes

	// epoch is the recompute epoch whose component holds it; its
	// progressive-filling state, in Fabric.fst, is valid while epoch is
	// the fabric's.
	epoch uint64
	// wAll and nAll are w and n before the filling's first step, kept as
	// flows join and leave: wAll sums the flows that countLoads counts
	// (exactly: small integers), nAll counts the loads of every group.
	wAll  float64
	nAll  int32
	ver   uint32 // bumped when its level changes: older heap entries are stale
	order int32  // first-load order in the component, for ties
	moved bool   // in Fabric.moved
	// allEpoch is Fabric.allEpoch when the resource was in Fabric.allRes.
	allEpoch uint64
}

// fillState is a resource's progressive-filling state, valid while its
// epoch is the fabric's: apart from the rest of the resource, in 24
// bytes, so that the filling's updates, which jump from resource to
// resource, stay in few cache lines (544 resources in 13 KiB; inside
// resources of 136 bytes they were spread over 72 KiB).
type fillState struct {
	rem float64 // capacity not used by frozen flows
	w   float64 // summed weights × shares of unfrozen loads
	n   int32   // unfrozen loads
	// livePos is its index in Fabric.live during a scanned filling, −1
	// once dropped.
	livePos int32
}

// Connect adds a link between a and b with capacity bytes/s per direction
// (before the bandwidth factor) and a latency. A link's name must be
// unique and its capacity positive and finite: a link that cannot carry
// anything would leave flows waiting forever, so Connect panics, naming
// the link, on a model-construction bug.
func (f *Fabric) Connect(name string, a, b *Node, capacity float64, latency sim.Time, s Sharing) *Link {
	switch {
	case f.linkByName[name] != nil:
		panic(fmt.Sprintf("fabric: link %q connected twice", name))
	case a == nil || b == nil || a.fab != f || b.fab != f:
		panic(fmt.Sprintf("fabric: link %q: both ends must be nodes of this fabric", name))
	case !(capacity > 0) || math.IsInf(capacity, 0):
		panic(fmt.Sprintf("fabric: link %q: capacity %v B/s must be positive and finite", name, capacity))
	case latency < 0:
		panic(fmt.Sprintf("fabric: link %q: negative latency %v", name, latency))
	case s != FullDuplex && s != Shared:
		panic(fmt.Sprintf("fabric: link %q: bad sharing %v", name, s))
	}
	l := &Link{fab: f, name: name, a: a, b: b, capacity: capacity, latency: latency, sharing: s, index: len(f.links)}
	eff := capacity * f.fac.Bandwidth
	for d := range 2 {
		if d == 1 && s == Shared {
			l.res[1] = l.res[0]
			break
		}
		l.res[d] = int32(len(f.res))
		dirs := uint8(d)
		if s == Shared {
			dirs = 2
		}
		f.res = append(f.res, resource{link: l, cap: eff, dirs: dirs})
		f.fst = append(f.fst, fillState{})
	}
	f.links = append(f.links, l)
	f.linkByName[name] = l
	a.links = append(a.links, l)
	if b != a {
		b.links = append(b.links, l)
	}
	f.toward, f.towardNext = f.toward[:0], 0
	clear(f.routes)
	return l
}

// Links are the fabric's links in creation order.
func (f *Fabric) Links() []*Link { return f.links }

// Link returns the link called name, or nil.
func (f *Fabric) Link(name string) *Link { return f.linkByName[name] }

// Name is the link's name, unique in its fabric.
func (l *Link) Name() string { return l.name }

func (l *Link) String() string { return l.name }

// A and B are the link's ends.
func (l *Link) A() *Node { return l.a }

// B is the link's other end.
func (l *Link) B() *Node { return l.b }

// Capacity is the nominal capacity in bytes/s per direction, before the
// bandwidth factor.
func (l *Link) Capacity() float64 { return l.capacity }

// Effective is the capacity flows share: Capacity × the bandwidth factor.
func (l *Link) Effective() float64 { return l.fab.res[l.res[0]].cap }

// Latency is the link's latency, before the latency factor.
func (l *Link) Latency() sim.Time { return l.latency }

// Sharing says whether the directions are independent.
func (l *Link) Sharing() Sharing { return l.sharing }

// From is the node a flow travelling d over l leaves.
func (l *Link) From(d Dir) *Node {
	if d == AtoB {
		return l.a
	}
	return l.b
}

// To is the node a flow travelling d over l arrives at.
func (l *Link) To(d Dir) *Node { return l.From(d.Reverse()) }

// share is the rate per unit of filling level of a flow over r, whose
// latency (before the latency factor) is lat: 1 under plain max-min, the
// inverse of LV08's sharing penalty under weighted sharing. The penalty
// is that of SimGrid's NetworkCm02Model::communicate
// (src/surf/network_cm02.cpp in SimGrid 3.32): the route's latency plus
// weight-S over the bandwidth of each link of the route. A route with no
// link and no latency has no penalty to weigh by; its flow, capped or
// unlimited, shares nothing, and keeps the share 1.
func (f *Fabric) share(r Route, lat sim.Time) float64 {
	if f.fac.WeightS == 0 {
		return 1
	}
	p := float64(lat) / float64(sim.Second)
	for _, h := range r.Hops {
		if !h.Load {
			p += f.fac.WeightS / h.Link.capacity
		}
	}
	if !(p > 0) {
		return 1
	}
	return 1 / p
}

// Recomputes counts the bandwidth recomputations so far (at most one per
// instant at which flows become active or end, plus one for any flow
// started from an observer or a completion callback at that instant).
func (f *Fabric) Recomputes() uint64 { return f.recomputes }

// Active is the number of flows transferring now (past their latency,
// not yet ended).
func (f *Fabric) Active() int { return f.nActive }

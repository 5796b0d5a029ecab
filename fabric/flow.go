package fabric

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// Flow is one bulk transfer: it waits its route's latency, then moves its
// bytes at the rate max-min sharing gives it.
type Flow struct {
	flowFields
	// done is outside flowFields, so that Start resetting a released
	// flow for reuse does not clear it twice: InitCompletion sets all
	// of it.
	done sim.Completion
}

// flowFields are a Flow's fields that Start sets anew (those that a
// released flow holds otherwise than a new one).
type flowFields struct {
	fab   *Fabric
	name  string
	route Route
	bytes int64
	cap   float64 // MaxRate; 0 for none
	tag   any
	ri    *routeInfo // what its route's hops give (loads, share, latency)
	loads []load     // ri.loads

	state                  flowState
	start, activeAt, endAt sim.Time // endAt: the end, once done
	// activation is its activation event, while it pays its latency.
	activation sim.Handle

	// While active: its group (the active flows with its hops, cap and
	// share, which always get the same rate) and its remaining bytes
	// relative to the group's reference (remaining = g.left + offset).
	g      *group
	offset float64
	seq    uint64 // activation order, while active
	rated  bool   // a recompute has set its group's rate since it joined
	// summed: its loads are in the resources' kept sums (countLoads).
	summed bool
	// share is the flow's rate per unit of filling level: 1 under plain
	// max-min, 1/penalty under LV08's weighted sharing (Factors.WeightS).
	share float64
}

// load is one resource a flow loads, with its weight (bytes of load per
// byte of flow).
type load struct {
	r int32
	w float64
}

type flowState uint8

const (
	flowLatency flowState = iota // paying its latency
	flowActive                   // transferring
	flowDone
	flowReleased // given back (Fabric.Release), waiting to be reused
)

// Option tunes a flow at Start: MaxRate or Tag. It is a plain value, so
// that making one allocates nothing.
type Option struct {
	kind optionKind
	rate float64
	tag  any
}

type optionKind uint8

const (
	optNone optionKind = iota
	optMaxRate
	optTag
)

func (o Option) apply(fl *Flow) {
	switch o.kind {
	case optMaxRate:
		fl.cap = o.rate
	case optTag:
		fl.tag = o.tag
	}
}

// MaxRate caps the flow at rate bytes/s whatever the links could give it:
// a CPU thread's memcpy rate, a DMA engine's issue rate. rate must be
// positive and finite.
func MaxRate(rate float64) Option {
	if !(rate > 0) || math.IsInf(rate, 0) {
		panic(fmt.Sprintf("fabric: MaxRate %v B/s must be positive and finite", rate))
	}
	return Option{kind: optMaxRate, rate: rate}
}

// Tag attaches user data to the flow, for observers (Flow.Tag).
func Tag(v any) Option { return Option{kind: optTag, tag: v} }

// Start begins a flow of bytes over r now. It is observed as FlowStart at
// once; FlowActive follows after r's latency × the latency factor, then
// FlowRate at each rate change and FlowEnd when its bytes are through, when
// Done completes. A 0-byte flow ends when its latency is over, and so does
// a flow that nothing limits (no hops and no MaxRate).
//
// Start never completes anything synchronously: even with zero latency
// the flow becomes active in an event at the current instant.
//
// An invalid request is a model bug, and Start panics naming the flow: a
// hop with a nil link or a link of another fabric, a bad direction, a
// negative or non-finite weight, negative bytes.
func (f *Fabric) Start(name string, r Route, bytes int64, opt ...Option) *Flow {
	if bytes < 0 {
		panic(fmt.Sprintf("fabric: flow %q: negative size %d", name, bytes))
	}
	fl := f.freeFlows.take()
	if resetFlows {
		fl.flowFields = flowFields{}
	}
	if checkFreed && (fl.g != nil || fl.offset != 0 || fl.rated) {
		panic("fabric: a released flow holds state of its past life")
	}
	// The fields a released flow holds otherwise than a new one: finish
	// left g nil, offset 0 and rated false; activate sets seq and summed
	// before any use, finish endAt (End reads it once done).
	now := f.eng.Now()
	fl.fab, fl.name, fl.bytes, fl.cap, fl.tag = f, name, bytes, 0, nil
	fl.state, fl.start, fl.activeAt = flowLatency, now, 0
	f.eng.InitCompletion(&fl.done, "flow ", name)
	// info's first test, the route of the last flow, written in: flows
	// come in runs over one route.
	ri := f.lastInfo
	if ri == nil || !sameHops(ri.hops, r.Hops) {
		ri = f.info(name, r)
	}
	fl.ri, fl.route.Hops, fl.loads, fl.share = ri, ri.hops, ri.loads, ri.share
	for _, o := range opt {
		o.apply(fl)
	}
	lat := ri.lat
	f.emit(fl.start, FlowStart, fl, 0)
	// The latency queue's push, written in for the common case: the
	// flow joins the run's end.
	q := &f.latent
	if n := len(q.run); latentRuns && (n == q.head || q.run[n-1].at <= fl.start+lat) {
		q.seq++
		q.run = append(q.run, latentFlow{at: fl.start + lat, seq: q.seq, fl: fl})
		q.inRun++
	} else {
		q.push(latentFlow{at: fl.start + lat, fl: fl})
	}
	fl.activation = f.eng.At(fl.start+lat, f.activateFn)
	return fl
}

// resetFlows makes Start clear every field of a released flow it
// reuses, as it once did. (A variable so that tests can check that the
// fields Start leaves as a released flow has them change nothing.)
var resetFlows = false

// latentFlow is a flow paying its latency, which ends at at.
type latentFlow struct {
	at  sim.Time
	seq uint64
	fl  *Flow
}

// latentQueue holds the flows paying their latency, ordered as the
// engine orders their activation events: by time, then by scheduling
// order. Each activation event (the one function activateFn, which so
// needs no closure per flow) takes the first flow: the engine fires
// the events in that same order. A flow whose activation comes no
// earlier than that of the last flow in the run (run[head:], in order)
// joins the run's end, the others the heap h: flows mostly come in
// order (a DMA engine's batch of writes, over one route, at once), and
// a run costs less than the heap, whose every pop sifts.
type latentQueue struct {
	h    []latentFlow
	seq  uint64
	run  []latentFlow
	head int
	// inRun counts the flows that joined the run.
	inRun uint64
}

// first is the flow whose activation comes first, nil if none.
func (q *latentQueue) first() *latentFlow {
	if q.runFirst() {
		return &q.run[q.head]
	}
	if len(q.h) > 0 {
		return &q.h[0]
	}
	return nil
}

// runFirst reports whether the run's first flow is the one whose
// activation comes first (rather than the heap's, or none).
func (q *latentQueue) runFirst() bool {
	return q.head < len(q.run) && (len(q.h) == 0 || q.run[q.head].before(&q.h[0]))
}

// before reports whether a's activation event comes before b's.
func (a *latentFlow) before(b *latentFlow) bool {
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *latentQueue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *latentQueue) push(e latentFlow) {
	q.seq++
	e.seq = q.seq
	if !latentRuns {
		q.pushHeap(e)
		return
	}
	// Its seq is the highest: it comes after the run's last unless
	// that is due later.
	if n := len(q.run); n == q.head || q.run[n-1].at <= e.at {
		q.run = append(q.run, e)
		q.inRun++
		return
	}
	q.pushHeap(e)
}

// latentRuns turns on the run of flows in order. (A variable so that
// tests can check that it changes nothing.)
var latentRuns = true

// pop takes the flow whose activation comes first.
func (q *latentQueue) pop() *Flow {
	if !q.runFirst() {
		return q.popHeap()
	}
	r := &q.run[q.head]
	fl := r.fl
	r.fl = nil
	if q.head++; q.head == len(q.run) {
		q.run, q.head = q.run[:0], 0
	} else if q.head >= 64 && 2*q.head >= len(q.run) {
		// A run that never empties (flows always waiting) moves down
		// from time to time, so that its storage stays within twice
		// the flows waiting in it.
		n := copy(q.run, q.run[q.head:])
		clear(q.run[n:])
		q.run, q.head = q.run[:n], 0
	}
	return fl
}

func (q *latentQueue) pushHeap(e latentFlow) {
	q.h = append(q.h, e)
	for i := len(q.h) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *latentQueue) popHeap() *Flow {
	h := q.h
	fl := h[0].fl
	n := len(h) - 1
	h[0] = h[n]
	h[n] = latentFlow{}
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && (h[c+1].at < h[c].at || h[c+1].at == h[c].at && h[c+1].seq < h[c].seq) {
			c++
		}
		if !(h[c].at < h[i].at || h[c].at == h[i].at && h[c].seq < h[i].seq) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	q.h = h
	return fl
}

// activateNext ends the latency of the flow whose activation event this is.
func (f *Fabric) activateNext() {
	f.latent.pop().activate()
	f.tail()
}

// activate ends the latency phase.
func (fl *Flow) activate() {
	f := fl.fab
	fl.state, fl.activeAt = flowActive, f.eng.Now()
	f.emit(fl.activeAt, FlowActive, fl, 0)
	if !fl.plain() {
		f.finish(fl)
		return
	}
	f.actSeq++
	fl.seq = f.actSeq
	f.nActive++
	g := f.join(fl)
	// In one pass over the loads, each resource's own updates in the
	// order of separate passes: a new group joins the members and the
	// counts of loads; fl's loads go in the kept sums (countLoads, as
	// float64(+1) × (w × share) is w × share); and the resources are
	// marked changed, but by a batch's later flows (its first flow
	// marked them at this instant).
	fl.summed = fl.cap == 0 && fl.ri.summable
	if !fl.summed {
		f.unsummed++
	}
	if added, mark := g.n == 1, !g.batch; added || fl.summed || mark {
		for _, ld := range g.loads {
			r := &f.res[ld.r]
			if added {
				r.members = append(r.members, g)
				r.nAll++
			}
			if fl.summed {
				r.wAll += ld.w * fl.share
			}
			if mark && !r.changedMark {
				r.changedMark = true
				f.changedRes = append(f.changedRes, ld.r)
			}
		}
	}
	f.startedFlows = append(f.startedFlows, fl)
	f.markDirty()
}

// plain reports whether fl's activation does nothing but join it to the
// active flows (it has bytes, and loads or a cap, so that activate does
// not end it at once).
func (fl *Flow) plain() bool { return fl.bytes != 0 && (len(fl.loads) != 0 || fl.cap != 0) }

// onTimer is the completion timer's event.
func (f *Fabric) onTimer() {
	f.onTimerWork()
	f.tail()
}

// onTimerWork ends every active flow whose end is now, in activation
// order.
func (f *Fabric) onTimerWork() {
	now := f.eng.Now()
	f.ending = f.ending[:0]
	emptied := false
	// (The flows that end go straight to f.ending, not to a local
	// slice, whose three words the loop over every group of a busy
	// fabric would otherwise keep on the stack at each step.)
	for _, g := range f.groups {
		if g.next <= now {
			if g.batch && wholeBatches {
				// A batch's flows all have offset 0, so they end
				// together, and they were pushed in activation order,
				// each at the end of the heap: its members are in the
				// order that popping them gives.
				if g.endOf(g.members[0]) <= now {
					for i, fl := range g.members {
						f.countLoads(fl, -1)
						f.ending = append(f.ending, fl)
						g.members[i] = nil
					}
					g.members, g.n, g.newTop = g.members[:0], 0, true
				}
			}
			for len(g.members) > 0 && g.endOf(g.members[0]) <= now {
				fl := g.members[0]
				if len(g.members) == 1 {
					// pop's work for a group's last member,
					// without the call.
					g.members[0] = nil
					g.members, g.n, g.newTop = g.members[:0], 0, true
				} else {
					g.pop()
				}
				f.countLoads(fl, -1)
				f.ending = append(f.ending, fl)
			}
			// Its resources marked changed and, if g is empty now, its
			// loads taken off their counts, in one pass. A resource left
			// with no loads lists emptied groups only (g, and any other
			// that ended since the last purge): its list is dropped here,
			// a store or two, so that the recompute's purge finds it as
			// long as its count and skips it (a lone flow's resources,
			// at its end, would each take purge's pass over the list).
			gone := g.n == 0
			for _, ld := range g.loads {
				r := &f.res[ld.r]
				if !r.changedMark {
					r.changedMark = true
					f.changedRes = append(f.changedRes, ld.r)
				}
				if gone {
					if r.nAll--; r.nAll == 0 && dropAtEnd {
						// (Backwards: the compiler makes a
						// forward loop a call to clear, which
						// costs more for the member or two.)
						for i := len(r.members) - 1; i >= 0; i-- {
							r.members[i] = nil
						}
						r.members = r.members[:0]
					}
				}
			}
			if gone {
				if g.batch {
					g.batch = false
					f.batches--
				}
				// Given back: the resources it loaded may
				// still list it until the next recompute
				// purges them (its end marked them changed),
				// so it is reused only after that recompute.
				f.freeGroups.put(g)
				if g.hashed {
					f.unregister(g)
				}
				emptied = true
			}
		}
	}
	ending := f.ending
	if emptied {
		f.groups = live(f.groups)
	}
	// Activation order, as the flows of one group end in the order of
	// their remaining bytes.
	if len(ending) > 1 && !bySeq(ending) {
		slices.SortFunc(ending, func(a, b *Flow) int { return cmp.Compare(a.seq, b.seq) })
	}
	f.nActive -= len(ending)
	for i, fl := range ending {
		ending[i] = nil
		// finish's body, written in.
		fl.state, fl.endAt = flowDone, f.eng.Now()
		fl.g, fl.offset, fl.rated = nil, 0, false
		f.emit(fl.endAt, FlowEnd, fl, 0)
		fl.done.Complete()
	}
	f.ending = ending[:0]
	// After the ends: a completion callback that starts a flow with no
	// latency activates it before this recompute, which so covers both
	// the ends and the starts (a closed loop costs one recompute per
	// instant, not two).
	f.markDirty()
}

// dropAtEnd makes onTimerWork drop the list of members of a resource
// that an end leaves with no loads; false, the recompute's purge drops
// them. (A variable so that tests can check that it changes nothing.)
var dropAtEnd = true

// wholeBatches makes onTimer take a batch's ending members at once;
// false, it pops them one by one, as any group's. (A variable for
// tests.)
var wholeBatches = true

// bySeq reports whether flows are in activation order already (those of
// one batch are), which a loop tells for less than the sort's calls.
func bySeq(flows []*Flow) bool {
	for i := 1; i < len(flows); i++ {
		if flows[i-1].seq > flows[i].seq {
			return false
		}
	}
	return true
}

// finish marks fl done now; it is no longer in the active set.
func (f *Fabric) finish(fl *Flow) {
	fl.state, fl.endAt = flowDone, f.eng.Now()
	fl.g, fl.offset, fl.rated = nil, 0, false
	f.emit(fl.endAt, FlowEnd, fl, 0)
	fl.done.Complete()
}

// Release gives fl back to the fabric once the one who started it is
// done with it, so that a later Start reuses it instead of allocating a
// flow: fl must be done, and neither the caller nor anyone it handed fl
// to may use it afterwards. Hooks may keep the flows of the events they
// see (a trace, the checker), so while any hook listens Release does
// nothing and fl stays valid. Releasing is optional: a flow never
// released is left to the garbage collector.
//
// A released flow is reused only after the next recompute, which drops
// the fabric's own references to the flows ended before it.
func (f *Fabric) Release(fl *Flow) {
	if fl.fab != f || fl.state != flowDone {
		panic(fmt.Sprintf("fabric: flow %q released while not done, twice or to another fabric", fl.name))
	}
	if f.Hooks.Active() {
		return
	}
	fl.state = flowReleased
	f.freeFlows.put(fl)
}

// Name is the name given at Start.
func (fl *Flow) Name() string { return fl.name }

func (fl *Flow) String() string { return fl.name }

// Bytes is the flow's size.
func (fl *Flow) Bytes() int64 { return fl.bytes }

// Route is the route given at Start; the caller must not modify its hops.
func (fl *Flow) Route() Route { return fl.route }

// Tag is the value given with the Tag option, or nil.
func (fl *Flow) Tag() any { return fl.tag }

// MaxRate is the flow's cap in bytes/s, 0 for none.
func (fl *Flow) MaxRate() float64 { return fl.cap }

// Done completes when the flow's bytes are through.
func (fl *Flow) Done() *sim.Completion { return &fl.done }

// Rate is the flow's current rate in bytes/s; 0 during its latency, after
// its end, and between becoming active and the recompute at that instant.
func (fl *Flow) Rate() float64 {
	if fl.state != flowActive || !fl.rated {
		return 0
	}
	return fl.g.rate
}

// Start is when the flow was started.
func (fl *Flow) Start() sim.Time { return fl.start }

// ActiveAt is when its latency phase ended; meaningful once FlowActive
// has been observed.
func (fl *Flow) ActiveAt() sim.Time { return fl.activeAt }

// End is when the flow ended; meaningful once Done has completed.
func (fl *Flow) End() sim.Time {
	if fl.state != flowDone {
		return 0
	}
	return fl.endAt
}

// Remaining is the bytes not yet through, now.
func (fl *Flow) Remaining() float64 {
	switch fl.state {
	case flowLatency:
		return float64(fl.bytes)
	case flowActive:
		g := fl.g
		dt := fl.fab.eng.Now() - fl.fab.last
		return max(0, g.left+fl.offset-g.rate*float64(dt)/float64(sim.Second))
	}
	return 0
}

package fabric

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// checkInvariants turns on the max-min optimality check after every
// recompute (O(F·H·R)); tests call checkShare directly.
const checkInvariants = false

// markDirty asks for one recompute at the current instant, however many
// flows become active or end at it: the event under way schedules it as
// the last thing it does (tail), unless one is scheduled already.
func (f *Fabric) markDirty() {
	if !f.pending {
		f.dirty = true
	}
}

// tail is the last thing each of the fabric's events does (an
// activation, the completion timer, a recompute): it schedules what the
// event left to schedule as its last act, the recompute it asked for
// (markDirty) or the completion timer that a recompute armed (arm).
// Where the run loop would run the fabric's own events next, it does
// their work at once instead (sim.Engine.RunsNext, TakeNext), in the
// order, at the times and with the sequence numbers and counts of fired
// events that the loop would give them: nothing else runs in between
// either way. So a flow's activation or end and the recompute it asks
// for cost one event where nothing else is due at that instant, not two;
// the completion timer that a recompute arms costs none where nothing
// else is due before it; and the activations of flows with no latency
// started by the event under way (a completion callback that starts the
// next flow) cost none either. It goes on while the fabric's events come
// next, one after the other, so it can run many in a row.
//
// While the recompute that the event under way asked for is not yet
// scheduled (dirty), an activation is run first only at the current
// instant, while no hook listens, and when it schedules nothing (a flow
// that activate joins to the active flows, not one it ends at once): the
// recompute, which would have been scheduled before it, is so scheduled
// after it with the sequence number it would have had, as nothing takes
// one in between. The timer is left to tail only while no hook listens
// (arm), for the same reason: nothing between arm and the end of the
// recompute takes a sequence number.
func (f *Fabric) tail() {
	if !inlineEvents {
		if f.dirty {
			f.dirty = false
			f.pending = true
			f.recomputeEv = f.eng.At(f.eng.Now(), f.recomputeFn)
		}
		return
	}
	for {
		if f.timerDue {
			f.timerDue = false
			if f.eng.RunsNext(f.timerAt) {
				f.inlined++
				f.onTimerWork()
				continue
			}
			f.timer = f.eng.At(f.timerAt, f.timerFn)
		}
		if lf := f.latent.first(); lf != nil {
			if (!f.dirty || lf.at == f.eng.Now() && !f.Hooks.Active() && lf.fl.plain()) && f.eng.TakeNext(lf.fl.activation) {
				f.inlined++
				fl := f.latent.pop()
				fl.activate()
				continue
			}
		}
		switch {
		case f.dirty:
			f.dirty = false
			if !f.eng.RunsNext(f.eng.Now()) {
				f.pending = true
				f.recomputeEv = f.eng.At(f.eng.Now(), f.recomputeFn)
				return
			}
		case f.pending && f.eng.TakeNext(f.recomputeEv):
		default:
			// (A timer that a recompute left as it was is seldom next:
			// not worth asking.)
			return
		}
		f.inlined++
		f.recompute()
	}
}

// inlineEvents turns on tail's running the fabric's own events at once.
// (A variable so that tests can check that doing so changes nothing.)
var inlineEvents = true

// changed marks resource r as changed since the last recompute.
func (f *Fabric) changed(r int32) {
	if res := &f.res[r]; !res.changedMark {
		res.changedMark = true
		f.changedRes = append(f.changedRes, r)
	}
}

// recompute brings every active flow's progress up to now, shares anew
// the capacity of the component that the flows started or ended since the
// last recompute reach, reschedules the ends of the flows whose rate
// changed and re-arms the completion timer for the earliest end.
//
// Flows outside that component keep their rates: max-min fairness is
// separable over connected components (no resource is shared across
// them), so sharing them anew would give the same rates again.
//
// Cost: O(F) for F active flows (their progress and the earliest end:
// a multiply-add and a compare each), plus, for the component's Fc flows
// of at most H loads and Rc resources, O(Fc·H·log Rc + C log C) for C
// capped flows: each filling step takes the lowest level from a heap of
// resources, and freezing a flow updates only the heap entries of its
// own resources. The single completion timer keeps event-queue work out
// of it: one cancel and one insert per recompute, not one per changed flow.
func (f *Fabric) recompute() {
	f.pending = false
	f.recomputes++
	now := f.eng.Now()
	if dt := now - f.last; dt > 0 {
		s := float64(dt)
		for _, g := range f.groups {
			g.left -= g.rate * s / float64(sim.Second)
		}
		f.advanceStats(dt)
	}
	f.last = now

	f.rateChanged, f.counted, f.purged = false, false, false
	// (loneChanges called here, not through loneChangesChecked, unless a
	// test set its reference: one call fewer.)
	if loneShortcut && (loneChangesRef == nil && f.loneChanges() || loneChangesRef != nil && f.loneChangesChecked()) {
		f.lones++
		f.shareLone()
	} else {
		f.component()
		f.fill()
		f.clearStats()
	}
	changed := f.rateChanged

	// The link counters of the component's directions, and each group's
	// next end: in one pass over the groups when the component holds
	// them all, as it does in a busy fabric.
	// (A batch's counters in a pass of their own, which keeps the test
	// for batches out of the pass over every group of a busy fabric.)
	// (shareLone counted its groups.)
	whole := len(f.compGroups) == len(f.groups) && f.batches == 0 && !f.counted
	if !whole && !f.counted {
		for _, g := range f.compGroups {
			if g.batch {
				f.countBatch(g)
			} else {
				f.countStats(g)
			}
		}
	}
	hooks := f.Hooks.Active()
	next := sim.Forever
	for _, g := range f.groups {
		if whole {
			f.countStats(g)
		}
		// From setAt and leftAt, so an unchanged rate and first member
		// give an unchanged end, which need not be computed again.
		if g.newTop {
			g.topOffset, g.newTop = g.members[0].offset, false
			g.next = g.endAt(g.topOffset)
		} else if g.changed {
			g.next = g.endAt(g.topOffset)
		}
		next = min(next, g.next)
		if !hooks {
			g.changed = false
		}
	}
	f.arm(next, hooks)
	if checkInvariants {
		if err := f.checkShare(); err != nil {
			panic(err)
		}
	}
	started := f.startedFlows
	if hooks && (changed || len(started) > 0) {
		// Observers see a consistent fabric: rates, ends and the timer
		// are all set before the first FlowRate, which comes for every
		// flow whose rate changed, in activation order.
		var flows []*Flow
		for _, g := range f.compGroups {
			if g.changed {
				flows = append(flows, g.members...)
			}
		}
		for _, fl := range started {
			if fl.state == flowActive && !fl.g.changed {
				flows = append(flows, fl)
			}
		}
		slices.SortFunc(flows, func(a, b *Flow) int { return cmp.Compare(a.seq, b.seq) })
		for _, fl := range started {
			fl.rated = true
		}
		for _, fl := range flows {
			fl.rated = true
			f.emit(now, FlowRate, fl, fl.g.rate)
		}
	}
	// (Loops rather than clear and append's copy: these lists hold a
	// flow or a few, and the runtime's calls cost more.)
	for i, fl := range started {
		fl.rated = true
		started[i] = nil
	}
	f.startedFlows = started[:0]
	if hooks {
		for _, g := range f.compGroups {
			g.changed = false
		}
	}
	// Pointers to groups that may empty dropped: backwards, as the
	// compiler makes the forward loop a call to clear, which costs more
	// for the group or few.
	for i := len(f.someGroups) - 1; i >= 0; i-- {
		f.someGroups[i] = nil
	}
	f.compGroups, f.someGroups = nil, f.someGroups[:0]
	// No list of the fabric holds the flows released before now, or the
	// groups emptied before now, any more: they can be reused.
	f.freeFlows.release()
	f.freeGroups.release()
	if recomputeCheck != nil {
		recomputeCheck(f)
	}
}

// recomputeCheck, when a test sets it, is called at the end of every
// recompute, to check what the recompute left.
var recomputeCheck func(*Fabric)

// loneShortcut turns on shareLone. (A variable so that tests can send
// every recompute through the filling.)
var loneShortcut = true

// loneChanges reports whether every group that the recompute would share
// anew is alone on its resources: each started flow's group is the only
// group with flows on every resource it loads, and every changed
// resource carries no group but one alone on its resources: a started
// one, or one whose flows did not change (an extra: a flow that shared
// its resources ended). It marks those groups (group.lone) with the
// recompute's count and lists them in f.someGroups, the started ones'
// first, in the order of the started flows (f.loneStarted of them), then
// the extras, for shareLone to share without looking for them again.
// When it also holds that the component the
// recompute would share holds no other group (withinAll shares the last
// discovered component whole, and that may hold groups of other
// components), shareLone gives every rate, end and counter that the
// filling would: a group alone on its resources gets the same rate from
// a filling whatever else it shares (shareLone), started or not.
//
// It reads the resources' counts of loads of groups with flows
// (resource.nAll), not their members: a group g is alone on resource r
// when r's count is g's own loads on r (routeInfo.resLoads). Each
// changed resource with a count is then either one of a lone started
// group's, which are all changed (activate marks them) and no two lone
// groups share, or one that another group loads: so every changed
// resource carries no group but the lone started ones when the changed
// resources with a count number exactly their resources. Only when they
// do not does it look for the others (loneExtras).
func (f *Fabric) loneChanges() bool {
	stamp, owned := f.recomputes, 0
	for _, fl := range f.startedFlows {
		g := fl.g
		if fl.state != flowActive || g.lone == stamp {
			continue
		}
		ri := g.ri
		for j, r := range ri.res {
			if f.res[r].nAll != ri.resLoads[j] {
				return false
			}
		}
		g.lone = stamp
		f.someGroups = append(f.someGroups, g)
		owned += len(ri.res)
	}
	// In the same pass, each changed resource purged (as component
	// would, which so finds it done if this recompute takes the
	// filling), withinAll's test, and the counters of those left with no
	// loads (of ended flows) cleared, as shareLone or the filling
	// (clearStats) would clear them: an empty resource's peak is
	// unchanged, clearRes would raise it to (cap − cap) / cap, +0, and a
	// peak is never below +0 (max(+0, −0) is +0). (The filling clears
	// them again, and the order in which the link directions enter
	// Fabric.used changes nothing.)
	within, drop := f.allEpoch != 0, f.emptied()
	for _, r := range f.changedRes {
		f.purge(r, drop)
		res := &f.res[r]
		if res.nAll != 0 {
			owned--
		} else if l := res.link; res.dirs == 2 {
			// clearDirs's body, written in.
			f.clearDir(l, 0)
			f.clearDir(l, 1)
		} else {
			f.clearDir(l, int(res.dirs))
		}
		if res.allEpoch != f.allEpoch {
			within = false
		}
	}
	f.purged = true
	f.loneStarted = len(f.someGroups)
	if owned != 0 && !f.loneExtras(stamp) {
		return false
	}
	n := len(f.someGroups)
	f.nLone, f.loneWithin = n, within
	return n == len(f.groups) || !within
}

// loneExtras reports whether every changed resource with loads carries
// one group alone on its resources, given that every lone started group
// is marked (group.lone is stamp); it marks the others and lists them in
// f.someGroups, after the started ones. The changed resources are purged: their members have flows.
func (f *Fabric) loneExtras(stamp uint64) bool {
	if !loneExtrasOn {
		return false
	}
	for _, r := range f.changedRes {
		res := &f.res[r]
		if res.nAll == 0 {
			continue
		}
		// Alone on r if on all its resources: then r's members are it.
		g := res.members[0]
		if g.lone == stamp {
			continue
		}
		ri := g.ri
		for j, r := range ri.res {
			if f.res[r].nAll != ri.resLoads[j] {
				return false
			}
		}
		g.lone = stamp
		f.someGroups = append(f.someGroups, g)
	}
	return true
}

// allResRef, when a test sets it, gives the resources that component
// would discover, in its order, for shareLone to compare its own with.
var allResRef func(*Fabric) []int32

// loneExtrasOn turns on loneExtras. (A variable so that tests can check
// that sharing anew the groups it finds changes nothing.)
var loneExtrasOn = true

// loneChangesChecked is loneChanges, compared with loneChangesRef's
// answer when a test sets it.
func (f *Fabric) loneChangesChecked() bool {
	if loneChangesRef == nil {
		return f.loneChanges()
	}
	want := loneChangesRef(f)
	if got := f.loneChanges(); got != want {
		panic(fmt.Sprintf("fabric: loneChanges %v, its reference %v", got, want))
	}
	return want
}

// loneChangesRef, when a test sets it, answers what loneChanges must,
// from the resources' members (the way loneChanges first did).
var loneChangesRef func(*Fabric) bool

// shareLone is component, fill and clearStats for a recompute whose
// changes are all lone (loneChanges): each started flow's group alone
// on its resources, the resources whose flows ended left with none. A
// group alone on its resources freezes at the first filling step that
// reaches it, whatever else the filling shares: the level then is the
// lowest of its resources' levels, capacity over its summed weights
// (none of them touched before, and every earlier step at a level no
// higher), or its cap over its share if that is lower. Ties and the
// order of the steps change nothing for it. So its rate is computed here
// in closed form, with the operations the filling would do on the same
// operands in the same order, and so are the loads its freeze leaves on
// its resources (their peak utilisation); the resources of ended flows
// only have their counters cleared. The last discovered component
// (allEpoch, allRes) is left as component would leave it.
func (f *Fabric) shareLone() {
	f.epoch++
	ep := f.epoch
	if f.nLone != len(f.groups) {
		// component would discover the lone groups' resources and the
		// changed ones, not every group: no component holds them all.
		f.allEpoch = 0
	} else if !f.loneWithin {
		// component would discover every group, and keep the
		// component in discovery order as the one that holds them all:
		// the changed resources, as the started flows' are among them
		// (withinAll), then the other resources of the groups found on
		// them (the extras, in the order loneExtras found them), each
		// group's in load order.
		comp := append(f.allRes[:0], f.changedRes...)
		for _, r := range comp {
			f.res[r].allEpoch = ep
		}
		for _, g := range f.someGroups[f.loneStarted:] {
			for _, ld := range g.loads {
				if res := &f.res[ld.r]; res.allEpoch != ep {
					res.allEpoch = ep
					comp = append(comp, ld.r)
				}
			}
		}
		if allResRef != nil {
			if want := allResRef(f); !slices.Equal(comp, want) {
				panic(fmt.Sprintf("fabric: shareLone's component %v, component's %v", comp, want))
			}
		}
		f.allEpoch, f.allRes = ep, comp
	}
	// The changed resources: loneChanges purged them and cleared the
	// counters of those left with no loads; the others are a lone
	// group's, which shareAlone clears.
	// The groups: those loneChanges listed, the started ones' in the
	// order of the started flows, then the extras, as component would
	// visit them.
	f.changedRes = f.changedRes[:0]
	cg := f.someGroups
	for _, g := range cg {
		g.mark = ep
		f.shareAlone(g)
	}
	f.compGroups = cg
	f.counted = true
}

// shareAlone sets the rate of g, alone on its resources, as the filling
// would (shareLone), its resources' peaks, and their counters: cleared,
// then g's flows and rate added (countStats, countBatch), which the
// recompute so need not add. (No other group's counters share a link
// direction with g's: every direction that g counts on is one of its
// resources', and no other group loads them.) A group of one uncapped
// flow, the common case, takes its level, rate and the loads its freeze
// leaves from its route's info, computed once.
func (f *Fabric) shareAlone(g *group) {
	ri := g.ri
	if g.n == 1 && g.cap == 0 && !g.batch && ri.lonePeaked {
		// shareAloneRate's answer for a flow alone whose route's
		// peaks are raised (the common case, a NIC's wire), without
		// the call: the rate is the route's (ri.loneX is ri.level ×
		// ri.share, the operands shareAloneRate multiplies), and the
		// peaks are left as they are.
		if x := ri.loneX; x != g.rate {
			f.setRate(g, x)
		}
	} else if peaks := f.shareAloneRate(g); peaks != nil {
		for j, r := range ri.res {
			res := &f.res[r]
			res.peak = max(res.peak, peaks[j])
		}
	}
	for _, st := range ri.resDirs {
		st.rate, st.n = 0, 0
		if !st.inUsed {
			st.inUsed = true
			f.used = append(f.used, st)
		}
	}
	switch {
	case !g.batch:
		f.countStats(g)
	case ri.countN == g.n && ri.countX == g.rate:
		// The counters as countBatch left them for the route's last
		// batch of this size at this rate, from the same cleared
		// counters: its sums are a function of the two.
		for i, d := range g.dirs {
			d.st.rate = ri.countRates[i]
		}
		for _, d := range g.dirs {
			d.st.n += int32(g.n)
		}
	default:
		f.countBatch(g)
		ri.countN, ri.countX = g.n, g.rate
		ri.countRates = ri.countRates[:0]
		for _, d := range g.dirs {
			ri.countRates = append(ri.countRates, d.st.rate)
		}
	}
}

// shareAloneRate sets g's rate, and returns the utilisations its freeze
// leaves on its resources, or raises their peaks itself, or finds them
// raised to those already, and returns nil.
func (f *Fabric) shareAloneRate(g *group) []float64 {
	ri := g.ri
	reps, k := g.reps()
	fst := f.fst
	level := ri.level
	if g.batch && g.cap == 0 && ri.batchN == g.n {
		// The same batch as the route's last (a DMA engine's burst of
		// writes, again and again).
		if x := ri.batchLevel * g.share; x != g.rate {
			f.setRate(g, x)
		}
		// Its peaks are raised: the route's last batch, of this size,
		// raised them to the utilisations it leaves (below), and a peak
		// never falls (max), so raising them again would leave them
		// as they are.
		return nil
	}
	if g.n != 1 {
		// Each resource's weights summed in load order, × k, as the
		// filling sums a group's (a batch's, once per flow), in the
		// filling state's w, free outside a filling.
		for _, r := range ri.res {
			fst[r].w = 0
		}
		for range reps {
			for _, l := range g.loads {
				fst[l.r].w += l.w * g.share * k
			}
		}
		level = math.Inf(1)
		for _, r := range ri.res {
			level = min(level, f.res[r].cap/fst[r].w)
		}
	}
	var x float64
	if g.cap > 0 && g.cap/g.share <= level {
		x = g.cap
	} else {
		x = level * g.share
	}
	if x != g.rate {
		f.setRate(g, x)
	}
	if g.n == 1 && x == ri.loneX {
		if ri.lonePeaked {
			// As for a batch, above.
			return nil
		}
		ri.lonePeaked = true
		return ri.lonePeak
	}
	for _, r := range ri.res {
		fst[r].rem = f.res[r].cap
	}
	for range reps {
		for _, l := range g.loads {
			fst[l.r].rem -= l.w * x * k
		}
	}
	// The peaks as clearRes raises them.
	if g.batch && g.cap == 0 {
		ri.batchN, ri.batchLevel = g.n, level
	}
	for _, r := range ri.res {
		res := &f.res[r]
		res.peak = max(res.peak, (res.cap-fst[r].rem)/res.cap)
	}
	return nil
}

// endTime is when bytes at rate, from now, are through; sim.Forever when
// that is past the range of sim.Time (about 106 days), where the float to
// int conversion would otherwise wrap.
func endTime(now sim.Time, bytes, rate float64) sim.Time {
	// The quotient of sim.TransferTime, computed once.
	t := bytes / rate * float64(sim.Second)
	if t >= float64(sim.Forever-now) {
		return sim.Forever
	}
	if bytes <= 0 {
		return now
	}
	return now + sim.Time(math.Ceil(t))
}

// arm points the completion timer at t. While no hook listens, it leaves
// the timer to tail to schedule (timerDue), which the recompute's event
// does as its last act.
func (f *Fabric) arm(t sim.Time, hooks bool) {
	if f.eng.Pending(f.timer) {
		if f.timerAt == t {
			return
		}
		f.eng.Cancel(f.timer)
	}
	if t == sim.Forever {
		return
	}
	f.timerAt = t
	if inlineEvents && !hooks {
		f.timerDue = true
		return
	}
	f.timer = f.eng.At(t, f.timerFn)
}

// component collects, from the changed resources and started flows, the
// resources (f.comp) and the groups (f.compGroups, in creation order) of
// their connected component, dropping emptied groups from the members of
// the resources it visits, and clears the changed resources.
func (f *Fabric) component() {
	f.epoch++
	// (Resources loneChanges purged need it no more.)
	ep, drop := f.epoch, f.emptied() && !f.purged
	if f.withinAll() {
		// Every change is within the component that held every group at
		// the last discovery: share that one again. Ends since may have
		// split it; sharing separate components together gives their
		// rates all the same.
		comp := append(f.comp[:0], f.allRes...)
		for _, r := range comp {
			f.res[r].epoch = ep
		}
		for _, r := range f.changedRes {
			f.purge(r, drop)
		}
		f.changedRes = f.changedRes[:0]
		f.comp, f.compGroups = comp, f.groups
		return
	}
	comp := f.comp[:0]
	for _, r := range f.changedRes {
		f.res[r].epoch = ep
		comp = append(comp, r)
	}
	// Only changed resources can hold emptied groups: a flow's end marks
	// its resources.
	nchanged, ngroups, all := len(comp), 0, len(f.groups)
	for _, fl := range f.startedFlows {
		if g := fl.g; fl.state == flowActive && g.mark != ep {
			g.mark = ep
			ngroups++
			for _, ld := range g.loads {
				if res := &f.res[ld.r]; res.epoch != ep {
					res.epoch = ep
					comp = append(comp, ld.r)
				}
			}
		}
	}
	f.changedRes = f.changedRes[:0]
	for i := 0; i < len(comp); i++ {
		if ngroups == all && i >= nchanged {
			// Every group is in, and so every resource they load;
			// nothing past the changed resources needs purging.
			break
		}
		if i < nchanged {
			f.purge(comp[i], drop)
		}
		for _, g := range f.res[comp[i]].members {
			if g.mark == ep {
				continue
			}
			g.mark = ep
			ngroups++
			for _, ld := range g.loads {
				if res := &f.res[ld.r]; res.epoch != ep {
					res.epoch = ep
					comp = append(comp, ld.r)
				}
			}
		}
	}
	f.comp = comp
	if ngroups == all {
		f.allEpoch, f.allRes = ep, append(f.allRes[:0], comp...)
		for _, r := range comp {
			f.res[r].allEpoch = ep
		}
	} else {
		f.allEpoch = 0
	}
	// Creation order, which f.groups keeps: the filling visits groups in
	// it, so that the rates are those of a recompute of every group, bit
	// for bit.
	if ngroups == len(f.groups) {
		f.compGroups = f.groups
		return
	}
	cg := f.someGroups[:0]
	if ngroups > 0 {
		for _, g := range f.groups {
			if g.mark == ep {
				cg = append(cg, g)
			}
		}
	}
	f.compGroups, f.someGroups = cg, cg
}

// purge clears changed resource r's mark and, if drop, drops its
// emptied groups. drop is whether any group emptied since the last
// recompute, which dropped those emptied before it (emptied).
//
// r's members hold a group once per load of it on r, and so do its
// count of loads (nAll), but that an emptied group's end takes its
// loads off the count at once and leaves it among the members until
// here: members that number the count hold no emptied group, and the
// pass over them (reading each group) is skipped. A lone flow's
// resources, purged at its start and again at its end, so take the pass
// once.
func (f *Fabric) purge(r int32, drop bool) {
	res := &f.res[r]
	res.changedMark = false
	if drop && len(res.members) != int(res.nAll) {
		res.members = live(res.members)
	}
}

// emptied reports whether any group emptied since the last recompute.
func (f *Fabric) emptied() bool { return f.freeGroups.waiting() > 0 }

// withinAll reports whether the last discovery found every group in one
// component and every resource changed since is one of its resources.
func (f *Fabric) withinAll() bool {
	if f.allEpoch == 0 {
		return false
	}
	// A started flow's resources are changed ones: activate marks them
	// (a batch's first flow for the batch).
	for _, r := range f.changedRes {
		if f.res[r].allEpoch != f.allEpoch {
			return false
		}
	}
	return true
}

// fill sets the rate of every group of the component by weighted
// progressive filling: all unfrozen flows rise together with one level
// (a flow's rate is the level times its share); a resource saturates when
// the level reaches (capacity left by frozen flows) / (weighted shares of
// its unfrozen flows), and its unfrozen flows freeze there; a capped flow
// freezes alone when the level reaches its cap over its share.
func (f *Fabric) fill() {
	// A small component is filled by scanning its resources at each step,
	// which costs less than keeping a heap when the steps touch most of
	// them; a large one by the heap, whose ties go by first-load order.
	scan := len(f.comp) <= scanMax
	capped, order := f.capped[:0], int32(0)
	if scan && f.unsummed == 0 {
		// Every flow is in the kept sums, which are those the loop
		// below would reach, bit for bit; no group has a cap.
		for _, r := range f.comp {
			res := &f.res[r]
			res.order = -1
			f.fst[r] = fillState{rem: res.cap, w: res.wAll, n: res.nAll}
		}
	} else {
		for _, r := range f.comp {
			res := &f.res[r]
			res.order = -1
			f.fst[r] = fillState{rem: res.cap}
		}
		for _, g := range f.compGroups {
			if g.cap > 0 {
				capped = append(capped, g)
			}
			reps, k := g.reps()
			for range reps - 1 {
				for _, ld := range g.loads {
					f.fst[ld.r].w += ld.w * g.share * k
				}
			}
			for _, ld := range g.loads {
				r := &f.fst[ld.r]
				// × k: exact for a group of one, which so sums as a
				// flow.
				r.w += ld.w * g.share * k
				r.n++
			}
			if !scan {
				for _, ld := range g.loads {
					if r := &f.res[ld.r]; r.order < 0 {
						r.order, order = order, order+1
					}
				}
			}
		}
	}
	ep := f.epoch // a group is frozen once its frozenAt is ep
	// Stable: equal caps keep creation order, for determinism.
	slices.SortStableFunc(capped, func(a, b *group) int { return cmp.Compare(a.cap/a.share, b.cap/b.share) })
	f.scan = scan
	f.heap, f.levels, f.live = f.heap[:0], f.levels[:0], f.live[:0]
	for _, r := range f.comp {
		if fs := &f.fst[r]; fs.n > 0 {
			if f.scan {
				fs.livePos = int32(len(f.live))
				f.live = append(f.live, r)
				f.levels = append(f.levels, fs.rem/fs.w)
				continue
			}
			res := &f.res[r]
			res.ver++
			f.heapPush(levelEntry{level: fs.rem / fs.w, order: res.order, r: r, ver: res.ver})
		}
	}

	if f.scan {
		// Every bit is clear: dropDead clears those it reads, and
		// the end of the filling those of its last step.
		if nw := (len(f.live) + 63) / 64; nw > len(f.deadBits) {
			f.deadBits = make([]uint64, nw)
		}
	}
	unfrozen, level, ci := len(f.compGroups), 0.0, 0
	for unfrozen > 0 {
		best, bestLevel := f.lowest()
		for ci < len(capped) && capped[ci].frozenAt == ep {
			ci++
		}
		if ci < len(capped) && capped[ci].cap/capped[ci].share <= bestLevel {
			if g := capped[ci]; g.cap != g.rate {
				f.setRate(g, g.cap)
			}
			if scan {
				f.freezeScanned(capped[ci], capped[ci].cap)
			} else {
				f.freeze(capped[ci], capped[ci].cap)
				f.settle()
			}
			unfrozen--
			ci++
			continue
		}
		// best ≥ 0 here: an active flow has a load or a cap (activate
		// ends at once a flow that has neither), so an unfrozen uncapped
		// flow keeps a resource in the heap. Rounding can put a level a
		// hair below the one already reached; the level never goes down.
		level = max(level, bestLevel)
		for _, g := range f.res[best].members {
			if g.frozenAt != ep && g.n > 0 {
				x := level * g.share
				if x != g.rate {
					f.setRate(g, x)
				}
				if scan {
					f.freezeScanned(g, x)
				} else {
					f.freeze(g, x)
				}
				unfrozen--
			}
		}
		if !scan {
			f.settle()
		}
	}
	if f.dead {
		clear(f.deadBits)
		f.dead = false
	}
	f.heap = f.heap[:0]
	f.capped = capped
	clear(capped) // drop pointers to groups that may empty
}

// freeze takes g's loads at its new rate x off the unfrozen sums.
// Its resources' levels are restored by settle, once per step however
// many of a resource's groups froze in it.
func (f *Fabric) freeze(g *group, x float64) {
	g.frozenAt = f.epoch
	reps, k := g.reps()
	for range reps - 1 {
		for _, ld := range g.loads {
			fs := &f.fst[ld.r]
			fs.rem -= ld.w * x * k
			fs.w -= ld.w * g.share * k
		}
	}
	for _, ld := range g.loads {
		fs := &f.fst[ld.r]
		fs.rem -= ld.w * x * k
		fs.w -= ld.w * g.share * k
		fs.n--
		if r := &f.res[ld.r]; !r.moved {
			r.moved = true
			f.moved = append(f.moved, ld.r)
		}
	}
}

// freezeScanned is freeze in a scanned filling: it sets the new level of
// each resource it leaves with unfrozen loads in f.levels (the last such
// write of a step has the level that the step leaves), and marks the
// positions in f.live of those it leaves with none in f.deadBits, for
// lowest to drop.
func (f *Fabric) freezeScanned(g *group, x float64) {
	g.frozenAt = f.epoch
	k, share := float64(g.n), g.share
	res, levels := f.fst, f.levels
	if g.batch {
		k = f.freezeBatch(g, x)
	}
	if g.unitLoads {
		// 1×x×k is x×k and 1×share×k is share×k, bit for bit.
		xk, sk := x*k, share*k
		for _, ld := range g.loads {
			r := &res[ld.r]
			rem, w, n := r.rem-xk, r.w-sk, r.n-1
			r.rem, r.w, r.n = rem, w, n
			if n > 0 {
				levels[r.livePos] = rem / w
			} else {
				f.deadBits[r.livePos>>6] |= 1 << (r.livePos & 63)
				f.dead = true
			}
		}
		return
	}
	for _, ld := range g.loads {
		r := &res[ld.r]
		rem, w, n := r.rem-ld.w*x*k, r.w-ld.w*share*k, r.n-1
		r.rem, r.w, r.n = rem, w, n
		if n > 0 {
			levels[r.livePos] = rem / w
		} else {
			f.deadBits[r.livePos>>6] |= 1 << (r.livePos & 63)
			f.dead = true
		}
	}
}

// freezeBatch takes the terms of batch g's flows but its last off the
// unfrozen sums, one flow after the other, as groups of one each would
// be (freezeScanned takes the last, and sets the levels), and returns the
// k of a group of one.
func (f *Fabric) freezeBatch(g *group, x float64) float64 {
	res := f.fst
	for range g.n - 1 {
		for _, ld := range g.loads {
			r := &res[ld.r]
			r.rem, r.w = r.rem-ld.w*x*1, r.w-ld.w*g.share*1
		}
	}
	return 1
}

// setRate gives g its new rate x. A group whose rate is unchanged does
// not come here and keeps its members' ends, which so stay exact, free of
// the rounding that advancing its progress adds. (fab.last is now:
// recompute set it.)
func (f *Fabric) setRate(g *group, x float64) {
	g.rate, g.setAt, g.leftAt, g.changed = x, f.last, g.left, true
	f.rateChanged = true
}

// scanMax is the most resources a component may have for fill to find
// each step's lowest level by a scan rather than from the heap. A step
// that freezes flows spread over most resources moves most heap entries,
// and then a scan is cheaper: with 1,000 flows over 544 resources the
// scan takes a third of the heap's time, while at 4,000 resources the
// heap takes a twentieth of the scan's. (A variable so that tests can
// send every component through the heap.)
var scanMax = 1024

// lowest is the resource of lowest level with unfrozen flows and its
// level, or -1 and +Inf.
func (f *Fabric) lowest() (int32, float64) {
	if !f.scan {
		return f.top()
	}
	if f.dead {
		f.dropDead()
	}
	best, bestLevel := -1, math.Inf(1)
	for i, l := range f.levels {
		if l < bestLevel {
			best, bestLevel = i, l
		}
	}
	if best < 0 {
		return -1, bestLevel
	}
	return f.live[best], bestLevel
}

// dropDead takes the resources left with no unfrozen loads out of the
// scanned ones: in order of position, each replaced by the last (and
// that one dropped at once if it is dead too). The order of the scan so
// stays that of a scan which drops dead resources as it meets them, and
// so does the choice among equal levels: the first in that order.
//
// f.deadBits marks their positions, which no drop has moved since the
// freezes that marked them, and its words are read in order of position.
// A position that a drop has cut off the end of live by then held a
// resource pulled into an earlier hole and dropped there (only dead ones
// are dropped), so it is past the end and skipped. A bitmap rather than
// a sorted list: the last step of a filling may leave most resources
// dead at once.
func (f *Fabric) dropDead() {
	live, levels, res := f.live, f.levels, f.fst
	for wi, word := range f.deadBits[:(len(live)+63)/64] {
		if word == 0 {
			continue
		}
		f.deadBits[wi] = 0
		for ; word != 0; word &= word - 1 {
			p := int32(wi*64 + bits.TrailingZeros64(word))
			for int(p) < len(live) && res[live[p]].n == 0 {
				gone, last := live[p], len(live)-1
				live[p], levels[p] = live[last], levels[last]
				res[live[p]].livePos = p
				res[gone].livePos = -1
				live, levels = live[:last], levels[:last]
			}
		}
	}
	f.live, f.levels, f.dead = live, levels, false
}

// settle gives each resource whose level changed in the last step of a
// heap filling a new heap entry at its new level; its old entries are
// stale from now on.
func (f *Fabric) settle() {
	for _, r := range f.moved {
		res, fs := &f.res[r], &f.fst[r]
		res.moved = false
		res.ver++
		if fs.n > 0 {
			f.heapPush(levelEntry{level: fs.rem / fs.w, order: res.order, r: r, ver: res.ver})
		}
	}
	f.moved = f.moved[:0]
}

// levelEntry is a resource's level when it was pushed; it is stale once
// the resource's ver has moved on.
type levelEntry struct {
	level float64
	order int32 // first-load order in the component, for ties
	r     int32
	ver   uint32
}

func (a levelEntry) less(b levelEntry) bool {
	if a.level != b.level {
		return a.level < b.level
	}
	return a.order < b.order
}

// top is the resource of lowest level with unfrozen flows and its level,
// or -1 and +Inf; stale entries on the way are dropped.
func (f *Fabric) top() (int32, float64) {
	for len(f.heap) > 0 {
		e := f.heap[0]
		if f.res[e.r].ver == e.ver && f.fst[e.r].n > 0 {
			return e.r, e.level
		}
		f.heapPop()
	}
	return -1, math.Inf(1)
}

func (f *Fabric) heapPush(e levelEntry) {
	h := append(f.heap, e)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	f.heap = h
}

func (f *Fabric) heapPop() {
	h := f.heap
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && h[c+1].less(h[c]) {
			c++
		}
		if !h[c].less(h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	f.heap = h
}

// checkShare verifies max-min optimality of the current rates: no resource
// carries more than its capacity, and every active flow is at its cap or
// crosses a saturated resource where no flow has a higher rate per unit
// of share (the rate itself under plain max-min). It
// recomputes loads from scratch, flow by flow, independently of share's
// bookkeeping.
func (f *Fabric) checkShare() error {
	const tol = 1e-9
	load := make([]float64, len(f.res))
	top := make([]float64, len(f.res))
	flows := f.activeFlows()
	for _, fl := range flows {
		for _, ld := range fl.loads {
			load[ld.r] += ld.w * fl.Rate()
			top[ld.r] = max(top[ld.r], fl.Rate()/fl.share)
		}
	}
	for i, r := range f.res {
		if load[i] > r.cap*(1+tol) {
			return fmt.Errorf("fabric: link %s: load %g B/s over capacity %g", r.link.name, load[i], r.cap)
		}
	}
	for _, fl := range flows {
		rate := fl.Rate()
		if !(rate > 0) {
			return fmt.Errorf("fabric: flow %s: rate %g", fl.name, rate)
		}
		if fl.cap > 0 && rate >= fl.cap*(1-tol) {
			if rate > fl.cap*(1+tol) {
				return fmt.Errorf("fabric: flow %s: rate %g over its cap %g", fl.name, rate, fl.cap)
			}
			continue
		}
		ok := false
		for _, ld := range fl.loads {
			if load[ld.r] >= f.res[ld.r].cap*(1-tol) && rate/fl.share >= top[ld.r]*(1-tol) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("fabric: flow %s at %g B/s has no bottleneck", fl.name, rate)
		}
	}
	return nil
}

// activeFlows are the active flows in activation order (O(F log F): for
// checks and tests).
func (f *Fabric) activeFlows() []*Flow {
	var flows []*Flow
	for _, g := range f.groups {
		flows = append(flows, g.members...)
	}
	slices.SortFunc(flows, func(a, b *Flow) int { return cmp.Compare(a.seq, b.seq) })
	return flows
}

// Unending counts the active flows that cannot end within the range of
// sim.Time at their current rate (about 106 days of virtual time): a run
// that stops with such a flow asked for more virtual time than the model
// has, which is bad input, not a deadlock.
func (f *Fabric) Unending() int {
	n := 0
	for _, g := range f.groups {
		for _, fl := range g.members {
			if g.endOf(fl) == sim.Forever {
				n++
			}
		}
	}
	return n
}

// recomputeEvent is the recompute's event.
func (f *Fabric) recomputeEvent() {
	f.recompute()
	f.tail()
}

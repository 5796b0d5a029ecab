package fabric

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// checkInvariants turns on the max-min optimality check after every
// recompute (O(F·H·R)); tests call checkShare directly.
const checkInvariants = false

// markDirty schedules one recompute at the current instant, however many
// flows become active or end at it.
func (f *Fabric) markDirty() {
	if !f.pending {
		f.pending = true
		f.eng.At(f.eng.Now(), f.recomputeFn)
	}
}

// recompute brings every active flow's progress up to now, shares the
// capacity anew, reschedules the ends of the flows whose rate changed and
// re-arms the completion timer for the earliest end.
//
// Cost: O(F·H + R·S) for F active flows of at most H loads, R loaded
// resources and S filling steps, S ≤ R + C for C capped flows (each step
// freezes a resource or a capped flow), plus O(C log C) to order the caps.
// The single completion timer keeps event-queue work out of it: one
// cancel and one insert per recompute, not one per changed flow.
func (f *Fabric) recompute() {
	f.pending = false
	f.recomputes++
	now := f.eng.Now()
	if dt := now - f.last; dt > 0 {
		s := float64(dt)
		for _, fl := range f.active {
			fl.remaining -= fl.rate * s / float64(sim.Second)
		}
		f.advanceStats(dt)
	}
	f.last = now

	f.share()

	next := sim.Forever
	changed := false
	for _, fl := range f.active {
		// A flow whose rate is unchanged keeps its end, which so stays
		// exact, free of the rounding that advancing its progress adds.
		fl.changed = fl.newRate != fl.rate
		if fl.changed {
			fl.rate = fl.newRate
			fl.endAt = endTime(now, fl.remaining, fl.rate)
			changed = true
		}
		next = min(next, fl.endAt)
	}
	f.restartStats()
	f.arm(next)
	if checkInvariants {
		if err := f.checkShare(); err != nil {
			panic(err)
		}
	}
	if changed && f.Hooks.Active() {
		// Observers see a consistent fabric: rates, ends and the timer
		// are all set before the first FlowRate.
		for _, fl := range f.active {
			if fl.changed {
				f.emit(Event{Header: sim.Header{Time: now}, Kind: FlowRate, Flow: fl, Rate: fl.rate})
			}
		}
	}
}

// endTime is when bytes at rate, from now, are through; sim.Forever when
// that is past the range of sim.Time (about 106 days), where the float to
// int conversion would otherwise wrap.
func endTime(now sim.Time, bytes, rate float64) sim.Time {
	if bytes/rate*float64(sim.Second) >= float64(sim.Forever-now) {
		return sim.Forever
	}
	return now + sim.TransferTime(bytes, rate)
}

// arm points the completion timer at t.
func (f *Fabric) arm(t sim.Time) {
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
	f.timer = f.eng.At(t, f.timerFn)
}

// share sets newRate of every active flow by weighted progressive
// filling: all unfrozen flows rise together at one level; a resource
// saturates when the level reaches (capacity left by frozen flows) /
// (weights of its unfrozen flows), and its unfrozen flows freeze there; a
// capped flow freezes alone when the level reaches its cap.
func (f *Fabric) share() {
	f.epoch++
	touched, capped := f.touched[:0], f.capped[:0]
	for _, fl := range f.active {
		fl.frozen, fl.newRate = false, 0
		if fl.cap > 0 {
			capped = append(capped, fl)
		}
		for _, ld := range fl.loads {
			r := &f.res[ld.r]
			if r.epoch != f.epoch {
				r.epoch, r.rem, r.w, r.n, r.flows = f.epoch, r.cap, 0, 0, r.flows[:0]
				touched = append(touched, ld.r)
			}
			r.w += ld.w
			r.n++
			r.flows = append(r.flows, fl)
		}
	}
	// Stable: equal caps keep activation order, for determinism.
	slices.SortStableFunc(capped, func(a, b *Flow) int { return cmp.Compare(a.cap, b.cap) })
	live := append(f.live[:0], touched...)

	unfrozen, level, ci := len(f.active), 0.0, 0
	for unfrozen > 0 {
		best, bestLevel := int32(-1), math.Inf(1)
		for i := 0; i < len(live); {
			r := &f.res[live[i]]
			if r.n == 0 {
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
				continue
			}
			if l := r.rem / r.w; l < bestLevel {
				best, bestLevel = live[i], l
			}
			i++
		}
		for ci < len(capped) && capped[ci].frozen {
			ci++
		}
		if ci < len(capped) && capped[ci].cap <= bestLevel {
			unfrozen -= f.freeze(capped[ci], capped[ci].cap)
			ci++
			continue
		}
		// best ≥ 0 here: an active flow has a load or a cap (activate
		// ends at once a flow that has neither), so an unfrozen uncapped
		// flow keeps a resource live. Rounding can put a level a hair
		// below the one already reached; the level never goes down.
		level = max(level, bestLevel)
		for _, fl := range f.res[best].flows {
			if !fl.frozen {
				unfrozen -= f.freeze(fl, level)
			}
		}
	}
	f.touched, f.capped, f.live = touched, capped, live
	clear(capped) // drop pointers to flows that may end
}

// freeze fixes fl's rate at x and takes its loads off the unfrozen sums.
// It returns 1, the number of flows frozen.
func (f *Fabric) freeze(fl *Flow, x float64) int {
	fl.frozen, fl.newRate = true, x
	for _, ld := range fl.loads {
		r := &f.res[ld.r]
		r.rem -= ld.w * x
		r.w -= ld.w
		r.n--
	}
	return 1
}

// checkShare verifies max-min optimality of the current rates: no resource
// carries more than its capacity, and every active flow is at its cap or
// crosses a saturated resource where no flow has a higher rate. It
// recomputes loads from scratch, independently of share's bookkeeping.
func (f *Fabric) checkShare() error {
	const tol = 1e-9
	load := make([]float64, len(f.res))
	top := make([]float64, len(f.res))
	for _, fl := range f.active {
		for _, ld := range fl.loads {
			load[ld.r] += ld.w * fl.rate
			top[ld.r] = max(top[ld.r], fl.rate)
		}
	}
	for i, r := range f.res {
		if load[i] > r.cap*(1+tol) {
			return fmt.Errorf("fabric: link %s: load %g B/s over capacity %g", r.link.name, load[i], r.cap)
		}
	}
	for _, fl := range f.active {
		if !(fl.rate > 0) {
			return fmt.Errorf("fabric: flow %s: rate %g", fl.name, fl.rate)
		}
		if fl.cap > 0 && fl.rate >= fl.cap*(1-tol) {
			if fl.rate > fl.cap*(1+tol) {
				return fmt.Errorf("fabric: flow %s: rate %g over its cap %g", fl.name, fl.rate, fl.cap)
			}
			continue
		}
		ok := false
		for _, ld := range fl.loads {
			if load[ld.r] >= f.res[ld.r].cap*(1-tol) && fl.rate >= top[ld.r]*(1-tol) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("fabric: flow %s at %g B/s has no bottleneck", fl.name, fl.rate)
		}
	}
	return nil
}

// Unending counts the active flows that cannot end within the range of
// sim.Time at their current rate (about 106 days of virtual time): a run
// that stops with such a flow asked for more virtual time than the model
// has, which is bad input, not a deadlock.
func (f *Fabric) Unending() int {
	n := 0
	for _, fl := range f.active {
		if fl.endAt == sim.Forever {
			n++
		}
	}
	return n
}

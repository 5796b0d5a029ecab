package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Engine is the discrete-event scheduler: a clock and a queue of events
// ordered by (time, sequence number). The sequence number is the order in
// which events were scheduled, so two events at the same instant run in
// the order they were created, and a run is a pure function of its inputs
// and seed.
//
// An Engine is not safe for concurrent use: models run on one goroutine
// at a time (processes are coroutines, not threads).
type Engine struct {
	now Time
	seq uint64
	// queue is a heap of the events scheduled for a later instant than
	// the one they were scheduled at; lane[laneHead:] are those
	// scheduled for the very instant they were scheduled at (a process
	// woken, a recompute at once), which is now, in the order they were
	// scheduled. Every event of the heap due now was scheduled before
	// the clock reached now, so before every event of the lane: the heap's
	// events due now run first, then the lane's, then the heap's later
	// ones, which is (time, sequence number) order without the heap's
	// work for the lane's events. The lane is empty whenever the clock
	// moves.
	queue    []*event
	lane     []*event
	laneHead int
	free     []*event
	rng      *rand.Rand

	running *process // the process executing now, nil in event context
	live    []*process
	spawned uint64
	fired   uint64

	// CPU receives a CPUWork for every span of CPU time a process
	// spends (Sleep) or is charged (Charge): the tracer's CPU tracks.
	CPU   Hooks[CPUWork]
	cpuEv CPUWork

	// loop is the run loop that runs the event under way, if any: what
	// Proc.Sleep needs to know that the event it schedules is the loop's
	// next.
	loop runLoop
	// shortcuts counts the resumes skipAhead ran without the event loop.
	shortcuts uint64
	// pool keeps the coroutines of processes that returned, for the
	// next processes to run on (coroPool).
	pool *coroPool
	// ahead is the process whose Sleep runs the loop's events on its own
	// coroutine now (Proc.RunAhead), nil when none does; aheads counts
	// the sleeps that ended so. Its resume is not queued while it runs
	// ahead: aheadAt is when it is due, one more queued event for
	// skipAhead.
	ahead   *Proc
	aheadAt Time
	aheads  uint64
	// aheadWake is the resume of the process that waits ahead
	// (waitAhead), once the completion it waits on has woken it;
	// waitAheads counts the waits that ended so.
	aheadWake  *event
	waitAheads uint64
}

type event struct {
	at  Time
	seq uint64
	fn  func()
	idx int // position in the heap, inLane in the lane, -1 once out of both
}

// inLane is the idx of an event in the lane.
const inLane = math.MaxInt

// runLoop describes the loop (Run, RunUntil, Guard) that runs the event
// under way: after it, the loop runs the first event of the queue if
// that is at or before limit and fewer than stop events have fired. The
// zero runLoop, stop 0, is no loop (Step, or no run at all). A loop
// restores the runLoop it found when it returns, so that an event that
// runs a loop of its own goes on under its own loop's.
type runLoop struct {
	limit Time
	stop  uint64
}

// Handle names a scheduled event so that it can be cancelled.
type Handle struct {
	ev  *event
	seq uint64
}

// New returns an engine at time 0 whose RNG is seeded with seed.
func New(seed uint64) *Engine {
	e := &Engine{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	e.pool = newPool(e)
	return e
}

// Now is the current virtual time.
func (e *Engine) Now() Time { return e.now }

// Rand is the engine's seeded random source. Models draw from it only in
// event order, so draws are reproducible.
func (e *Engine) Rand() *rand.Rand { return e.rng }

// Fired counts the events run so far.
func (e *Engine) Fired() uint64 { return e.fired }

// At schedules fn at time t. Scheduling into the past is a model bug and
// panics.
func (e *Engine) At(t Time, fn func()) Handle {
	if t < e.now {
		panic(fmt.Sprintf("sim: event scheduled at %v, in the past (now %v)", t, e.now))
	}
	var ev *event
	if n := len(e.free); n > 0 {
		ev, e.free = e.free[n-1], e.free[:n-1]
	} else {
		ev = new(event)
	}
	e.seq++
	if t == e.now && sameInstantLane {
		*ev = event{at: t, seq: e.seq, fn: fn, idx: inLane}
		e.lane = append(e.lane, ev)
		return Handle{ev, ev.seq}
	}
	*ev = event{at: t, seq: e.seq, fn: fn, idx: len(e.queue)}
	e.queue = append(e.queue, ev)
	e.up(ev.idx)
	return Handle{ev, ev.seq}
}

// push queues fn at t on the heap with sequence number seq, taken
// earlier (runAhead).
func (e *Engine) push(t Time, seq uint64, fn func()) {
	var ev *event
	if n := len(e.free); n > 0 {
		ev, e.free = e.free[n-1], e.free[:n-1]
	} else {
		ev = new(event)
	}
	*ev = event{at: t, seq: seq, fn: fn, idx: len(e.queue)}
	e.queue = append(e.queue, ev)
	e.up(ev.idx)
}

// sameInstantLane turns the lane on. (A variable so that tests can run
// the same model with every event through the heap.)
var sameInstantLane = true

// next is the event the engine runs next, nil when none is queued.
func (e *Engine) next() *event {
	if len(e.queue) > 0 && (e.queue[0].at == e.now || e.laneHead == len(e.lane)) {
		return e.queue[0]
	}
	if e.laneHead < len(e.lane) {
		return e.lane[e.laneHead]
	}
	return nil
}

// take removes ev, the event next returned, from the lane or the heap.
func (e *Engine) take(ev *event) {
	if ev.idx == inLane {
		e.takeLane()
		return
	}
	last := len(e.queue) - 1
	e.swap(0, last)
	e.queue = e.queue[:last]
	if last > 0 {
		e.down(0)
	}
}

// takeLane removes the lane's first event.
func (e *Engine) takeLane() {
	e.lane[e.laneHead] = nil
	e.laneHead++
	if e.laneHead == len(e.lane) {
		e.lane, e.laneHead = e.lane[:0], 0
	}
}

// After schedules fn d after now.
func (e *Engine) After(d Time, fn func()) Handle { return e.At(e.now+d, fn) }

// Cancel removes a pending event. It reports false when the event already
// ran or was cancelled.
func (e *Engine) Cancel(h Handle) bool {
	ev := h.ev
	if ev == nil || ev.seq != h.seq || ev.idx < 0 {
		return false
	}
	if ev.idx == inLane {
		i := e.laneHead
		for e.lane[i] != ev {
			i++
		}
		copy(e.lane[i:], e.lane[i+1:])
		e.lane[len(e.lane)-1] = nil
		e.lane = e.lane[:len(e.lane)-1]
		if e.laneHead == len(e.lane) {
			e.lane, e.laneHead = e.lane[:0], 0
		}
		e.release(ev)
		return true
	}
	i, last := ev.idx, len(e.queue)-1
	if i != last {
		e.swap(i, last)
	}
	e.queue = e.queue[:last]
	if i != last {
		e.down(i)
		e.up(i)
	}
	e.release(ev)
	return true
}

// Pending reports whether an event is still waiting to run.
func (e *Engine) Pending(h Handle) bool {
	return h.ev != nil && h.ev.seq == h.seq && h.ev.idx >= 0
}

func (e *Engine) release(ev *event) {
	ev.idx, ev.fn, ev.seq = -1, nil, 0
	e.free = append(e.free, ev)
}

// Step runs the next event, if any, and reports whether it ran one. It
// is no run loop, even when an event of one calls it.
func (e *Engine) Step() bool {
	e.noLoopAhead()
	return e.step(Forever, 0)
}

// noLoopAhead panics when an event run ahead by a sleeping process
// (Proc.RunAhead) runs the engine itself: the sleeper's resume may be
// among the events that loop would run, and a coroutine cannot resume
// itself.
func (e *Engine) noLoopAhead() {
	if e.ahead != nil {
		panic("sim: an event ran the engine (Step, Run, RunUntil or Guard) while process " + e.ahead.name + " ran events ahead in its sleep (Proc.RunAhead)")
	}
}

// step runs the next event if it is at or before limit. A run loop
// calls it with the most events that may have fired when the loop would
// run another (stop), which the event finds in e.loop; Step, which is no
// loop, with 0.
func (e *Engine) step(limit Time, stop uint64) bool {
	ev := e.next()
	if ev == nil || ev.at > limit {
		return false
	}
	// fire's and run's body, written out: the run loop pays no call
	// for it (fire is past the inlining budget).
	e.take(ev)
	e.now = ev.at
	fn := ev.fn
	e.release(ev)
	e.fired++
	e.loop = runLoop{limit: limit, stop: stop}
	fn()
	return true
}

// fire takes ev, the event next returned, off the queue as running it
// does (the clock to its time, the count of fired events) and returns
// its function, for the caller to run or to do at once.
func (e *Engine) fire(ev *event) func() {
	e.take(ev)
	e.now = ev.at
	fn := ev.fn
	e.release(ev)
	e.fired++
	return fn
}

// run runs ev, the event next returned, due at or before limit, as step
// does: a run ahead, which has found it already, calls it directly.
func (e *Engine) run(ev *event, limit Time, stop uint64) {
	fn := e.fire(ev)
	e.loop = runLoop{limit: limit, stop: stop}
	fn()
}

// skipAhead reports whether n events scheduled one after the other,
// the last d from now, each when the one before it runs, would each be
// the one the run loop under way runs next, once the event running now
// returns: the loop goes on (its limit, its event budget) and no queued
// event is due by then (one due at the same instant was scheduled
// earlier, and so runs first). If so it does what scheduling and running
// those events would: the sequence numbers they would take, the clock, the
// count of fired events; its caller then does at once what the event
// would have done.
func (e *Engine) skipAhead(n uint64, d Time) bool {
	t := e.now + d
	if n == 0 || e.loop.stop-e.fired < n || !sleepShortcut || t < e.now || !e.nextAt(t) {
		return false
	}
	e.seq += n
	e.now = t
	e.fired += n
	e.shortcuts += n
	return true
}

// nextAt reports whether the run loop under way would run an event at t
// (not before now) next: its event budget is not spent, t is within its
// limit, and no event of the heap, the lane or a process running ahead
// is due by t. (Small enough to be inlined: Sleep asks it on every
// sleep.)
func (e *Engine) nextAt(t Time) bool {
	return e.fired < e.loop.stop && t <= e.loop.limit && e.laneHead == len(e.lane) &&
		(len(e.queue) == 0 || e.queue[0].at > t) && (e.ahead == nil || e.aheadAt > t)
}

// RunsNext and TakeNext let a component do work of its own that it would
// otherwise schedule, or has scheduled, as an event at once, as the last
// thing the event running now does, when that event would be the next
// the run loop under way runs: nothing runs in between either way, so no
// one can tell the difference, and the event's scheduling and running
// are spared (the fabric's recomputes, activations and completion timer).
// Both do what scheduling and running the event would do to the engine's
// state (the sequence number, the count of fired events, the clock, which
// moves to the event's time) and report true; the caller must then do
// the event's work at once. They report false, and do nothing, from a
// process (its caller is not the last thing an event does), under Step
// (which is no loop), and when the loop would stop first (its limit, its
// event budget) or run another event first.

// RunsNext reports whether an event that the event running now would
// schedule at t (not before now), as the last thing it does, would be the
// next event the run loop under way runs: no other event is due by t
// (those due by then were all scheduled before it, and so would run
// first).
func (e *Engine) RunsNext(t Time) bool {
	if t < e.now || e.running != nil || !e.nextAt(t) {
		return false
	}
	e.seq++
	e.fired++
	e.now = t
	return true
}

// TakeNext reports whether h's event is the next event the run loop under
// way runs once the event running now returns; if so it takes it off the
// queue, and the caller does its work.
func (e *Engine) TakeNext(h Handle) bool {
	ev := h.ev
	if ev == nil || ev.seq != h.seq || e.running != nil || e.fired >= e.loop.stop ||
		ev.at > e.loop.limit || e.ahead != nil && e.aheadAt <= ev.at {
		return false
	}
	// next() != ev and fire, written out for where ev is: at the heap's
	// top it is next when due now or the lane is empty; first in the
	// lane, when no event of the heap is due now. (Each call spared
	// counts: a received packet takes an event or two so.)
	switch ev.idx {
	case 0:
		if ev.at != e.now && e.laneHead < len(e.lane) {
			return false
		}
		last := len(e.queue) - 1
		e.swap(0, last)
		e.queue = e.queue[:last]
		if last > 0 {
			e.down(0)
		}
	case inLane:
		if e.lane[e.laneHead] != ev || len(e.queue) > 0 && e.queue[0].at == e.now {
			return false
		}
		e.takeLane()
	default:
		// Deeper in the heap (not next), or no longer queued.
		return false
	}
	e.now = ev.at
	e.release(ev)
	e.fired++
	return true
}

// runAhead runs, on the coroutine of p, which sleeps for d > 0, the
// events that the loop under way would run before p's resume, one by one
// as the loop would (step, with the loop's limit and event budget, no
// process running); then, if the loop would run the resume next, it does
// what scheduling and running it would (its sequence number, the clock,
// the fired count) and reports true: p goes on without having left its
// coroutine. It reports false when the loop would stop first (its limit,
// its budget), having queued the resume with the sequence number it took
// at the start: p must block. The resume is queued only then: until
// then its time and sequence number stand for it, which order it among
// the queued events as the heap would (skipAhead counts it too, through
// aheadAt). The events run in the order, at the times and with the loop
// state they would have had; only the stack they run on differs, which
// no model sees, apart from an event that runs the engine itself
// (noLoopAhead).
func (e *Engine) runAhead(p *Proc, d Time) bool {
	at := e.now + d
	e.seq++
	seq := e.seq
	e.ahead, e.aheadAt, e.running = p, at, nil
	p.state, p.waiting = procBlocked, asleep{}
	ok := false
	for {
		lp := e.loop
		if top := e.next(); top != nil && (top.at < at || top.at == at && top.seq < seq) {
			if top.at > lp.limit || e.fired >= lp.stop {
				break
			}
			e.run(top, lp.limit, lp.stop)
			continue
		}
		// The resume is next.
		if at > lp.limit || e.fired >= lp.stop {
			break
		}
		e.now = at
		e.fired++
		e.aheads++
		ok = true
		break
	}
	e.ahead, e.running = nil, &p.process
	p.state, p.waiting = procRunning, nil
	if !ok {
		// Due after now (d > 0) or, if now, before every event of the
		// lane (scheduled after it): the heap's place for it.
		e.push(at, seq, p.resumeFn)
	}
	return ok
}

// waitAhead is runAhead for p, marked RunAhead, waiting on c: it runs, on
// p's coroutine, the events the loop under way would run while p is
// blocked, one by one as the loop would, until c's completion has woken p
// (wake queues p's resume as it always does, and notes it in aheadWake)
// and that resume is the loop's next event; then it takes the resume off
// the queue as step would (the clock, the fired count) and reports true.
// It reports false when the loop would stop first (its limit, its
// budget, or no event left): p must block, its resume queued if it was
// woken. skipAhead needs no stand-in here (aheadAt is Forever): the
// resume, once there is one, is queued like any event.
func (e *Engine) waitAhead(p *Proc, c *Completion) bool {
	e.ahead, e.aheadAt, e.aheadWake, e.running = p, Forever, nil, nil
	p.state, p.waiting = procBlocked, c
	ok := false
	for {
		lp := e.loop
		top := e.next()
		if top == nil || top.at > lp.limit || e.fired >= lp.stop {
			break
		}
		if top == e.aheadWake {
			e.fire(top)
			e.waitAheads++
			ok = true
			break
		}
		e.run(top, lp.limit, lp.stop)
	}
	e.ahead, e.aheadWake, e.running = nil, nil, &p.process
	p.state, p.waiting = procRunning, nil
	return ok
}

// sleepShortcut turns skipAhead on. (A variable so that tests can run the
// same model with every resume through the event loop.)
var sleepShortcut = true

// Run runs events until none is left.
func (e *Engine) Run() {
	e.noLoopAhead()
	outer := e.loop
	defer func() { e.loop = outer }()
	for e.step(Forever, math.MaxUint64) {
	}
}

// RunUntil runs every event at or before t, then sets the clock to t (if
// t is not in the past).
func (e *Engine) RunUntil(t Time) {
	e.noLoopAhead()
	outer := e.loop
	defer func() { e.loop = outer }()
	for e.step(t, math.MaxUint64) {
	}
	if t > e.now {
		e.now = t
	}
}

func (e *Engine) less(i, j int) bool {
	a, b := e.queue[i], e.queue[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (e *Engine) swap(i, j int) {
	q := e.queue
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}

func (e *Engine) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(i, p) {
			return
		}
		e.swap(i, p)
		i = p
	}
}

func (e *Engine) down(i int) {
	n := len(e.queue)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && e.less(r, l) {
			m = r
		}
		if !e.less(m, i) {
			return
		}
		e.swap(i, m)
		i = m
	}
}

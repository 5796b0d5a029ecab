// Code generated for the tests: the engine of commit f617116 (engine.go,
// proc.go, coro.go, step.go, guard.go) with its package-level names
// prefixed with ref and its comments left out, the reference that
// TestEngineMatchesRef runs random models on. Not to be edited, but
// generated anew from that commit if the reference must change.

package sim

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
)

type refEngine struct {
	now Time
	seq uint64

	queue    []*refevent
	lane     []*refevent
	laneHead int
	free     []*refevent
	rng      *rand.Rand

	running *refprocess
	live    []*refprocess
	spawned uint64
	fired   uint64

	CPU   Hooks[refCPUWork]
	cpuEv refCPUWork

	loop refrunLoop

	shortcuts uint64

	pool *refcoroPool

	ahead   *refProc
	aheadAt Time
	aheads  uint64

	aheadWake  *refevent
	waitAheads uint64
}

type refevent struct {
	at  Time
	seq uint64
	fn  func()
	idx int
}

const refinLane = math.MaxInt

type refrunLoop struct {
	limit Time
	stop  uint64
}

type refHandle struct {
	ev  *refevent
	seq uint64
}

func refNew(seed uint64) *refEngine {
	e := &refEngine{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	e.pool = refnewPool(e)
	return e
}

func (e *refEngine) Now() Time { return e.now }

func (e *refEngine) Rand() *rand.Rand { return e.rng }

func (e *refEngine) Fired() uint64 { return e.fired }

func (e *refEngine) At(t Time, fn func()) refHandle {
	if t < e.now {
		panic(fmt.Sprintf("sim: event scheduled at %v, in the past (now %v)", t, e.now))
	}
	var ev *refevent
	if n := len(e.free); n > 0 {
		ev, e.free = e.free[n-1], e.free[:n-1]
	} else {
		ev = new(refevent)
	}
	e.seq++
	if t == e.now && refsameInstantLane {
		*ev = refevent{at: t, seq: e.seq, fn: fn, idx: refinLane}
		e.lane = append(e.lane, ev)
		return refHandle{ev, ev.seq}
	}
	*ev = refevent{at: t, seq: e.seq, fn: fn, idx: len(e.queue)}
	e.queue = append(e.queue, ev)
	e.up(ev.idx)
	return refHandle{ev, ev.seq}
}

func (e *refEngine) push(t Time, seq uint64, fn func()) {
	var ev *refevent
	if n := len(e.free); n > 0 {
		ev, e.free = e.free[n-1], e.free[:n-1]
	} else {
		ev = new(refevent)
	}
	*ev = refevent{at: t, seq: seq, fn: fn, idx: len(e.queue)}
	e.queue = append(e.queue, ev)
	e.up(ev.idx)
}

var refsameInstantLane = true

func (e *refEngine) next() *refevent {
	if len(e.queue) > 0 && (e.queue[0].at == e.now || e.laneHead == len(e.lane)) {
		return e.queue[0]
	}
	if e.laneHead < len(e.lane) {
		return e.lane[e.laneHead]
	}
	return nil
}

func (e *refEngine) take(ev *refevent) {
	if ev.idx == refinLane {
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

func (e *refEngine) takeLane() {
	e.lane[e.laneHead] = nil
	e.laneHead++
	if e.laneHead == len(e.lane) {
		e.lane, e.laneHead = e.lane[:0], 0
	}
}

func (e *refEngine) After(d Time, fn func()) refHandle { return e.At(e.now+d, fn) }

func (e *refEngine) Cancel(h refHandle) bool {
	ev := h.ev
	if ev == nil || ev.seq != h.seq || ev.idx < 0 {
		return false
	}
	if ev.idx == refinLane {
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

func (e *refEngine) Pending(h refHandle) bool {
	return h.ev != nil && h.ev.seq == h.seq && h.ev.idx >= 0
}

func (e *refEngine) release(ev *refevent) {
	ev.idx, ev.fn, ev.seq = -1, nil, 0
	e.free = append(e.free, ev)
}

func (e *refEngine) Step() bool {
	e.noLoopAhead()
	return e.step(Forever, 0)
}

func (e *refEngine) noLoopAhead() {
	if e.ahead != nil {
		panic("sim: an event ran the engine (Step, Run, RunUntil or Guard) while process " + e.ahead.name + " ran events ahead in its sleep (Proc.RunAhead)")
	}
}

func (e *refEngine) step(limit Time, stop uint64) bool {
	ev := e.next()
	if ev == nil || ev.at > limit {
		return false
	}

	e.take(ev)
	e.now = ev.at
	fn := ev.fn
	e.release(ev)
	e.fired++
	e.loop = refrunLoop{limit: limit, stop: stop}
	fn()
	return true
}

func (e *refEngine) fire(ev *refevent) func() {
	e.take(ev)
	e.now = ev.at
	fn := ev.fn
	e.release(ev)
	e.fired++
	return fn
}

func (e *refEngine) run(ev *refevent, limit Time, stop uint64) {
	fn := e.fire(ev)
	e.loop = refrunLoop{limit: limit, stop: stop}
	fn()
}

func (e *refEngine) skipAhead(n uint64, d Time) bool {
	t := e.now + d
	if n == 0 || e.fired >= e.loop.stop || e.loop.stop-e.fired < n || !refsleepShortcut || t > e.loop.limit || t < e.now ||
		len(e.queue) > 0 && e.queue[0].at <= t || e.laneHead < len(e.lane) || e.ahead != nil && e.aheadAt <= t {
		return false
	}
	e.seq += n
	e.now = t
	e.fired += n
	e.shortcuts += n
	return true
}

func (e *refEngine) RunsNext(t Time) bool {
	if t < e.now || e.running != nil || e.fired >= e.loop.stop || t > e.loop.limit || e.laneHead < len(e.lane) ||
		len(e.queue) > 0 && e.queue[0].at <= t || e.ahead != nil && e.aheadAt <= t {
		return false
	}
	e.seq++
	e.fired++
	e.now = t
	return true
}

func (e *refEngine) TakeNext(h refHandle) bool {
	ev := h.ev
	if ev == nil || ev.seq != h.seq || ev.idx < 0 || e.running != nil || e.fired >= e.loop.stop ||
		ev.at > e.loop.limit || e.ahead != nil && e.aheadAt <= ev.at || e.next() != ev {
		return false
	}
	e.fire(ev)
	return true
}

func (e *refEngine) runAhead(p *refProc, d Time) bool {
	at := e.now + d
	e.seq++
	seq := e.seq
	e.ahead, e.aheadAt, e.running = p, at, nil
	p.state, p.waiting = refprocBlocked, refasleep{}
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

		if at > lp.limit || e.fired >= lp.stop {
			break
		}
		e.now = at
		e.fired++
		e.aheads++
		ok = true
		break
	}
	e.ahead, e.running = nil, &p.refprocess
	p.state, p.waiting = refprocRunning, nil
	if !ok {

		e.push(at, seq, p.resumeFn)
	}
	return ok
}

func (e *refEngine) waitAhead(p *refProc, c *refCompletion) bool {
	e.ahead, e.aheadAt, e.aheadWake, e.running = p, Forever, nil, nil
	p.state, p.waiting = refprocBlocked, c
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
	e.ahead, e.aheadWake, e.running = nil, nil, &p.refprocess
	p.state, p.waiting = refprocRunning, nil
	return ok
}

var refsleepShortcut = true

func (e *refEngine) Run() {
	e.noLoopAhead()
	outer := e.loop
	defer func() { e.loop = outer }()
	for e.step(Forever, math.MaxUint64) {
	}
}

func (e *refEngine) RunUntil(t Time) {
	e.noLoopAhead()
	outer := e.loop
	defer func() { e.loop = outer }()
	for e.step(t, math.MaxUint64) {
	}
	if t > e.now {
		e.now = t
	}
}

func (e *refEngine) less(i, j int) bool {
	a, b := e.queue[i], e.queue[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (e *refEngine) swap(i, j int) {
	q := e.queue
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}

func (e *refEngine) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(i, p) {
			return
		}
		e.swap(i, p)
		i = p
	}
}

func (e *refEngine) down(i int) {
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

type refprocess struct {
	e    *refEngine
	name string

	resumeFn func()

	stop func()

	exit *refCompletion
	end  Time
	id   uint64
	slot int

	waiting any

	cpu   Time
	state refprocState
}

type refProc struct {
	refprocess

	body func(*refProc)
	co   *refcoro

	ahead bool
}

type refprocState uint8

const (
	refprocNew refprocState = iota
	refprocRunning
	refprocBlocked
	refprocDone

	refprocClosed
)

type refkilled struct{}

func (e *refEngine) Spawn(name string, body func(p *refProc)) *refProc {
	p := &refProc{body: body}
	e.add(&p.refprocess, name, p.resume)
	return p
}

func (e *refEngine) add(p *refprocess, name string, resume func()) {
	e.spawned++
	p.e, p.name, p.id, p.slot, p.resumeFn = e, name, e.spawned, len(e.live), resume
	e.live = append(e.live, p)
	e.At(e.now, resume)
}

func (p *refProc) start() {
	p.co = p.e.pool.take(p)
	p.stop = p.co.stop
}

func (p *refProc) resume() {
	if p.state >= refprocDone {
		return
	}
	if p.co == nil {
		p.start()
	}
	prev := p.e.running
	p.e.running, p.state, p.waiting = &p.refprocess, refprocRunning, nil
	c := p.co
	_, alive := c.next()
	p.e.running = prev
	if c.returned {
		p.co, p.stop = nil, nil
		p.e.pool.give(c)
	}
	if !alive || c.returned {
		p.finish()
	}
}

func (p *refprocess) finish() {
	p.state, p.end = refprocDone, p.e.now
	p.e.removeLive(p)
	if p.exit != nil {
		p.exit.Complete()
	}
}

func (p *refProc) block(on any) {
	if p.state == refprocClosed {

		panic(refkilled{})
	}
	if p.e.running != &p.refprocess {
		panic(fmt.Sprintf("sim: %s called on process %q, which is not running", refwaitingOn(on), p.name))
	}
	p.state, p.waiting = refprocBlocked, on
	if !p.co.yield(struct{}{}) {
		panic(refkilled{})
	}
}

type refasleep struct{}

func refwaitingOn(on any) string {
	switch on := on.(type) {
	case refasleep:
		return "sleep"
	case *refCompletion:
		return "completion " + on.label()
	case *refCond:
		return "condition " + on.name
	}
	return ""
}

func (p *refprocess) wake() {
	h := p.e.At(p.e.now, p.resumeFn)
	if a := p.e.ahead; a != nil && &a.refprocess == p {

		p.e.aheadWake = h.ev
	}
}

func (p *refprocess) Name() string { return p.name }

func (p *refprocess) Engine() *refEngine { return p.e }

func (p *refprocess) Now() Time { return p.e.now }

func (p *refprocess) charge(d Time) {
	if d < 0 {
		p.negativeSleep(d)
	}
	p.cpu += d
	if d > 0 && p.e.CPU.Active() {
		p.e.emitCPU(p, p.e.now, p.e.now+d, false)
	}
}

func (p *refprocess) negativeSleep(d Time) {
	panic(fmt.Sprintf("sim: %q sleeps a negative duration %v", p.name, d))
}

func (p *refProc) Sleep(d Time) {
	p.charge(d)
	e := p.e
	if p.state == refprocRunning && e.running == &p.refprocess {
		if e.skipAhead(1, d) {
			return
		}

		if p.ahead && e.ahead == nil && e.loop.stop > 0 && refsleepShortcut && d > 0 && e.now+d > e.now {
			if e.runAhead(p, d) {
				return
			}
			p.block(refasleep{})
			return
		}
	}
	e.After(d, p.resumeFn)
	p.block(refasleep{})
}

func (p *refProc) RunAhead() { p.ahead = true }

func (p *refProc) SleepAlone(n uint64, d Time) bool {
	e := p.e
	if n == 0 || d < 0 || e.CPU.Active() || p.state != refprocRunning || e.running != &p.refprocess || !e.skipAhead(n, d) {
		return false
	}
	p.cpu += d
	return true
}

func (p *refProc) Wait(c *refCompletion) {
	if c.done {
		return
	}
	c.addWaiter(&p.refprocess)
	e := p.e
	if p.ahead && e.ahead == nil && e.loop.stop > 0 && refsleepShortcut && p.state == refprocRunning && e.running == &p.refprocess {
		if e.waitAhead(p, c) {
			return
		}
	}
	p.block(c)
}

func (p *refprocess) Spawn(name string, body func(*refProc)) *refProc { return p.e.Spawn(name, body) }

func (p *refprocess) SpawnStep(name string, step func(*refStepProc) refNext) *refStepProc {
	return p.e.SpawnStep(name, step)
}

func (p *refProc) Join(child *refProc) { p.Wait(child.Exited()) }

func (p *refprocess) Charge(d Time) {
	if d < 0 {
		panic(fmt.Sprintf("sim: %q charged a negative duration %v", p.name, d))
	}
	p.cpu += d
	if d > 0 && p.e.CPU.Active() {
		p.e.emitCPU(p, p.e.now-d, p.e.now, true)
	}
}

type refCPUWork struct {
	Header

	End     Time
	Charged bool
}

func (e *refEngine) emitCPU(p *refprocess, start, end Time, charged bool) {
	cause := CauseCall
	if charged {
		cause = CauseTransfer
	}
	e.cpuEv = refCPUWork{Header: Header{Time: start, Proc: p.name, Component: "cpu", Cause: cause}, End: end, Charged: charged}
	e.CPU.Emit(&e.cpuEv)
}

func (p *refprocess) CPUTime() Time { return p.cpu }

func (p *refprocess) Exited() *refCompletion {
	if p.exit == nil {
		p.exit = &refCompletion{e: p.e, exitOf: p}
		if p.state == refprocDone {
			p.exit.done, p.exit.at = true, p.end
		}
	}
	return p.exit
}

func (p *refProc) WaitUntil(c *refCond, pred func() bool) {
	for !pred() {
		c.waiters = append(c.waiters, &p.refprocess)
		p.block(c)
	}
}

func (e *refEngine) Blocked() []string {
	live := slices.Clone(e.live)
	slices.SortFunc(live, func(a, b *refprocess) int { return cmp.Compare(a.id, b.id) })
	var out []string
	for _, p := range live {
		out = append(out, fmt.Sprintf("%s (waiting on %s)", p.name, refwaitingOn(p.waiting)))
	}
	return out
}

func (e *refEngine) Close() {
	for _, p := range slices.Clone(e.live) {
		p.state = refprocClosed
		if p.stop != nil {
			p.stop()
		}
	}
	e.live = nil
	e.queue, e.lane, e.laneHead = nil, nil, 0
	e.pool.close()
}

type refCompletion struct {
	e *refEngine

	prefix, name string

	exitOf *refprocess
	done   bool
	at     Time

	waiter  *refprocess
	waiters []*refprocess

	first     func()
	callbacks []func()
}

func (c *refCompletion) label() string {
	if c.exitOf != nil {
		return "exit of " + c.exitOf.name
	}
	return c.prefix + c.name
}

func (e *refEngine) NewCompletion() *refCompletion { return &refCompletion{e: e} }

func (e *refEngine) NewNamedCompletion(name string) *refCompletion {
	return &refCompletion{e: e, name: name}
}

func (e *refEngine) NewLabelledCompletion(prefix, name string) *refCompletion {
	return &refCompletion{e: e, prefix: prefix, name: name}
}

func (e *refEngine) InitCompletion(c *refCompletion, prefix, name string) {

	*c = refCompletion{}
	c.e, c.prefix, c.name = e, prefix, name
}

func (c *refCompletion) Done() bool { return c.done }

func (c *refCompletion) At() Time { return c.at }

func (c *refCompletion) Complete() {
	if c.done {
		panic("sim: completion " + c.label() + " completed twice")
	}
	c.done, c.at = true, c.e.now
	if c.waiter != nil {
		c.waiter.wake()
	}
	for _, p := range c.waiters {
		p.wake()
	}
	first, cbs := c.first, c.callbacks
	c.waiter, c.waiters, c.first, c.callbacks = nil, nil, nil, nil
	if first != nil {
		first()
	}
	for _, fn := range cbs {
		fn()
	}
}

func (c *refCompletion) addWaiter(p *refprocess) {
	if c.waiter == nil {
		c.waiter = p
		return
	}
	c.waiters = append(c.waiters, p)
}

func (c *refCompletion) OnComplete(fn func()) {
	if c.done {
		fn()
		return
	}
	if c.first == nil {
		c.first = fn
		return
	}
	c.callbacks = append(c.callbacks, fn)
}

type refCond struct {
	name    string
	waiters []*refprocess
}

func refNewCond(name string) *refCond { return &refCond{name: name} }

func (c *refCond) Signal() {
	if len(c.waiters) == 0 {
		return
	}
	p := c.waiters[0]
	c.waiters = c.waiters[1:]
	p.wake()
}

func (c *refCond) Broadcast() {

	ws := c.waiters
	for _, p := range ws {
		p.wake()
	}
	clear(ws)
	c.waiters = ws[:0]
}

func (e *refEngine) removeLive(p *refprocess) {
	last := len(e.live) - 1
	e.live[p.slot] = e.live[last]
	e.live[p.slot].slot = p.slot
	e.live = e.live[:last]
}

type refcoro struct {
	next  func() (struct{}, bool)
	stop  func()
	yield func(struct{}) bool

	p        *refProc
	returned bool
}

type refcoroPool struct{ idle []*refcoro }

const refmaxIdleCoros = 4

func (pl *refcoroPool) close() {
	for _, c := range pl.idle {
		c.stop()
	}
	pl.idle = nil
}

func refnewPool(e *refEngine) *refcoroPool {
	pl := new(refcoroPool)
	runtime.AddCleanup(e, (*refcoroPool).close, pl)
	return pl
}

func (pl *refcoroPool) take(p *refProc) *refcoro {
	var c *refcoro
	if n := len(pl.idle); n > 0 {
		c = pl.idle[n-1]
		pl.idle[n-1] = nil
		pl.idle = pl.idle[:n-1]
	} else {
		c = new(refcoro)
		c.next, c.stop = iter.Pull(c.loop)
	}
	c.p, c.returned = p, false
	return c
}

func (pl *refcoroPool) give(c *refcoro) {
	c.p = nil
	if len(pl.idle) >= refmaxIdleCoros {
		c.stop()
		return
	}
	pl.idle = append(pl.idle, c)
}

func (c *refcoro) loop(yield func(struct{}) bool) {
	c.yield = yield
	for c.run() {
		c.returned = true
		if !yield(struct{}{}) {
			return
		}
	}
}

func (c *refcoro) run() (ok bool) {
	p := c.p
	body := p.body
	p.body = nil
	defer func() {
		if r := recover(); r != nil {
			if _, k := r.(refkilled); !k {
				panic(r)
			}
			ok = false
		}
	}()
	body(p)
	return true
}

type refStepProc struct {
	refprocess
	step func(*refStepProc) refNext
}

type refNext struct {
	kind refnextKind
	d    Time
	c    *refCompletion
	cond *refCond
}

type refnextKind uint8

const (
	refnextExit refnextKind = iota
	refnextSleep
	refnextWait
	refnextCond
)

func refSleepFor(d Time) refNext { return refNext{kind: refnextSleep, d: d} }

func refWaitFor(c *refCompletion) refNext { return refNext{kind: refnextWait, c: c} }

func refWaitOn(c *refCond) refNext { return refNext{kind: refnextCond, cond: c} }

func refExit() refNext { return refNext{} }

func (e *refEngine) SpawnStep(name string, step func(s *refStepProc) refNext) *refStepProc {
	s := &refStepProc{step: step}
	e.add(&s.refprocess, name, s.resume)
	return s
}

func (s *refStepProc) resume() {
	if s.state >= refprocDone {
		return
	}
	prev := s.e.running
	s.e.running, s.state, s.waiting = &s.refprocess, refprocRunning, nil
	n := s.step(s)
	for n.kind == refnextWait && n.c.done {
		n = s.step(s)
	}
	switch n.kind {
	case refnextExit:
		s.e.running = prev
		s.step = nil
		s.finish()
		return
	case refnextSleep:
		s.charge(n.d)
		s.e.After(n.d, s.resumeFn)
		s.waiting = refasleep{}
	case refnextWait:
		n.c.addWaiter(&s.refprocess)
		s.waiting = n.c
	case refnextCond:
		n.cond.waiters = append(n.cond.waiters, &s.refprocess)
		s.waiting = n.cond
	}
	s.state = refprocBlocked
	s.e.running = prev
}

var (
	refErrStalled = errors.New("model stalled")

	refErrLimit = errors.New("run limit reached")
)

const refDefaultHorizon = 50 * 24 * 3600 * Second

type refLimits struct {
	Horizon Time

	Events uint64
}

type refStallError struct {
	At Time

	Blocked []string
}

func (e *refStallError) Error() string {
	return fmt.Sprintf("model stalled at %v: %d process(es) blocked with no event left to wake them: %s",
		e.At, len(e.Blocked), strings.Join(e.Blocked, "; "))
}

func (e *refStallError) Unwrap() error { return refErrStalled }

type refLimitError struct {
	At Time

	Next    Time
	Horizon Time

	Events uint64

	Blocked []string
}

func (e *refLimitError) Error() string {
	if e.Events > 0 {
		return fmt.Sprintf("run stopped at %v after %d events, its budget, with events still pending", e.At, e.Events)
	}
	return fmt.Sprintf("run stopped at %v: the next event is at %v, past the horizon of %v", e.At, e.Next, e.Horizon)
}

func (e *refLimitError) Unwrap() error { return refErrLimit }

func (e *refEngine) Guard(l refLimits) error {
	e.noLoopAhead()
	horizon := l.Horizon
	if horizon <= 0 {
		horizon = refDefaultHorizon
	}
	start := e.fired
	stop := uint64(math.MaxUint64)
	if l.Events > 0 {
		stop = start + l.Events
	}
	outer := e.loop
	defer func() { e.loop = outer }()
	for {
		if next := e.next(); l.Events > 0 && e.fired-start >= l.Events && next != nil {
			return &refLimitError{At: e.now, Next: next.at, Horizon: horizon, Events: l.Events, Blocked: e.Blocked()}
		}
		if !e.step(horizon, stop) {
			break
		}
	}
	if next := e.next(); next != nil {
		return &refLimitError{At: e.now, Next: next.at, Horizon: horizon, Blocked: e.Blocked()}
	}
	if len(e.live) > 0 {
		return &refStallError{At: e.now, Blocked: e.Blocked()}
	}
	return nil
}

package sim

import (
	"cmp"
	"fmt"
	"slices"
)

// process is what the two forms of a simulated process share: a Proc
// (a coroutine, with a stack) and a StepProc (a step function, without
// one). It is the identity that reports, hooks and other processes see:
// the name, the spawn order, what it waits on, its CPU time and its exit.
type process struct {
	e    *Engine
	name string
	// resumeFn is the form's resume, bound once: a method value allocates.
	resumeFn func()
	// stop unwinds a started coroutine at Close; nil for a StepProc,
	// which has no stack to unwind.
	stop func()
	// exit is made when first asked for (Exited, Join), so that a process
	// nobody waits for costs no Completion; end is when it returned.
	exit *Completion
	end  Time
	id   uint64 // spawn order
	slot int    // index in Engine.live while alive
	// waiting is what the blocked process waits on, for deadlock reports:
	// a *Completion, a *Cond or asleep. Its words are made only when a
	// report asks, so that waiting on a named completion builds no string.
	waiting any
	// cpu is the time spent in Sleep (SleepFor): CPU work.
	cpu   Time
	state procState
}

// Proc is a simulated thread of control (an application thread, a driver
// path, a kernel worker): ordinary sequential Go code that blocks in
// virtual time. Each Proc is a coroutine (iter.Pull); only one runs at a
// time, and the engine resumes them from events, so the interleaving is
// the event order and nothing else. Its stack costs 2 KiB and more;
// processes counted in millions are StepProcs.
type Proc struct {
	process
	// body is what the process runs, until it starts: the coroutine
	// and its stack are taken (coroPool) at the first resume, so that a
	// process spawned but not yet run costs no stack.
	body func(*Proc)
	co   *coro
	// ahead: its sleeps may run the loop's events ahead (RunAhead).
	ahead bool
}

type procState uint8

const (
	procNew procState = iota
	procRunning
	procBlocked
	procDone
	// procClosed: Close ended it before it returned.
	procClosed
)

// killed unwinds a process whose engine is shut down while it is blocked.
type killed struct{}

// Spawn creates a process that starts running body at the current time,
// after the events already scheduled for this instant.
func (e *Engine) Spawn(name string, body func(p *Proc)) *Proc {
	p := &Proc{body: body}
	e.add(&p.process, name, p.resume)
	return p
}

// add makes p a live process of e and schedules its first resume.
func (e *Engine) add(p *process, name string, resume func()) {
	e.spawned++
	p.e, p.name, p.id, p.slot, p.resumeFn = e, name, e.spawned, len(e.live), resume
	e.live = append(e.live, p)
	e.At(e.now, resume)
}

// start gives p its coroutine, on its first resume.
func (p *Proc) start() {
	p.co = p.e.pool.take(p)
	p.stop = p.co.stop
}

// resume runs p until it blocks or ends. It is called from event context
// only, so exactly one process runs at a time.
func (p *Proc) resume() {
	if p.state >= procDone {
		return
	}
	if p.co == nil {
		p.start()
	}
	prev := p.e.running
	p.e.running, p.state, p.waiting = &p.process, procRunning, nil
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

// finish ends p, which has returned.
func (p *process) finish() {
	p.state, p.end = procDone, p.e.now
	p.e.removeLive(p)
	if p.exit != nil {
		p.exit.Complete()
	}
}

// block suspends the running process until something calls wake.
func (p *Proc) block(on any) {
	if p.state == procClosed {
		// Close is unwinding p and a deferred function blocks again (a
		// driver's cleanup that sleeps or waits): keep unwinding.
		panic(killed{})
	}
	if p.e.running != &p.process {
		panic(fmt.Sprintf("sim: %s called on process %q, which is not running", waitingOn(on), p.name))
	}
	p.state, p.waiting = procBlocked, on
	if !p.co.yield(struct{}{}) {
		panic(killed{})
	}
}

// asleep is what a process in Sleep (SleepFor) waits on.
type asleep struct{}

// waitingOn says what a process waits on (process.waiting) in reports.
func waitingOn(on any) string {
	switch on := on.(type) {
	case asleep:
		return "sleep"
	case *Completion:
		return "completion " + on.label()
	case *Cond:
		return "condition " + on.name
	}
	return ""
}

// wake makes a blocked process runnable at the current instant.
func (p *process) wake() {
	h := p.e.At(p.e.now, p.resumeFn)
	if a := p.e.ahead; a != nil && &a.process == p {
		// p waits ahead (waitAhead): this is the resume it looks for.
		p.e.aheadWake = h.ev
	}
}

// Name is the name given at Spawn.
func (p *process) Name() string { return p.name }

// Engine is the engine p runs on.
func (p *process) Engine() *Engine { return p.e }

// Now is the current virtual time.
func (p *process) Now() Time { return p.e.now }

// charge counts d, a sleep's duration, as CPU work of p.
func (p *process) charge(d Time) {
	if d < 0 {
		p.negativeSleep(d)
	}
	p.cpu += d
	if d > 0 && p.e.CPU.Active() {
		p.e.emitCPU(p, p.e.now, p.e.now+d, false)
	}
}

func (p *process) negativeSleep(d Time) {
	panic(fmt.Sprintf("sim: %q sleeps a negative duration %v", p.name, d))
}

// Sleep blocks p for d of virtual time during which it computes: models
// charge CPU work (a memcpy, cache maintenance, a busy poll) with Sleep,
// and it counts in CPUTime. A process blocked on something (Wait,
// WaitUntil, Join) is idle.
//
// When its resume would be the event the engine runs next (nothing else
// is due by then), p goes on at once with the clock advanced, as if the
// event had been scheduled and run (skipAhead), instead of switching out
// of its coroutine and back: no one can tell, as nothing runs between
// the switch out and the resume, and it spares the event and the two
// switches.
func (p *Proc) Sleep(d Time) {
	e := p.e
	if d > 0 && e.running == &p.process && p.state == procRunning && !e.CPU.Active() {
		// The usual sleep, written out: charge only adds d (positive,
		// no CPU hook), and skipAhead(1, d)'s test and work for one
		// event follow. It spares charge's and skipAhead's calls, and
		// skipAhead's tests of n, on the path most sleeps of a hot
		// model take.
		p.cpu += d
		if t := e.now + d; t > e.now && sleepShortcut && e.nextAt(t) {
			e.seq++
			e.now = t
			e.fired++
			e.shortcuts++
			return
		}
		p.sleepOut(d)
		return
	}
	p.charge(d)
	if p.state == procRunning && e.running == &p.process && e.skipAhead(1, d) {
		return
	}
	p.sleepOut(d)
}

// sleepOut is the rest of a sleep of d, charged, whose resume is not the
// loop's next event (skipAhead said no): p runs the events before it
// ahead (RunAhead), or blocks until its resume runs.
func (p *Proc) sleepOut(d Time) {
	e := p.e
	// (A sleep of 0 goes through the lane; one whose end overflows the
	// clock panics in After.)
	if p.ahead && e.ahead == nil && e.loop.stop > 0 && sleepShortcut && d > 0 && e.now+d > e.now &&
		p.state == procRunning && e.running == &p.process {
		if e.runAhead(p, d) {
			return
		}
		p.block(asleep{})
		return
	}
	e.After(d, p.resumeFn)
	p.block(asleep{})
}

// RunAhead lets p's sleeps run the events due before their end on p's
// own coroutine, as the run loop would run them, instead of switching out
// to the loop and back (two coroutine switches a sleep): when another
// event is due before a sleep ends, p runs it, and every event after it
// up to its own resume, then goes on, as long as the loop under way
// (Run, RunUntil, Guard) would have run them; where the loop would stop
// first, p blocks as usual. Its waits on a completion (Wait, Join) do
// the same: p runs the loop's events until the completion has woken it
// and its resume is the next event, then goes on. The events run in the
// same order, at the same times, with no process running, so nothing
// else changes. The caller
// promises that no event run meanwhile runs the engine itself (Step, Run,
// RunUntil, Guard from an event): the engine panics if one does, since
// that loop could have to resume p, whose coroutine is the one running.
// A sleep or wait of a process resumed by another's run ahead (an event
// run so woke it) switches as usual. For hot processes of hardware models
// (a driver's interrupt handler, the unified-memory driver's fault
// service) that sleep between device events or wait for their transfers.
// (Waits on a condition, WaitUntil, switch as usual.)
func (p *Proc) RunAhead() { p.ahead = true }

// SleepAlone is n calls of Sleep, d in all, made at once when each would
// go on without leaving the coroutine (nothing else due before their
// end, within the run loop's limit and event budget: skipAhead) and no
// CPU hook wants their spans one by one: the clock, p's CPU time, the
// sequence number and the count of fired events advance as those calls
// would advance them, and it reports true. Otherwise it does nothing and
// reports false, and the caller sleeps step by step. A model that
// knows the outcome of many short steps that only sleep in between
// (the same work, no other process can see it meanwhile) applies them
// in one go after SleepAlone returned true, without running each.
func (p *Proc) SleepAlone(n uint64, d Time) bool {
	e := p.e
	if n == 0 || d < 0 || e.CPU.Active() || p.state != procRunning || e.running != &p.process || !e.skipAhead(n, d) {
		return false
	}
	p.cpu += d
	return true
}

// Wait blocks p until c completes; it returns at once if c already has.
func (p *Proc) Wait(c *Completion) {
	if c.done {
		return
	}
	c.addWaiter(&p.process)
	e := p.e
	if p.ahead && e.ahead == nil && e.loop.stop > 0 && sleepShortcut && p.state == procRunning && e.running == &p.process {
		if e.waitAhead(p, c) {
			return
		}
	}
	p.block(c)
}

// Spawn starts a child process (a coroutine); Join, or waiting on its
// Exited, waits for it.
func (p *process) Spawn(name string, body func(*Proc)) *Proc { return p.e.Spawn(name, body) }

// SpawnStep starts a child StepProc; waiting on its Exited waits for it.
func (p *process) SpawnStep(name string, step func(*StepProc) Next) *StepProc {
	return p.e.SpawnStep(name, step)
}

// Join blocks p until child has returned.
func (p *Proc) Join(child *Proc) { p.Wait(child.Exited()) }

// Charge counts d as CPU time of p without blocking it: for work that
// takes its time elsewhere (a memcpy that is a flow on the memory bus)
// while p computes.
func (p *process) Charge(d Time) {
	if d < 0 {
		panic(fmt.Sprintf("sim: %q charged a negative duration %v", p.name, d))
	}
	p.cpu += d
	if d > 0 && p.e.CPU.Active() {
		p.e.emitCPU(p, p.e.now-d, p.e.now, true)
	}
}

// CPUWork is a span of CPU time of one process, as CPUTime counts it:
// a Sleep (the process computes: a call's own work, cache maintenance,
// a busy poll) or a Charge (work whose time a flow took, as a memcpy on
// the memory bus). Header's Time is when it began, Proc the process,
// Component "cpu", Cause CauseCall for a Sleep and CauseTransfer for a
// Charge.
type CPUWork struct {
	Header
	// End is when it ends; Charged says it came from Charge.
	End     Time
	Charged bool
}

func (e *Engine) emitCPU(p *process, start, end Time, charged bool) {
	cause := CauseCall
	if charged {
		cause = CauseTransfer
	}
	e.cpuEv = CPUWork{Header: Header{Time: start, Proc: p.name, Component: "cpu", Cause: cause}, End: end, Charged: charged}
	e.CPU.Emit(&e.cpuEv)
}

// CPUTime is the virtual time p has spent computing (in Sleep, SleepFor
// and Charge) so far.
func (p *process) CPUTime() Time { return p.cpu }

// Exited completes when the process returns. It is made on the first
// call: done at once, at the time p returned, if p already has.
func (p *process) Exited() *Completion {
	if p.exit == nil {
		p.exit = &Completion{e: p.e, exitOf: p}
		if p.state == procDone {
			p.exit.done, p.exit.at = true, p.end
		}
	}
	return p.exit
}

// WaitUntil blocks p on c until pred holds; pred is checked first and
// again after every Signal or Broadcast that wakes p.
func (p *Proc) WaitUntil(c *Cond, pred func() bool) {
	for !pred() {
		c.waiters = append(c.waiters, &p.process)
		p.block(c)
	}
}

// Blocked lists the processes that have not finished, with what each
// waits on; after Run returns, any of them is deadlocked.
func (e *Engine) Blocked() []string {
	live := slices.Clone(e.live)
	slices.SortFunc(live, func(a, b *process) int { return cmp.Compare(a.id, b.id) })
	var out []string
	for _, p := range live {
		out = append(out, fmt.Sprintf("%s (waiting on %s)", p.name, waitingOn(p.waiting)))
	}
	return out
}

// Close ends every process that has not finished, unwinding a
// coroutine's stack (its deferred functions run), so that no coroutine
// outlives the engine; a StepProc has no stack, and none of its code
// runs. The exit of a process ended so never completes. The engine is not
// usable afterwards.
func (e *Engine) Close() {
	for _, p := range slices.Clone(e.live) {
		p.state = procClosed
		if p.stop != nil {
			p.stop()
		}
	}
	e.live = nil
	e.queue, e.lane, e.laneHead = nil, nil, 0
	e.pool.close()
}

// Completion is a one-shot event that processes wait on and callbacks
// hang off: the end of a DMA, a fence signal, a process exit.
type Completion struct {
	e *Engine
	// prefix + name is its name in reports, joined only when a report
	// needs it, so that naming a completion per packet costs nothing.
	prefix, name string
	// exitOf is the process whose exit this is, named after it.
	exitOf *process
	done   bool
	at     Time
	// waiter is the first process to wait, kept apart so that the usual
	// single waiter (a DMA's issuer on its flow) needs no slice, as
	// first for callbacks; waiters are the ones after it.
	waiter  *process
	waiters []*process
	// first is the first callback, kept apart so that the usual single
	// callback needs no slice; callbacks are the ones after it.
	first     func()
	callbacks []func()
}

// label is c's name in reports.
func (c *Completion) label() string {
	if c.exitOf != nil {
		return "exit of " + c.exitOf.name
	}
	return c.prefix + c.name
}

// NewCompletion returns a pending completion.
func (e *Engine) NewCompletion() *Completion { return &Completion{e: e} }

// NewNamedCompletion returns a pending completion with a name used in
// deadlock reports.
func (e *Engine) NewNamedCompletion(name string) *Completion {
	return &Completion{e: e, name: name}
}

// NewLabelledCompletion is NewNamedCompletion(prefix + name) without
// building the string unless a report or a waiter needs it: a flow's
// completion is "flow " and the flow's name.
func (e *Engine) NewLabelledCompletion(prefix, name string) *Completion {
	return &Completion{e: e, prefix: prefix, name: name}
}

// InitCompletion makes *c a pending completion labelled prefix + name,
// as NewLabelledCompletion does, for a completion embedded in a larger
// object (a flow's), which so needs no allocation of its own. *c must
// not be in use.
func (e *Engine) InitCompletion(c *Completion, prefix, name string) {
	// Cleared in place, then the fields set: a composite literal is
	// built on the stack and copied in with wide loads across its
	// narrow stores, which the CPU cannot forward from its store
	// buffer (a stall on every flow).
	*c = Completion{}
	c.e, c.prefix, c.name = e, prefix, name
}

// Done reports whether c has completed.
func (c *Completion) Done() bool { return c.done }

// At is when c completed; meaningful only once Done.
func (c *Completion) At() Time { return c.at }

// Complete marks c done, wakes its waiters in the order they began to
// wait and runs its callbacks, now, in the order they were added.
// Completing twice is a model bug and panics.
func (c *Completion) Complete() {
	if c.done {
		panic("sim: completion " + c.label() + " completed twice")
	}
	c.done, c.at = true, c.e.now
	if c.waiters == nil && c.callbacks == nil {
		// At most one waiter and one callback, the usual case: only
		// the fields in use are cleared, which spares the stores (and
		// their write barriers' tests) of the empty ones.
		if w := c.waiter; w != nil {
			c.waiter = nil
			w.wake()
		}
		if first := c.first; first != nil {
			c.first = nil
			first()
		}
		return
	}
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

// addWaiter queues p to be woken when c completes, after those queued
// before it.
func (c *Completion) addWaiter(p *process) {
	if c.waiter == nil {
		c.waiter = p
		return
	}
	c.waiters = append(c.waiters, p)
}

// OnComplete runs fn when c completes, or now if it already has.
func (c *Completion) OnComplete(fn func()) {
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

// Cond is a condition processes wait on (Proc.WaitUntil) until another
// party changes the state it guards and signals it.
type Cond struct {
	name    string
	waiters []*process
}

// NewCond returns a condition with a name used in deadlock reports.
func NewCond(name string) *Cond { return &Cond{name: name} }

// Signal wakes the longest-waiting process, if any.
func (c *Cond) Signal() {
	if len(c.waiters) == 0 {
		return
	}
	p := c.waiters[0]
	c.waiters = c.waiters[1:]
	p.wake()
}

// Broadcast wakes every waiting process, in the order they began to wait.
func (c *Cond) Broadcast() {
	// wake only schedules each resume, so no process can wait on c
	// meanwhile, and the list is kept for the next waits: a process
	// waiting on one condition over and over makes no garbage.
	ws := c.waiters
	for _, p := range ws {
		p.wake()
	}
	clear(ws)
	c.waiters = ws[:0]
}

func (e *Engine) removeLive(p *process) {
	last := len(e.live) - 1
	e.live[p.slot] = e.live[last]
	e.live[p.slot].slot = p.slot
	e.live = e.live[:last]
}

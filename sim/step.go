package sim

// StepProc is a simulated process without a stack of its own: its body
// is a step function, a state machine that the engine calls each time
// the process resumes and that returns what the process waits for next
// (SleepFor, WaitFor, WaitOn) or that it is done (Exit). It is SystemC's
// method process (SC_METHOD): it runs to the end of its step and cannot
// suspend in the middle of one, and it names its next trigger as
// next_trigger does (a time or an event); unlike an SC_METHOD it can end.
//
// A StepProc is resumed at the same (time, sequence) positions as the
// Proc that does the same things in the same order (a Sleep where the
// step returns SleepFor, a Wait where it returns WaitFor, a WaitUntil
// where it returns WaitOn until its condition holds), so a model can
// switch a process from one form to the other without changing any
// output. Its name, spawn order, CPU time, exit and deadlock reports are
// a Proc's. What it costs is its struct, its pending event and the step
// function's state, a few hundred bytes, against a coroutine's stack of
// 2 KiB and more: the form for processes counted in millions.
type StepProc struct {
	process
	step func(*StepProc) Next
}

// Next is what a StepProc's step returns: what the process waits for
// before its step is called again, or that it is done. The zero Next is
// Exit().
type Next struct {
	kind nextKind
	d    Time
	c    *Completion
	cond *Cond
}

type nextKind uint8

const (
	nextExit nextKind = iota
	nextSleep
	nextWait
	nextCond
)

// SleepFor resumes the process d from now, which it spends computing, as
// Proc.Sleep(d): it counts in CPUTime and reaches the engine's CPU hooks.
func SleepFor(d Time) Next { return Next{kind: nextSleep, d: d} }

// WaitFor resumes the process when c completes, as Proc.Wait(c): at once,
// with no event between, if c already has. A child's Exited is its Join.
func WaitFor(c *Completion) Next { return Next{kind: nextWait, c: c} }

// WaitOn resumes the process at the next Signal or Broadcast of c that
// wakes it. The step checks the condition c guards when it is called
// again and returns WaitOn(c) while it does not hold, as Proc.WaitUntil
// does with its predicate.
func WaitOn(c *Cond) Next { return Next{kind: nextCond, cond: c} }

// Exit ends the process, as a Proc's body returning: its Exited
// completes now.
func Exit() Next { return Next{} }

// SpawnStep creates a StepProc whose step runs first at the current time,
// after the events already scheduled for this instant (as Spawn's body).
func (e *Engine) SpawnStep(name string, step func(s *StepProc) Next) *StepProc {
	s := &StepProc{step: step}
	e.add(&s.process, name, s.resume)
	return s
}

// resume calls s's step until it waits for something not yet done. It is
// called from event context only, as Proc.resume.
func (s *StepProc) resume() {
	if s.state >= procDone {
		return
	}
	prev := s.e.running
	s.e.running, s.state, s.waiting = &s.process, procRunning, nil
	n := s.step(s)
	for n.kind == nextWait && n.c.done {
		n = s.step(s)
	}
	switch n.kind {
	case nextExit:
		s.e.running = prev
		s.step = nil
		s.finish()
		return
	case nextSleep:
		s.charge(n.d)
		s.e.After(n.d, s.resumeFn)
		s.waiting = asleep{}
	case nextWait:
		n.c.addWaiter(&s.process)
		s.waiting = n.c
	case nextCond:
		n.cond.waiters = append(n.cond.waiters, &s.process)
		s.waiting = n.cond
	}
	s.state = procBlocked
	s.e.running = prev
}

package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// A model run can go wrong without any component failing: every process
// blocks on something no event will ever complete (a deadlock, or a flow
// so slow that its end lies beyond sim.Time's range and so was never
// scheduled), or virtual time runs towards the end of its range, where
// After would overflow. Run cannot tell either from a clean end; Guard
// can, and says which, so that a caller turns it into an error instead of
// an empty result or a panic at Close.

// Errors wrapped by Guard's errors, for errors.Is.
var (
	// ErrStalled: the queue emptied while processes were still blocked.
	ErrStalled = errors.New("model stalled")
	// ErrLimit: the run reached its horizon or event budget.
	ErrLimit = errors.New("run limit reached")
)

// DefaultHorizon is the virtual time a guarded run may reach when Limits
// gives none: 50 days, half of sim.Time's range (about 106 days), so that
// no model's After(d) overflows before the guard stops it.
const DefaultHorizon = 50 * 24 * 3600 * Second

// Limits bound a guarded run.
type Limits struct {
	// Horizon is the latest virtual time an event may run at; zero means
	// DefaultHorizon.
	Horizon Time
	// Events is the most events the run may fire (a model that loops
	// without advancing time); zero means no bound.
	Events uint64
}

// StallError reports processes blocked forever when the queue emptied.
type StallError struct {
	At Time
	// Blocked lists each process still alive with what it waits on, in
	// spawn order (Engine.Blocked).
	Blocked []string
}

func (e *StallError) Error() string {
	return fmt.Sprintf("model stalled at %v: %d process(es) blocked with no event left to wake them: %s",
		e.At, len(e.Blocked), strings.Join(e.Blocked, "; "))
}

func (e *StallError) Unwrap() error { return ErrStalled }

// LimitError reports a run stopped at its horizon or event budget.
type LimitError struct {
	At Time
	// Next is the time of the first event not run (past Horizon), or of
	// the next event when the event budget ran out.
	Next    Time
	Horizon Time
	// Events is the budget when it is what stopped the run, else zero.
	Events uint64
	// Blocked lists the processes still alive (Engine.Blocked).
	Blocked []string
}

func (e *LimitError) Error() string {
	if e.Events > 0 {
		return fmt.Sprintf("run stopped at %v after %d events, its budget, with events still pending", e.At, e.Events)
	}
	return fmt.Sprintf("run stopped at %v: the next event is at %v, past the horizon of %v", e.At, e.Next, e.Horizon)
}

func (e *LimitError) Unwrap() error { return ErrLimit }

// Guard runs events as Run does, within l, and reports how the run ended:
// nil when the queue emptied with every process finished, a *StallError
// when processes are still blocked, a *LimitError when the horizon or the
// event budget stopped it (the events left are not run; Close ends the
// processes).
func (e *Engine) Guard(l Limits) error {
	e.noLoopAhead()
	horizon := l.Horizon
	if horizon <= 0 {
		horizon = DefaultHorizon
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
			return &LimitError{At: e.now, Next: next.at, Horizon: horizon, Events: l.Events, Blocked: e.Blocked()}
		}
		if !e.step(horizon, stop) {
			break
		}
	}
	if next := e.next(); next != nil {
		return &LimitError{At: e.now, Next: next.at, Horizon: horizon, Blocked: e.Blocked()}
	}
	if len(e.live) > 0 {
		return &StallError{At: e.now, Blocked: e.Blocked()}
	}
	return nil
}

package dmalab

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// DefaultEventBudget bounds the events of one run (Options.EventBudget): the built-in scenarios at
// their defaults fire at most about half a million, and a busy-polling
// driver waiting on a transfer that takes days of virtual time would
// otherwise spin for hours of real time before reaching the horizon.
// At a few million events a second it stops such a run within a minute
// or two.
const DefaultEventBudget uint64 = 1 << 28

// ErrModel is wrapped by the error of a run whose model deadlocked:
// processes blocked with nothing left to wake them, not traceable to the
// input. It is a bug, but one the model itself detected and explained,
// not a finding: the CLI exits 2 on it, as on bad input, and keeps 3 for
// failures nothing explained (a panic).
var ErrModel = errors.New("model error")

// RunEngine runs the system's engine to the end of virtual time under
// sim's guard and turns a run that did not end cleanly into an error that
// says why and what to change. knobs names the parameters that set how
// much work the run does ("size", "sizes", "packets"), the first things
// to make smaller. Every program and scenario run ends here.
//
// A run stops short for three reasons. A transfer slower than sim.Time's
// range can hold (a size far too large for a bandwidth, often one set
// with --set platform.…) never gets its end scheduled, so its process
// waits forever; the run reaches the horizon; or it exhausts the event
// budget. All three are input the model cannot serve: usage errors.
// Processes blocked with no such transfer are a deadlock in the model:
// ErrModel, with each process and what it waits on.
//
// Every error wraps sim.ErrStalled or sim.ErrLimit.
func (s *System) RunEngine(sizes ...string) error {
	m := s.Machine
	budget := s.opt.EventBudget
	if budget == 0 {
		budget = DefaultEventBudget
	}
	err := m.Engine.Guard(sim.Limits{Events: budget})
	if s.Checker != nil {
		// The end of the run: what never happened (a fence never
		// signalled) is known now, whatever stopped the engine.
		s.Checker.Finish(m.Engine.Now())
	}
	if err == nil {
		return nil
	}
	change := "use a smaller workload"
	if len(sizes) > 0 {
		change = fmt.Sprintf("make %s smaller (--set %s=…)", strings.Join(sizes, " or "), sizes[0])
	}
	if l := slowestLink(m.Fabric); l != nil {
		change += fmt.Sprintf(", or use a faster platform (its slowest link is %s at %s)", l.Name(), platform.Rate(l.Effective()))
	}
	days := sim.DefaultHorizon / (24 * 3600 * sim.Second)
	var se *sim.StallError
	var le *sim.LimitError
	switch {
	case errors.As(err, &le) && le.Events > 0:
		return fmt.Errorf("%w: the run needs more than %d events (a driver polling a very slow transfer, or a very large workload): %s (%w)",
			ErrUsage, le.Events, change, err)
	case errors.As(err, &le):
		return fmt.Errorf("%w: the run needs more than %d days of virtual time: %s (%w)", ErrUsage, days, change, err)
	case errors.As(err, &se) && m.Fabric.Unending() > 0:
		return fmt.Errorf("%w: %d transfer(s) would take longer than the model's clock can count (about 106 days of virtual time): %s (%w)",
			ErrUsage, m.Fabric.Unending(), change, err)
	}
	avoid := ""
	if len(sizes) > 0 {
		avoid = fmt.Sprintf("; other values of %s may avoid it", strings.Join(sizes, " or "))
	}
	return fmt.Errorf("%w: %w: the model deadlocked, a bug in dmalab (please report it with the command line)%s", ErrModel, err, avoid)
}

// slowestLink is the fabric's link of least effective capacity, the
// likeliest cause of a transfer that cannot end; nil without links.
func slowestLink(f *fabric.Fabric) *fabric.Link {
	var slow *fabric.Link
	for _, l := range f.Links() {
		if slow == nil || l.Effective() < slow.Effective() {
			slow = l
		}
	}
	return slow
}

package fabric

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// EventKind says what happened to a flow.
type EventKind uint8

const (
	FlowStart  EventKind = iota + 1 // Start was called
	FlowActive                      // its latency is over; it now competes for bandwidth
	FlowRate                        // its rate changed (Event.Rate)
	FlowEnd                         // its bytes are through; Done completes next
)

func (k EventKind) String() string {
	switch k {
	case FlowStart:
		return "start"
	case FlowActive:
		return "active"
	case FlowRate:
		return "rate"
	case FlowEnd:
		return "end"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one observation of a flow.
type Event struct {
	// Header's Component is "fabric", its Cause CauseTransfer; flows
	// are hardware, so its Proc is empty.
	sim.Header
	Kind EventKind
	Flow *Flow
	// Rate is the flow's new rate in bytes/s (FlowRate only).
	Rate float64
}

func (e Event) String() string {
	if e.Kind == FlowRate {
		return fmt.Sprintf("%v %v %s %g B/s", e.Time, e.Kind, e.Flow.name, e.Rate)
	}
	return fmt.Sprintf("%v %v %s", e.Time, e.Kind, e.Flow.name)
}

// emit delivers the event of kind k about fl at t (with its new rate,
// for FlowRate) to f.Hooks. Small enough to be inlined, so that with no
// hook listening an event costs a test, not the building of an Event.
func (f *Fabric) emit(t sim.Time, k EventKind, fl *Flow, rate float64) {
	if f.Hooks.Active() {
		f.deliver(t, k, fl, rate)
	}
}

// deliver builds the event in the fabric's own event struct and
// delivers it.
func (f *Fabric) deliver(t sim.Time, k EventKind, fl *Flow, rate float64) {
	f.ev = Event{Header: sim.Header{Time: t, Component: "fabric", Cause: sim.CauseTransfer}, Kind: k, Flow: fl, Rate: rate}
	f.Hooks.Emit(&f.ev)
}

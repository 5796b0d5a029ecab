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

// emit delivers ev to f.Hooks from the fabric's own event struct.
func (f *Fabric) emit(ev Event) {
	if !f.Hooks.Active() {
		return
	}
	f.ev = ev
	f.ev.Component, f.ev.Cause = "fabric", sim.CauseTransfer
	f.Hooks.Emit(&f.ev)
}

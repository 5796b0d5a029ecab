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
	Kind EventKind
	Time sim.Time
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

// Observe calls fn for every event from now on, in the order they happen,
// after any observer added before it. fn runs inside the fabric's event
// handling: it may Start flows (they take effect through events) but must
// not block.
func (f *Fabric) Observe(fn func(Event)) { f.observers = append(f.observers, fn) }

func (f *Fabric) emit(ev Event) {
	for _, fn := range f.observers {
		fn(ev)
	}
}

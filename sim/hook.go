package sim

// One event shape for the whole model. Every model event (a DMA API call,
// a transfer, a memory access, a flow, a unified-memory fault, a CUDA
// call, a GPU activity, a file released by a process) is a struct that
// embeds Header, so that every subscriber can read when it happened, in
// which process, in which component and why, without knowing the event's
// type. Components deliver their events through a Hooks value of their
// event type (the typed part); a subscriber that wants everything hooks
// every component with a function of Event (the common part). This is
// Akita's sim/hook.go shape (one hook signature, a context naming domain,
// position and item), with Go generics instead of an untyped item.
//
// Events are passed by pointer and are valid only during the call: a
// component may reuse the struct for its next event, so a hook copies
// what it keeps.

// Cause says what a span of virtual time, or an event, is for: the
// categories latency is attributed to.
type Cause uint8

const (
	// CauseCall is an API call's own work (a map, a sync, a driver
	// entry, its fixed overhead).
	CauseCall Cause = iota + 1
	// CauseQueue is waiting for a busy resource (a copy engine, a
	// channel, a lock).
	CauseQueue
	// CauseTranslate is address translation (dma-direct, swiotlb, an
	// IOMMU walk).
	CauseTranslate
	// CauseTransfer is bytes moving over links.
	CauseTransfer
	// CauseFault is fault service (a GPU or CPU page fault, migration).
	CauseFault
	// CauseAccess is a memory access (CPU load/store, device read/write).
	CauseAccess
	// CauseLifecycle is a file, process or object being created or
	// released.
	CauseLifecycle
	nCauses
)

var causeNames = [...]string{"", "call", "queue", "translate", "transfer", "fault", "access", "lifecycle"}

func (c Cause) String() string {
	if c < nCauses {
		return causeNames[c]
	}
	return "cause?"
}

// Header is the part every model event carries.
type Header struct {
	// Time is when the event took effect.
	Time Time
	// Proc is the simulated process (thread) that caused it; empty for
	// hardware acting on its own (a flow ending, an engine fetching).
	Proc string
	// Component is the emitter: "dma", "mem", "machine", "fabric",
	// "uvm", "cuda", "gpu", "kernel", or a device's name.
	Component string
	// Cause classifies the event.
	Cause Cause
}

// Head returns the header; embedding Header makes a struct an Event.
func (h *Header) Head() *Header { return h }

// Event is any model event: a struct embedding Header, by pointer.
type Event interface{ Head() *Header }

// Hooks is where a component delivers its events of type E to its
// subscribers, in registration order. The zero value has none; emitting
// to none costs one length check, so components build an event only when
// Active says someone listens.
type Hooks[E any] struct {
	fns []func(*E)
}

// Hook registers fn for every event, after those registered before.
func (h *Hooks[E]) Hook(fn func(*E)) { h.fns = append(h.fns, fn) }

// Active reports whether any hook is registered.
func (h *Hooks[E]) Active() bool { return len(h.fns) > 0 }

// Emit calls every hook with e.
func (h *Hooks[E]) Emit(e *E) {
	for _, fn := range h.fns {
		fn(e)
	}
}

// Hooker is a component's hook point seen without its event type: what a
// subscriber to every event (a tracer, statistics) registers with.
type Hooker interface {
	HookAll(fn func(Event))
}

// HookAll registers fn for every event of h, as an Event. E must embed
// Header (by value), so that *E is an Event; otherwise HookAll panics,
// which is a model bug found by the first run.
func (h *Hooks[E]) HookAll(fn func(Event)) {
	h.Hook(func(e *E) { fn(any(e).(Event)) })
}

package gdr

import (
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Op is what an Event reports.
type Op uint8

const (
	OpOpen        Op = iota + 1 // gdr_open
	OpPinBuffer                 // gdr_pin_buffer
	OpMap                       // gdr_map
	OpCopyTo                    // gdr_copy_to_mapping (CPU stores)
	OpCopyFrom                  // gdr_copy_from_mapping (CPU loads)
	OpUnmap                     // gdr_unmap
	OpUnpinBuffer               // gdr_unpin_buffer
	OpClose                     // gdr_close
	OpInvalidate                // the free callback revoked a pin
)

var opNames = [...]string{"", "open", "pin_buffer", "map", "copy_to_mapping", "copy_from_mapping",
	"unmap", "unpin_buffer", "close", "invalidate"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// Event is one gdrcopy call, or the driver revoking a pin.
type Event struct {
	sim.Header
	Op Op
	// Call is the entry point ("gdr_pin_buffer").
	Call string
	// Process is the process of the handle.
	Process string
	// Device is the GPU index of the pinned memory.
	Device int
	// Addr and Size: the pinned range (rounded to 64 KiB pages) for pins
	// and maps; for copies, the GPU address and byte count accessed.
	Addr mem.GPUAddr
	Size uint64
	// Offset is a copy's offset into the mapping.
	Offset uint64
	// VA is the mapping's user address.
	VA mem.VirtAddr
	// Duration is what the call cost the calling thread.
	Duration sim.Time
	// Err is the error returned, nil on success.
	Err error
}

func (d *Driver) emit(t *sim.Proc, e *Event) {
	if !d.Hooks.Active() {
		return
	}
	e.Component = "gdr"
	e.Cause = sim.CauseCall
	switch e.Op {
	case OpCopyTo, OpCopyFrom:
		e.Cause = sim.CauseAccess
	case OpInvalidate:
		e.Cause = sim.CauseLifecycle
	}
	if t != nil {
		e.Time, e.Proc = t.Now(), t.Name()
	}
	d.Hooks.Emit(e)
}

package rdma

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// Op is what an Event reports.
type Op int

const (
	// OpRegMR: ibv_reg_mr succeeded (Addr, Len, Key, Access, Peer).
	OpRegMR Op = iota + 1
	// OpDeregMR: ibv_dereg_mr.
	OpDeregMR
	// OpInvalidate: a peer-memory client invalidated an MR.
	OpInvalidate
	// OpPostSend and OpPostRecv: a WQE posted (QPN, WRID, Opcode).
	OpPostSend
	OpPostRecv
	// OpComplete: the HCA wrote a CQE (QPN, WRID, Status, Len).
	OpComplete
)

func (o Op) String() string {
	switch o {
	case OpRegMR:
		return "ibv_reg_mr"
	case OpDeregMR:
		return "ibv_dereg_mr"
	case OpInvalidate:
		return "peer_invalidate"
	case OpPostSend:
		return "ibv_post_send"
	case OpPostRecv:
		return "ibv_post_recv"
	case OpComplete:
		return "cqe"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Event is one thing an HCA or its verbs did, delivered through
// Device.Hooks: the model never prints.
type Event struct {
	sim.Header
	Op     Op
	Device string
	// PID is the process of the PD (MR events and posts).
	PID int
	// Addr, Len, Key and Access are the MR's (MR events); Len is also
	// a completion's byte length.
	Addr, Len uint64
	Key       uint32
	Access    Access
	Peer      bool
	// QPN, WRID, Opcode and Status are a WQE's or a completion's.
	QPN    uint32
	WRID   uint64
	Opcode Opcode
	WC     WCOpcode
	Status Status
	Detail string
}

// emit builds and delivers an event when someone listens.
func (d *Device) emit(t *sim.Proc, cause sim.Cause, fill func(e *Event)) {
	if !d.Hooks.Active() {
		return
	}
	e := Event{Header: sim.Header{Time: d.env.Machine.Engine.Now(), Component: d.name, Cause: cause}, Device: d.name}
	if t != nil {
		e.Proc = t.Name()
	}
	fill(&e)
	d.Hooks.Emit(&e)
}

package machine

import "fmt"

// CopyKind is a copy's direction, as cudaMemcpyKind names it.
type CopyKind uint8

const (
	HostToDevice CopyKind = iota + 1
	DeviceToHost
	// DeviceToDevice copies within one GPU's VRAM.
	DeviceToDevice
	// PeerToPeer copies between two GPUs' VRAM (cuMemcpyPeerAsync).
	PeerToPeer
)

func (k CopyKind) String() string {
	switch k {
	case HostToDevice:
		return "h2d"
	case DeviceToHost:
		return "d2h"
	case DeviceToDevice:
		return "d2d"
	case PeerToPeer:
		return "p2p"
	}
	return fmt.Sprintf("CopyKind(%d)", int(k))
}

// CopyEngine is the copy engine the model gives copies of kind k, the one
// place this choice is made (cuMemcpy, stream copies, staged pageable
// copies and the transfers scenario all ask here): with three or more
// engines, host-to-device on the first, device-to-host on the second and
// copies between VRAMs on the third, so that the three run at once, as
// the H200's three async engines allow (CUDA assigns engines to streams
// in ways it does not document; this is assumed). With two, device
// copies share the first; with one, all share it and serialise. A copy
// engine runs one copy at a time, in FIFO order, so two copies in the
// same direction take turns.
func (g *GPU) CopyEngine(k CopyKind) *Engine {
	ce := g.CopyEngines
	i := 0
	switch k {
	case DeviceToHost:
		i = 1
	case DeviceToDevice, PeerToPeer:
		i = 2
	}
	if i >= len(ce) {
		i = 0
	}
	return ce[i]
}

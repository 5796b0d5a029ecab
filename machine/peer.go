package machine

import "fmt"

// PeerKind is where peer-to-peer traffic between two PCIe agents turns
// round: NVIDIA's GPUDirect RDMA guide ("Supported Systems") names
// three cases, best first: PCIe switches only; a single CPU/IOH (the
// root complex forwards it); and across CPU/IOH with QPI/HT between
// them, which it calls unreliable or extremely slow.
type PeerKind uint8

const (
	// PeerNone: one end is host memory or the same component: not
	// peer-to-peer.
	PeerNone PeerKind = iota
	// PeerSwitch: both below one PCIe switch, which routes the TLPs
	// between its downstream ports; the root complex never sees them.
	PeerSwitch
	// PeerRootComplex: below one root complex but no common switch: the
	// root complex forwards between its root ports.
	PeerRootComplex
	// PeerCrossSocket: below different root complexes: the traffic
	// crosses the socket interconnect.
	PeerCrossSocket
)

func (k PeerKind) String() string {
	switch k {
	case PeerSwitch:
		return "switch"
	case PeerRootComplex:
		return "root-complex"
	case PeerCrossSocket:
		return "cross-socket"
	}
	return "none"
}

// PeerPath is the turning point of peer-to-peer traffic between two
// endpoints: its kind, and the switch or root complex where it turns
// (the lowest common ancestor; for PeerCrossSocket the first end's root
// complex).
type PeerPath struct {
	Kind PeerKind
	At   string
}

// PeerPath classifies the path between a and b, both attached to PCIe
// (a GPU's memory, a device's side). Host memory at either end is
// PeerNone; so is an integrated GPU, which is no PCIe agent.
func (m *Machine) PeerPath(a, b Endpoint) (PeerPath, error) {
	if a.kind == 0 || b.kind == 0 {
		return PeerPath{}, fmt.Errorf("peer path %v → %v: unset endpoint", a, b)
	}
	pa, pb := m.attachment(a).port, m.attachment(b).port
	if pa == nil || pb == nil || pa == pb || isIntegrated(a) || isIntegrated(b) {
		return PeerPath{}, nil
	}
	ca, cb := upChain(pa), upChain(pb)
	if ca[len(ca)-1] != cb[len(cb)-1] {
		return PeerPath{Kind: PeerCrossSocket, At: ca[len(ca)-1].name}, nil
	}
	var lca *pciePort
	for len(ca) > 0 && len(cb) > 0 && ca[len(ca)-1] == cb[len(cb)-1] {
		lca = ca[len(ca)-1]
		ca, cb = ca[:len(ca)-1], cb[:len(cb)-1]
	}
	if lca.parent == nil {
		return PeerPath{Kind: PeerRootComplex, At: lca.name}, nil
	}
	return PeerPath{Kind: PeerSwitch, At: lca.name}, nil
}

func isIntegrated(e Endpoint) bool { return e.kind == gpuMemory && e.gpu.Spec.Integrated }

package machine

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/fabric"
)

// Endpoint is a place bytes are read from or written to: host DRAM on a
// NUMA node, a GPU's VRAM, or a device's own side of its PCIe port.
type Endpoint struct {
	kind endpointKind
	node int
	gpu  *GPU
	dev  *Device
}

type endpointKind uint8

const (
	hostMemory endpointKind = iota + 1
	gpuMemory
	deviceSide
)

// HostMemory is DRAM on NUMA node n.
func (m *Machine) HostMemory(n int) (Endpoint, error) {
	if n < 0 || n >= len(m.Nodes) {
		return Endpoint{}, fmt.Errorf("platform %s has %d NUMA node(s); there is no node %d", m.Spec.Name, len(m.Nodes), n)
	}
	return Endpoint{kind: hostMemory, node: n}, nil
}

// Memory is the GPU's VRAM.
func (g *GPU) Memory() Endpoint { return Endpoint{kind: gpuMemory, gpu: g} }

// Side is the device's own side of its PCIe port (its buffers, its wire).
func (d *Device) Side() Endpoint { return Endpoint{kind: deviceSide, dev: d} }

func (e Endpoint) String() string {
	switch e.kind {
	case hostMemory:
		return fmt.Sprintf("node%d memory", e.node)
	case gpuMemory:
		return e.gpu.Name + " memory"
	case deviceSide:
		return e.dev.Name
	}
	return "no endpoint"
}

// Route is the path bytes take from src to dst, with the memory at each
// end: host DRAM and VRAM are links too, so a transfer competes with
// every other user of that memory.
//
// PCIe is a tree, so the path between two PCIe components is unique: up
// to their lowest common ancestor and down again, or, below different
// root complexes, up to one socket, across the socket links and down.
// GPU-to-GPU traffic takes NVLink when the two GPUs share a bundle or an
// NVSwitch, as the CUDA driver does for peer copies.
func (m *Machine) Route(src, dst Endpoint) (fabric.Route, error) {
	if src.kind == 0 || dst.kind == 0 {
		return fabric.Route{}, fmt.Errorf("route %v → %v: unset endpoint", src, dst)
	}
	var hops []fabric.Hop
	if src == dst {
		// An in-place copy reads and writes the same memory: twice the
		// bytes through its bus.
		if l := memoryLink(m, src); l != nil {
			hops = append(hops, fabric.Hop{Link: l, Dir: fabric.AtoB, Weight: 2})
		}
		return fabric.Route{Hops: hops}, nil
	}
	if l := memoryLink(m, src); l != nil {
		hops = append(hops, fabric.Hop{Link: l, Dir: fabric.BtoA, Weight: 1})
	}
	mid, err := m.between(src, dst)
	if err != nil {
		return fabric.Route{}, fmt.Errorf("route %v → %v: %w", src, dst, err)
	}
	hops = append(hops, mid...)
	if l := memoryLink(m, dst); l != nil {
		hops = append(hops, fabric.Hop{Link: l, Dir: fabric.AtoB, Weight: 1})
	}
	return fabric.Route{Hops: hops}, nil
}

func memoryLink(m *Machine, e Endpoint) *fabric.Link {
	switch e.kind {
	case hostMemory:
		return m.Nodes[e.node].DRAM
	case gpuMemory:
		return e.gpu.VRAM
	}
	return nil
}

// between is the path from src's attachment point to dst's, excluding
// the memories themselves.
func (m *Machine) between(src, dst Endpoint) ([]fabric.Hop, error) {
	if src.kind == gpuMemory && dst.kind == gpuMemory {
		if hops, ok := m.nvlinkPath(src.gpu, dst.gpu); ok {
			return hops, nil
		}
	}
	a, b := m.attachment(src), m.attachment(dst)
	switch {
	case a.port == nil && b.port == nil:
		return m.socketPath(a.node, b.node)
	case a.port == nil:
		down, err := m.pathToPort(a.node, b.port)
		return down, err
	case b.port == nil:
		down, err := m.pathToPort(b.node, a.port)
		return reverse(down), err
	}
	return m.portToPort(a.port, b.port)
}

type attachPoint struct {
	node int       // NUMA node (socket) for host memory
	port *pciePort // PCIe component for GPUs and devices
}

func (m *Machine) attachment(e Endpoint) attachPoint {
	switch e.kind {
	case gpuMemory:
		return attachPoint{port: m.pcie[e.gpu.Name]}
	case deviceSide:
		return attachPoint{port: m.pcie[e.dev.Name]}
	}
	return attachPoint{node: e.node}
}

// upChain lists p and its ancestors up to and including the root complex.
func upChain(p *pciePort) []*pciePort {
	var c []*pciePort
	for ; p != nil; p = p.parent {
		c = append(c, p)
	}
	return c
}

// pathToPort goes from socket n down to port p.
func (m *Machine) pathToPort(n int, p *pciePort) ([]fabric.Hop, error) {
	chain := upChain(p)
	rc := chain[len(chain)-1]
	hops, err := m.socketPath(n, rc.node)
	if err != nil {
		return nil, err
	}
	// From the socket through each component's upstream link, downwards.
	for i := len(chain) - 1; i >= 0; i-- {
		hops = append(hops, fabric.Hop{Link: chain[i].up, Dir: fabric.AtoB, Weight: 1})
	}
	return hops, nil
}

// portToPort is the unique tree path between two PCIe components, or up
// and across sockets when they hang below different root complexes.
func (m *Machine) portToPort(a, b *pciePort) ([]fabric.Hop, error) {
	ca, cb := upChain(a), upChain(b)
	if ca[len(ca)-1] != cb[len(cb)-1] {
		up, err := m.pathToPort(ca[len(ca)-1].node, a)
		if err != nil {
			return nil, err
		}
		down, err := m.pathToPort(ca[len(ca)-1].node, b)
		return append(reverse(up), down...), err
	}
	// Strip the common ancestors; what remains are the links below the
	// lowest common ancestor on each side.
	for len(ca) > 0 && len(cb) > 0 && ca[len(ca)-1] == cb[len(cb)-1] {
		ca, cb = ca[:len(ca)-1], cb[:len(cb)-1]
	}
	var hops []fabric.Hop
	for _, p := range ca {
		hops = append(hops, fabric.Hop{Link: p.up, Dir: fabric.BtoA, Weight: 1})
	}
	for i := len(cb) - 1; i >= 0; i-- {
		hops = append(hops, fabric.Hop{Link: cb[i].up, Dir: fabric.AtoB, Weight: 1})
	}
	return hops, nil
}

// socketPath is the shortest path over socket links from node a to node
// b (breadth-first, links in spec order, so it is deterministic).
func (m *Machine) socketPath(a, b int) ([]fabric.Hop, error) {
	if a == b {
		return nil, nil
	}
	if r, ok := m.socketRoutes[[2]int{a, b}]; ok {
		return slices.Clone(r.Hops), nil
	}
	type via struct {
		from int
		hop  fabric.Hop
	}
	prev := map[int]via{a: {}}
	queue := []int{a}
	links := m.socketLinks
	for len(queue) > 0 && prev[b] == (via{}) {
		n := queue[0]
		queue = queue[1:]
		for _, sl := range links {
			var next int
			var dir fabric.Dir
			switch n {
			case sl.a:
				next, dir = sl.b, fabric.AtoB
			case sl.b:
				next, dir = sl.a, fabric.BtoA
			default:
				continue
			}
			if _, seen := prev[next]; seen {
				continue
			}
			prev[next] = via{n, fabric.Hop{Link: sl.link, Dir: dir, Weight: 1}}
			queue = append(queue, next)
		}
	}
	if _, ok := prev[b]; !ok {
		return nil, fmt.Errorf("no socket link path from node%d to node%d", a, b)
	}
	var hops []fabric.Hop
	for n := b; n != a; n = prev[n].from {
		hops = append(hops, prev[n].hop)
	}
	slices.Reverse(hops)
	m.socketRoutes[[2]int{a, b}] = fabric.Route{Hops: hops}
	return slices.Clone(hops), nil
}

// socketLink is an inter-socket link with the NUMA nodes it joins.
type socketLink struct {
	a, b int
	link *fabric.Link
}

// nvlinkPath is the NVLink path between two GPUs: a direct bundle, or two
// bundles into one NVSwitch.
func (m *Machine) nvlinkPath(a, b *GPU) ([]fabric.Hop, bool) {
	if l, ok := a.NVLinks[b.Name]; ok {
		return []fabric.Hop{{Link: l, Dir: dirFrom(l, a.Port), Weight: 1}}, true
	}
	for _, sw := range m.Spec.NVSwitches {
		la, oka := a.NVLinks[sw.Name]
		lb, okb := b.NVLinks[sw.Name]
		if oka && okb {
			return []fabric.Hop{
				{Link: la, Dir: dirFrom(la, a.Port), Weight: 1},
				{Link: lb, Dir: dirFrom(lb, m.Fabric.Node(sw.Name)), Weight: 1},
			}, true
		}
	}
	return nil, false
}

// dirFrom is the direction of travel over l leaving vertex from.
func dirFrom(l *fabric.Link, from *fabric.Node) fabric.Dir {
	if l.A() == from {
		return fabric.AtoB
	}
	return fabric.BtoA
}

// reverse is the same path travelled the other way.
func reverse(hops []fabric.Hop) []fabric.Hop {
	out := make([]fabric.Hop, len(hops))
	for i, h := range hops {
		h.Dir = h.Dir.Reverse()
		out[len(hops)-1-i] = h
	}
	return out
}

package machine

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Machine is a running machine: the engine, the fabric built from the
// spec's links, and the state of each component. Spec is what the
// hardware is; everything else is what it is doing.
type Machine struct {
	Spec   *platform.Spec
	Engine *sim.Engine
	Fabric *fabric.Fabric
	// Mem is the machine's memory: DRAM per node, the kernel address
	// space, CPU caches and the content of every byte.
	Mem *mem.Memory

	Nodes   []*Node
	GPUs    []*GPU
	Devices []*Device

	// pcie holds every PCIe component (root complex, switch, endpoint)
	// by name, with its parent, for tree routing.
	pcie map[string]*pciePort
	// tlp holds the transaction-layer view of every PCIe link (DMARoute).
	tlp map[*fabric.Link]*tlpLink
	// sockets is the fabric vertex of each NUMA node's uncore/mesh, where
	// DRAM, root complexes and socket links meet.
	sockets     []*fabric.Node
	socketLinks []socketLink
	// socketRoutes caches node-to-node routes over socket links.
	socketRoutes map[[2]int]fabric.Route
	// memory holds every memory bus (DRAM, VRAM) with the latency of a
	// read at it (RoundTrip).
	memory map[*fabric.Link]sim.Time
	// nvlink holds the packet view of every NVLink bundle (DMARoute).
	nvlink map[*fabric.Link]nvPacket
	// times are the last sleeps of small local accesses (accessTime).
	times     [4]accessTimeEntry
	timesNext int
}

// Node is a NUMA node: its cores and DRAM.
type Node struct {
	ID   int
	Spec platform.Node
	// DRAM is the node's memory bus, shared by reads and writes of every
	// agent (one resource for both directions).
	DRAM *fabric.Link
}

// GPU is a discrete GPU: its PCIe port, its VRAM bus and its copy engines.
type GPU struct {
	Index int
	Name  string
	Spec  platform.GPU
	// Node is the NUMA node of the GPU's root complex.
	Node int
	// Port is the fabric vertex of the GPU's host interface, where PCIe,
	// NVLink and the VRAM bus meet (the GPU's internal crossbar).
	Port *fabric.Node
	// VRAM is the HBM/GDDR bus, shared by reads and writes; for an
	// integrated GPU it is its node's DRAM bus, shared with the CPUs.
	VRAM *fabric.Link
	// NVLinks are the GPU's NVLink bundles, by the name of the far end.
	NVLinks     map[string]*fabric.Link
	CopyEngines []*Engine
	port        *pciePort
}

// Device is a DMA-capable PCIe device other than a GPU (NIC, NVMe).
type Device struct {
	Name string
	Spec platform.Device
	Node int
	Port *fabric.Node
	// Line is the device's external port (a NIC's wire), nil when the
	// spec gives no line rate.
	Line    *fabric.Link
	Engines []*Engine
	port    *pciePort
}

// pciePort is one component of the PCIe tree and the link to its parent.
type pciePort struct {
	name   string
	parent *pciePort // nil for a root complex
	node   int       // NUMA node of the root complex above
	vertex *fabric.Node
	up     *fabric.Link // link to parent; for a root complex, to the socket
	depth  int
}

// unlimited is the capacity given to a component the spec sets no
// bandwidth cap for (a root complex without one): 1 PB/s, beyond any
// traffic a machine generates, so it adds its latency but never limits.
// (The fabric requires finite capacities.)
const unlimited = 1e15

// Options are how a machine is built beyond its spec.
type Options struct {
	// Payload keeps the real bytes of every write (mem.Options.Payload).
	Payload bool
	// Engine, when set, is the engine the machine runs on instead of a
	// new one seeded with the seed: two machines on one engine share
	// virtual time, so that hosts joined by a wire (package rdma) run
	// as one simulation. Each keeps its own fabric, memory and names.
	Engine *sim.Engine
}

// New builds a running machine from a validated spec. The engine is
// seeded with seed.
func New(spec *platform.Spec, seed uint64) (*Machine, error) {
	return NewWithOptions(spec, seed, Options{})
}

// NewWithOptions is New with options.
func NewWithOptions(spec *platform.Spec, seed uint64, opt Options) (*Machine, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	eng := opt.Engine
	if eng == nil {
		eng = sim.New(seed)
	}
	// The memory's CPU copies take the machine's one copy model
	// (CPUCopyBetween), and its accesses to another node's memory are
	// flows (CPUAccess), so that a bounce, a driver's memcpy or a
	// thread reading remote memory shares DRAM and the socket links
	// with the rest of the machine.
	var m *Machine
	copyTime := func(p *sim.Proc, node, src, dst int, bytes uint64, cached bool) {
		var err error
		switch {
		case cached && dst == node:
			err = m.CPUCopyCached(p, "memcpy", node, int64(bytes))
		case cached:
			// The source is in the cache: only the stores' line fills
			// cross to the destination's node.
			err = m.CPUAccess(p, "memcpy", node, dst, int64(bytes), false, float64(m.Nodes[node].Spec.MemcpyRate.V))
		default:
			err = m.CPUCopyBetween(p, "memcpy", node, src, dst, int64(bytes))
		}
		if err != nil {
			panic(fmt.Sprintf("machine %s: %v", spec.Name, err)) // mem checked the nodes
		}
	}
	remoteTime := func(p *sim.Proc, cpu, home int, bytes uint64, toMemory bool, rate float64) {
		if err := m.CPUAccess(p, "cpu access", cpu, home, int64(bytes), toMemory, rate); err != nil {
			panic(fmt.Sprintf("machine %s: %v", spec.Name, err)) // mem checked the nodes
		}
	}
	localTime := func(p *sim.Proc, node int, bytes uint64, toMemory bool, rate float64) {
		if err := m.CPULocalAccess(p, "cpu access", node, int64(bytes), toMemory, rate); err != nil {
			panic(fmt.Sprintf("machine %s: %v", spec.Name, err)) // mem checked the node
		}
	}
	memory, err := mem.New(spec, eng, mem.Options{Payload: opt.Payload, CopyTime: copyTime, RemoteTime: remoteTime, LocalTime: localTime})
	if err != nil {
		return nil, fmt.Errorf("machine %s: %w", spec.Name, err)
	}
	ff := spec.Fabric
	m = &Machine{
		Spec:   spec,
		Engine: eng,
		Mem:    memory,
		Fabric: fabric.New(eng, fabric.Factors{
			Bandwidth: ff.Bandwidth(),
			Latency:   ff.Latency(),
			Cross:     ff.Cross(),
			WeightS:   ff.LV08WeightS(),
		}),
		pcie:         map[string]*pciePort{},
		tlp:          map[*fabric.Link]*tlpLink{},
		socketRoutes: map[[2]int]fabric.Route{},
		memory:       map[*fabric.Link]sim.Time{},
		nvlink:       map[*fabric.Link]nvPacket{},
	}
	f := m.Fabric
	for _, n := range spec.Nodes {
		sock := f.Node(fmt.Sprintf("node%d", n.ID))
		mem := f.Node(fmt.Sprintf("node%d.mem", n.ID))
		m.sockets = append(m.sockets, sock)
		m.Nodes = append(m.Nodes, &Node{
			ID:   n.ID,
			Spec: n,
			DRAM: f.Connect(fmt.Sprintf("node%d.dram", n.ID), sock, mem,
				float64(n.DRAMBandwidth.V), n.DRAMLatency.V, fabric.Shared),
		})
		m.memory[m.Nodes[len(m.Nodes)-1].DRAM] = n.DRAMLatency.V
	}
	for _, l := range spec.SocketLinks {
		link := f.Connect(l.Name, m.sockets[l.A], m.sockets[l.B], float64(l.Rate()), l.Latency.V, fabric.FullDuplex)
		m.socketLinks = append(m.socketLinks, socketLink{l.A, l.B, link})
	}
	for _, rc := range spec.RootComplexes {
		capacity := float64(rc.Bandwidth.V)
		if capacity == 0 {
			capacity = unlimited
		}
		v := f.Node(rc.Name)
		m.pcie[rc.Name] = &pciePort{
			name: rc.Name, node: rc.Node, vertex: v,
			up: f.Connect(rc.Name, m.sockets[rc.Node], v, capacity, rc.Latency.V, fabric.FullDuplex),
		}
	}
	// Switches may be listed before their parent switch: attach in
	// passes until every one has found its parent (Validate has ruled
	// out cycles and missing parents).
	pending := slices.Clone(spec.Switches)
	for len(pending) > 0 {
		before := len(pending)
		pending = slices.DeleteFunc(pending, func(s platform.Switch) bool {
			if m.pcie[s.Parent] == nil {
				return false
			}
			m.attach(s.Name, s.Parent, s.Link, s.Latency.V)
			return true
		})
		if len(pending) == before {
			return nil, fmt.Errorf("machine %s: switch %s: parent %s not found", spec.Name, pending[0].Name, pending[0].Parent)
		}
	}
	for i, g := range spec.GPUs {
		var port *pciePort
		var vram *fabric.Link
		if g.Integrated {
			// An integrated GPU (Tegra) is no PCIe endpoint: its port
			// into the SoC's memory controller hangs off its node's
			// socket as a root complex does, and its memory is that
			// node's DRAM, shared with the CPUs.
			bw, err := spec.GPUMemoryBandwidth(g.Name)
			if err != nil {
				return nil, fmt.Errorf("machine %s: %w", spec.Name, err)
			}
			v := f.Node(g.Name)
			port = &pciePort{name: g.Name, node: g.Node, vertex: v,
				up: f.Connect(g.Name+".mc", m.sockets[g.Node], v, float64(bw), 0, fabric.Shared)}
			m.pcie[g.Name] = port
			vram = m.Nodes[g.Node].DRAM
		} else {
			port = m.attach(g.Name, g.Parent, g.Link, 0)
			// The bus carries no latency of its own: writes are posted,
			// and a read's latency is the round trip's (RoundTrip).
			vram = f.Connect(g.Name+".hbm", port.vertex, f.Node(g.Name+".vram"), float64(g.VRAMBandwidth.V), 0, fabric.Shared)
			m.memory[vram] = g.VRAMLatency.V
		}
		gpu := &GPU{
			Index: i, Name: g.Name, Spec: g, Node: port.node, Port: port.vertex, port: port,
			VRAM:    vram,
			NVLinks: map[string]*fabric.Link{},
		}
		for j := range g.CopyEngines.V {
			gpu.CopyEngines = append(gpu.CopyEngines, newEngine(eng, fmt.Sprintf("%s.ce%d", g.Name, j), gpu.CE()))
		}
		m.GPUs = append(m.GPUs, gpu)
	}
	for _, d := range spec.Devices {
		port := m.attach(d.Name, d.Parent, d.Link, 0)
		dev := &Device{Name: d.Name, Spec: d, Node: port.node, Port: port.vertex, port: port}
		if d.LineRate.V > 0 {
			dev.Line = f.Connect(d.Name+".line", port.vertex, f.Node(d.Name+".wire"), float64(d.LineRate.V), 0, fabric.FullDuplex)
		}
		for j := range max(d.DMAEngines.V, 1) {
			dev.Engines = append(dev.Engines, newEngine(eng, fmt.Sprintf("%s.dma%d", d.Name, j), dev.DMA()))
		}
		m.Devices = append(m.Devices, dev)
	}
	for _, s := range spec.NVSwitches {
		f.Node(s.Name)
	}
	for _, l := range spec.NVLinks {
		capacity := float64(l.Rate())
		a, b := m.nvVertex(l.A), m.nvVertex(l.B)
		link := f.Connect("nvlink."+l.A+"-"+l.B, a, b, capacity, l.Latency.V, fabric.FullDuplex)
		m.nvlink[link] = newNVPacket(l)
		for _, g := range m.GPUs {
			if g.Name == l.A {
				g.NVLinks[l.B] = link
			}
			if g.Name == l.B {
				g.NVLinks[l.A] = link
			}
		}
	}
	return m, nil
}

// nvVertex is the fabric vertex for an NVLink end: a GPU's port or an
// NVSwitch.
func (m *Machine) nvVertex(name string) *fabric.Node {
	if p := m.pcie[name]; p != nil {
		return p.vertex
	}
	return m.Fabric.Node(name)
}

// attach adds a PCIe component below parent, joined by its upstream link
// (full duplex, the link's payload rate per direction). extra is latency
// of the component itself (a switch's traversal), added to the link's.
func (m *Machine) attach(name, parent string, l platform.PCIeLink, extra sim.Time) *pciePort {
	par := m.pcie[parent]
	v := m.Fabric.Node(name)
	p := &pciePort{
		name: name, parent: par, node: par.node, vertex: v, depth: par.depth + 1,
		up: m.Fabric.Connect(name+".pcie", par.vertex, v, float64(l.Rate()), l.Latency.V+extra, fabric.FullDuplex),
	}
	if t := newTLPLink(l); t != nil {
		m.tlp[p.up] = t
	}
	m.pcie[name] = p
	return p
}

// GPU returns the GPU with the given index, or an error naming the
// GPUs there are.
func (m *Machine) GPU(i int) (*GPU, error) {
	if i < 0 || i >= len(m.GPUs) {
		return nil, fmt.Errorf("platform %s has %d GPU(s); there is no GPU %d", m.Spec.Name, len(m.GPUs), i)
	}
	return m.GPUs[i], nil
}

// Close ends the engine's processes.
func (m *Machine) Close() { m.Engine.Close() }

package platform

import (
	"fmt"
	"slices"
)

// pcieTransferRate is the per-lane signalling rate of each generation in
// transfers per second (PCI-SIG base specifications 1.0 to 6.0).
var pcieTransferRate = [...]float64{1: 2.5e9, 2: 5e9, 3: 8e9, 4: 16e9, 5: 32e9, 6: 64e9}

// RawRate is the link's rate per direction after line encoding and before
// any protocol overhead: lanes × transfer rate × encoding / 8. Gen1 (2.5
// GT/s) and Gen2 (5 GT/s) use 8b/10b; Gen3 (8), Gen4 (16) and Gen5 (32 GT/s)
// use 128b/130b. Gen6 (64 GT/s, PAM4) carries fixed 256-byte FLITs whose
// FEC, CRC and header bytes are protocol overhead rather than a line code,
// so RawRate counts its encoding as 1 and Efficiency carries the FLIT
// overhead (242 of 256 bytes are payload-bearing). Gen5 x16 is 63.015 GB/s.
// An invalid Gen gives 0. A link with a Bandwidth has no line code to
// take away: its RawRate is the Bandwidth.
func (l PCIeLink) RawRate() Rate {
	if l.Bandwidth.V != 0 {
		return l.Bandwidth.V
	}
	if l.Gen < 1 || l.Gen >= len(pcieTransferRate) {
		return 0
	}
	bits := pcieTransferRate[l.Gen] * float64(l.Width)
	switch {
	case l.Gen <= 2:
		bits = bits * 8 / 10
	case l.Gen <= 5:
		bits = bits * 128 / 130
	}
	return Rate(bits / 8)
}

// Rate is the payload rate per direction: RawRate × Efficiency, or the
// Bandwidth that replaces them.
func (l PCIeLink) Rate() Rate {
	if l.Bandwidth.V != 0 {
		return l.Bandwidth.V
	}
	return l.RawRate() * Rate(l.Efficiency.V)
}

// RawRate is the bundle's rate per direction: Links × LinkRate.
func (l NVLink) RawRate() Rate { return Rate(l.Links.V) * l.LinkRate.V }

// Kind is what a named component of a Spec is.
type Kind int

// Kinds of components.
const (
	KindNone Kind = iota
	KindRootComplex
	KindSwitch
	KindGPU
	KindDevice
	KindNVSwitch
	KindSocketLink
)

func (k Kind) String() string {
	switch k {
	case KindRootComplex:
		return "root complex"
	case KindSwitch:
		return "switch"
	case KindGPU:
		return "GPU"
	case KindDevice:
		return "device"
	case KindNVSwitch:
		return "NVSwitch"
	case KindSocketLink:
		return "socket link"
	}
	return "none"
}

// KindOf returns what the component called name is, KindNone if there is
// none.
func (s *Spec) KindOf(name string) Kind {
	switch {
	case name == "":
		return KindNone
	case slices.ContainsFunc(s.RootComplexes, func(x RootComplex) bool { return x.Name == name }):
		return KindRootComplex
	case slices.ContainsFunc(s.Switches, func(x Switch) bool { return x.Name == name }):
		return KindSwitch
	case slices.ContainsFunc(s.GPUs, func(x GPU) bool { return x.Name == name }):
		return KindGPU
	case slices.ContainsFunc(s.Devices, func(x Device) bool { return x.Name == name }):
		return KindDevice
	case slices.ContainsFunc(s.NVSwitches, func(x NVSwitch) bool { return x.Name == name }):
		return KindNVSwitch
	case slices.ContainsFunc(s.SocketLinks, func(x SocketLink) bool { return x.Name == name }):
		return KindSocketLink
	}
	return KindNone
}

// find returns the element of list called name, or an error wrapping
// ErrNotFound that lists the names there are.
func find[T any](s *Spec, list []T, name string, nameOf func(T) string, kind Kind) (T, error) {
	for _, x := range list {
		if nameOf(x) == name {
			return x, nil
		}
	}
	names := make([]string, len(list))
	for i, x := range list {
		names[i] = nameOf(x)
	}
	var zero T
	return zero, fmt.Errorf("platform %s has no %s %q (%ss: %s): %w", s.Name, kind, name, kind, shortList(names), ErrNotFound)
}

// GPU returns the GPU called name.
func (s *Spec) GPU(name string) (GPU, error) {
	return find(s, s.GPUs, name, func(x GPU) string { return x.Name }, KindGPU)
}

// Device returns the device (NIC, NVMe drive) called name.
func (s *Spec) Device(name string) (Device, error) {
	return find(s, s.Devices, name, func(x Device) string { return x.Name }, KindDevice)
}

// Switch returns the PCIe switch called name.
func (s *Spec) Switch(name string) (Switch, error) {
	return find(s, s.Switches, name, func(x Switch) string { return x.Name }, KindSwitch)
}

// RootComplex returns the root complex called name.
func (s *Spec) RootComplex(name string) (RootComplex, error) {
	return find(s, s.RootComplexes, name, func(x RootComplex) string { return x.Name }, KindRootComplex)
}

// NVSwitch returns the NVSwitch called name.
func (s *Spec) NVSwitch(name string) (NVSwitch, error) {
	return find(s, s.NVSwitches, name, func(x NVSwitch) string { return x.Name }, KindNVSwitch)
}

// Node returns the NUMA node with the given ID.
func (s *Spec) Node(id int) (Node, error) {
	for _, n := range s.Nodes {
		if n.ID == id {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("platform %s has no NUMA node %d (%d nodes): %w", s.Name, id, len(s.Nodes), ErrNotFound)
}

// Distance returns the SLIT distance between nodes a and b: from
// Distances when given, else 10 for a == b and 21 otherwise.
func (s *Spec) Distance(a, b int) int {
	if a >= 0 && a < len(s.Distances) && b >= 0 && b < len(s.Distances[a]) {
		return s.Distances[a][b]
	}
	if a == b {
		return 10
	}
	return 21
}

// Uplink returns the parent and the upstream PCIe link of a switch, GPU
// or device.
func (s *Spec) Uplink(name string) (parent string, link PCIeLink, err error) {
	switch s.KindOf(name) {
	case KindSwitch:
		x, _ := s.Switch(name)
		return x.Parent, x.Link, nil
	case KindGPU:
		x, _ := s.GPU(name)
		if x.Integrated {
			return "", PCIeLink{}, fmt.Errorf("platform %s: GPU %q is integrated: it has no upstream PCIe link (it shares node %d's DRAM)", s.Name, name, x.Node)
		}
		return x.Parent, x.Link, nil
	case KindDevice:
		x, _ := s.Device(name)
		return x.Parent, x.Link, nil
	case KindNone:
		return "", PCIeLink{}, fmt.Errorf("platform %s has no component %q: %w", s.Name, name, ErrNotFound)
	}
	return "", PCIeLink{}, fmt.Errorf("%s %q has no upstream PCIe link", s.KindOf(name), name)
}

// PathToRoot returns the PCIe path from a switch, GPU or device up to its
// root complex: name, the switches above it in order, and the root
// complex last. For a root complex it is just its name.
func (s *Spec) PathToRoot(name string) ([]string, error) {
	path := []string{name}
	for at := name; ; {
		switch k := s.KindOf(at); k {
		case KindRootComplex:
			return path, nil
		case KindSwitch, KindGPU, KindDevice:
			if len(path) > len(s.Switches)+2 {
				return nil, fmt.Errorf("platform %s: %q: cycle among switches", s.Name, name)
			}
			parent, _, err := s.Uplink(at)
			if err != nil {
				return nil, err
			}
			if parent == "" {
				return nil, fmt.Errorf("platform %s: %s %q has no parent", s.Name, k, at)
			}
			path = append(path, parent)
			at = parent
		case KindNone:
			if at == name {
				return nil, fmt.Errorf("platform %s has no component %q: %w", s.Name, name, ErrNotFound)
			}
			return nil, fmt.Errorf("platform %s: %q: unknown parent %q: %w", s.Name, name, at, ErrNotFound)
		default:
			return nil, fmt.Errorf("platform %s: %s %q is not on PCIe", s.Name, k, at)
		}
	}
}

// NodeOf returns the NUMA node of a root complex, switch, GPU or device:
// the node of the root complex at the top of its PCIe path, or the node
// whose DRAM an integrated GPU shares.
func (s *Spec) NodeOf(name string) (int, error) {
	if g, err := s.GPU(name); err == nil && g.Integrated {
		return g.Node, nil
	}
	path, err := s.PathToRoot(name)
	if err != nil {
		return 0, err
	}
	rc, err := s.RootComplex(path[len(path)-1])
	if err != nil {
		return 0, err
	}
	return rc.Node, nil
}

// DeviceCoherent reports whether DMA by the device or GPU called name
// snoops the CPU caches, as x86 PCIe does: false when the device or GPU
// has noncoherent_dma or its root complex has (an integrated GPU has no
// root complex). Streaming DMA to a non-coherent device needs cache
// maintenance; its coherent buffers are uncached. For an integrated GPU
// it is Tegra's I/O coherence: true from Xavier on, where pinned memory
// is cacheable on the CPU; false before, where pinned memory is uncached
// on the CPU as on the GPU.
func (s *Spec) DeviceCoherent(name string) (bool, error) {
	own := false
	switch k := s.KindOf(name); k {
	case KindDevice:
		d, _ := s.Device(name)
		own = d.NonCoherentDMA
	case KindGPU:
		g, _ := s.GPU(name)
		if g.Integrated {
			return !g.NonCoherentDMA, nil
		}
		own = g.NonCoherentDMA
	case KindNone:
		return false, fmt.Errorf("platform %s has no component %q: %w", s.Name, name, ErrNotFound)
	default:
		return false, fmt.Errorf("platform %s: %s %q does no DMA of its own: want a device or GPU", s.Name, k, name)
	}
	path, err := s.PathToRoot(name)
	if err != nil {
		return false, err
	}
	rc, err := s.RootComplex(path[len(path)-1])
	if err != nil {
		return false, err
	}
	return !own && !rc.NonCoherentDMA, nil
}

// GPUMemoryBandwidth returns the rate at which the GPU called name reaches
// the memory it allocates from: a discrete GPU's VRAM bandwidth; for an
// integrated GPU its vram_bandwidth when given, else its node's DRAM
// bandwidth, which it shares with the node's CPUs and DMA either way.
func (s *Spec) GPUMemoryBandwidth(name string) (Rate, error) {
	g, err := s.GPU(name)
	if err != nil {
		return 0, err
	}
	if !g.Integrated || g.VRAMBandwidth.V != 0 {
		return g.VRAMBandwidth.V, nil
	}
	n, err := s.Node(g.Node)
	if err != nil {
		return 0, err
	}
	return n.DRAMBandwidth.V, nil
}

// Clone returns a deep copy of s.
func (s *Spec) Clone() *Spec {
	c := *s
	c.Nodes = slices.Clone(s.Nodes)
	if s.Distances != nil {
		c.Distances = make([][]int, len(s.Distances))
		for i, row := range s.Distances {
			c.Distances[i] = slices.Clone(row)
		}
	}
	c.SocketLinks = slices.Clone(s.SocketLinks)
	c.RootComplexes = slices.Clone(s.RootComplexes)
	c.Switches = slices.Clone(s.Switches)
	c.GPUs = slices.Clone(s.GPUs)
	c.Devices = slices.Clone(s.Devices)
	for i := range c.Devices {
		c.Devices[i].DMAAliases = slices.Clone(s.Devices[i].DMAAliases)
	}
	c.NVSwitches = slices.Clone(s.NVSwitches)
	c.NVLinks = slices.Clone(s.NVLinks)
	return &c
}

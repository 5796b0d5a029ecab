package iommu

import (
	"fmt"
	"math"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Place puts the unit in root complex rootComplex of machine m, as a
// VT-d remapping unit sits in its IIO stack or an SMMU beside its
// host bridge: from then on a walk's table read costs what a read of
// the tables' node memory costs from there, and a device attached with
// ATS pays its own link's round trip for a translation request.
//
// One table read is the request's trip from the root complex to the
// tables' node (the root complex's latency, which the platform gives as
// one way from a root port to memory, plus the socket links when the
// tables are on another node), the DRAM access (the node's load-to-use
// latency) and the completion's trip back, scaled by the fabric's
// latency factor. On 2s-4gpu-pcie with the tables on node 0 that is
// 2 × 150 + 110 = 410 ns: a walk that reads one table after the
// paging-structure caches is the ~330 ns IOTLB miss pcie-bench measured
// on an older Xeon (Neugebauer et al., SIGCOMM 2018) within the
// platform's assumed latencies, and a cold walk of four is 1.64 µs.
//
// The reads' bytes (a 64-byte line each) are counted in Stats.WalkReads
// but not put on the fabric as flows: at one read per packet even
// 400 Gb/s of 1500-byte packets makes ~2 GB/s of walk traffic, a few
// per cent of a node's DRAM bandwidth, and a flow per read would cost
// more events than the packets' own.
func (u *Unit) Place(m *machine.Machine, rootComplex string) error {
	rc, ok := findRootComplex(m.Spec, rootComplex)
	if !ok {
		return fmt.Errorf("iommu: place %s at %q: platform %s has no such root complex: %w", u.name, rootComplex, m.Spec.Name, mem.ErrInvalid)
	}
	lat, err := nodePath(m, rc.Node, u.node)
	if err != nil {
		return fmt.Errorf("iommu: place %s at %s: %w", u.name, rootComplex, err)
	}
	if u.node < 0 || u.node >= len(m.Nodes) {
		return fmt.Errorf("iommu: place %s: no node %d: %w", u.name, u.node, mem.ErrInvalid)
	}
	read := 2*(rc.Latency.V+lat) + m.Nodes[u.node].DRAM.Latency()
	u.walkRead = scale(m, read)
	u.m = m
	return nil
}

// WalkReadCost is what one table read of a walk costs the unit.
func (u *Unit) WalkReadCost() sim.Time { return u.walkRead }

// RootComplexOf is the root complex above the named device or GPU of
// spec (through its switches), false if there is none.
func RootComplexOf(spec *platform.Spec, device string) (string, bool) {
	parent := ""
	for _, d := range spec.Devices {
		if d.Name == device {
			parent = d.Parent
		}
	}
	for _, g := range spec.GPUs {
		if g.Name == device {
			parent = g.Parent
		}
	}
	for range len(spec.Switches) + 1 {
		if _, ok := findRootComplex(spec, parent); ok {
			return parent, true
		}
		next := ""
		for _, s := range spec.Switches {
			if s.Name == parent {
				next = s.Parent
			}
		}
		if next == "" {
			return "", false
		}
		parent = next
	}
	return "", false
}

func findRootComplex(spec *platform.Spec, name string) (platform.RootComplex, bool) {
	for _, rc := range spec.RootComplexes {
		if rc.Name == name {
			return rc, true
		}
	}
	return platform.RootComplex{}, false
}

// nodePath is the latency of the socket links from node a to node b.
func nodePath(m *machine.Machine, a, b int) (sim.Time, error) {
	src, err := m.HostMemory(a)
	if err != nil {
		return 0, err
	}
	dst, err := m.HostMemory(b)
	if err != nil {
		return 0, err
	}
	r, err := m.Route(src, dst)
	if err != nil {
		return 0, err
	}
	return latencyWithout(r, dramLinks(m), ""), nil
}

func dramLinks(m *machine.Machine) map[*fabric.Link]bool {
	dram := map[*fabric.Link]bool{}
	for _, n := range m.Nodes {
		dram[n.DRAM] = true
	}
	return dram
}

// latencyWithout sums r's latency (data hops) but for the links in skip
// and the link named skipName.
func latencyWithout(r fabric.Route, skip map[*fabric.Link]bool, skipName string) sim.Time {
	var t sim.Time
	for _, h := range r.Hops {
		if h.Load || skip[h.Link] || h.Link.Name() == skipName {
			continue
		}
		t += h.Link.Latency()
	}
	return t
}

func scale(m *machine.Machine, t sim.Time) sim.Time {
	if f := m.Fabric.Factors().Latency; f != 0 && f != 1 {
		return sim.Time(math.Round(float64(t) * f))
	}
	return t
}

// atsRoundTrip is a translation request from device dev to the unit and
// its completion back: the device's PCIe links and switches up to its
// root port, both ways. A device the placed machine does not know, or a
// unit not placed, pays DefaultATSRoundTrip.
func (u *Unit) atsRoundTrip(dev string) sim.Time {
	m := u.m
	if m == nil {
		return DefaultATSRoundTrip
	}
	for _, d := range m.Devices {
		if d.Name != dev {
			continue
		}
		host, err := m.HostMemory(d.Node)
		if err != nil {
			break
		}
		r, err := m.DMARoute(d.Side(), host, d.DMA())
		if err != nil {
			break
		}
		rc, _ := RootComplexOf(m.Spec, dev)
		return scale(m, 2*latencyWithout(r, dramLinks(m), rc))
	}
	return DefaultATSRoundTrip
}

package machine

import (
	"fmt"
	"math"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// CPUCopy is one CPU thread copying bytes within node's memory (a
// memcpy): a flow that reads and writes the node's DRAM, capped at the
// node's MemcpyRate. It blocks p until the copy is done and counts as p's
// CPU time.
func (m *Machine) CPUCopy(p *sim.Proc, name string, node int, bytes int64) error {
	return m.cpuCopy(p, name, node, bytes, false, 0)
}

// CPUCopyAt is CPUCopy by a copy routine of its own rate (bytes/s, one
// thread, local memory) instead of the node's MemcpyRate; 0 means that
// rate.
func (m *Machine) CPUCopyAt(p *sim.Proc, name string, node int, bytes int64, rate float64) error {
	return m.cpuCopy(p, name, node, bytes, false, rate)
}

// CPUCopyCached is one CPU thread copying bytes whose source is in its
// caches (a buffer it has just written) within node's memory: the
// node's MemcpyRate, and no DRAM traffic or latency, the lines being
// read from the cache and written into it. It blocks p until the copy
// is done and counts as p's CPU time.
func (m *Machine) CPUCopyCached(p *sim.Proc, name string, node int, bytes int64) error {
	if _, err := m.HostMemory(node); err != nil {
		return fmt.Errorf("memcpy %s: %w", name, err)
	}
	if bytes < 0 {
		return fmt.Errorf("memcpy %s: negative size %d", name, bytes)
	}
	p.Sleep(sim.TransferTime(float64(bytes), float64(m.Nodes[node].Spec.MemcpyRate.V)))
	return nil
}

// CPUCopyOut is one CPU thread copying bytes out of a buffer that stays
// in its caches (a staging buffer a copy engine has just filled) into
// node's memory with non-temporal stores: a flow that only writes the
// node's DRAM, capped at the node's StreamCopyRate. It blocks p until
// the copy is done and counts as p's CPU time.
func (m *Machine) CPUCopyOut(p *sim.Proc, name string, node int, bytes int64) error {
	return m.cpuCopy(p, name, node, bytes, true, 0)
}

func (m *Machine) cpuCopy(p *sim.Proc, name string, node int, bytes int64, out bool, at float64) error {
	src, err := m.HostMemory(node)
	if err != nil {
		return fmt.Errorf("memcpy %s: %w", name, err)
	}
	if bytes < 0 {
		return fmt.Errorf("memcpy %s: negative size %d", name, bytes)
	}
	n := m.Nodes[node]
	rate := n.Spec.MemcpyRate.V
	route := fabric.Route{Hops: []fabric.Hop{{Link: n.DRAM, Dir: fabric.AtoB, Weight: 1}}}
	if out {
		rate = n.Spec.StreamCopyRate()
	} else if route, err = m.Route(src, src); err != nil {
		return fmt.Errorf("memcpy %s: %w", name, err)
	}
	if at > 0 {
		rate = platform.Rate(at)
	}
	start := p.Now()
	fl := m.Fabric.Start(name, route, bytes, fabric.MaxRate(float64(rate)))
	p.Wait(fl.Done())
	p.Charge(p.Now() - start)
	return nil
}

// CPUAccess is one CPU thread on node cpu moving bytes of memory on
// node home at a local rate of local bytes/s (its memcpy or uncached
// rate on its own node's memory): a remote access. toMemory says the
// bytes go from the CPU to memory (uncached stores); otherwise they
// come from memory to the CPU (loads, and the line fills of
// write-allocate stores).
//
// It costs the idle remote load latency (platform.Spec.LoadLatency:
// home's DRAM latency and the round trip over the socket links; a
// store's data leaves with its request, so it pays one way), then the
// bytes as a flow over home's DRAM and the socket links, capped at the
// rate the thread's line fills in flight allow over that latency
// (platform.Spec.ThreadRate) and sharing every link with the other
// flows crossing it (a GPU's DMA from the same memory among them). On
// the thread's own node it is the same flow over the node's DRAM,
// capped at local. It blocks p until the bytes are through and counts
// as p's CPU time.
func (m *Machine) CPUAccess(p *sim.Proc, name string, cpu, home int, bytes int64, toMemory bool, local float64) error {
	if _, err := m.HostMemory(cpu); err != nil {
		return fmt.Errorf("CPU access %s: %w", name, err)
	}
	if _, err := m.HostMemory(home); err != nil {
		return fmt.Errorf("CPU access %s: %w", name, err)
	}
	if bytes < 0 || !(local > 0) {
		return fmt.Errorf("CPU access %s: size %d at %v B/s", name, bytes, local)
	}
	hops := m.cpuPath(home, cpu)
	dram := fabric.Hop{Link: m.Nodes[home].DRAM, Dir: fabric.BtoA, Weight: 1}
	if toMemory {
		hops = reverse(hops)
		dram.Dir = fabric.AtoB
		hops = append(hops, dram)
	} else {
		hops = append([]fabric.Hop{dram}, hops...)
	}
	limit := float64(m.Spec.ThreadRate(cpu, home, platform.Rate(local)))
	if !toMemory {
		// The request crosses the socket links before any data comes
		// back; the flow's route pays the DRAM and the way back.
		p.Sleep(m.requestLatency(cpu, home))
	}
	start := p.Now()
	fl := m.Fabric.Start(name, fabric.Route{Hops: hops}, bytes, fabric.MaxRate(limit))
	p.Wait(fl.Done())
	p.Charge(p.Now() - start)
	return nil
}

// LocalFlowMin is the smallest local CPU access that CPULocalAccess
// makes a flow on the node's DRAM bus; a smaller one is a sleep at the
// thread's rate, as if the bus were idle. A flow costs three events (its
// start, the fabric's recompute, its end) and a recompute over every
// flow on the fabric, where a sleep costs one event; accesses this small
// move too few bytes to matter to the DRAM's share (see
// docs/measurements/2026-11-25-numa-dram-sharing.md).
var LocalFlowMin int64 = 64 << 10

// CPULocalAccess is one CPU thread on node moving bytes of its own
// node's DRAM at most at rate bytes/s (its memcpy or uncached rate): a
// local access. From LocalFlowMin bytes on it is a flow on the node's
// DRAM bus capped at rate, sharing the bus max-min with every other
// flow on it (other threads' local accesses, remote threads' and
// devices' DMA), so that a thread alone takes bytes/rate, as a sleep
// would, and N threads together get at most the DRAM's bandwidth. The
// hop only loads the bus: the DRAM's latency is in the thread's rate
// already (Little's law over its line fills), as it was before the bus
// was shared. toMemory says the bytes go from the CPU to memory. It
// blocks p until the bytes are through and counts as p's CPU time.
func (m *Machine) CPULocalAccess(p *sim.Proc, name string, node int, bytes int64, toMemory bool, rate float64) error {
	// HostMemory's check, without making its endpoint: every CPU access
	// of a driver comes here.
	if node < 0 || node >= len(m.Nodes) {
		_, err := m.HostMemory(node)
		return fmt.Errorf("CPU access %s: %w", name, err)
	}
	if bytes < 0 || !(rate > 0) {
		return fmt.Errorf("CPU access %s: size %d at %v B/s", name, bytes, rate)
	}
	if bytes < LocalFlowMin {
		p.Sleep(m.accessTime(bytes, rate))
		return nil
	}
	dir := fabric.BtoA
	if toMemory {
		dir = fabric.AtoB
	}
	start := p.Now()
	fl := m.Fabric.Start(name, fabric.Route{Hops: []fabric.Hop{{Link: m.Nodes[node].DRAM, Dir: dir, Weight: 1, Load: true}}}, bytes, fabric.MaxRate(rate))
	p.Wait(fl.Done())
	p.Charge(p.Now() - start)
	return nil
}

// accessTimeEntry is one (bytes, rate) and its TransferTime.
type accessTimeEntry struct {
	bytes int64
	rate  float64
	t     sim.Time
}

// accessTime is sim.TransferTime(bytes, rate), rate > 0, for the last
// few pairs kept: a driver's accesses come back to a few sizes at a few
// rates (a status word, a packet, a descriptor), and the division and
// rounding cost more than the look-up. The zero entries match no call
// (rate > 0).
func (m *Machine) accessTime(bytes int64, rate float64) sim.Time {
	for i := range m.times {
		if e := &m.times[i]; e.bytes == bytes && e.rate == rate {
			return e.t
		}
	}
	t := sim.TransferTime(float64(bytes), rate)
	m.times[m.timesNext] = accessTimeEntry{bytes: bytes, rate: rate, t: t}
	m.timesNext = (m.timesNext + 1) % len(m.times)
	return t
}

// CPUCopyBetween is one CPU thread on node cpu copying bytes from memory
// on node src to memory on node dst (a memcpy across nodes). With both
// on cpu's node it is CPUCopy. Otherwise it is one flow from src's DRAM
// over the socket links to the CPU and on to dst's DRAM, sharing every
// link it crosses, capped at the node's MemcpyRate scaled by Little's
// law: the line fill buffers serve the loads and the stores' line fills
// alike, so a copy's lines wait the mean of the two load latencies
// (platform.Spec.LoadLatency), and the rate falls by local latency over
// that mean. A remote source's request crosses the links first. It
// blocks p until the copy is done and counts as p's CPU time.
func (m *Machine) CPUCopyBetween(p *sim.Proc, name string, cpu, src, dst int, bytes int64) error {
	return m.CPUCopyBetweenAt(p, name, cpu, src, dst, bytes, 0)
}

// CPUCopyBetweenAt is CPUCopyBetween by a copy routine of its own local
// rate (bytes/s; 0 means the node's MemcpyRate), scaled as that is.
func (m *Machine) CPUCopyBetweenAt(p *sim.Proc, name string, cpu, src, dst int, bytes int64, at float64) error {
	if src == cpu && dst == cpu {
		return m.CPUCopyAt(p, name, cpu, bytes, at)
	}
	for _, n := range []int{cpu, src, dst} {
		if _, err := m.HostMemory(n); err != nil {
			return fmt.Errorf("memcpy %s: %w", name, err)
		}
	}
	if bytes < 0 {
		return fmt.Errorf("memcpy %s: negative size %d", name, bytes)
	}
	in, out := m.cpuPath(src, cpu), m.cpuPath(cpu, dst)
	hops := append([]fabric.Hop{{Link: m.Nodes[src].DRAM, Dir: fabric.BtoA, Weight: 1}}, in...)
	hops = append(hops, out...)
	if dst == src {
		// Read and written through the same bus: twice the bytes.
		hops[0].Weight = 2
	} else {
		hops = append(hops, fabric.Hop{Link: m.Nodes[dst].DRAM, Dir: fabric.AtoB, Weight: 1})
	}
	s := m.Spec
	rate := float64(m.Nodes[cpu].Spec.MemcpyRate.V)
	if at > 0 {
		rate = at
	}
	if l := s.LoadLatency(cpu, cpu); l > 0 {
		mean := float64(s.LoadLatency(cpu, src)+s.LoadLatency(cpu, dst)) / 2
		rate *= float64(l) / mean
	}
	if src != cpu {
		p.Sleep(m.requestLatency(cpu, src))
	}
	start := p.Now()
	fl := m.Fabric.Start(name, fabric.Route{Hops: hops}, bytes, fabric.MaxRate(rate))
	p.Wait(fl.Done())
	p.Charge(p.Now() - start)
	return nil
}

// cpuPath is the socket links a CPU's access crosses from node a to
// node b. Nodes that no socket link joins (a platform that describes
// several nodes but not their links) are reached with no link between
// them: the access then costs its memory's DRAM alone, as the platform
// gives nothing else (platform.Spec.LoadLatency agrees).
func (m *Machine) cpuPath(a, b int) []fabric.Hop {
	hops, err := m.socketPath(a, b)
	if err != nil {
		return nil
	}
	return hops
}

// requestLatency is a read request's one way over the socket links from
// node cpu to node home, scaled by the fabric's latency factor as the
// flows' own latencies are.
func (m *Machine) requestLatency(cpu, home int) sim.Time {
	lat := m.Spec.SocketLatency(cpu, home)
	if f := m.Spec.Fabric.Latency(); f != 1 {
		lat = sim.Time(math.Round(float64(lat) * f))
	}
	return lat
}

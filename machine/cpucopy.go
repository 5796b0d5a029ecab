package machine

import (
	"fmt"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/sim"
)

// CPUCopy is one CPU thread copying bytes within node's memory (a
// memcpy): a flow that reads and writes the node's DRAM, capped at the
// node's MemcpyRate. It blocks p until the copy is done and counts as p's
// CPU time.
func (m *Machine) CPUCopy(p *sim.Proc, name string, node int, bytes int64) error {
	return m.cpuCopy(p, name, node, bytes, false)
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
	return m.cpuCopy(p, name, node, bytes, true)
}

func (m *Machine) cpuCopy(p *sim.Proc, name string, node int, bytes int64, out bool) error {
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
	start := p.Now()
	fl := m.Fabric.Start(name, route, bytes, fabric.MaxRate(float64(rate)))
	p.Wait(fl.Done())
	p.Charge(p.Now() - start)
	return nil
}

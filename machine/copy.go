package machine

import (
	"fmt"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/sim"
)

// Transfer is one copy as observers see it once it has ended.
type Transfer struct {
	Name     string
	Engine   *Engine
	Src, Dst Endpoint
	Bytes    int64
	// Call is when the program issued the copy, Start when the engine
	// began moving data (after the call's overhead and any queueing),
	// End when the last byte landed.
	Call, Start, End sim.Time
	Route            fabric.Route
	Flow             *fabric.Flow
}

// CopyOp describes one synchronous copy, as cuMemcpy or a driver's
// memcpy-by-DMA issues it.
type CopyOp struct {
	Name     string
	Engine   *Engine
	Src, Dst Endpoint
	Bytes    int64
	// Overhead is the call's fixed cost before the engine starts (driver
	// work, push buffer, doorbell) and the completion path after it,
	// lumped together ahead of the data.
	Overhead sim.Time
}

// Observe registers fn to be called for every finished transfer, in the
// order they end.
func (m *Machine) Observe(fn func(Transfer)) { m.observers = append(m.observers, fn) }

// Copy performs op from process p and returns when the last byte has
// landed: the call's overhead, a wait for the engine if it is busy, then
// the bytes as a flow over the route (its latency, then the data at the
// fair share of every link on the way).
func (m *Machine) Copy(p *sim.Proc, op CopyOp) (Transfer, error) {
	if op.Bytes < 0 {
		return Transfer{}, fmt.Errorf("copy %s: negative size %d", op.Name, op.Bytes)
	}
	if op.Engine == nil {
		return Transfer{}, fmt.Errorf("copy %s: no engine", op.Name)
	}
	route, err := m.DMARoute(op.Src, op.Dst, op.Engine.Master)
	if err != nil {
		return Transfer{}, fmt.Errorf("copy %s: %w", op.Name, err)
	}
	t := Transfer{Name: op.Name, Engine: op.Engine, Src: op.Src, Dst: op.Dst, Bytes: op.Bytes, Call: p.Now(), Route: route}
	p.Sleep(op.Overhead)
	op.Engine.Acquire(p)
	t.Start = p.Now()
	t.Flow = m.Fabric.Start(op.Name, route, op.Bytes, fabric.Tag(op.Engine))
	p.Wait(t.Flow.Done())
	t.End = p.Now()
	op.Engine.Release()
	for _, fn := range m.observers {
		fn(t)
	}
	return t, nil
}

// CPUCopy is one CPU thread copying bytes within node's memory (a
// memcpy): a flow that reads and writes the node's DRAM, capped at the
// node's MemcpyRate. It blocks p until the copy is done and counts as p's
// CPU time.
func (m *Machine) CPUCopy(p *sim.Proc, name string, node int, bytes int64) error {
	return m.cpuCopy(p, name, node, bytes, false)
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

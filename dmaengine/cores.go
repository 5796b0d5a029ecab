package dmaengine

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// Cores accounts CPU time per core, the model's counterpart of the
// per-CPU busy time of /proc/stat: a process attached to a core has the
// CPU time it spends from then on (sim.Proc.CPUTime: Sleep is computing,
// waiting is idle) counted on that core, and a model can charge time to
// a core directly. Both the DMA path (submission, doorbell, interrupt
// handler, polling) and the CPU-copy path are accounted the same way, so
// a scenario can report CPU time per operation per path.
type Cores struct {
	charged []sim.Time
	procs   []attached
}

type attached struct {
	p    *sim.Proc
	core int
	base sim.Time // p's CPU time when attached
}

// NewCores accounts n cores, numbered 0..n-1.
func NewCores(n int) *Cores { return &Cores{charged: make([]sim.Time, n)} }

// Len is the number of cores.
func (c *Cores) Len() int { return len(c.charged) }

func (c *Cores) check(core int) {
	if core < 0 || core >= len(c.charged) {
		panic(fmt.Sprintf("dmaengine: core %d of %d", core, len(c.charged)))
	}
}

// Attach counts p's CPU time from now on core. A process attached again
// moves: its time so far stays where it was counted.
func (c *Cores) Attach(p *sim.Proc, core int) {
	c.check(core)
	c.Detach(p)
	c.procs = append(c.procs, attached{p: p, core: core, base: p.CPUTime()})
}

// Detach stops counting p; the time counted so far stays on its core.
func (c *Cores) Detach(p *sim.Proc) {
	for i, a := range c.procs {
		if a.p == p {
			c.charged[a.core] += p.CPUTime() - a.base
			c.procs = append(c.procs[:i], c.procs[i+1:]...)
			return
		}
	}
}

// Charge adds d of CPU time to core.
func (c *Cores) Charge(core int, d sim.Time) {
	c.check(core)
	c.charged[core] += d
}

// Busy is the CPU time counted on core so far.
func (c *Cores) Busy(core int) sim.Time {
	c.check(core)
	t := c.charged[core]
	for _, a := range c.procs {
		if a.core == core {
			t += a.p.CPUTime() - a.base
		}
	}
	return t
}

// Total is the CPU time counted on all cores.
func (c *Cores) Total() sim.Time {
	var t sim.Time
	for i := range c.charged {
		t += c.Busy(i)
	}
	return t
}

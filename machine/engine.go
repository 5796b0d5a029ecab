package machine

import "github.com/dmalab/dmalab/sim"

// Engine is a DMA engine: a GPU copy engine or a device's DMA queue. It
// executes one transfer at a time, in the order they were submitted; a
// transfer submitted while it is busy waits in its queue.
type Engine struct {
	Name string
	// Master is the PCIe agent the engine's transfers are (DMARoute).
	Master Master
	eng    *sim.Engine
	busy   bool
	// queue holds the waiters, each woken with the engine handed over.
	queue []*sim.Completion
	// Busy accumulates the time the engine spent executing transfers.
	Busy  sim.Time
	since sim.Time
}

func newEngine(e *sim.Engine, name string, by Master) *Engine {
	return &Engine{Name: name, eng: e, Master: by}
}

// Acquire blocks p until the engine is free and takes it.
func (en *Engine) Acquire(p *sim.Proc) {
	if en.busy {
		c := en.eng.NewNamedCompletion(en.Name)
		en.queue = append(en.queue, c)
		p.Wait(c)
	} else {
		en.busy = true
	}
	en.since = en.eng.Now()
}

// Release hands the engine to the next waiter, or frees it.
func (en *Engine) Release() {
	en.Busy += en.eng.Now() - en.since
	if len(en.queue) == 0 {
		en.busy = false
		return
	}
	next := en.queue[0]
	en.queue = en.queue[1:]
	next.Complete()
}

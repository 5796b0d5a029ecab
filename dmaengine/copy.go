package dmaengine

import (
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Mode is how a driver learns that a descriptor has completed.
type Mode int

const (
	// Interrupt: the descriptor asks for an MSI; the handler (RequestIRQ)
	// reaps it and the submitter sleeps until then. Costs the
	// interrupt's latency, and the handler's CPU time, per interrupt.
	Interrupt Mode = iota + 1
	// Polling: the submitter busy-polls the status word. Costs CPU time
	// for the whole wait.
	Polling
)

func (m Mode) String() string {
	switch m {
	case Interrupt:
		return "interrupt"
	case Polling:
		return "polling"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Copy is a memcpy by the engine of a MemToMem channel, from the
// driver's process p: size bytes from src to dst (bus addresses of
// mapped or coherent memory) as descriptors of at most MaxLen bytes,
// one doorbell, then a wait for the last one by mode. In Interrupt mode
// a handler must have been requested (RequestIRQ, with nil for the
// default one that reaps everything completed); every
// descriptor asks for an interrupt (the vector's auto-mask coalesces
// them). When the ring fills, Copy rings the doorbell and waits for
// room. It returns the last descriptor's completion.
func (ch *Chan) Copy(p *sim.Proc, dst, src mem.DMAAddr, size uint64, mode Mode) (Completed, error) {
	if ch.kind != MemToMem {
		return Completed{}, fmt.Errorf("copy on %s: a %v channel", ch.name, ch.kind)
	}
	if mode != Interrupt && mode != Polling {
		return Completed{}, fmt.Errorf("copy on %s: mode %v", ch.name, mode)
	}
	if size == 0 {
		return Completed{}, fmt.Errorf("copy on %s: %w: 0", ch.name, ErrBadLength)
	}
	var flags Flags
	if mode == Interrupt {
		if !ch.irqActive {
			return Completed{}, fmt.Errorf("copy on %s: interrupt mode without a handler (RequestIRQ)", ch.name)
		}
		flags = FlagIRQ
	}
	var last Cookie
	rung := true
	for off := uint64(0); off < size; {
		if ch.Space() == 0 {
			if !rung {
				ch.IssuePending(p)
				rung = true
			}
			ch.WaitSpace(p, mode, nil)
		}
		n := min(size-off, MaxLen)
		c, err := ch.Submit(p, Descriptor{Src: src + mem.DMAAddr(off), Dst: dst + mem.DMAAddr(off), Len: n, Flags: flags})
		if err != nil {
			return Completed{}, err
		}
		last, rung = c, false
		off += n
	}
	ch.IssuePending(p)
	if mode == Polling {
		ch.Poll(p, last, nil)
	} else {
		ch.Wait(p, last)
	}
	done, _ := ch.Lookup(last)
	return done, nil
}

// WaitSpace blocks p until the ring has a free entry: by polling (it
// reaps, handing completions to fn, and spins) or, in Interrupt mode, by
// sleeping until the interrupt handler has reaped.
func (ch *Chan) WaitSpace(p *sim.Proc, mode Mode, fn func(Completed)) {
	if mode == Polling {
		for ch.Space() == 0 {
			if ch.Reap(p, 0, fn) == 0 {
				p.Sleep(ch.poll)
			}
		}
		return
	}
	p.WaitUntil(ch.reapCond, func() bool { return ch.Space() > 0 })
}

// CPUCopy is the CPU path: p, on a core of node, copies size bytes from
// src to dst (kernel linear-map addresses: kmalloc or page-allocator
// memory) with memcpy through the caches. Its CPU time is the copy's
// whole duration, at the node's memcpy rate as mem charges it.
func CPUCopy(p *sim.Proc, m *mem.Memory, node int, dst, src mem.VirtAddr, size uint64) error {
	sp, err := m.VirtToPhys(src)
	if err != nil {
		return fmt.Errorf("cpu copy from %v: %w", src, err)
	}
	dp, err := m.VirtToPhys(dst)
	if err != nil {
		return fmt.Errorf("cpu copy to %v: %w", dst, err)
	}
	m.CopyPhys(p, node, dp, sp, size)
	return nil
}

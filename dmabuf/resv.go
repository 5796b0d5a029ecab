package dmabuf

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
)

// Usage is enum dma_resv_usage: why a fence is in a reservation
// object. The order matters: waiting for a usage waits for the fences
// of that usage and of every one before it.
type Usage uint8

const (
	// UsageKernel is DMA_RESV_USAGE_KERNEL: memory management (a move,
	// a clear) every user waits for.
	UsageKernel Usage = iota
	// UsageWrite is DMA_RESV_USAGE_WRITE: implicit-sync writers.
	UsageWrite
	// UsageRead is DMA_RESV_USAGE_READ: implicit-sync readers.
	UsageRead
	// UsageBookkeep is DMA_RESV_USAGE_BOOKKEEP: fences implicit sync
	// never waits for (explicitly synchronised submissions, page-table
	// updates).
	UsageBookkeep
)

var usageNames = [...]string{"kernel", "write", "read", "bookkeep"}

func (u Usage) String() string {
	if int(u) < len(usageNames) {
		return usageNames[u]
	}
	return fmt.Sprintf("Usage(%d)", int(u))
}

// UsageRW is dma_resv_usage_rw: what an access waits for. A reader
// waits for the writers (and the kernel): UsageWrite. A writer waits
// for the readers too: UsageRead. Neither waits for bookkeeping fences.
func UsageRW(write bool) Usage {
	if write {
		return UsageRead
	}
	return UsageWrite
}

// Resv is struct dma_resv: the fences of the work using one buffer,
// each with its usage. Locking (dma_resv_lock, ww_mutex) and the
// reservation of slots (dma_resv_reserve_fences) are not modelled: one
// process runs at a time.
type Resv struct {
	l      *Layer
	name   string
	fences []resvFence
}

type resvFence struct {
	f *Fence
	u Usage
}

// AddFence is dma_resv_add_fence: f joins the object with usage u. A
// fence of the same context with a usage at least u and not later than
// f is replaced, as is any fence already signalled; the others stay.
// Fence arrays are added as their parts (dma_fence_unwrap).
func (r *Resv) AddFence(p *sim.Proc, f *Fence, u Usage) {
	for _, part := range f.Parts() {
		r.add(part, u)
	}
	if r.l.Hooks.Active() {
		r.l.emit(p, Event{Op: OpResvAdd, Buffer: r.name, Fence: f.String(), FenceIDs: ids(f.Parts()), Usage: u})
	}
}

func (r *Resv) add(f *Fence, u Usage) {
	for i, old := range r.fences {
		if old.f.context == f.context && old.u >= u && !old.f.IsLater(f) || old.f.signaled {
			r.fences[i] = resvFence{f, u}
			return
		}
	}
	r.fences = append(r.fences, resvFence{f, u})
}

// Fences lists the fences with usage u or before it, in the order
// they were added (dma_resv_for_each_fence).
func (r *Resv) Fences(u Usage) []*Fence {
	var out []*Fence
	for _, x := range r.fences {
		if x.u <= u {
			out = append(out, x.f)
		}
	}
	return out
}

// TestSignaled is dma_resv_test_signaled: every fence with usage u or
// before it has signalled.
func (r *Resv) TestSignaled(u Usage) bool {
	for _, f := range r.Fences(u) {
		if !f.signaled {
			return false
		}
	}
	return true
}

// WaitTimeout is dma_resv_wait_timeout: process p waits for every
// fence with usage u or before it, one after the other, within timeout
// in all. It returns the time left; a timeout is an error wrapping
// ErrTimedOut.
func (r *Resv) WaitTimeout(p *sim.Proc, u Usage, timeout sim.Time) (sim.Time, error) {
	fences := r.Fences(u)
	start, left := p.Now(), timeout
	var err error
	blocked := false
	if timeout > 0 && r.l.Hooks.Active() {
		var pending []*Fence
		for _, f := range fences {
			if !f.signaled {
				pending = append(pending, f)
			}
		}
		if len(pending) > 0 {
			r.l.emit(p, Event{Header: sim.Header{Cause: sim.CauseQueue}, Op: OpFenceWaitBegin, Buffer: r.name, Usage: u, FenceIDs: ids(pending)})
		}
	}
	for _, f := range fences {
		blocked = blocked || !f.signaled
		if left, err = f.wait(p, left); err != nil {
			err = fmt.Errorf("dma_resv_wait_timeout(%s, %v, %v): %v: %w", r.name, u, timeout, f, err)
			break
		}
	}
	if blocked {
		r.l.emit(p, Event{Header: sim.Header{Cause: sim.CauseQueue}, Op: OpFenceWait, Buffer: r.name, Usage: u, Waited: p.Now() - start}.fail(err))
	}
	return left, err
}

// ids are the fences' ids, for an event.
func ids(fs []*Fence) []uint64 {
	out := make([]uint64, len(fs))
	for i, f := range fs {
		out[i] = f.id
	}
	return out
}

package dmabuf

import (
	"slices"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/sim"
)

// TestCheckerEvents pins what the checker reads from the events: a
// fence's making and id, the start and end of a wait that blocks, the
// fences a reservation holds, a get's descriptor, an attachment's
// number on every operation (a second detach included) and the pages
// of an export.
func TestCheckerEvents(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	app := r.proc("app")
	nic := r.dev("nic0")
	var f *Fence
	var b *Buffer
	r.run(func(p *sim.Proc) {
		fd, err := r.system.Allocate(p, app, 8192, 0)
		must(t, err)
		if _, err := r.l.Get(p, app, fd+7); err == nil {
			t.Error("get of a bad descriptor succeeded")
		}
		b, err = r.l.Get(p, app, fd)
		must(t, err)
		a, err := b.Attach(p, nic, AttachOptions{})
		must(t, err)
		_, err = a.Map(p, dma.ToDevice)
		must(t, err)
		must(t, a.Detach(p))
		if err := a.Detach(p); err == nil {
			t.Error("second detach succeeded")
		}
		f = r.l.NewFence("drv", "tl", r.l.ContextAlloc(1), 4)
		b.Resv().AddFence(p, f, UsageWrite)
		p.Spawn("signaller", func(q *sim.Proc) {
			q.Sleep(sim.Microsecond)
			must(t, f.Signal(q))
		})
		_, err = b.Resv().WaitTimeout(p, UsageWrite, sim.Second)
		must(t, err)
	})
	var ops []Op
	for _, e := range r.events {
		switch e.Op {
		case OpExport:
			if len(e.Pages) != 2 || e.Pages[0] != Pages(b)[0] {
				t.Errorf("export pages %v, want %v", e.Pages, Pages(b))
			}
		case OpGet:
			if e.FD != 3 && e.FD != 10 || e.Failed != (e.FD == 10) {
				t.Errorf("get of fd %d, failed %v", e.FD, e.Failed)
			}
		case OpAttach, OpMap, OpDetach:
			if e.Attachment != 1 {
				t.Errorf("%v of attachment %d, want 1", e.Op, e.Attachment)
			}
		case OpFenceInit, OpResvAdd, OpFenceWaitBegin, OpFenceSignal:
			if !slices.Equal(e.FenceIDs, []uint64{f.ID()}) {
				t.Errorf("%v names fences %v, want [%d]", e.Op, e.FenceIDs, f.ID())
			}
			if e.Op == OpFenceInit && (e.Context != f.Context() || e.Seqno != 4 || e.Fence != f.String()) {
				t.Errorf("fence-init %+v", e)
			}
		default:
			continue
		}
		ops = append(ops, e.Op)
	}
	want := []Op{OpExport, OpGet, OpGet, OpAttach, OpMap, OpDetach, OpDetach, OpFenceInit, OpResvAdd, OpFenceWaitBegin, OpFenceSignal}
	if !slices.Equal(ops, want) {
		t.Errorf("events %v, want %v", ops, want)
	}
	if n := r.count(OpDetach); n != 2 {
		t.Errorf("%d detach events, want 2 (the second failed)", n)
	}
}

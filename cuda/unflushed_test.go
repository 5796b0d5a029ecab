package cuda

import (
	"testing"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// A synchronous copy into device memory that the GPUDirect driver's
// window covers is observed as OpCopyUnflushed when it returns, with
// the window; with CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set, or into host
// memory, it is not.
func TestCopyUnflushedObserved(t *testing.T) {
	const window = 2 * sim.Microsecond
	for _, tc := range []struct {
		name    string
		sync    bool
		toHost  bool
		unflush int
	}{{"device", false, false, 1}, {"sync-memops", true, false, 0}, {"to-host", false, true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			r := h200(t)
			r.d.SetMemopsWindow(func(gpu.Allocation) sim.Time { return window })
			var returned sim.Time
			r.run(func(p *sim.Proc) {
				dev, err := r.ctx.MemAlloc(p, 1<<20)
				must(t, err)
				host, err := r.ctx.MemAllocHost(p, 1<<20)
				must(t, err)
				if tc.sync {
					must(t, r.ctx.PointerSetAttribute(PointerAttributeSyncMemops, 1, dev))
				}
				dst, src := dev, mem.GPUAddr(host)
				if tc.toHost {
					dst, src = src, dst
				}
				must(t, r.ctx.Memcpy(p, dst, src, 1<<20))
				returned = p.Now()
			})
			got := r.ops(OpCopyUnflushed)
			if len(got) != tc.unflush {
				t.Fatalf("%d copy-unflushed observations, want %d: %v", len(got), tc.unflush, got)
			}
			if tc.unflush > 0 && (got[0].Visible != window || got[0].Time != returned || !got[0].Write || got[0].Target.Kind != MemDevice) {
				t.Errorf("observation %+v: want the window %v at the copy's return %v", got[0], window, returned)
			}
		})
	}
}

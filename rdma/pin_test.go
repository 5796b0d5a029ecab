package rdma

import (
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ibv_reg_mr pins the anonymous pages it registers (ib_umem_get's
// pin_user_pages: they must not migrate under the HCA's DMA), and
// ibv_dereg_mr releases them.
func TestRegMRPinsAnonymousPages(t *testing.T) {
	p := newPair(t, false)
	h := p.a
	h.proc.Kernel().SetMemory(h.m.Mem)
	const size = 8 * mem.PageSize
	p.run(t, func(th *sim.Proc) {
		va, err := h.proc.MmapAnon(size)
		if err != nil {
			t.Fatal(err)
		}
		mr, err := h.pd.RegMR(th, uint64(va), size, full)
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range []uint64{0, size - mem.PageSize} {
			if n := h.m.Mem.Pinned(va + mem.VirtAddr(off)); n != 1 {
				t.Errorf("page +%#x pinned %d times while registered, want 1", off, n)
			}
		}
		if err := mr.Dereg(th); err != nil {
			t.Fatal(err)
		}
		if n := h.m.Mem.Pinned(va); n != 0 {
			t.Errorf("pinned %d times after ibv_dereg_mr, want 0", n)
		}
	})
}

package nvp2p

import (
	"slices"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// A pin's event lists its BAR1 pages (what a checker needs to name the
// GPU memory behind a peer's access), and a refused token-0 pin's names
// the memory's owner beside the caller.
func TestGetPagesEvent(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		buf := r.alloc(p, 2<<20)
		pt, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, buf, 2*GPUPageSize, nop, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.p2p.GetPages(p, r.other.KernelProcess(), 0, 0, buf, GPUPageSize, nop, nil); err == nil {
			t.Fatal("token-0 pin from another process succeeded")
		}
		ev := r.ops(OpGetPages)
		if len(ev) != 2 {
			t.Fatalf("%d get_pages events", len(ev))
		}
		var want []mem.PhysAddr
		for _, pg := range pt.Pages {
			want = append(want, pg.PhysicalAddress)
		}
		if !slices.Equal(ev[0].BAR, want) {
			t.Errorf("pin's BAR1 pages %v, want %v", ev[0].BAR, want)
		}
		if e := ev[1]; e.Err == nil || e.Process != "other" || e.Owner != "app" || e.BAR != nil {
			t.Errorf("refused pin: process %q, owner %q, BAR %v, err %v", e.Process, e.Owner, e.BAR, e.Err)
		}
	})
}

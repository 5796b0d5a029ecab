package rdma

import (
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestEvents: the verbs and the HCA report through Hooks, in order.
func TestEvents(t *testing.T) {
	p := newPair(t, false)
	var got []string
	for _, h := range []*host{p.a, p.b} {
		h.dev.Hooks.Hook(func(e *Event) {
			got = append(got, fmt.Sprintf("%s %v %v", map[*host]string{p.a: "A", p.b: "B"}[h], e.Op, e.Status))
		})
	}
	p.run(t, func(th *sim.Proc) {
		dst, src := p.a.buf(t, 4096), p.b.buf(t, 4096)
		mra, _ := p.a.pd.RegMR(th, dst, 4096, full)
		mrb, _ := p.b.pd.RegMR(th, src, 4096, 0)
		_, qb := p.connect(t, th, full, 7, 12)
		_ = qb.PostSend(th, SendWR{WRID: 1, Opcode: WRRDMAWrite, Signaled: true, SGList: []SGE{{Addr: src, Length: 4096, LKey: mrb.LKey}}, RemoteAddr: dst, RKey: mra.RKey})
		_ = qb.PostSend(th, SendWR{WRID: 2, Opcode: WRRDMAWrite, Signaled: true, SGList: []SGE{{Addr: src, Length: 4096, LKey: mrb.LKey}}, RemoteAddr: dst, RKey: 0})
		p.b.cq.Wait(th, 0, 2)
		_ = mra.Dereg(th)
	})
	want := "[A ibv_reg_mr IBV_WC_SUCCESS B ibv_reg_mr IBV_WC_SUCCESS B ibv_post_send IBV_WC_SUCCESS B ibv_post_send IBV_WC_SUCCESS " +
		"B cqe IBV_WC_SUCCESS B cqe IBV_WC_REM_ACCESS_ERR A ibv_dereg_mr IBV_WC_SUCCESS]"
	if fmt.Sprint(got) != want {
		t.Errorf("events\n%v\nwant\n%s", got, want)
	}
}

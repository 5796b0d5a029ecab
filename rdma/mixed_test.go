package rdma

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestDifferentPresets: a dgx-h100 and a 2s-4gpu-pcie on one engine;
// the 2s-4gpu-pcie host RDMA-READs the DGX's memory.
func TestDifferentPresets(t *testing.T) {
	eng := sim.New(1)
	p := &pair{eng: eng, a: newHost(t, eng, "dgx-h100", true), b: newHost(t, eng, "2s-4gpu-pcie", true)}
	var err error
	if p.wire, err = Connect(p.a.dev, p.b.dev, DefaultCable); err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	want := pattern(n, 0xc3)
	var wc []WC
	var got []byte
	p.run(t, func(th *sim.Proc) {
		remote, local := p.a.buf(t, n), p.b.buf(t, n)
		p.a.fill(th, remote, want)
		mra, _ := p.a.pd.RegMR(th, remote, n, AccessRemoteRead)
		mrb, _ := p.b.pd.RegMR(th, local, n, AccessLocalWrite)
		_, qb := p.connect(t, th, full, 7, 12)
		_ = qb.PostSend(th, SendWR{WRID: 5, Opcode: WRRDMARead, SGList: []SGE{{Addr: local, Length: n, LKey: mrb.LKey}},
			RemoteAddr: remote, RKey: mra.RKey, Signaled: true})
		wc = p.b.cq.Wait(th, 0, 1)
		got = p.b.read(th, local, n)
	})
	if wc[0].Status != WCSuccess || !bytes.Equal(got, want) {
		t.Fatalf("read from the DGX: %v (%s)", wc[0].Status, wc[0].Detail)
	}
}

// TestSendTooLong: a SEND longer than the posted receive completes the
// receive with IBV_WC_LOC_LEN_ERR and the send with
// IBV_WC_REM_INV_REQ_ERR, and writes nothing.
func TestSendTooLong(t *testing.T) {
	p := newPair(t, false)
	var sw, rw []WC
	var before, after uint64
	p.run(t, func(th *sim.Proc) {
		dst, src := p.a.buf(t, 8192), p.b.buf(t, 8192)
		mra, _ := p.a.pd.RegMR(th, dst, 4096, AccessLocalWrite)
		mrb, _ := p.b.pd.RegMR(th, src, 8192, 0)
		qa, qb := p.connect(t, th, 0, 7, 1)
		_ = qa.PostRecv(th, RecvWR{WRID: 1, SGList: []SGE{{Addr: dst, Length: 4096, LKey: mra.LKey}}})
		pa := physOf(t, p.a, dst)
		before = uint64(p.a.m.Mem.LatestIn(pa, 4096))
		_ = qb.PostSend(th, SendWR{WRID: 2, Opcode: WRSend, SGList: []SGE{{Addr: src, Length: 8192, LKey: mrb.LKey}}})
		sw = p.b.cq.Wait(th, 0, 1)
		rw = p.a.cq.Poll(th, 0, 4)
		after = uint64(p.a.m.Mem.LatestIn(pa, 4096))
	})
	if sw[0].Status != WCRemInvReqErr || len(rw) != 1 || rw[0].Status != WCLocLenErr || rw[0].WRID != 1 {
		t.Fatalf("send %v, receive %+v", sw[0].Status, rw)
	}
	if before != after {
		t.Error("the receive buffer was written")
	}
}

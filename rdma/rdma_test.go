package rdma

import (
	"bytes"
	"errors"
	"math"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

const full = AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead

func TestWriteBytesEndToEnd(t *testing.T) {
	p := newPair(t, true)
	const n = 1<<20 + 123
	want := pattern(n, 0x5a)
	var wc []WC
	var got []byte
	p.run(t, func(th *sim.Proc) {
		dst := p.a.buf(t, 2<<20)
		src := p.b.buf(t, 2<<20)
		p.b.fill(th, src, want)
		mra, err := p.a.pd.RegMR(th, dst, n, full)
		if err != nil {
			t.Fatal(err)
		}
		mrb, err := p.b.pd.RegMR(th, src, n, AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		_, qb := p.connect(t, th, full, 7, 12)
		if err := qb.PostSend(th, SendWR{WRID: 42, Opcode: WRRDMAWrite, Signaled: true,
			SGList: []SGE{{Addr: src, Length: n, LKey: mrb.LKey}}, RemoteAddr: dst, RKey: mra.RKey}); err != nil {
			t.Fatal(err)
		}
		wc = p.b.cq.Wait(th, 0, 1)
		got = p.a.read(th, dst, n)
	})
	if len(wc) != 1 || wc[0].Status != WCSuccess || wc[0].WRID != 42 || wc[0].ByteLen != n || wc[0].Opcode != WCRDMAWrite {
		t.Fatalf("completion %+v", wc)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("host A's memory does not hold what host B wrote")
	}
	// Every byte crossed the wire once from B to A, with a header per
	// 4 KiB packet.
	pk := (n + 4095) / 4096
	if got, want := p.wire.Link.Stats().Bytes[1], float64(n+pk*DefaultHeader); math.Abs(got-want) > 1 {
		t.Errorf("wire B→A carried %v bytes, want %v", got, want)
	}
}

func TestReadBytes(t *testing.T) {
	p := newPair(t, true)
	const n = 300 << 10
	want := pattern(n, 0x33)
	var wc []WC
	var got []byte
	p.run(t, func(th *sim.Proc) {
		remote := p.a.buf(t, n)
		local := p.b.buf(t, n)
		p.a.fill(th, remote, want)
		mra, _ := p.a.pd.RegMR(th, remote, n, AccessLocalWrite|AccessRemoteRead)
		mrb, _ := p.b.pd.RegMR(th, local, n, AccessLocalWrite)
		_, qb := p.connect(t, th, full, 7, 12)
		if err := qb.PostSend(th, SendWR{WRID: 7, Opcode: WRRDMARead, Signaled: true,
			SGList: []SGE{{Addr: local, Length: n, LKey: mrb.LKey}}, RemoteAddr: remote, RKey: mra.RKey}); err != nil {
			t.Fatal(err)
		}
		wc = p.b.cq.Wait(th, 0, 1)
		got = p.b.read(th, local, n)
	})
	if wc[0].Status != WCSuccess || wc[0].Opcode != WCRDMARead || wc[0].ByteLen != n {
		t.Fatalf("completion %+v", wc[0])
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the read did not bring host A's bytes")
	}
	// The response crossed A→B, the request B→A.
	if s := p.wire.Link.Stats(); s.Bytes[0] < n || s.Bytes[1] >= 1024 {
		t.Errorf("wire bytes A→B %v, B→A %v", s.Bytes[0], s.Bytes[1])
	}
}

func TestSendRecvAndRNR(t *testing.T) {
	const n = 10000
	cases := []struct {
		name string
		// recvAt: when host A posts its receive (-1: never).
		recvAt   sim.Time
		rnrRetry uint8
		want     Status
		minTime  sim.Time
	}{
		{"posted", 0, 0, WCSuccess, 0},
		// RNR timer 1 is 10 µs: the receive posted at 25 µs is found by
		// the third try.
		{"late, retried", 25 * sim.Microsecond, 7, WCSuccess, 20 * sim.Microsecond},
		{"never, 3 retries", -1, 3, WCRNRRetryExcErr, 30 * sim.Microsecond},
		{"never, no retry", -1, 0, WCRNRRetryExcErr, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, true)
			want := pattern(n, 1)
			var sendWC, recvWC []WC
			var got []byte
			var t0, t1 sim.Time
			p.run(t, func(th *sim.Proc) {
				dst := p.a.buf(t, n)
				src := p.b.buf(t, n)
				p.b.fill(th, src, want)
				mra, err := p.a.pd.RegMR(th, dst, n, AccessLocalWrite)
				if err != nil {
					t.Fatal(err)
				}
				mrb, err := p.b.pd.RegMR(th, src, n, 0)
				if err != nil {
					t.Fatal(err)
				}
				qa, qb := p.connect(t, th, 0, c.rnrRetry, 1)
				post := func(th *sim.Proc) {
					if err := qa.PostRecv(th, RecvWR{WRID: 9, SGList: []SGE{{Addr: dst, Length: n, LKey: mra.LKey}}}); err != nil {
						t.Error(err)
					}
				}
				if c.recvAt == 0 {
					post(th)
				} else if c.recvAt > 0 {
					at := th.Now() + c.recvAt
					th.Spawn("recv", func(r *sim.Proc) { r.Sleep(at - r.Now()); post(r) })
				}
				t0 = th.Now()
				if err := qb.PostSend(th, SendWR{WRID: 8, Opcode: WRSend, Signaled: true, SGList: []SGE{{Addr: src, Length: n, LKey: mrb.LKey}}}); err != nil {
					t.Fatal(err)
				}
				sendWC = p.b.cq.Wait(th, 0, 1)
				t1 = th.Now()
				recvWC = p.a.cq.Poll(th, 0, 4)
				got = p.a.read(th, dst, n)
			})
			if sendWC[0].Status != c.want {
				t.Fatalf("send completed %v (%s), want %v", sendWC[0].Status, sendWC[0].Detail, c.want)
			}
			if t1-t0 < c.minTime {
				t.Errorf("took %v, want at least %v of RNR waits", t1-t0, c.minTime)
			}
			if c.want == WCSuccess {
				if len(recvWC) != 1 || recvWC[0].Status != WCSuccess || recvWC[0].Opcode != WCRecv || recvWC[0].ByteLen != n || recvWC[0].WRID != 9 {
					t.Fatalf("receive completion %+v", recvWC)
				}
				if !bytes.Equal(got, want) {
					t.Fatal("received bytes differ")
				}
			} else if len(recvWC) != 0 || bytes.Equal(got, want) {
				t.Fatalf("nothing may be received: %+v", recvWC)
			}
		})
	}
}

// TestRemoteErrors: a bad rkey, a missing permission on the MR or on the
// QP are IBV_WC_REM_ACCESS_ERR with nothing written (the versions of
// the target do not move); a bad lkey IBV_WC_LOC_PROT_ERR; a QP that
// does not exist IBV_WC_RETRY_EXC_ERR after the retries. Each error
// puts the QP in ERR and flushes the next WQE.
func TestRemoteErrors(t *testing.T) {
	const n = 64 << 10
	cases := []struct {
		name      string
		mrAccess  Access
		qpAccess  Access
		rkeyDelta uint32
		lkeyDelta uint32
		op        Opcode
		badDest   bool
		want      Status
	}{
		{"bad rkey", full, full, 0x100, 0, WRRDMAWrite, false, WCRemAccessErr},
		{"MR without REMOTE_WRITE", AccessLocalWrite | AccessRemoteRead, full, 0, 0, WRRDMAWrite, false, WCRemAccessErr},
		{"QP without REMOTE_WRITE", full, AccessRemoteRead, 0, 0, WRRDMAWrite, false, WCRemAccessErr},
		{"read of MR without REMOTE_READ", AccessLocalWrite | AccessRemoteWrite, full, 0, 0, WRRDMARead, false, WCRemAccessErr},
		{"bad lkey", full, full, 0, 0x100, WRRDMAWrite, false, WCLocProtErr},
		{"no remote QP", full, full, 0, 0, WRRDMAWrite, true, WCRetryExcErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPair(t, true)
			var wcs []WC
			var state QPState
			var before, after uint64
			var took sim.Time
			p.run(t, func(th *sim.Proc) {
				dst := p.a.buf(t, n)
				src := p.b.buf(t, n)
				p.b.fill(th, src, pattern(n, 9))
				mra, _ := p.a.pd.RegMR(th, dst, n, c.mrAccess)
				mrb, _ := p.b.pd.RegMR(th, src, n, AccessLocalWrite)
				qa, qb := p.a.qp(t, th), p.b.qp(t, th)
				dest := qa.Num
				if c.badDest {
					dest = 0x999
				}
				rts(t, qa, qb.Num, c.qpAccess, 7, 12)
				rts(t, qb, dest, c.qpAccess, 7, 12)
				pa := physOf(t, p.a, dst)
				before = uint64(p.a.m.Mem.LatestIn(pa, n))
				t0 := th.Now()
				wr := SendWR{WRID: 1, Opcode: c.op, Signaled: true, SGList: []SGE{{Addr: src, Length: n, LKey: mrb.LKey + c.lkeyDelta}},
					RemoteAddr: dst, RKey: mra.RKey + c.rkeyDelta}
				if err := qb.PostSend(th, wr); err != nil {
					t.Fatal(err)
				}
				wr.WRID = 2
				if err := qb.PostSend(th, wr); err != nil {
					t.Fatal(err)
				}
				wcs = p.b.cq.Wait(th, 0, 2)
				took = th.Now() - t0
				state = qb.State()
				after = uint64(p.a.m.Mem.LatestIn(pa, n))
			})
			if wcs[0].Status != c.want || wcs[0].WRID != 1 {
				t.Fatalf("first completion %v (%s), want %v", wcs[0].Status, wcs[0].Detail, c.want)
			}
			if wcs[1].Status != WCWRFlushErr || wcs[1].WRID != 2 {
				t.Errorf("second completion %+v, want flushed", wcs[1])
			}
			if state != QPSErr {
				t.Errorf("QP in %v, want ERR", state)
			}
			if before != after {
				t.Errorf("target written: version %d → %d", before, after)
			}
			if c.want == WCRetryExcErr {
				if min := AckTimeout(14) * 8; took < min {
					t.Errorf("retry exceeded after %v, want at least 8 timeouts (%v)", took, min)
				}
			}
		})
	}
}

func TestVerbsErrnos(t *testing.T) {
	p := newPair(t, false)
	p.run(t, func(th *sim.Proc) {
		h := p.a
		va := h.buf(t, 1<<20)
		mr, err := h.pd.RegMR(th, va, 4096, AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		cq, _ := h.dev.CreateCQ(th, 8)
		qp := h.qp(t, th)
		tooMany := make([]SGE, 5)
		cases := []struct {
			name string
			err  error
			want syscall.Errno
		}{
			{"reg_mr remote write without local write", func() error { _, err := h.pd.RegMR(th, va, 4096, AccessRemoteWrite); return err }(), syscall.EINVAL},
			{"reg_mr of nothing", func() error { _, err := h.pd.RegMR(th, va, 0, 0); return err }(), syscall.EINVAL},
			{"reg_mr of unmapped memory", func() error { _, err := h.pd.RegMR(th, 0x1000, 4096, 0); return err }(), syscall.EFAULT},
			{"create_cq of 0", func() error { _, err := h.dev.CreateCQ(th, 0); return err }(), syscall.EINVAL},
			{"create_cq too large", func() error { _, err := h.dev.CreateCQ(th, MaxCQE+1); return err }(), syscall.EINVAL},
			{"create_qp without CQ", func() error {
				_, err := h.pd.CreateQP(th, QPInitAttr{Type: QPTypeRC, Cap: QPCap{MaxSendWR: 1}})
				return err
			}(), syscall.EINVAL},
			{"create_qp beyond max_qp_wr", func() error {
				_, err := h.pd.CreateQP(th, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: QPTypeRC, Cap: QPCap{MaxSendWR: MaxQPWR + 1}})
				return err
			}(), syscall.EINVAL},
			{"create_qp UD", func() error {
				_, err := h.pd.CreateQP(th, QPInitAttr{SendCQ: cq, RecvCQ: cq, Type: 4, Cap: QPCap{MaxSendWR: 1}})
				return err
			}(), syscall.EINVAL},
			{"post_send in RESET", qp.PostSend(th, SendWR{Opcode: WRSend}), syscall.EINVAL},
			{"post_recv in RESET", qp.PostRecv(th, RecvWR{}), syscall.EINVAL},
			{"RESET → RTR", qp.Modify(QPAttr{State: QPSRTR}, AttrState|maskToRTR), syscall.EINVAL},
			{"RESET → INIT without port", qp.Modify(QPAttr{State: QPSInit}, AttrState|AttrAccessFlags|AttrPKeyIndex), syscall.EINVAL},
			{"modify without state", qp.Modify(QPAttr{}, AttrPort), syscall.EINVAL},
			{"dealloc_pd in use", h.pd.Dealloc(), syscall.EBUSY},
			{"destroy_cq in use", h.cq.Destroy(th), syscall.EBUSY},
		}
		if err := qp.Modify(QPAttr{State: QPSInit, PortNum: 1}, AttrState|maskToInit); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, []struct {
			name string
			err  error
			want syscall.Errno
		}{
			{"INIT → RTR without dest QPN", qp.Modify(QPAttr{State: QPSRTR, PathMTU: MTU4096}, AttrState|maskToRTR&^AttrDestQPN), syscall.EINVAL},
			{"INIT → RTS", qp.Modify(QPAttr{State: QPSRTS}, AttrState|maskToRTS), syscall.EINVAL},
			{"post_send in INIT", qp.PostSend(th, SendWR{Opcode: WRSend}), syscall.EINVAL},
		}...)
		rts2 := func() error {
			if err := qp.Modify(QPAttr{State: QPSRTR, PathMTU: MTU4096, DestQPN: 0x999}, AttrState|maskToRTR); err != nil {
				return err
			}
			return qp.Modify(QPAttr{State: QPSRTS, Timeout: 1}, AttrState|maskToRTS)
		}
		if err := rts2(); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, []struct {
			name string
			err  error
			want syscall.Errno
		}{
			{"post_send with too many SGEs", qp.PostSend(th, SendWR{Opcode: WRSend, SGList: tooMany}), syscall.EINVAL},
			{"post_send of an unknown opcode", qp.PostSend(th, SendWR{Opcode: 99}), syscall.EINVAL},
		}...)
		// 16 WQEs fill the send queue (the HCA is still fetching the
		// first); the 17th is ENOMEM.
		var full error
		for i := range 17 {
			if err := qp.PostSend(th, SendWR{WRID: uint64(i), Opcode: WRSend}); err != nil {
				full = err
				break
			}
		}
		cases = append(cases, struct {
			name string
			err  error
			want syscall.Errno
		}{"post_send to a full queue", full, syscall.ENOMEM})
		for _, c := range cases {
			if !errors.Is(c.err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
			}
		}
		if err := mr.Dereg(th); err != nil {
			t.Fatal(err)
		}
		if err := mr.Dereg(th); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("second dereg: %v", err)
		}
		// The 16 sends time out one after the other (to 1 is 8.192 µs,
		// 8 tries each); then the QP can go.
		h.cq.Wait(th, 0, 16)
		if err := qp.Destroy(th); err != nil {
			t.Fatal(err)
		}
		if err := h.cq.Destroy(th); err != nil {
			t.Errorf("destroy_cq once free: %v", err)
		}
		if err := cq.Destroy(th); err != nil {
			t.Error(err)
		}
		if err := h.pd.Dealloc(); err != nil {
			t.Errorf("dealloc_pd once free: %v", err)
		}
	})
}

func TestRegMRMemlock(t *testing.T) {
	p := newPair(t, false)
	h := p.a
	p.run(t, func(th *sim.Proc) {
		va := h.buf(t, 16<<20)
		if got := h.proc.MemlockLimit(); got != 8<<20 {
			t.Fatalf("RLIMIT_MEMLOCK %d", got)
		}
		t0 := th.Now()
		mr1, err := h.pd.RegMR(th, va, 6<<20, AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := th.Now()-t0, sim.Time(6<<20/4096)*DefaultPinCost; got < want {
			t.Errorf("reg_mr of 6 MiB took %v, want at least the pinning %v", got, want)
		}
		if got := h.proc.LockedVM(); got != 6<<20 {
			t.Errorf("locked_vm %d after 6 MiB", got)
		}
		// 4 MiB more passes the 8 MiB limit: ENOMEM, nothing pinned.
		if _, err := h.pd.RegMR(th, va+8<<20, 4<<20, AccessLocalWrite); !errors.Is(err, syscall.ENOMEM) {
			t.Errorf("reg_mr past RLIMIT_MEMLOCK: %v", err)
		}
		if got := h.proc.LockedVM(); got != 6<<20 {
			t.Errorf("locked_vm %d after the refusal", got)
		}
		// An unaligned range pins every page it touches.
		mr2, err := h.pd.RegMR(th, va+8<<20+100, 4096, AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.proc.LockedVM(); got != 6<<20+2*4096 {
			t.Errorf("locked_vm %d after an unaligned page", got)
		}
		_ = mr1.Dereg(th)
		_ = mr2.Dereg(th)
		if got := h.proc.LockedVM(); got != 0 {
			t.Errorf("locked_vm %d after dereg", got)
		}
		if _, err := h.pd.RegMR(th, va+8<<20, 4<<20, AccessLocalWrite); err != nil {
			t.Errorf("reg_mr after dereg: %v", err)
		}
	})
}

package rdma

import (
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// writeRun RDMA-writes size bytes from B to A once and returns the
// time from the post to the completion, and the completion.
func writeRun(t *testing.T, p *pair, size uint64) (sim.Time, WC) {
	var took sim.Time
	var wc []WC
	p.run(t, func(th *sim.Proc) {
		dst, src := p.a.buf(t, size), p.b.buf(t, size)
		for _, h := range []*host{p.a, p.b} {
			if err := h.proc.SetMemlockLimit(2 * size); err != nil {
				t.Fatal(err)
			}
		}
		mra, err := p.a.pd.RegMR(th, dst, size, full)
		if err != nil {
			t.Fatal(err)
		}
		mrb, err := p.b.pd.RegMR(th, src, size, AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		_, qb := p.connect(t, th, full, 7, 12)
		t0 := th.Now()
		if err := qb.PostSend(th, SendWR{WRID: 1, Opcode: WRRDMAWrite, Signaled: true,
			SGList: []SGE{{Addr: src, Length: size, LKey: mrb.LKey}}, RemoteAddr: dst, RKey: mra.RKey}); err != nil {
			t.Fatal(err)
		}
		wc = p.b.cq.Wait(th, 0, 1)
		took = wc[0].Time - t0
	})
	return took, wc[0]
}

// TestWriteThroughput: a large RDMA WRITE runs at the slowest of the
// wire (the line rate less a header per 4 KiB packet) and the two
// hosts' PCIe links (their payload rate at Max_Payload_Size: the
// transaction layer's rate the machine calibrates), less at most the
// pipeline's fill and drain: three pieces of the 64 (the first through
// the faster stages, and the last two, which the last stage holds at
// once): 64/67.
func TestWriteThroughput(t *testing.T) {
	const size = 64 << 20
	cases := []struct {
		name string
		set  []string // on host A, the responder
		wire bool     // the wire binds
	}{
		{"gen5 x16: the 400 Gb/s wire binds", nil, true},
		{"responder on gen3 x16: its PCIe link binds", []string{"devices.nic0.link.gen", "3"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eng := sim.New(1)
			p := &pair{eng: eng, a: newHost(t, eng, "2s-4gpu-pcie", false, c.set...), b: newHost(t, eng, "2s-4gpu-pcie", false)}
			var err error
			if p.wire, err = Connect(p.a.dev, p.b.dev, DefaultCable); err != nil {
				t.Fatal(err)
			}
			took, wc := writeRun(t, p, size)
			if wc.Status != WCSuccess {
				t.Fatal(wc.Status)
			}
			wire := p.wire.Link.Capacity() * 4096 / (4096 + DefaultHeader)
			pa := p.a.m.Fabric.Link("nic0.pcie").Capacity()
			pb := p.b.m.Fabric.Link("nic0.pcie").Capacity()
			bound := min(wire, pa, pb)
			if c.wire != (bound == wire) {
				t.Fatalf("bounds: wire %.4g, PCIe A %.4g, B %.4g B/s: the case's premise fails", wire, pa, pb)
			}
			rate := float64(size) / took.Seconds()
			t.Logf("%.4g GB/s in %v (wire %.4g, PCIe A %.4g, B %.4g GB/s)", rate/1e9, took, wire/1e9, pa/1e9, pb/1e9)
			if rate > bound*1.0001 || rate < bound*64/67 {
				t.Errorf("%.4g GB/s, want within [%.4g, %.4g] (wire %.4g, PCIe A %.4g, B %.4g)",
					rate/1e9, bound*64/67/1e9, bound/1e9, wire/1e9, pa/1e9, pb/1e9)
			}
		})
	}
}

// TestDeterministic: the same run twice gives the same times, to the
// picosecond, and the same wire counters.
func TestDeterministic(t *testing.T) {
	var got []string
	for range 2 {
		p := newPair(t, true)
		took, wc := writeRun(t, p, 3<<20+17)
		got = append(got, fmt.Sprint(took, wc, p.wire.Link.Stats()))
	}
	if got[0] != got[1] {
		t.Errorf("runs differ:\n%s\n%s", got[0], got[1])
	}
}

// TestWireShared: two QPs writing 16 MiB each at once share the wire:
// both finish together, the two messages in the time the wire takes
// for both (within the same bounds as one message of twice the size).
func TestWireShared(t *testing.T) {
	const size = 16 << 20
	p := newPair(t, false)
	var t0 sim.Time
	var wcs []WC
	p.run(t, func(th *sim.Proc) {
		for _, h := range []*host{p.a, p.b} {
			_ = h.proc.SetMemlockLimit(4 * size)
		}
		dst, src := p.a.buf(t, 2*size), p.b.buf(t, 2*size)
		mra, _ := p.a.pd.RegMR(th, dst, 2*size, full)
		mrb, _ := p.b.pd.RegMR(th, src, 2*size, 0)
		_, q1 := p.connect(t, th, full, 7, 12)
		_, q2 := p.connect(t, th, full, 7, 12)
		t0 = th.Now()
		for i, q := range []*QP{q1, q2} {
			off := uint64(i) * size
			_ = q.PostSend(th, SendWR{WRID: uint64(i), Opcode: WRRDMAWrite, Signaled: true,
				SGList: []SGE{{Addr: src + off, Length: size, LKey: mrb.LKey}}, RemoteAddr: dst + off, RKey: mra.RKey})
		}
		wcs = p.b.cq.Wait(th, 0, 2)
	})
	bound := p.wire.Link.Capacity() * 4096 / (4096 + DefaultHeader)
	rate := float64(2*size) / (wcs[1].Time - t0).Seconds()
	if rate > bound*1.0001 || rate < bound*64/67 {
		t.Errorf("two messages at %.4g GB/s together, want within [%.4g, %.4g]", rate/1e9, bound*64/67/1e9, bound/1e9)
	}
	if d := wcs[1].Time - wcs[0].Time; d < 0 || float64(d) > 0.05*float64(wcs[1].Time-t0) {
		t.Errorf("completions %v apart: the wire was not shared", d)
	}
}

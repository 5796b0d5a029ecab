package dmalab

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/nvp2p/peermem"
	"github.com/dmalab/dmalab/rdma"
)

// TestRDMAWriteIntoGPUMemory: host B's HCA RDMA-writes 1 MiB into
// memory host A's program allocated with cuMemAlloc and registered
// through nvidia-peermem (nvidia_p2p pins it in BAR1). The bytes land
// in gpu0's VRAM over nic0 → sw0 → gpu0, never through the root
// complex; when the program frees the memory the free callback
// invalidates the MR without calling put_pages, and BAR1 is free again.
func TestRDMAWriteIntoGPUMemory(t *testing.T) {
	a, err := Boot("2s-4gpu-pcie", Options{Payload: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Boot("2s-4gpu-pcie", Options{Payload: true, Engine: a.Engine})
	if err != nil {
		t.Fatal(err)
	}
	env := func(s *System) rdma.Env {
		return rdma.Env{Machine: s.Machine, Mem: s.Mem, DMA: s.DMA, Kernel: s.Kernel}
	}
	ha, _ := rdma.Open(env(a), "nic0", rdma.Params{})
	hb, _ := rdma.Open(env(b), "nic0", rdma.Params{})
	if _, err := rdma.Connect(ha, hb, rdma.DefaultCable); err != nil {
		t.Fatal(err)
	}
	p2p, err := a.NVP2P()
	if err != nil {
		t.Fatal(err)
	}
	var ev []nvp2p.Event
	p2p.Hooks.Hook(func(e *nvp2p.Event) { ev = append(ev, *e) })
	peermem.New(p2p, nil).Register(ha)
	cu, _ := a.CUDA()

	const n = 1 << 20
	msg := bytes.Repeat([]byte{3, 1, 4, 1, 5, 9, 2, 6}, n/8)
	var got []byte
	var wc rdma.WC
	var rcBytes, gpuBytes float64
	var invalidated bool
	err = a.Run("server", func(p *Process) error {
		t := p.Thread
		pr, err := cu.Attach(p.Process)
		if err != nil {
			return err
		}
		ctx, err := pr.PrimaryContext(0)
		if err != nil {
			return err
		}
		gbuf, err := ctx.MemAlloc(t, 2<<20)
		if err != nil {
			return err
		}
		pb, _ := b.Kernel.NewProcess("client", 0)
		bufB, _ := b.Mem.Vmalloc(0, n)
		if err := pb.MM.Map(kernel.VMA{Start: bufB, Size: n, Name: "anon"}); err != nil {
			return err
		}
		b.Mem.WriteBytes(t, 0, bufB, msg)
		pdA, _ := ha.AllocPD(p.Process)
		pdB, _ := hb.AllocPD(pb)
		mrA, err := pdA.RegMR(t, uint64(gbuf), n, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
		if err != nil {
			return err
		}
		if peer, _ := mrA.Peer(); !peer {
			return errors.New("GPU memory not registered through nv_mem")
		}
		mrB, err := pdB.RegMR(t, uint64(bufB), n, 0)
		if err != nil {
			return err
		}
		cqA, _ := ha.CreateCQ(t, 4)
		cqB, _ := hb.CreateCQ(t, 4)
		ia := rdma.QPInitAttr{SendCQ: cqA, RecvCQ: cqA, Type: rdma.QPTypeRC, Cap: rdma.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}
		qa, _ := pdA.CreateQP(t, ia)
		ia.SendCQ, ia.RecvCQ = cqB, cqB
		qb, _ := pdB.CreateQP(t, ia)
		for _, q := range []struct {
			qp   *rdma.QP
			dest uint32
		}{{qa, qb.Num}, {qb, qa.Num}} {
			err := errors.Join(
				q.qp.Modify(rdma.QPAttr{State: rdma.QPSInit, PortNum: 1, AccessFlags: rdma.AccessRemoteWrite},
					rdma.AttrState|rdma.AttrPKeyIndex|rdma.AttrPort|rdma.AttrAccessFlags),
				q.qp.Modify(rdma.QPAttr{State: rdma.QPSRTR, PathMTU: rdma.MTU4096, DestQPN: q.dest},
					rdma.AttrState|rdma.AttrAV|rdma.AttrPathMTU|rdma.AttrDestQPN|rdma.AttrRQPSN|rdma.AttrMaxDestRdAtomic|rdma.AttrMinRNRTimer),
				q.qp.Modify(rdma.QPAttr{State: rdma.QPSRTS, Timeout: 14, RetryCnt: 7},
					rdma.AttrState|rdma.AttrSQPSN|rdma.AttrMaxQPRdAtomic|rdma.AttrRetryCnt|rdma.AttrRNRRetry|rdma.AttrTimeout))
			if err != nil {
				return err
			}
		}
		rc0 := a.Machine.Fabric.Link("sw0.pcie").Stats()
		g0 := a.Machine.Fabric.Link("gpu0.pcie").Stats()
		if err := qb.PostSend(t, rdma.SendWR{WRID: 1, Opcode: rdma.WRRDMAWrite, Signaled: true,
			SGList: []rdma.SGE{{Addr: uint64(bufB), Length: n, LKey: mrB.LKey}}, RemoteAddr: uint64(gbuf), RKey: mrA.RKey}); err != nil {
			return err
		}
		wc = cqB.Wait(t, 0, 1)[0]
		rc1 := a.Machine.Fabric.Link("sw0.pcie").Stats()
		g1 := a.Machine.Fabric.Link("gpu0.pcie").Stats()
		rcBytes = rc1.Bytes[0] + rc1.Bytes[1] - rc0.Bytes[0] - rc0.Bytes[1]
		gpuBytes = g1.Bytes[0] + g1.Bytes[1] - g0.Bytes[0] - g0.Bytes[1]
		_, vram, err := cu.System().Resolve(gbuf, n)
		if err != nil {
			return err
		}
		got = make([]byte, n)
		a.Mem.DeviceReadBytes("test", true, vram[0].Start, got)
		if err := ctx.MemFree(t, gbuf); err != nil {
			return err
		}
		_, invalidated = mrA.Peer()
		return mrA.Dereg(t)
	})
	if err != nil {
		t.Fatal(err)
	}
	if wc.Status != rdma.WCSuccess || !bytes.Equal(got, msg) {
		t.Fatalf("completion %v (%s); VRAM holds the message: %v", wc.Status, wc.Detail, bytes.Equal(got, msg))
	}
	if rcBytes != 0 || gpuBytes < n {
		t.Errorf("sw0's upstream link carried %v bytes (want 0), gpu0's link %v (want ≥ %d)", rcBytes, gpuBytes, n)
	}
	if !invalidated {
		t.Error("the MR was not invalidated when the memory was freed")
	}
	var calls []string
	for _, e := range ev {
		calls = append(calls, e.Op.String())
		if e.Op == nvp2p.OpPutPages && e.InCallback {
			t.Error("put_pages from inside the free callback")
		}
		if e.Op == nvp2p.OpCallbackReturned && !e.FreedTable {
			t.Error("the callback did not free the page table")
		}
	}
	want := []string{"get_pages", "dma_map_pages", "free_callback", "free_dma_mapping", "free_page_table", "callback_returned"}
	if len(calls) < len(want) {
		t.Fatalf("nvidia_p2p calls %v, want %v", calls, want)
	}
	for i, w := range want {
		if calls[i] != w {
			t.Fatalf("nvidia_p2p calls %v, want %v first", calls, want)
		}
	}
	bar := cu.System().Devices[0].BAR1()
	if bar.Info().Used != bar.Reserved() {
		t.Errorf("BAR1 used %d after the free, want the reserve %d", bar.Info().Used, bar.Reserved())
	}
}

package dmalab

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/rdma"
)

// TestTwoHostsOneEngine: a second system booted on the first's engine
// (Options.Engine) shares its virtual time, so their NICs can be
// joined by a wire and host B's NIC RDMA-writes host A's registered
// memory; systems on their own engines cannot be joined.
func TestTwoHostsOneEngine(t *testing.T) {
	for _, mode := range []string{platform.IOMMUOff, platform.IOMMUStrict} {
		t.Run("iommu "+mode, func(t *testing.T) { twoHosts(t, mode) })
	}
}

// twoHosts runs the RDMA WRITE with both hosts' IOMMUs in mode: through
// a translating IOMMU the MR is mapped in the NIC's domain and every
// access of the NIC is translated there.
func twoHosts(t *testing.T, mode string) {
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = platform.Set(spec, "iommu.mode", mode); err != nil {
		t.Fatal(err)
	}
	a, err := BootSpec(spec, Options{Payload: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := BootSpec(spec, Options{Payload: true, Check: true, Engine: a.Engine})
	if err != nil {
		t.Fatal(err)
	}
	if b.Engine != a.Engine || b.Machine == a.Machine || b.Mem == a.Mem {
		t.Fatal("B must share A's engine and nothing else")
	}
	env := func(s *System) rdma.Env {
		return rdma.Env{Machine: s.Machine, Mem: s.Mem, DMA: s.DMA, Kernel: s.Kernel}
	}
	ha, _ := rdma.Open(env(a), "nic0", rdma.Params{})
	hb, _ := rdma.Open(env(b), "nic0", rdma.Params{})
	if _, err := rdma.Connect(ha, hb, rdma.DefaultCable); err != nil {
		t.Fatal(err)
	}
	// A third system on an engine of its own cannot be cabled to them.
	c, _ := Boot("2s-4gpu-pcie", Options{})
	hc, _ := rdma.Open(env(c), "nic1", rdma.Params{})
	hb1, _ := rdma.Open(env(b), "nic1", rdma.Params{})
	if _, err := rdma.Connect(hb1, hc, rdma.DefaultCable); !errors.Is(err, rdma.ErrEngine) {
		t.Errorf("connect across engines: %v", err)
	}

	const n = 2 << 20
	msg := bytes.Repeat([]byte{1, 2, 3, 5, 8, 13}, n/6+1)[:n]
	var got []byte
	var wc rdma.WC
	err = a.Run("server", func(p *Process) error {
		t := p.Thread
		pb, err := b.Kernel.NewProcess("client", 0)
		if err != nil {
			return err
		}
		bufA, _ := a.Mem.Vmalloc(0, n)
		bufB, _ := b.Mem.Vmalloc(0, n)
		if err := errors.Join(p.MM.Map(kernel.VMA{Start: bufA, Size: n, Name: "anon"}), pb.MM.Map(kernel.VMA{Start: bufB, Size: n, Name: "anon"})); err != nil {
			return err
		}
		b.Mem.WriteBytes(t, 0, bufB, msg)
		pdA, _ := ha.AllocPD(p.Process)
		pdB, _ := hb.AllocPD(pb)
		mrA, err := pdA.RegMR(t, uint64(bufA), n, rdma.AccessLocalWrite|rdma.AccessRemoteWrite)
		if err != nil {
			return err
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
		if err := qb.PostSend(t, rdma.SendWR{WRID: 3, Opcode: rdma.WRRDMAWrite, Signaled: true,
			SGList: []rdma.SGE{{Addr: uint64(bufB), Length: n, LKey: mrB.LKey}}, RemoteAddr: uint64(bufA), RKey: mrA.RKey}); err != nil {
			return err
		}
		wc = cqB.Wait(t, 0, 1)[0]
		got = make([]byte, n)
		a.Mem.ReadBytes(t, 0, bufA, got)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if wc.Status != rdma.WCSuccess || !bytes.Equal(got, msg) {
		t.Fatalf("completion %v (%s); bytes equal: %v", wc.Status, wc.Detail, bytes.Equal(got, msg))
	}
	// A correct program: no diagnostic on either host, the MR's
	// mapping being the RDMA core's own.
	for _, s := range []*System{a, b} {
		for _, d := range s.Checker.Diagnostics() {
			t.Errorf("%s: %s: %s", s.Spec.Name, d.Class, d.Message)
		}
	}
	nic, _ := a.DMA.Device("nic0")
	if _, isMapper := nic.Translator().(dma.Mapper); isMapper != (mode == platform.IOMMUStrict) {
		t.Errorf("nic0 behind a domain: %v in mode %s", isMapper, mode)
	}
}

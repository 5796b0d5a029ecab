package nvme_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvme"
	"github.com/dmalab/dmalab/pci"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

var _ pci.Function = (*nvme.Controller)(nil)

func TestEnableHandshake(t *testing.T) {
	r := newRig(t, nvme.Options{})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		capReg := h.rd(p, nvme.RegCAP, 8)
		if mqes := capReg & nvme.CapMQESMask; mqes != nvme.DefaultMaxQueueEntries-1 {
			t.Errorf("CAP.MQES = %d, want %d", mqes, nvme.DefaultMaxQueueEntries-1)
		}
		if to := capReg >> nvme.CapTOShift & 0xff; to != 1 {
			t.Errorf("CAP.TO = %d, want 1 (500 ms covers a 1 ms ready time)", to)
		}
		if capReg&nvme.CapCSSNVM == 0 || capReg&nvme.CapCQR == 0 {
			t.Errorf("CAP = %#x: want CSS NVM and CQR", capReg)
		}
		if lo, hi := h.rd(p, nvme.RegCAP, 4), h.rd(p, nvme.RegCAP+4, 4); lo|hi<<32 != capReg {
			t.Errorf("CAP by halves %#x:%#x, whole %#x", hi, lo, capReg)
		}
		if vs := h.rd(p, nvme.RegVS, 4); vs != nvme.Version {
			t.Errorf("VS = %#x", vs)
		}
		if csts := h.rd(p, nvme.RegCSTS, 4); csts != 0 {
			t.Errorf("CSTS before enable = %#x", csts)
		}
		start := p.Now()
		csts := h.enable(p, 32)
		took := p.Now() - start
		if csts != nvme.CSTSReady {
			t.Fatalf("CSTS after enable = %#x, want RDY", csts)
		}
		if took < nvme.DefaultReadyTime || took > nvme.DefaultReadyTime+2*sim.Millisecond {
			t.Errorf("RDY after %v, want ReadyTime (%v) plus one poll", took, nvme.DefaultReadyTime)
		}
		if asq := h.rd(p, nvme.RegASQ, 8); asq != uint64(h.admin.sqDMA) {
			t.Errorf("ASQ reads %#x, wrote %v", asq, h.admin.sqDMA)
		}
		if r.c.PageSize() != mem.PageSize {
			t.Errorf("page size %d", r.c.PageSize())
		}
		h.wr(p, nvme.RegCC, 4, nvme.CCIOSQES64|nvme.CCIOCQES16)
		if csts := h.waitCSTS(p, capReg, nvme.CSTSReady, false); csts != 0 {
			t.Errorf("CSTS after disable = %#x", csts)
		}
	})
}

func TestEnableBadConfigIsFatal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		asq, aqa uint64
		cc       uint64
	}{
		{"no admin SQ", 0, 31 | 31<<16, nvme.CCEnable},
		{"unaligned ASQ", 0x1000_0800, 31 | 31<<16, nvme.CCEnable},
		{"one-entry queues", 0x1000_0000, 0, nvme.CCEnable},
		{"page size beyond MPSMAX", 0x1000_0000, 31 | 31<<16, nvme.CCEnable | 5<<nvme.CCMPSShift},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nvme.Options{})
			h := newHost(t, r)
			r.run(t, func(p *sim.Proc) {
				capReg := h.rd(p, nvme.RegCAP, 8)
				h.wr(p, nvme.RegAQA, 4, tc.aqa)
				h.wr(p, nvme.RegASQ, 8, tc.asq)
				h.wr(p, nvme.RegACQ, 8, 0x2000_0000)
				h.wr(p, nvme.RegCC, 4, tc.cc)
				if csts := h.waitCSTS(p, capReg, nvme.CSTSReady|nvme.CSTSFatal, true); csts != nvme.CSTSFatal {
					t.Errorf("CSTS = %#x, want CFS alone", csts)
				}
			})
		})
	}
}

func TestRegisterAccessErrors(t *testing.T) {
	r := newRig(t, nvme.Options{})
	regs := r.c.BARs()[0].Regs
	for _, tc := range []struct {
		name  string
		off   uint64
		size  int
		write bool
		want  string
	}{
		{"beyond BAR0", nvme.BAR0Size, 4, false, "beyond BAR0"},
		{"hole", 0x40, 4, false, "no register"},
		{"8-byte CC", nvme.RegCC, 8, false, "32-bit"},
		{"2-byte CAP", nvme.RegCAP, 2, false, "64-bit"},
		{"doorbell between strides", nvme.RegDoorbells + 2, 4, true, "not a doorbell"},
		{"8-byte doorbell", nvme.RegDoorbells, 8, true, "4-byte"},
		{"write CSTS", nvme.RegCSTS, 4, true, "read-only"},
		{"write CAP", nvme.RegCAP, 8, true, "read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			r.m.Engine.Spawn("driver", func(p *sim.Proc) {
				if tc.write {
					err = regs.WriteReg(p, tc.off, tc.size, 1)
				} else {
					_, err = regs.ReadReg(p, tc.off, tc.size)
				}
			})
			r.m.Engine.Run()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "nvme0") {
				t.Errorf("error %v, want one naming nvme0 and %q", err, tc.want)
			}
		})
	}
}

func TestRegisterCosts(t *testing.T) {
	r := newRig(t, nvme.Options{})
	h := newHost(t, r)
	ow := r.c.OneWay()
	if ow <= 0 {
		t.Fatalf("one-way latency %v", ow)
	}
	r.run(t, func(p *sim.Proc) {
		start := p.Now()
		h.rd(p, nvme.RegVS, 4)
		if got := p.Now() - start; got != 2*ow {
			t.Errorf("read took %v, want the round trip %v", got, 2*ow)
		}
		start = p.Now()
		h.wr(p, nvme.RegINTMS, 4, 1)
		if got := p.Now() - start; got != r.c.Options().MMIOWrite {
			t.Errorf("posted write took %v, want %v", got, r.c.Options().MMIOWrite)
		}
		if v := h.rd(p, nvme.RegINTMS, 4); v != 1 {
			t.Errorf("INTMS = %d after a write and a read behind it", v)
		}
	})
}

func TestIdentify(t *testing.T) {
	for _, lba := range []uint64{512, 4096} {
		t.Run(fmt.Sprintf("lba%d", lba), func(t *testing.T) {
			const capacity = 1 << 30
			r := newRig(t, nvme.Options{LBASize: lba, Capacity: capacity, Model: "test drive"})
			h := newHost(t, r)
			r.run(t, func(p *sim.Proc) {
				h.enable(p, 32)
				buf := h.pages(p, 2)
				prp1, prp2 := h.prp(p, buf, 0, nvme.IdentifyDataBytes, 0)
				e := h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminIdentify, PRP1: prp1, PRP2: prp2, CDW10: nvme.CNSController})
				mustStatus(t, "identify controller", e, nvme.StatusSuccess)
				id := h.read(p, buf, 0, nvme.IdentifyDataBytes)
				if mn := strings.TrimRight(string(id[24:64]), " "); mn != "test drive" {
					t.Errorf("MN %q", mn)
				}
				if id[77] != nvme.DefaultMDTS || id[512] != 0x66 || id[513] != 0x44 {
					t.Errorf("MDTS %d SQES %#x CQES %#x", id[77], id[512], id[513])
				}
				if nn := binary.LittleEndian.Uint32(id[516:]); nn != 1 {
					t.Errorf("NN = %d", nn)
				}
				if vs := binary.LittleEndian.Uint32(id[80:]); vs != nvme.Version {
					t.Errorf("VER = %#x", vs)
				}
				// The namespace's, with PRP1 at an offset so that
				// the 4 KiB cross into the second page.
				prp1, prp2 = h.prp(p, buf, 512, nvme.IdentifyDataBytes, 0)
				e = h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminIdentify, NSID: 1, PRP1: prp1, PRP2: prp2, CDW10: nvme.CNSNamespace})
				mustStatus(t, "identify namespace", e, nvme.StatusSuccess)
				ns := h.read(p, buf, 512, nvme.IdentifyDataBytes)
				if nsze := binary.LittleEndian.Uint64(ns[0:]); nsze != capacity/lba {
					t.Errorf("NSZE = %d, want %d", nsze, capacity/lba)
				}
				if lbads := ns[130]; 1<<lbads != lba {
					t.Errorf("LBADS = %d, want log2(%d)", lbads, lba)
				}
				if ns[33] != 1 {
					t.Errorf("DLFEAT = %d, want 1 (reads of unwritten blocks return zeros)", ns[33])
				}
				e = h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminIdentify, NSID: 2, PRP1: prp1, PRP2: prp2, CDW10: nvme.CNSNamespace})
				mustStatus(t, "identify namespace 2", e, nvme.StatusInvalidNamespace)
				e = h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminIdentify, PRP1: prp1, PRP2: prp2, CDW10: 0x55})
				mustStatus(t, "identify CNS 55h", e, nvme.StatusInvalidField)
			})
		})
	}
}

func TestCreateQueueErrors(t *testing.T) {
	r := newRig(t, nvme.Options{})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q := h.ioQueue(p, 1, 64, 1, true)
		nq := uint32(r.c.Queues())
		e := h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminSetFeatures, CDW10: nvme.FeatureNumQueues, CDW11: 3 | 3<<16})
		mustStatus(t, "set number of queues", e, nvme.StatusSuccess)
		if e.DW0 != (nq-1)|(nq-1)<<16 {
			t.Errorf("number of queues DW0 = %#x, want %d allocated (0-based) each", e.DW0, nq)
		}
		for _, tc := range []struct {
			name string
			cmd  nvme.Command
			want nvme.Status
		}{
			{"CQ 0", nvme.Command{Opcode: nvme.AdminCreateCQ, PRP1: uint64(q.cqDMA), CDW10: 0 | 63<<16, CDW11: 1}, nvme.StatusInvalidQID},
			{"CQ beyond the queue count", nvme.Command{Opcode: nvme.AdminCreateCQ, PRP1: uint64(q.cqDMA), CDW10: (nq + 1) | 63<<16, CDW11: 1}, nvme.StatusInvalidQID},
			{"CQ that exists", nvme.Command{Opcode: nvme.AdminCreateCQ, PRP1: uint64(q.cqDMA), CDW10: 1 | 63<<16, CDW11: 1}, nvme.StatusInvalidQID},
			{"CQ beyond MQES", nvme.Command{Opcode: nvme.AdminCreateCQ, PRP1: uint64(q.cqDMA), CDW10: 2 | (nvme.DefaultMaxQueueEntries)<<16, CDW11: 1}, nvme.StatusInvalidQSize},
			{"CQ not contiguous", nvme.Command{Opcode: nvme.AdminCreateCQ, PRP1: uint64(q.cqDMA), CDW10: 2 | 63<<16, CDW11: 0}, nvme.StatusInvalidField},
			{"CQ vector beyond MSI-X", nvme.Command{Opcode: nvme.AdminCreateCQ, PRP1: uint64(q.cqDMA), CDW10: 2 | 63<<16, CDW11: 1 | 2 | uint32(r.c.Vectors())<<16}, nvme.StatusInvalidVector},
			{"SQ on a missing CQ", nvme.Command{Opcode: nvme.AdminCreateSQ, PRP1: uint64(q.sqDMA), CDW10: 2 | 63<<16, CDW11: 1 | 2<<16}, nvme.StatusCQInvalid},
			{"delete CQ with its SQ", nvme.Command{Opcode: nvme.AdminDeleteCQ, CDW10: 1}, nvme.StatusInvalidQueueDeletion},
			{"delete missing SQ", nvme.Command{Opcode: nvme.AdminDeleteSQ, CDW10: 5}, nvme.StatusInvalidQID},
			{"unknown admin opcode", nvme.Command{Opcode: 0x7f}, nvme.StatusInvalidOpcode},
			{"get log page (not modelled)", nvme.Command{Opcode: 0x02}, nvme.StatusInvalidOpcode},
			{"other feature", nvme.Command{Opcode: nvme.AdminSetFeatures, CDW10: 0x01}, nvme.StatusInvalidField},
		} {
			mustStatus(t, tc.name, h.do(p, h.admin, tc.cmd), tc.want)
		}
		mustStatus(t, "delete SQ 1", h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminDeleteSQ, CDW10: 1}), nvme.StatusSuccess)
		mustStatus(t, "delete CQ 1", h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminDeleteCQ, CDW10: 1}), nvme.StatusSuccess)
		if s := r.c.Stats(); s.Errors != 12 {
			t.Errorf("stats: %d errors, want 12", s.Errors)
		}
	})
}

func TestWriteReadBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		lba  uint64
		nlb  int
		slba uint64
	}{
		{"512B one block", 512, 1, 0},
		{"512B 24 blocks", 512, 24, 1000},
		{"4K 8 blocks", 4096, 8, 77},
		{"4K 32 blocks (MDTS)", 4096, 32, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nvme.Options{LBASize: tc.lba})
			h := newHost(t, r)
			r.run(t, func(p *sim.Proc) {
				h.enable(p, 32)
				q := h.ioQueue(p, 1, 64, 1, false)
				n := uint64(tc.nlb) * tc.lba
				npages := int((n + mem.PageSize - 1) / mem.PageSize)
				src, dst := h.pages(p, npages), h.pages(p, npages)
				want := pattern(int(n), tc.nlb)
				h.fill(p, src, 0, want)
				prp1, prp2 := h.prp(p, src, 0, n, 0)
				mustStatus(t, "write", h.do(p, q, rw(nvme.CmdWrite, tc.slba, tc.nlb, prp1, prp2)), nvme.StatusSuccess)
				mustStatus(t, "flush", h.do(p, q, nvme.Command{Opcode: nvme.CmdFlush, NSID: 1}), nvme.StatusSuccess)
				prp1, prp2 = h.prp(p, dst, 0, n, 0)
				mustStatus(t, "read", h.do(p, q, rw(nvme.CmdRead, tc.slba, tc.nlb, prp1, prp2)), nvme.StatusSuccess)
				if got := h.read(p, dst, 0, n); !bytes.Equal(got, want) {
					t.Errorf("read back differs from what was written")
				}
				// The block after them was never written: zeros.
				h.fill(p, dst, 0, pattern(int(tc.lba), 99))
				mustStatus(t, "read unwritten", h.do(p, q, rw(nvme.CmdRead, tc.slba+uint64(tc.nlb), 1, uint64(dst.pages[0]), 0)), nvme.StatusSuccess)
				if got := h.read(p, dst, 0, tc.lba); !bytes.Equal(got, make([]byte, tc.lba)) {
					t.Errorf("unwritten block does not read as zeros")
				}
				s := r.c.Stats()
				if s.BytesWritten != n || s.BytesRead != n+tc.lba {
					t.Errorf("stats: %d written, %d read", s.BytesWritten, s.BytesRead)
				}
			})
		})
	}
}

func TestPRPLists(t *testing.T) {
	for _, tc := range []struct {
		name    string
		off     uint64 // PRP1's offset into its page
		n       uint64
		listOff uint64
	}{
		{"two pages, PRP2 a page", 0, 2 * mem.PageSize, 0},
		{"offset PRP1 over two pages", 2048, mem.PageSize, 0},
		{"five pages through a list", 0, 5 * mem.PageSize, 0},
		{"offset PRP1 through a list", 512, 7 * mem.PageSize, 0},
		{"list chained at its page's end", 0, 32 * mem.PageSize, mem.PageSize - 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nvme.Options{LBASize: 512})
			h := newHost(t, r)
			r.run(t, func(p *sim.Proc) {
				h.enable(p, 32)
				q := h.ioQueue(p, 1, 16, 1, false)
				npages := int((tc.off + tc.n + mem.PageSize - 1) / mem.PageSize)
				// Pages allocated one by one, used in reverse order:
				// each PRP entry points somewhere else.
				src := h.pages(p, npages)
				for i, j := 0, npages-1; i < j; i, j = i+1, j-1 {
					src.va[i], src.va[j] = src.va[j], src.va[i]
					src.pages[i], src.pages[j] = src.pages[j], src.pages[i]
				}
				dst := h.pages(p, npages)
				want := pattern(int(tc.n), 5)
				h.fill(p, src, tc.off, want)
				nlb := int(tc.n / 512)
				prp1, prp2 := h.prp(p, src, tc.off, tc.n, tc.listOff)
				mustStatus(t, "write", h.do(p, q, rw(nvme.CmdWrite, 8, nlb, prp1, prp2)), nvme.StatusSuccess)
				prp1, prp2 = h.prp(p, dst, tc.off, tc.n, tc.listOff)
				mustStatus(t, "read", h.do(p, q, rw(nvme.CmdRead, 8, nlb, prp1, prp2)), nvme.StatusSuccess)
				if got := h.read(p, dst, tc.off, tc.n); !bytes.Equal(got, want) {
					t.Errorf("data through the PRPs differs")
				}
			})
		})
	}
}

func TestCommandErrors(t *testing.T) {
	r := newRig(t, nvme.Options{LBASize: 4096, Capacity: 1 << 30})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q := h.ioQueue(p, 1, 16, 1, false)
		buf := h.pages(p, 2)
		a := uint64(buf.pages[0])
		blocks := uint64(1<<30) / 4096
		for _, tc := range []struct {
			name string
			cmd  nvme.Command
			want nvme.Status
		}{
			{"namespace 2", func() nvme.Command { c := rw(nvme.CmdRead, 0, 1, a, 0); c.NSID = 2; return c }(), nvme.StatusInvalidNamespace},
			{"past the end", rw(nvme.CmdRead, blocks-1, 2, a, uint64(buf.pages[1])), nvme.StatusLBAOutOfRange},
			{"beyond MDTS", rw(nvme.CmdRead, 0, 33, a, 0), nvme.StatusInvalidField},
			{"PRP1 not dword aligned", rw(nvme.CmdRead, 0, 1, a+2, 0), nvme.StatusPRPOffsetInvalid},
			{"PRP2 page with an offset", rw(nvme.CmdRead, 0, 2, a, uint64(buf.pages[1])+8), nvme.StatusPRPOffsetInvalid},
			{"unknown I/O opcode", nvme.Command{Opcode: 0x7e, NSID: 1}, nvme.StatusInvalidOpcode},
			{"fused", func() nvme.Command { c := rw(nvme.CmdRead, 0, 1, a, 0); c.Flags = 1; return c }(), nvme.StatusInvalidField},
		} {
			mustStatus(t, tc.name, h.do(p, q, tc.cmd), tc.want)
		}
	})
}

func TestBadDoorbellsRaiseAsyncEvents(t *testing.T) {
	r := newRig(t, nvme.Options{})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q := h.ioQueue(p, 1, 16, 1, false)
		// Before any Asynchronous Event Request: the event waits.
		h.wr(p, nvme.DoorbellOffset(9, false, h.dstrd), 4, 1)
		aer := h.submit(p, h.admin, nvme.Command{Opcode: nvme.AdminAsyncEventReq})
		e := h.wait(p, h.admin)
		if e.CID != aer || !e.Status.OK() {
			t.Fatalf("AER completion %+v", e)
		}
		if ev := nvme.ParseAsyncEvent(e.DW0); ev != (nvme.AsyncEvent{Type: nvme.EventTypeError, Info: nvme.EventInvalidDoorbell, LogPage: nvme.LogErrorInformation}) {
			t.Errorf("event %+v, want invalid doorbell", ev)
		}
		// An outstanding request completes when the event happens: a
		// tail beyond the queue's 16 entries.
		aer = h.submit(p, h.admin, nvme.Command{Opcode: nvme.AdminAsyncEventReq})
		p.Sleep(10 * sim.Microsecond)
		if _, ok := h.reap(p, h.admin); ok {
			t.Fatal("AER completed with no event")
		}
		h.wr(p, nvme.DoorbellOffset(q.id, false, h.dstrd), 4, 16)
		e = h.wait(p, h.admin)
		if ev := nvme.ParseAsyncEvent(e.DW0); e.CID != aer || ev.Info != nvme.EventInvalidDoorbellValue {
			t.Errorf("completion %+v (event %+v), want invalid doorbell value", e, ev)
		}
		// The queue still works.
		buf := h.pages(p, 1)
		mustStatus(t, "read after the bad doorbell", h.do(p, q, rw(nvme.CmdRead, 0, 1, uint64(buf.pages[0]), 0)), nvme.StatusSuccess)
		// Four requests may be outstanding; the fifth is refused.
		for range 5 {
			h.submit(p, h.admin, nvme.Command{Opcode: nvme.AdminAsyncEventReq})
		}
		mustStatus(t, "fifth AER", h.wait(p, h.admin), nvme.StatusAERLimitExceeded)
		if s := r.c.Stats(); s.AsyncEvents != 2 {
			t.Errorf("%d async events, want 2", s.AsyncEvents)
		}
	})
}

func TestMSIX(t *testing.T) {
	r := newRig(t, nvme.Options{})
	h := newHost(t, r)
	if err := r.c.SetIRQ(r.c.Vectors(), func(*sim.Proc) {}); err == nil {
		t.Error("SetIRQ beyond the table: no error")
	}
	var got []int
	for v := range r.c.Vectors() {
		if err := r.c.SetIRQ(v, func(*sim.Proc) { got = append(got, v) }); err != nil {
			t.Fatal(err)
		}
	}
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		got = nil // the admin queue's own completions (vector 0)
		q3 := h.ioQueue(p, 1, 16, 3, true)
		q5 := h.ioQueue(p, 2, 16, 5, false) // interrupts disabled
		p.Sleep(2 * r.c.Options().MSI)
		if len(got) == 0 || got[0] != 0 {
			t.Errorf("admin completions raised %v, want vector 0", got)
		}
		got = nil
		buf := h.pages(p, 1)
		read := rw(nvme.CmdRead, 0, 1, uint64(buf.pages[0]), 0)
		h.do(p, q3, read)
		p.Sleep(2 * r.c.Options().MSI)
		if len(got) != 1 || got[0] != 3 {
			t.Errorf("vectors raised %v, want [3]", got)
		}
		got = nil
		h.do(p, q5, read)
		p.Sleep(2 * r.c.Options().MSI)
		if len(got) != 0 {
			t.Errorf("CQ without IEN raised %v", got)
		}
		if err := r.c.SetIRQ(3, nil); err != nil {
			t.Fatal(err)
		}
		h.do(p, q3, read)
		p.Sleep(2 * r.c.Options().MSI)
		if len(got) != 0 {
			t.Errorf("masked vector raised %v", got)
		}
		if s := r.c.Stats(); s.Dropped != 1 {
			t.Errorf("%d interrupts dropped, want 1", s.Dropped)
		}
	})
}

// An interrupt-driven driver: the handler wakes the submitter, which
// sleeps idle until then (no polling).
func TestInterruptDrivenCompletion(t *testing.T) {
	r := newRig(t, nvme.Options{})
	h := newHost(t, r)
	irq := sim.NewCond("nvme0 q1")
	fired := 0
	if err := r.c.SetIRQ(1, func(*sim.Proc) { fired++; irq.Broadcast() }); err != nil {
		t.Fatal(err)
	}
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q := h.ioQueue(p, 1, 16, 1, true)
		buf := h.pages(p, 1)
		start := p.Now()
		h.submit(p, q, rw(nvme.CmdRead, 0, 8, uint64(buf.pages[0]), 0))
		p.WaitUntil(irq, func() bool { return fired > 0 })
		if _, ok := h.reap(p, q); !ok {
			t.Fatal("interrupt before the completion entry landed")
		}
		if took := p.Now() - start; took < nvme.DefaultReadLatency+r.c.Options().MSI {
			t.Errorf("a 4 KiB read took %v, less than its media latency and the MSI", took)
		}
	})
}

func TestFLR(t *testing.T) {
	r := newRig(t, nvme.Options{})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q := h.ioQueue(p, 1, 16, 1, false)
		src := h.pages(p, 32)
		h.fill(p, src, 0, pattern(128<<10, 1))
		prp1, prp2 := h.prp(p, src, 0, 128<<10, 0)
		mustStatus(t, "write", h.do(p, q, rw(nvme.CmdWrite, 0, 256, prp1, prp2)), nvme.StatusSuccess)
		// A read in flight when the reset comes: its data may land
		// before Reset returns, nothing after.
		dst := h.pages(p, 32)
		prp1, prp2 = h.prp(p, dst, 0, 128<<10, 0)
		h.submit(p, q, rw(nvme.CmdRead, 0, 256, prp1, prp2))
		p.Sleep(nvme.DefaultReadLatency + 2*sim.Microsecond)
		start := p.Now()
		if err := r.c.Reset(p); err != nil {
			t.Fatal(err)
		}
		if took := p.Now() - start; took != nvme.DefaultFLRTime {
			t.Errorf("FLR took %v, want %v", took, nvme.DefaultFLRTime)
		}
		after := h.read(p, dst, 0, 128<<10)
		for _, reg := range []uint64{nvme.RegCC, nvme.RegCSTS, nvme.RegAQA, nvme.RegASQ} {
			if v := h.rd(p, reg, 4); v != 0 {
				t.Errorf("register %#x = %#x after FLR", reg, v)
			}
		}
		p.Sleep(sim.Millisecond)
		if got := h.read(p, dst, 0, 128<<10); !bytes.Equal(got, after) {
			t.Error("memory changed after FLR returned")
		}
		if _, ok := h.reap(p, q); ok {
			t.Error("a completion after FLR")
		}
		// Up again: the queues are gone, the data is not.
		h.enable(p, 32)
		mustStatus(t, "delete SQ 1 after FLR", h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminDeleteSQ, CDW10: 1}), nvme.StatusInvalidQID)
		q = h.ioQueue(p, 1, 16, 1, false)
		clearBuf := h.pages(p, 32)
		prp1, prp2 = h.prp(p, clearBuf, 0, 128<<10, 0)
		mustStatus(t, "read after FLR", h.do(p, q, rw(nvme.CmdRead, 0, 256, prp1, prp2)), nvme.StatusSuccess)
		if got := h.read(p, clearBuf, 0, 128<<10); !bytes.Equal(got, pattern(128<<10, 1)) {
			t.Error("namespace lost its data in FLR")
		}
	})
}

// A queue-depth-32 stream of 128 KiB reads moves at the slower of the
// media (line_rate) and the Gen4 x4 link's payload rate, less the
// per-command latency that 32 commands in flight cannot hide.
func TestReadStreamThroughput(t *testing.T) {
	const (
		qd       = 32
		size     = 128 << 10
		commands = 512
	)
	r := newRig(t, nvme.Options{LBASize: 4096})
	h := newHost(t, r)
	spec, _ := platform.Preset(preset)
	d, err := spec.Device(device)
	if err != nil {
		t.Fatal(err)
	}
	bound := min(float64(d.LineRate.V), float64(d.Link.Rate()))
	var tput float64
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q := h.ioQueue(p, 1, 256, 1, false)
		bufs := make([]buffer, qd)
		cmds := make([]nvme.Command, qd)
		for i := range bufs {
			bufs[i] = h.pages(p, size/mem.PageSize)
			prp1, prp2 := h.prp(p, bufs[i], 0, size, 0)
			cmds[i] = rw(nvme.CmdRead, uint64(i*size/4096), size/4096, prp1, prp2)
		}
		start := p.Now()
		sent, done := 0, 0
		for ; sent < qd; sent++ {
			h.submit(p, q, cmds[sent%qd])
		}
		for done < commands {
			e, ok := h.reap(p, q)
			if !ok {
				p.Sleep(sim.Microsecond)
				continue
			}
			if !e.Status.OK() {
				t.Fatalf("read: %v", e.Status)
			}
			done++
			if sent < commands {
				c := cmds[int(e.CID)%qd]
				h.submit(p, q, c)
				sent++
			}
		}
		tput = float64(commands*size) / (p.Now() - start).Seconds()
	})
	// Little's law: 32 commands each spending at least ReadLatency
	// plus its share of the link cannot fall below this.
	perCmd := nvme.DefaultReadLatency.Seconds() + qd*size/bound
	floor := 0.9 * qd * size / perCmd
	t.Logf("throughput %.3f GB/s, bound %.3f GB/s, floor %.3f GB/s", tput/1e9, bound/1e9, floor/1e9)
	if tput > bound*1.0001 || tput < floor {
		t.Errorf("throughput %.3f GB/s outside [%.3f, %.3f] GB/s", tput/1e9, floor/1e9, bound/1e9)
	}
}

// Behind an IOMMU domain, a read whose PRP is an IOVA that is not
// mapped completes with Data Transfer Error and changes no byte of the
// buffer the IOVA used to map; a write from it changes no block.
func TestIOMMUFault(t *testing.T) {
	r := newRig(t, nvme.Options{})
	unit, err := iommu.NewUnit("dmar0", r.m.Mem, r.m.Engine, 0, iommu.Strict, iommu.DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	dom, err := unit.NewDomain()
	if err != nil {
		t.Fatal(err)
	}
	iommu.Attach(r.dev, dom, iommu.AttachOptions{PCI: true})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q := h.ioQueue(p, 1, 16, 1, false)
		src := h.pages(p, 1)
		h.fill(p, src, 0, pattern(4096, 3))
		mustStatus(t, "write through mapped IOVAs", h.do(p, q, rw(nvme.CmdWrite, 0, 8, uint64(src.pages[0]), 0)), nvme.StatusSuccess)

		buf, err := r.m.Mem.Kmalloc(r.node, mem.PageSize)
		if err != nil {
			t.Fatal(err)
		}
		old := pattern(4096, 4)
		r.m.Mem.WriteBytes(p, r.node, buf, old)
		iova := r.dev.MapSingle(p, buf, mem.PageSize, dma.Bidirectional)
		if r.dev.MappingError(iova) {
			t.Fatal("dma_map_single failed")
		}
		r.dev.UnmapSingle(p, iova, mem.PageSize, dma.Bidirectional)
		mustStatus(t, "read into an unmapped IOVA", h.do(p, q, rw(nvme.CmdRead, 0, 8, uint64(iova), 0)), nvme.StatusDataTransferError)
		got := make([]byte, 4096)
		r.m.Mem.ReadBytes(p, r.node, buf, got)
		if !bytes.Equal(got, old) {
			t.Error("the faulting read changed the buffer")
		}
		mustStatus(t, "write from an unmapped IOVA", h.do(p, q, rw(nvme.CmdWrite, 0, 8, uint64(iova), 0)), nvme.StatusDataTransferError)
		dst := h.pages(p, 1)
		mustStatus(t, "read back", h.do(p, q, rw(nvme.CmdRead, 0, 8, uint64(dst.pages[0]), 0)), nvme.StatusSuccess)
		if !bytes.Equal(h.read(p, dst, 0, 4096), pattern(4096, 3)) {
			t.Error("the faulting write changed the namespace")
		}
	})
	if unit.Stats().Faults == 0 {
		t.Error("the IOMMU recorded no fault")
	}
}

// A fetch from a submission queue the IOMMU does not map is fatal.
func TestFetchFaultIsFatal(t *testing.T) {
	r := newRig(t, nvme.Options{})
	unit, _ := iommu.NewUnit("dmar0", r.m.Mem, r.m.Engine, 0, iommu.Strict, iommu.DefaultParams())
	dom, _ := unit.NewDomain()
	iommu.Attach(r.dev, dom, iommu.AttachOptions{PCI: true})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		capReg := h.rd(p, nvme.RegCAP, 8)
		h.admin = h.newQueue(p, 0, 32)
		h.admin.sqDMA = 0x7000_0000 // never mapped
		h.enable(p, 32)
		h.submit(p, h.admin, nvme.Command{Opcode: nvme.AdminIdentify, CDW10: nvme.CNSController})
		if csts := h.waitCSTS(p, capReg, nvme.CSTSFatal, true); csts&nvme.CSTSFatal == 0 {
			t.Errorf("CSTS = %#x, want CFS", csts)
		}
	})
}

func TestOptionsValidation(t *testing.T) {
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		device  string
		payload bool
		opt     nvme.Options
		want    error
		text    string
	}{
		{"LBA size", device, true, nvme.Options{LBASize: 1024}, nvme.ErrBadOption, "LBA size 1024"},
		{"tiny capacity", device, true, nvme.Options{LBASize: 4096, Capacity: 100}, nvme.ErrBadOption, "capacity"},
		{"negative latency", device, true, nvme.Options{ReadLatency: -1}, nvme.ErrBadOption, "negative"},
		{"queue entries", device, true, nvme.Options{MaxQueueEntries: 1}, nvme.ErrBadOption, "queue entries"},
		{"MDTS", device, true, nvme.Options{MDTS: 11}, nvme.ErrBadOption, "MDTS"},
		{"stride", device, true, nvme.Options{DoorbellStride: 16}, nvme.ErrBadOption, "stride"},
		{"not payload", device, false, nvme.Options{}, nvme.ErrNeedsPayload, "payload"},
		{"a NIC", "nic0", true, nvme.Options{}, nvme.ErrBadOption, `kind "nic"`},
		{"no such device", "nvme9", true, nvme.Options{}, nil, "no such device"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: tc.payload})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			x, err := dma.New(m, m.Mem)
			if err != nil {
				t.Fatal(err)
			}
			_, err = nvme.New(m, m.Mem, x, tc.device, tc.opt)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
}

func TestDoorbellStride(t *testing.T) {
	r := newRig(t, nvme.Options{DoorbellStride: 2})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		if h.dstrd != 2 {
			t.Fatalf("CAP.DSTRD = %d", h.dstrd)
		}
		q := h.ioQueue(p, 3, 16, 1, false)
		buf := h.pages(p, 1)
		mustStatus(t, "read on queue 3 with stride 16", h.do(p, q, rw(nvme.CmdRead, 0, 1, uint64(buf.pages[0]), 0)), nvme.StatusSuccess)
	})
}

func TestCompletionEncoding(t *testing.T) {
	for _, e := range []nvme.Completion{
		{DW0: 0xdeadbeef, SQHead: 7, SQID: 3, CID: 0xabcd, Phase: true, Status: nvme.StatusSuccess},
		{SQHead: 65535, SQID: 1, CID: 1, Phase: false, Status: nvme.StatusInvalidQueueDeletion},
		{Status: nvme.StatusLBAOutOfRange, Phase: true},
	} {
		b := make([]byte, nvme.CQESize)
		e.Marshal(b)
		if got := nvme.ParseCompletion(b); got != e {
			t.Errorf("round trip of %+v gave %+v", e, got)
		}
	}
	b := make([]byte, nvme.CQESize)
	(&nvme.Completion{Status: nvme.StatusDataTransferError, Phase: true}).Marshal(b)
	// DW3: phase in bit 16, SC in 24:17, SCT in 27:25.
	if dw3 := binary.LittleEndian.Uint32(b[12:]); dw3 != 1<<16|0x04<<17 {
		t.Errorf("DW3 = %#x", dw3)
	}
	if s := nvme.StatusInvalidQID.String(); s != "Invalid Queue Identifier (SCT 1 SC 0x01)" {
		t.Errorf("String() = %q", s)
	}
	c := nvme.Command{Opcode: 2, CID: 9, NSID: 1, PRP1: 0x1000, PRP2: 0x2000, CDW10: 1, CDW11: 2, CDW12: 3, CDW13: 4, CDW14: 5, CDW15: 6}
	sq := make([]byte, nvme.SQESize)
	c.Marshal(sq)
	if got := nvme.ParseCommand(sq); got != c {
		t.Errorf("command round trip %+v", got)
	}
}

// A correct driver (queues and buffers from dma_alloc_coherent) draws
// no diagnostic from the DMA-API checker: every access of the
// controller is a device access to memory mapped for it.
func TestNoDiagnosticsForACorrectDriver(t *testing.T) {
	r := newRig(t, nvme.Options{})
	ck := check.New(check.Options{})
	dmadebug.Attach(ck, r.x, r.m.Mem, dmadebug.Options{})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q := h.ioQueue(p, 1, 16, 1, false)
		buf := h.pages(p, 8)
		h.fill(p, buf, 0, pattern(8*4096, 2))
		prp1, prp2 := h.prp(p, buf, 0, 8*4096, 0)
		mustStatus(t, "write", h.do(p, q, rw(nvme.CmdWrite, 0, 64, prp1, prp2)), nvme.StatusSuccess)
		mustStatus(t, "read", h.do(p, q, rw(nvme.CmdRead, 0, 64, prp1, prp2)), nvme.StatusSuccess)
	})
	for _, d := range ck.Diagnostics() {
		t.Errorf("checker: %v", d)
	}
}

// Two submission queues on one completion queue, the controller
// working on one command at a time: it serves the queues round robin.
func TestRoundRobinSharedCQ(t *testing.T) {
	r := newRig(t, nvme.Options{MaxInflight: 1})
	h := newHost(t, r)
	r.run(t, func(p *sim.Proc) {
		h.enable(p, 32)
		q1 := h.ioQueue(p, 1, 16, 1, false)
		q2 := h.newQueue(p, 2, 16)
		sq := nvme.Command{Opcode: nvme.AdminCreateSQ, PRP1: uint64(q2.sqDMA), CDW10: 2 | 15<<16, CDW11: 1 | 1<<16}
		mustStatus(t, "create SQ 2 on CQ 1", h.do(p, h.admin, sq), nvme.StatusSuccess)
		buf := h.pages(p, 1)
		read := rw(nvme.CmdRead, 0, 1, uint64(buf.pages[0]), 0)
		for range 4 {
			h.submit(p, q1, read)
		}
		for range 4 {
			h.submit(p, q2, read)
		}
		var order []uint16
		for len(order) < 8 {
			order = append(order, h.wait(p, q1).SQID)
		}
		// Queue 2's doorbell arrives while queue 1's first command is
		// under way; from then on the two alternate.
		if want := []uint16{1, 2, 1, 2, 1, 2, 1, 2}; !slices.Equal(order, want) {
			t.Errorf("completions by queue %v, want %v", order, want)
		}
		mustStatus(t, "delete CQ 1 while SQ 2 posts to it", h.do(p, h.admin, nvme.Command{Opcode: nvme.AdminDeleteCQ, CDW10: 1}), nvme.StatusInvalidQueueDeletion)
	})
}

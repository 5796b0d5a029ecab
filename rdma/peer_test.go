package rdma

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// fakeGPU is a peer-memory client standing in for nvidia_peermem: it
// owns a range of "GPU virtual addresses" at base, backed by pages
// of the host (the fake has no VRAM to give), which it says are gpu0's
// memory so that the HCA's transfers take the peer-to-peer route.
type fakeGPU struct {
	h       *host
	base    uint64
	size    uint64
	backing mem.VirtAddr
	calls   []string
	core    CoreContext
	off     uint64
	mapped  []PeerSegment
	// everMapped keeps what dma_map gave, after the unmap.
	everMapped []PeerSegment
}

const gpuVA = 0x7f00_0000_0000

func (f *fakeGPU) Name() string { return "fake_nv_mem" }

func (f *fakeGPU) Acquire(t *sim.Proc, addr, size uint64) (any, bool) {
	if addr < f.base || addr+size > f.base+f.size {
		return nil, false
	}
	f.calls = append(f.calls, "acquire")
	return f, true
}

func (f *fakeGPU) GetPages(t *sim.Proc, ctx any, addr, size uint64, write bool, core CoreContext) error {
	f.calls = append(f.calls, "get_pages")
	f.core = core
	f.off = addr - f.base
	return nil
}

func (f *fakeGPU) DMAMap(t *sim.Proc, ctx any, dev *dma.Device) (PeerMapping, error) {
	f.calls = append(f.calls, "dma_map")
	ranges, _, _, err := f.h.m.Mem.Translate(f.backing, f.size)
	if err != nil {
		return PeerMapping{}, err
	}
	for _, r := range ranges {
		bus := dev.MapPage(t, r.Start, 0, r.Size, dma.Bidirectional)
		if dev.MappingError(bus) {
			return PeerMapping{}, fmt.Errorf("map %v", r.Start)
		}
		f.mapped = append(f.mapped, PeerSegment{Bus: bus, Len: r.Size})
	}
	f.everMapped = append(f.everMapped, f.mapped...)
	return PeerMapping{Segments: f.mapped, Memory: f.h.m.GPUs[0].Memory(), Offset: f.off}, nil
}

func (f *fakeGPU) DMAUnmap(t *sim.Proc, ctx any, dev *dma.Device) error {
	f.calls = append(f.calls, "dma_unmap")
	for _, s := range f.mapped {
		dev.UnmapPage(t, s.Bus, s.Len, dma.Bidirectional)
	}
	f.mapped = nil
	return nil
}

func (f *fakeGPU) PutPages(t *sim.Proc, ctx any) { f.calls = append(f.calls, "put_pages") }
func (f *fakeGPU) PageSize(ctx any) uint64       { return 64 << 10 }
func (f *fakeGPU) Release(ctx any)               { f.calls = append(f.calls, "release") }

// TestPeerMemoryRegistration: host A registers "GPU" memory through a
// peer-memory client, host B's HCA RDMA-writes into it; A's HCA writes
// at the bus addresses the client's dma_map gave, over the route to
// gpu0; after the client invalidates (the memory freed), a write is
// IBV_WC_REM_ACCESS_ERR and changes nothing, and dereg only releases.
func TestPeerMemoryRegistration(t *testing.T) {
	p := newPair(t, true)
	const n = 256 << 10
	want := pattern(n, 0x77)
	f := &fakeGPU{h: p.a, base: gpuVA, size: 1 << 20}
	inv := p.a.dev.RegisterPeerMemoryClient(f)
	var writes []mem.DMAAddr
	p.a.dev.env.DMA.Hooks.Hook(func(e *dma.Event) {
		if e.Op == dma.OpDeviceAccess && e.Write && e.Device == "nic0" && e.Size > CQESize {
			writes = append(writes, e.Addr)
		}
	})
	var wc1, wc2 []WC
	var got []byte
	var callsAtInvalidate []string
	var v0, v1 mem.Version
	var peerAfter bool
	var gpuBytes float64
	p.run(t, func(th *sim.Proc) {
		var err error
		if f.backing, err = p.a.m.Mem.Vmalloc(0, f.size); err != nil {
			t.Fatal(err)
		}
		src := p.b.buf(t, n)
		p.b.fill(th, src, want)
		mrg, err := p.a.pd.RegMR(th, gpuVA+0x10000, n, full)
		if err != nil {
			t.Fatal(err)
		}
		if peer, _ := mrg.Peer(); !peer {
			t.Fatal("the GPU range was not registered through the peer client")
		}
		if mrg.PageSize() != 64<<10 {
			t.Errorf("peer MR page size %d, want the client's 64 KiB", mrg.PageSize())
		}
		if p.a.proc.LockedVM() != 0 {
			t.Errorf("peer memory counted against RLIMIT_MEMLOCK: %d", p.a.proc.LockedVM())
		}
		mrb, _ := p.b.pd.RegMR(th, src, n, AccessLocalWrite)
		_, qb := p.connect(t, th, full, 7, 12)
		wr := SendWR{WRID: 1, Opcode: WRRDMAWrite, Signaled: true, SGList: []SGE{{Addr: src, Length: n, LKey: mrb.LKey}},
			RemoteAddr: gpuVA + 0x10000, RKey: mrg.RKey}
		_ = qb.PostSend(th, wr)
		wc1 = p.b.cq.Wait(th, 0, 1)
		got = make([]byte, n)
		p.a.m.Mem.ReadBytes(th, 0, f.backing+0x10000, got)
		gpuBytes = p.a.m.Fabric.Link("gpu0.pcie").Stats().Bytes[0] + p.a.m.Fabric.Link("gpu0.pcie").Stats().Bytes[1]

		// cudaFree: the client's free callback invalidates.
		pa := physOf(t, p.a, uint64(f.backing)+0x10000)
		inv(th, f.core)
		callsAtInvalidate = append([]string(nil), f.calls...)
		_, peerAfter = mrg.Peer()
		v0 = p.a.m.Mem.LatestIn(pa, n)
		p.b.fill(th, src, pattern(n, 1))
		_, qb2 := p.connect(t, th, full, 7, 12)
		wr.WRID = 2
		_ = qb2.PostSend(th, wr)
		wc2 = p.b.cq.Wait(th, 0, 1)
		v1 = p.a.m.Mem.LatestIn(pa, n)
		if err := mrg.Dereg(th); err != nil {
			t.Fatal(err)
		}
	})
	if wc1[0].Status != WCSuccess {
		t.Fatalf("write into peer memory: %v (%s)", wc1[0].Status, wc1[0].Detail)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("peer memory does not hold the bytes written")
	}
	if len(writes) == 0 {
		t.Fatal("no device write seen")
	}
	for _, a := range writes {
		in := false
		for _, s := range f.everMapped {
			in = in || s.Bus <= a && a < s.Bus+mem.DMAAddr(s.Len)
		}
		if !in {
			t.Errorf("the HCA wrote at %v, not an address dma_map gave", a)
		}
	}
	if gpuBytes < n {
		t.Errorf("gpu0's PCIe link carried %v bytes, want the %d written (the peer route)", gpuBytes, n)
	}
	if want := []string{"acquire", "get_pages", "dma_map", "dma_unmap", "put_pages"}; fmt.Sprint(callsAtInvalidate) != fmt.Sprint(want) {
		t.Errorf("calls at invalidate %v, want %v", callsAtInvalidate, want)
	}
	if !peerAfter {
		t.Error("the MR is not marked invalidated")
	}
	if wc2[0].Status != WCRemAccessErr {
		t.Errorf("write after invalidation: %v (%s), want IBV_WC_REM_ACCESS_ERR", wc2[0].Status, wc2[0].Detail)
	}
	if v0 != v1 {
		t.Errorf("invalidated memory written: version %d → %d", v0, v1)
	}
	if want := []string{"acquire", "get_pages", "dma_map", "dma_unmap", "put_pages", "release"}; fmt.Sprint(f.calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v (dereg after invalidation only releases)", f.calls, want)
	}
}

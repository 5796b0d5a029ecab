package nvp2p

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// write has device dev write data at bus address a (its DMA engine's
// transaction, from its side of the port).
func (r *rig) write(p *sim.Proc, dev string, a mem.DMAAddr, data []byte) (dma.TransferInfo, error) {
	md := r.mdev(dev)
	host, _ := r.m.HostMemory(0)
	return r.dev(dev).Transfer(p, &dma.Transfer{
		Name: dev + " p2p write", Master: md.DMA(), Src: md.Side(), Dst: host,
		Bytes: int64(len(data)), Write: []dma.Span{dma.BusSpan(a, uint64(len(data)))}, Data: data,
	})
}

func linkBytes(r *rig, name string) float64 {
	l := r.m.Fabric.Link(name)
	if l == nil {
		r.t.Fatalf("no link %s", name)
	}
	s := l.Stats()
	return s.Bytes[0] + s.Bytes[1]
}

// A third-party device writes GPU memory through the BAR1 addresses
// dma_map_pages gives it: below the GPU's switch (nic0, sw0) the bytes
// never reach the root complex; from nvme0 on a root port of rc0 they
// turn in the root complex (through sw0's upstream link) at its p2p
// efficiency; from nic1 below the other socket the mapping is refused,
// and a raw transfer too. The bytes land in VRAM.
func TestPeerDMARoutes(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", true, nil)
	r.run(func(p *sim.Proc) {
		const size = 1 << 20
		a := r.alloc(p, 2<<20)
		pt, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, size, nop, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, vram, _ := r.cu.System().Resolve(a, size)
		for _, tc := range []struct {
			dev    string
			kind   machine.PeerKind
			at     string
			silent string // a link that must carry nothing
			busy   string // a link that must carry the bytes
			capped bool
		}{
			{"nic0", machine.PeerSwitch, "sw0", "sw0.pcie", "nic0.pcie", false},
			{"nvme0", machine.PeerRootComplex, "rc0", "", "sw0.pcie", true},
		} {
			m, err := r.p2p.DMAMapPages(p, r.dev(tc.dev), pt)
			if err != nil {
				t.Fatalf("%s: %v", tc.dev, err)
			}
			if m.Entries() != pt.Entries() || m.DMAAddresses[0] != mem.DMAAddr(pt.Pages[0].PhysicalAddress) {
				t.Errorf("%s: mapping %v", tc.dev, m.DMAAddresses[:1])
			}
			silent0 := 0.0
			if tc.silent != "" {
				silent0 = linkBytes(r, tc.silent)
			}
			busy0 := linkBytes(r, tc.busy)
			data := bytes.Repeat([]byte(tc.dev[:1]), 64<<10)
			// The second 64 KiB page of the pin.
			info, err := r.write(p, tc.dev, m.DMAAddresses[1], data)
			if err != nil {
				t.Fatalf("%s: %v", tc.dev, err)
			}
			if info.Peer == nil || info.Peer.Path.Kind != tc.kind || info.Peer.Path.At != tc.at {
				t.Fatalf("%s: peer %+v, want %v at %s", tc.dev, info.Peer, tc.kind, tc.at)
			}
			if info.Dst != r.m.GPUs[0].Memory() {
				t.Errorf("%s: destination %v, want gpu0 memory", tc.dev, info.Dst)
			}
			if tc.silent != "" && linkBytes(r, tc.silent) != silent0 {
				t.Errorf("%s: %s carried %v bytes", tc.dev, tc.silent, linkBytes(r, tc.silent)-silent0)
			}
			if got := linkBytes(r, tc.busy) - busy0; got < float64(len(data)) {
				t.Errorf("%s: %s carried %v bytes, want ≥ %d", tc.dev, tc.busy, got, len(data))
			}
			if (info.Peer.Cap > 0) != tc.capped {
				t.Errorf("%s: cap %v", tc.dev, info.Peer.Cap)
			}
			if tc.capped {
				if min := sim.Time(float64(len(data)) / info.Peer.Cap * float64(sim.Second)); info.Move < min {
					t.Errorf("%s: moved in %v, faster than the cap allows (%v)", tc.dev, info.Move, min)
				}
			}
			got := make([]byte, len(data))
			r.m.Mem.DeviceReadBytes("test", true, vram[0].Start+64<<10, got)
			if !bytes.Equal(got, data) {
				t.Errorf("%s: VRAM holds %q..., want the device's bytes", tc.dev, got[:4])
			}
		}
		// Across sockets: refused at dma_map_pages, and by the DMA layer.
		if _, err := r.p2p.DMAMapPages(p, r.dev("nic1"), pt); !errors.Is(err, ENOTSUPP) {
			t.Errorf("nic1 across sockets: %v, want ENOTSUPP", err)
		}
		if _, err := r.write(p, "nic1", mem.DMAAddr(pt.Pages[0].PhysicalAddress), make([]byte, 4096)); !errors.Is(err, dma.ErrPeerRefused) {
			t.Errorf("nic1 raw transfer: %v, want ErrPeerRefused", err)
		}
		// An unpinned BAR1 page answers nothing: no byte lands.
		if err := r.p2p.PutPages(p, 0, 0, a, pt); err != nil {
			t.Fatal(err)
		}
		if _, err := r.write(p, "nic0", mem.DMAAddr(pt.Pages[1].PhysicalAddress), make([]byte, 4096)); !errors.Is(err, mem.ErrBadAddr) {
			t.Errorf("write to an unpinned BAR1 page: %v, want ErrBadAddr", err)
		}
		got := make([]byte, 4)
		r.m.Mem.DeviceReadBytes("test", true, vram[0].Start+64<<10, got)
		if got[0] != 'n' {
			t.Errorf("the write to an unpinned page changed VRAM: %q", got)
		}
	})
}

// With cross-socket peers allowed the transfer goes, over UPI, capped.
func TestPeerCrossSocketAllowed(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false, nil)
	r.x.AllowCrossSocket(0.1)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 2<<20)
		pt, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, 1<<20, nop, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := r.p2p.DMAMapPages(p, r.dev("nic1"), pt)
		if err != nil {
			t.Fatal(err)
		}
		upi := linkBytes(r, "upi")
		info, err := r.write(p, "nic1", m.DMAAddresses[0], make([]byte, 64<<10))
		if err != nil {
			t.Fatal(err)
		}
		if info.Peer.Path.Kind != machine.PeerCrossSocket || info.Peer.Cap <= 0 || linkBytes(r, "upi")-upi < 64<<10 {
			t.Errorf("peer %+v, upi carried %v", info.Peer, linkBytes(r, "upi")-upi)
		}
	})
}

// translating is an IOMMU domain's stand-in: not dma-direct.
type translating struct{ dma.Direct }

func (translating) Name() string { return "iommu domain" }

// GPUDirect RDMA does not work with the IOMMU translating the peer's
// addresses: dma_map_pages refuses.
func TestIOMMURefused(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 2<<20)
		pt, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, 64<<10, nop, nil)
		if err != nil {
			t.Fatal(err)
		}
		nic := r.dev("nic0")
		nic.SetTranslator(translating{})
		if _, err := r.p2p.DMAMapPages(p, nic, pt); !errors.Is(err, ENOTSUPP) {
			t.Fatalf("dma_map_pages behind a translating IOMMU: %v, want ENOTSUPP", err)
		}
		ev := r.ops(OpDMAMapPages)
		if len(ev) != 1 || !ev[0].IOMMU || ev[0].Err == nil {
			t.Errorf("events %+v", ev)
		}
		nic.SetTranslator(dma.Direct{})
		if _, err := r.p2p.DMAMapPages(p, nic, pt); err != nil {
			t.Errorf("passthrough (direct): %v", err)
		}
	})
}

package nvp2p

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// read has device dev read n bytes at bus address a into its side.
func (r *rig) read(p *sim.Proc, dev string, a mem.DMAAddr, n uint64) (dma.TransferInfo, error) {
	md := r.mdev(dev)
	host, _ := r.m.HostMemory(0)
	return r.dev(dev).Transfer(p, &dma.Transfer{
		Name: dev + " p2p read", Master: md.DMA(), Src: host, Dst: md.Side(),
		Bytes: int64(n), Read: []dma.Span{dma.BusSpan(a, n)},
	})
}

// A synchronous cuMemcpyHtoD into pinned GPU memory without
// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS may return before its data is
// visible to a third-party reader: a NIC reading the buffer at once
// gets the old bytes (older versions), and the new ones after the
// window. With the attribute set, the read right after the copy always
// sees the new bytes. Memory no one pinned keeps its behaviour.
func TestSyncMemops(t *testing.T) {
	for _, sync := range []bool{false, true} {
		name := "without"
		if sync {
			name = "with"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", true, nil)
			r.run(func(p *sim.Proc) {
				const n = 64 << 10
				buf := r.alloc(p, 2<<20)
				if sync {
					if err := r.ctx.PointerSetAttribute(cuda.PointerAttributeSyncMemops, 1, buf); err != nil {
						t.Fatal(err)
					}
				}
				host, err := r.ctx.MemAllocHost(p, n)
				if err != nil {
					t.Fatal(err)
				}
				old := bytes.Repeat([]byte{'o'}, n)
				fresh := bytes.Repeat([]byte{'N'}, n)
				r.m.Mem.WriteBytes(p, 0, host, old)
				if err := r.ctx.Memcpy(p, buf, mem.GPUAddr(host), n); err != nil {
					t.Fatal(err)
				}
				pt, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, buf, n, nop, nil)
				if err != nil {
					t.Fatal(err)
				}
				m, err := r.p2p.DMAMapPages(p, r.dev("nic0"), pt)
				if err != nil {
					t.Fatal(err)
				}
				_, vram, _ := r.cu.System().Resolve(buf, n)
				v0 := r.m.Mem.Latest(vram[0].Start)
				r.m.Mem.WriteBytes(p, 0, host, fresh)
				if err := r.ctx.Memcpy(p, buf, mem.GPUAddr(host), n); err != nil {
					t.Fatal(err)
				}
				v1 := r.m.Mem.Latest(vram[0].Start)
				// The NIC reads at once (an RDMA READ the application
				// posts right after cuMemcpy returned).
				first, err := r.read(p, "nic0", m.DMAAddresses[0], n)
				if err != nil {
					t.Fatal(err)
				}
				p.Sleep(2 * MemopsWindow)
				later, err := r.read(p, "nic0", m.DMAAddresses[0], n)
				if err != nil {
					t.Fatal(err)
				}
				want := fresh
				if !sync {
					want = old
				}
				if !bytes.Equal(first.Data, want) {
					t.Errorf("read right after the copy: %q..., want %q...", first.Data[:2], want[:2])
				}
				if !bytes.Equal(later.Data, fresh) {
					t.Errorf("read after the window: %q..., want the new bytes", later.Data[:2])
				}
				// Versions: the copy's write is in VRAM when cuMemcpy
				// returns only with the attribute; after the window always.
				v2 := r.m.Mem.Latest(vram[0].Start)
				if (v1 > v0) != sync || v2 <= v0 {
					t.Errorf("VRAM versions: %d before, %d when cuMemcpy returned, %d after the window (sync %v)", v0, v1, v2, sync)
				}
			})
		})
	}
}

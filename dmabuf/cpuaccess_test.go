package dmabuf

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/sim"
)

func fill(s string, n int) []byte { return bytes.Repeat([]byte(s), n/len(s)+1)[:n] }

// TestCPUAccessNonCoherent is the proof, in payload mode on the Zynq
// (gem0 does not snoop the CPU caches), that begin/end_cpu_access
// matter. A device writes a frame into a buffer whose old lines the CPU
// has cached (read back after DMA_BUF_SYNC_END, as a speculative
// prefetch may): without DMA_BUF_SYNC_START the CPU reads the old bytes
// (mem proves them stale), with it the new ones. The CPU writes a frame:
// without DMA_BUF_SYNC_END the device reads the old bytes from DRAM,
// with it the new ones.
func TestCPUAccessNonCoherent(t *testing.T) {
	const size = 256
	oldF, newF := fill("old frame ", size), fill("NEW FRAME ", size)
	for _, heap := range []string{"system", "reserved"} {
		for _, sync := range []bool{true, false} {
			name := heap + "/without sync"
			if sync {
				name = heap + "/with sync"
			}
			t.Run(name+"/device writes, CPU reads", func(t *testing.T) {
				r := newRig(t, "zynq-7000", true)
				gem := r.dev("gem0")
				pr := r.proc("app")
				h, err := r.l.Heap(heap)
				must(t, err)
				r.run(func(p *sim.Proc) {
					fd, err := h.Allocate(p, pr, 4096, 0)
					must(t, err)
					b, err := r.l.Get(p, pr, fd)
					must(t, err)
					va, err := b.Mmap(p, pr)
					must(t, err)
					a, err := b.Attach(p, gem, AttachOptions{})
					must(t, err)
					sgt, err := a.Map(p, dma.Bidirectional)
					must(t, err)
					at := sgt.SGL[0].DMAAddress
					// Frame 1, read correctly: the CPU caches its lines.
					if _, err := gem.WriteBytes(at, oldF); err != nil {
						t.Fatal(err)
					}
					must(t, b.Sync(p, SyncStart|SyncRead))
					got := make([]byte, size)
					if acc := r.mem.ReadBytes(p, 0, va, got); acc.Stale || !bytes.Equal(got, oldF) {
						t.Fatalf("frame 1: %q (stale %v)", got[:16], acc.Stale)
					}
					must(t, b.Sync(p, SyncEnd|SyncRead))
					// The lines come back while the device owns the
					// buffer (a read outside the bracket; a speculative
					// prefetch on a real core).
					r.mem.Read(p, 0, va, size)
					// Frame 2.
					if _, err := gem.WriteBytes(at, newF); err != nil {
						t.Fatal(err)
					}
					if sync {
						must(t, b.Sync(p, SyncStart|SyncRead))
					}
					acc := r.mem.ReadBytes(p, 0, va, got)
					want := newF
					if !sync {
						want = oldF
					}
					if !bytes.Equal(got, want) {
						t.Errorf("CPU read %q..., want %q...", got[:16], want[:16])
					}
					if acc.Stale == sync {
						t.Errorf("mem says stale = %v; sync %v", acc.Stale, sync)
					}
				})
			})
			t.Run(name+"/CPU writes, device reads", func(t *testing.T) {
				r := newRig(t, "zynq-7000", true)
				gem := r.dev("gem0")
				pr := r.proc("app")
				h, err := r.l.Heap(heap)
				must(t, err)
				r.run(func(p *sim.Proc) {
					fd, err := h.Allocate(p, pr, 4096, 0)
					must(t, err)
					b, err := r.l.Get(p, pr, fd)
					must(t, err)
					va, err := b.Mmap(p, pr)
					must(t, err)
					a, err := b.Attach(p, gem, AttachOptions{})
					must(t, err)
					sgt, err := a.Map(p, dma.Bidirectional)
					must(t, err)
					at := sgt.SGL[0].DMAAddress
					must(t, b.Sync(p, SyncStart|SyncWrite))
					r.mem.WriteBytes(p, 0, va, oldF)
					must(t, b.Sync(p, SyncEnd|SyncWrite))
					if sync {
						must(t, b.Sync(p, SyncStart|SyncWrite))
					}
					r.mem.WriteBytes(p, 0, va, newF)
					if sync {
						must(t, b.Sync(p, SyncEnd|SyncWrite))
					}
					got := make([]byte, size)
					acc, err := gem.ReadBytes(at, got)
					must(t, err)
					want := newF
					if !sync {
						want = oldF
					}
					if !bytes.Equal(got, want) {
						t.Errorf("device read %q..., want %q...", got[:16], want[:16])
					}
					if acc.Stale == sync {
						t.Errorf("mem says stale = %v; sync %v", acc.Stale, sync)
					}
				})
			})
		}
	}
}

// TestCPUAccessCoherent: on x86 PCIe the device snoops, so the same
// missing sync goes unseen, as on real hardware.
func TestCPUAccessCoherent(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", true)
	nic := r.dev("nic0")
	pr := r.proc("app")
	newF := fill("NEW FRAME ", 256)
	r.run(func(p *sim.Proc) {
		fd, err := r.system.Allocate(p, pr, 4096, 0)
		must(t, err)
		b, err := r.l.Get(p, pr, fd)
		must(t, err)
		va, err := b.Mmap(p, pr)
		must(t, err)
		a, err := b.Attach(p, nic, AttachOptions{})
		must(t, err)
		sgt, err := a.Map(p, dma.Bidirectional)
		must(t, err)
		r.mem.WriteBytes(p, 0, va, newF)
		got := make([]byte, len(newF))
		acc, err := nic.ReadBytes(sgt.SGL[0].DMAAddress, got)
		must(t, err)
		if acc.Stale || !bytes.Equal(got, newF) {
			t.Errorf("coherent device read %q (stale %v)", got[:16], acc.Stale)
		}
	})
}

// TestSyncFlags: DMA_BUF_IOCTL_SYNC refuses flags it does not know and
// a sync that names neither read nor write.
func TestSyncFlags(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	r.run(func(p *sim.Proc) {
		b, err := r.system.Alloc(p, 0, 4096)
		must(t, err)
		for _, f := range []uint64{0, SyncEnd, 8, SyncRW | 16} {
			if err := b.Sync(p, f); err == nil {
				t.Errorf("flags %#x accepted", f)
			}
		}
		for _, f := range []uint64{SyncStart | SyncRead, SyncEnd | SyncRead, SyncStart | SyncRW, SyncEnd | SyncWrite} {
			must(t, b.Sync(p, f))
		}
	})
}

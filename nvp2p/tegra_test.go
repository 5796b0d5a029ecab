package nvp2p

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// On Jetson the discrete calls and persistent pins are -ENOTSUPP; the
// Tegra get_pages pins cudaHostAlloc memory in 4 KiB pages of the
// shared DRAM, maps them for a device through the DMA API, and frees
// them back through the callback when the memory goes.
func TestTegraFlavour(t *testing.T) {
	r := newRig(t, "jetson-orin", false, nil)
	if !r.p2p.Tegra() {
		t.Fatal("jetson-orin: not Tegra")
	}
	r.run(func(p *sim.Proc) {
		kp := r.app.KernelProcess()
		dev, err := r.ctx.MemAlloc(p, 2<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.p2p.GetPages(p, kp, 0, 0, dev, 64<<10, nop, nil); !errors.Is(err, ENOTSUPP) {
			t.Errorf("discrete get_pages on Tegra: %v", err)
		}
		if _, err := r.p2p.GetPagesPersistent(p, kp, dev, 64<<10, 0); !errors.Is(err, ENOTSUPP) {
			t.Errorf("persistent on Tegra: %v", err)
		}
		va, err := r.ctx.MemAllocHost(p, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		host := mem.GPUAddr(va)
		if _, err := r.p2p.GetPagesTegra(p, kp, host+512, 4096, nop, nil); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("unaligned: %v", err)
		}
		if _, err := r.p2p.GetPagesTegra(p, kp, dev, 4096, nop, nil); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("device memory: %v", err)
		}
		if _, err := r.p2p.GetPagesTegra(p, r.other.KernelProcess(), host, 4096, nop, nil); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("another process: %v", err)
		}
		var pt *PageTable
		calls := 0
		pt, err = r.p2p.GetPagesTegra(p, kp, host, 64<<10, r.freeing(&pt, &calls), nil)
		if err != nil {
			t.Fatal(err)
		}
		if pt.PageSize != PageSize4KB || pt.Entries() != 16 {
			t.Errorf("page size %v, %d entries; want 4 KiB, 16", pt.PageSize, pt.Entries())
		}
		for _, pg := range pt.Pages {
			if _, ok := r.m.Mem.NodeOf(pg.PhysicalAddress); !ok {
				t.Errorf("page %v is not DRAM", pg.PhysicalAddress)
			}
		}
		vi := r.dev("vi0")
		m, err := r.p2p.DMAMapPagesTegra(p, vi, pt, dma.FromDevice)
		if err != nil {
			t.Fatal(err)
		}
		if m.Entries() != 16 {
			t.Errorf("%d addresses", m.Entries())
		}
		if _, err := vi.Write(m.DMAAddresses[3], 4096); err != nil {
			t.Errorf("vi0 writes a mapped page: %v", err)
		}
		if _, err := r.p2p.DMAMapPages(p, vi, pt); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("discrete dma_map_pages of a Tegra table: %v", err)
		}
		if err := r.ctx.MemFreeHost(p, va); err != nil {
			t.Fatal(err)
		}
		if calls != 1 || !pt.Revoked() {
			t.Errorf("callback %d times, revoked %v", calls, pt.Revoked())
		}
		if err := r.p2p.PutPagesTegra(p, pt); err != nil {
			t.Errorf("put after the callback: %v", err)
		}
	})
}

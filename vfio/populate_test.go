package vfio_test

import (
	"testing"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/vfio"
)

// TestMapDMAPopulates: VFIO_IOMMU_MAP_DMA of anonymous memory nothing
// has touched pins it (get_user_pages faults the pages in, placed by
// the process's policy) instead of failing on absent pages, and the
// device's DMA then lands in those pages.
func TestMapDMAPopulates(t *testing.T) {
	r := newRig(t)
	last := r.sys.Mem.Nodes() - 1
	const size = 16 * mem.PageSize
	r.run(func(th *sim.Proc) {
		r.assign(th, "nvme2")
		if err := r.p.SetMemPolicy(kernel.MPOLBind, last); err != nil {
			t.Fatal(err)
		}
		buf, err := r.p.MmapAnon(size)
		if err != nil {
			t.Fatal(err)
		}
		if _, present, _ := r.sys.Mem.PageNode(buf); present {
			t.Fatal("a page of a fresh mapping is present")
		}
		cfd, _ := r.legacy(th, 1)
		err = r.v.MapDMA(th, r.p, cfd, vfio.DMAMap{Flags: vfio.DMAMapFlagRead | vfio.DMAMapFlagWrite, VAddr: buf, IOVA: 0x100000, Size: size})
		if err != nil {
			t.Fatalf("MAP_DMA of untouched anonymous memory: %v", err)
		}
		for i := range uint64(16) {
			n, present, err := r.sys.Mem.PageNode(buf + mem.VirtAddr(i*mem.PageSize))
			if err != nil || !present || n != last {
				t.Errorf("page %d: node %d, present %v, %v; want node %d", i, n, present, err, last)
			}
		}
		// Pinned for the device: no migration while mapped, and the
		// unmap releases the pin.
		if n := r.sys.Mem.Pinned(buf); n != 1 {
			t.Errorf("pin count %d while mapped, want 1", n)
		}
		if _, err := r.v.UnmapDMA(th, r.p, cfd, vfio.DMAUnmap{IOVA: 0x100000, Size: size}); err != nil {
			t.Fatal(err)
		}
		if n := r.sys.Mem.Pinned(buf + 15*mem.PageSize); n != 0 {
			t.Errorf("pin count %d after UNMAP_DMA, want 0", n)
		}
	})
}

package iommu

import (
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/sim"
)

// TestEventNamesDeviceAndProcess: a map and an unmap the DMA layer makes
// name the device and the driver's process (the checker's provenance);
// iommu_map and iommu_unmap called directly name neither.
func TestEventNamesDeviceAndProcess(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	dev, tr := r.attach("nic0", AttachOptions{PCI: true})
	buf := r.pages(2 * 4096)
	r.run(func(p *sim.Proc) {
		a := dev.MapPage(p, buf, 0, 4096, dma.FromDevice)
		dev.UnmapPage(p, a, 4096, dma.FromDevice)
		if err := tr.Domain().Map(0x10000, buf+4096, 4096, ProtRead); err != nil {
			t.Error(err)
		}
		tr.Domain().Unmap(0x10000, 4096)
	})
	type named struct {
		op        Op
		dev, proc string
	}
	var got []named
	for _, e := range r.events {
		if e.Op == OpMap || e.Op == OpUnmap {
			got = append(got, named{e.Op, e.Device, e.Proc})
		}
	}
	want := []named{{OpMap, "nic0", "drv"}, {OpUnmap, "nic0", "drv"}, {OpMap, "", ""}, {OpUnmap, "", ""}}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %v, want %v", i, got[i], want[i])
		}
	}
}

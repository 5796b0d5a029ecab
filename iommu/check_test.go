package iommu

import (
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/sim"
)

// TestDMADebugThroughIOMMU: the DMA-API checker sees calls through a
// domain as it sees dma-direct's: a merged dma_map_sg unmapped with its
// original count and a page mapping are correct; an unmap with the
// wrong size is reported.
func TestDMADebugThroughIOMMU(t *testing.T) {
	tests := []struct {
		name      string
		unmapSize uint64
		want      []string
	}{
		{"correct", 4096, nil},
		{"wrong size", 100, []string{"unmap-size"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Strict, DefaultParams())
			c := check.New(check.Options{})
			dmadebug.Attach(c, r.dma, r.mem, dmadebug.Options{})
			dev, _ := r.attach("nic0", AttachOptions{PCI: true})
			sgl := make([]dma.Scatterlist, 4)
			for i := range sgl {
				sgl[i].SetPage(r.pages(2*4096)+4096, 4096, 0)
			}
			r.run(func(p *sim.Proc) {
				if n := dev.MapSG(p, sgl, len(sgl), dma.Bidirectional); n != 1 {
					t.Errorf("MapSG = %d, want 1", n)
				}
				dev.MappingError(sgl[0].DMAAddress)
				if _, err := dev.Write(sgl[0].DMAAddress, 4*4096); err != nil {
					t.Error(err)
				}
				dev.UnmapSG(p, sgl, len(sgl), dma.Bidirectional)
				a := dev.MapPage(p, sgl[0].Page, 0, 4096, dma.ToDevice)
				dev.MappingError(a)
				dev.UnmapPage(p, a, tc.unmapSize, dma.ToDevice)
			})
			var got []string
			for _, d := range c.Report().Diagnostics {
				got = append(got, d.Class)
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Errorf("diagnostics %v, want %v", got, tc.want)
			}
		})
	}
}

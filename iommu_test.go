package dmalab

import (
	"slices"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestAttachIOMMU: a unit a program builds and attaches is checked when
// the system checks (a use after unmap is the IOMMU pack's and the
// DMA-API pack's finding; correct use is nobody's), and HookAll hears
// its events either way.
func TestAttachIOMMU(t *testing.T) {
	tests := []struct {
		name       string
		check, bug bool
		want       []string
	}{
		{"correct", true, false, nil},
		{"use after unmap", true, true, []string{"iommu-fault", "device-access-unmapped"}},
		{"unchecked", false, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys, err := Boot("2s-4gpu-pcie", Options{Check: tc.check})
			if err != nil {
				t.Fatal(err)
			}
			defer sys.Close()
			u, err := iommu.NewUnit("dmar0", sys.Mem, sys.Engine, 0, iommu.Strict, iommu.DefaultParams())
			if err != nil {
				t.Fatal(err)
			}
			dom, err := u.NewDomain()
			if err != nil {
				t.Fatal(err)
			}
			nic, err := sys.Device("nic0")
			if err != nil {
				t.Fatal(err)
			}
			iommu.Attach(nic, dom, iommu.AttachOptions{PCI: true})
			sys.AttachIOMMU(u)
			heard := 0
			sys.HookAll(func(e sim.Event) {
				if _, ok := e.(*iommu.Event); ok {
					heard++
				}
			})
			err = sys.Run("drv", func(p *Process) error {
				buf, err := sys.Mem.AllocPages(p.Node(), mem.PageSize, mem.ZoneNormal)
				if err != nil {
					return err
				}
				a := nic.MapPage(p.Thread, buf, 0, 1500, dma.FromDevice)
				nic.MappingError(a)
				if _, err := nic.Write(a, 1500); err != nil {
					return err
				}
				nic.UnmapPage(p.Thread, a, 1500, dma.FromDevice)
				if tc.bug {
					nic.Write(a, 1500)
				}
				nic.Unbind(p.Thread)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range sys.Diagnostics() {
				got = append(got, d.Class)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("diagnostics %v, want %v", sys.Diagnostics(), tc.want)
			}
			if heard == 0 {
				t.Error("HookAll heard no event of the unit")
			}
		})
	}
}

package dmalab

import (
	"strings"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// TestBootIOMMU: a platform whose IOMMU mode translates boots one unit
// of its profile with a domain per group, its DMA devices and discrete
// GPUs behind it (GPUs and a NIC below one switch without ACS sharing a
// domain) and integrated GPUs on dma-direct; off and passthrough leave
// every device on dma-direct. A mapping and a device write through nic0 then reach the
// unit's IOTLB and its events.
func TestBootIOMMU(t *testing.T) {
	tests := []struct {
		preset, mode string
		unit         string // "" when no unit is built
	}{
		{"2s-4gpu-pcie", platform.IOMMUOff, ""},
		{"2s-4gpu-pcie", platform.IOMMUPassthrough, ""},
		{"2s-4gpu-pcie", platform.IOMMUStrict, "dmar0"},
		{"2s-4gpu-pcie", platform.IOMMULazy, "dmar0"},
		{"jetson-orin", platform.IOMMUStrict, "smmu0"},
	}
	for _, tc := range tests {
		t.Run(tc.preset+"/"+tc.mode, func(t *testing.T) {
			spec, err := platform.Preset(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			if spec, err = platform.Set(spec, "iommu.mode", tc.mode); err != nil {
				t.Fatal(err)
			}
			sys, err := BootSpec(spec, Options{Check: true})
			if err != nil {
				t.Fatal(err)
			}
			defer sys.Close()
			units := sys.IOMMUs()
			if tc.unit == "" {
				if len(units) != 0 {
					t.Fatalf("%d units, want none", len(units))
				}
			} else if len(units) != 1 || units[0].Name() != tc.unit || units[0].Mode().String() != tc.mode {
				t.Fatalf("units %v, want one %s in mode %s", units, tc.unit, tc.mode)
			}
			domains := map[string]*iommu.Domain{}
			for _, g := range spec.GPUs {
				dev, err := sys.Device(g.Name)
				if err != nil {
					t.Fatal(err)
				}
				tr, translated := dev.Translator().(*iommu.Translator)
				if want := tc.unit != "" && !g.Integrated; translated != want {
					t.Errorf("%s translated by %s in mode %s, want translated %v", g.Name, dev.Translator().Name(), tc.mode, want)
				}
				if translated {
					domains[g.Name] = tr.Domain()
				}
			}
			if len(spec.Devices) == 0 {
				return
			}
			for _, d := range spec.Devices {
				dev, err := sys.Device(d.Name)
				if err != nil {
					t.Fatal(err)
				}
				tr, translated := dev.Translator().(*iommu.Translator)
				if translated != (tc.unit != "") {
					t.Fatalf("%s translated by %s in mode %s", d.Name, dev.Translator().Name(), tc.mode)
				}
				if translated {
					domains[d.Name] = tr.Domain()
				}
			}
			if tc.unit == "" {
				return
			}
			if tc.preset == "jetson-orin" {
				// The camera, ISP and display controller each have a
				// domain of their own; the integrated GPU none.
				if domains["vi0"] == nil || domains["isp0"] == nil || domains["dc0"] == nil || domains["vi0"] == domains["isp0"] || domains["gpu0"] != nil {
					t.Errorf("domains: vi0 %p isp0 %p dc0 %p gpu0 %p", domains["vi0"], domains["isp0"], domains["dc0"], domains["gpu0"])
				}
				return
			}
			// nic0 and nic2 share sw0's group, hence its domain; so do
			// gpu0 and gpu1, below the same switch.
			if domains["nic0"] != domains["nic2"] || domains["nic0"] == domains["nic1"] {
				t.Errorf("domains: nic0 %p nic2 %p nic1 %p, want nic0 = nic2 != nic1", domains["nic0"], domains["nic2"], domains["nic1"])
			}
			if domains["gpu0"] == nil || domains["gpu0"] != domains["gpu1"] || domains["gpu0"] != domains["nic0"] || domains["gpu2"] == domains["gpu0"] {
				t.Errorf("domains: gpu0 %p gpu1 %p nic0 %p gpu2 %p, want gpu0 = gpu1 = nic0 != gpu2", domains["gpu0"], domains["gpu1"], domains["nic0"], domains["gpu2"])
			}
			heard := 0
			sys.HookAll(func(e sim.Event) {
				if _, ok := e.(*iommu.Event); ok {
					heard++
				}
			})
			nic, _ := sys.Device("nic0")
			err = sys.Run("drv", func(p *Process) error {
				buf, err := sys.Mem.AllocPages(p.Node(), mem.PageSize, mem.ZoneNormal)
				if err != nil {
					return err
				}
				a := nic.MapPage(p.Thread, buf, 0, 1500, dma.FromDevice)
				if nic.MappingError(a) {
					t.Error("dma_map_page through the domain failed")
					return nil
				}
				if _, err := nic.Write(a, 1500); err != nil {
					return err
				}
				nic.UnmapPage(p.Thread, a, 1500, dma.FromDevice)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			st := units[0].IOTLB().Stats()
			if st.Hits+st.Misses == 0 || heard == 0 {
				t.Errorf("IOTLB %+v, %d iommu events: the write did not go through the unit", st, heard)
			}
			if tc.mode == platform.IOMMUStrict && st.Invalidations == 0 {
				t.Errorf("strict mode: no invalidation at the unmap (%+v)", st)
			}
			if d := sys.Diagnostics(); len(d) != 0 {
				t.Errorf("diagnostics: %v", d)
			}
			if !strings.HasPrefix(nic.Translator().Name(), "iommu "+tc.unit) {
				t.Errorf("nic0 translator %q", nic.Translator().Name())
			}
		})
	}
}

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

// TestMergedSGOwnership: dma_map_sg through an IOMMU merges three
// scattered pages behind one IOVA range. The DMA-API pack tracks the
// pages themselves, not [first page, +merged length): a CPU write to
// the third page while the device owns it is reported; after
// dma_sync_sg_for_cpu with the count passed to dma_map_sg (whose
// first entry now carries the merged length), reads of every page are
// the CPU's; the pages in between the first's physical address and the
// merged length's end, which belong to nobody's mapping, never are.
func TestMergedSGOwnership(t *testing.T) {
	sys, err := Boot("2s-4gpu-pcie", Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	u, err := iommu.NewUnit("dmar9", sys.Mem, sys.Engine, 0, iommu.Strict, iommu.DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	sys.AttachIOMMU(u)
	dom, err := u.NewDomain()
	if err != nil {
		t.Fatal(err)
	}
	nic, err := sys.Device("nic0")
	if err != nil {
		t.Fatal(err)
	}
	iommu.Attach(nic, dom, iommu.AttachOptions{PCI: true})
	err = sys.Run("drv", func(p *Process) error {
		va, err := sys.Mem.Vmalloc(0, 3*mem.PageSize)
		if err != nil {
			return err
		}
		sgt := dma.SGAllocTable(3)
		pages := make([]mem.PhysAddr, 3)
		for i := range 3 {
			r, _, _, err := sys.Mem.Translate(va+mem.VirtAddr(i)*mem.PageSize, mem.PageSize)
			if err != nil {
				return err
			}
			pa := r[0].Start
			pages[i] = pa
			sgt.SGL[i].SetPage(pa, mem.PageSize, 0)
		}
		if n := nic.MapSG(p.Thread, sgt.SGL, 3, dma.FromDevice); n != 1 {
			t.Fatalf("dma_map_sg through the IOMMU returned %d, want the 3 pages merged into 1", n)
		}
		// A kmalloc'd line between the first page and first page + 12 KiB
		// physically, if any, is nobody's: writing it is fine.
		for off := mem.PhysAddr(mem.PageSize); off < 3*mem.PageSize; off += mem.PageSize {
			pa := pages[0] + off
			if slices.Contains(pages, pa) {
				continue
			}
			sys.Mem.Write(p.Thread, 0, sys.Mem.PhysToVirt(pa), 64)
		}
		if got := len(sys.Diagnostics()); got != 0 {
			t.Errorf("%d diagnostics after writing pages outside the mapping: %v", got, sys.Diagnostics())
		}
		sys.Mem.Write(p.Thread, 0, va+2*mem.PageSize, 64)
		d := sys.Diagnostics()
		if len(d) != 1 || d[0].Class != "cpu-access-device-owned" {
			t.Fatalf("write to the third page while the NIC owns it: %v", d)
		}
		nic.SyncSGForCPU(p.Thread, sgt.SGL, 3, dma.FromDevice)
		for i := range 3 {
			sys.Mem.Read(p.Thread, 0, va+mem.VirtAddr(i)*mem.PageSize, 64)
		}
		if got := len(sys.Diagnostics()); got != 1 {
			t.Errorf("reads after dma_sync_sg_for_cpu: %d diagnostics, want the one before: %v", got, sys.Diagnostics())
		}
		nic.UnmapSG(p.Thread, sgt.SGL, 3, dma.FromDevice)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

package iommucheck

import (
	"strings"
	"testing"

	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/vfio"
)

// userDriver gives nic0 to a user-space driver, process udrv, through
// the legacy interface, with one page mapped at IOVA 0x100000; the pack
// watches the VFIO layer.
func (r *rig) userDriver(t *testing.T, th *sim.Proc) (*vfio.VFIO, *kernel.Process, int) {
	t.Helper()
	k := kernel.New(r.m.Engine, r.m.Mem.Nodes())
	v, err := vfio.New(vfio.Config{Kernel: k, Mem: r.m.Mem, Unit: r.unit,
		Groups:  []iommu.Group{{ID: 0, Devices: []string{"nic0"}}},
		Devices: []vfio.Device{{Name: "nic0", Driver: "nic", DMA: r.nic}}})
	must(t, err)
	r.pack.WatchVFIO(v)
	p, err := k.NewProcess("udrv", 0)
	must(t, err)
	must(t, v.Unbind(th, "nic0"))
	must(t, v.SetDriverOverride("nic0", vfio.DriverVFIOPCI))
	must(t, v.Bind(th, "nic0", vfio.DriverVFIOPCI))
	cfd, err := v.Open(th, p, vfio.ContainerPath)
	must(t, err)
	gfd, err := v.Open(th, p, "/dev/vfio/0")
	must(t, err)
	must(t, v.GroupSetContainer(th, p, gfd, cfd))
	must(t, v.SetIOMMU(th, p, cfd, vfio.Type1v2IOMMU))
	buf, err := r.m.Mem.Vmalloc(0, 4096)
	must(t, err)
	must(t, p.MM.Map(kernel.VMA{Start: buf, Size: 4096, Name: "anon"}))
	must(t, v.MapDMA(th, p, cfd, vfio.DMAMap{Flags: vfio.DMAMapFlagRead | vfio.DMAMapFlagWrite, VAddr: buf, IOVA: 0x100000, Size: 4096}))
	return v, p, cfd
}

// TestVFIOUseAfterUnmap: a user driver's device writing where its
// container mapped before but no longer does is the use after unmap of
// iommu-fault, named by the VFIO calls, not vfio-dma-unmapped.
func TestVFIOUseAfterUnmap(t *testing.T) {
	r := newRig(t, iommu.Strict, true)
	r.run(func(th *sim.Proc) {
		v, p, cfd := r.userDriver(t, th)
		_, err := v.UnmapDMA(th, p, cfd, vfio.DMAUnmap{IOVA: 0x100000, Size: 4096})
		must(t, err)
		r.nic.Write(0x100000, 64)
	})
	ds := r.c.Diagnostics()
	if len(ds) != 1 || ds[0].Class != IOMMUFault {
		t.Fatalf("diagnostics %v, want one %s", ds, IOMMUFault)
	}
	if d := ds[0]; !contains(d.Origin, "VFIO_IOMMU_MAP_DMA(container1") || !contains(d.Message, "unmapped by VFIO_IOMMU_UNMAP_DMA(container1") {
		t.Errorf("diagnostic %+v: want the VFIO calls as the mapping's origin and unmap", d)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

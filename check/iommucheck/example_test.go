package iommucheck_test

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/iommucheck"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A NIC behind an IOMMU in lazy mode keeps writing into a receive
// buffer its driver already unmapped. The IOTLB still holds the entry
// until the flush queue is flushed, so the write lands: the hardware
// does not stop it, the pack reports it, with the unmap as its origin.
func Example() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{})
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	unit, _ := iommu.NewUnit("dmar0", m.Mem, m.Engine, 0, iommu.Lazy, iommu.DefaultParams())
	dom, _ := unit.NewDomain()
	nic, _ := x.Device("nic0")
	iommu.Attach(nic, dom, iommu.AttachOptions{PCI: true})

	chk := check.New(check.Options{})
	iommucheck.Attach(chk, unit).WatchDMA(x)

	buf, _ := m.Mem.AllocPages(0, mem.PageSize, mem.ZoneNormal)
	m.Engine.Spawn("rx", func(p *sim.Proc) {
		p.Sleep(sim.Microsecond)
		iova := nic.MapPage(p, buf, 0, 1500, dma.FromDevice)
		nic.MappingError(iova)
		nic.Write(iova, 1500)
		nic.UnmapPage(p, iova, 1500, dma.FromDevice)
		_, err := nic.Write(iova, 1500)
		fmt.Println("write after unmap blocked:", err != nil)
	})
	m.Engine.Run()
	for _, d := range chk.Diagnostics() {
		fmt.Printf("%s %s %s\n  %s\n  unmapped by %s\n", d.Severity, d.Class, d.Buffer, d.Message, d.Origin)
	}
	// Output:
	// write after unmap blocked: false
	// error iommu-stale-iotlb dma:0xfffff000
	//   nic0 writes dma:0xfffff000 through a stale IOTLB entry of dmar0 domain 1 (lazy invalidation, before the flush): it reached pa:0x100001000, no longer mapped for it; its -w mapping dma:0xfffff000 +4096 (pa:0x100001000) was made by dma_map_page(nic0, pa:0x100001000, 0, 1500, DMA_FROM_DEVICE) at 1us by rx
	//   unmapped by dma_unmap_page(nic0, dma:0xfffff000, 1500, DMA_FROM_DEVICE) at 1us by rx
}

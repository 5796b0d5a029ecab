package dmalab_test

import (
	"fmt"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
)

// A program puts nic0 behind an IOMMU in lazy mode and gives the unit
// to the system, which checks it. The NIC writes a packet into a
// receive buffer, the driver unmaps it, and the NIC writes into it once
// more: the IOTLB still translates, the
// write lands. Both packs report it: the DMA API's (the driver's bug)
// and the IOMMU's (what the hardware let through), each with its
// provenance.
func ExampleSystem_AttachIOMMU() {
	sys, err := dmalab.Boot("2s-4gpu-pcie", dmalab.Options{Check: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sys.Close()
	unit, err := iommu.NewUnit("dmar0", sys.Mem, sys.Engine, 0, iommu.Lazy, iommu.DefaultParams())
	if err != nil {
		fmt.Println(err)
		return
	}
	dom, err := unit.NewDomain()
	if err != nil {
		fmt.Println(err)
		return
	}
	nic, err := sys.Device("nic0")
	if err != nil {
		fmt.Println(err)
		return
	}
	iommu.Attach(nic, dom, iommu.AttachOptions{PCI: true})
	sys.AttachIOMMU(unit)

	err = sys.Run("rx", func(p *dmalab.Process) error {
		buf, err := sys.Mem.AllocPages(p.Node(), mem.PageSize, mem.ZoneNormal)
		if err != nil {
			return err
		}
		iova := nic.MapPage(p.Thread, buf, 0, 1500, dma.FromDevice)
		if nic.MappingError(iova) {
			return fmt.Errorf("dma_map_page failed")
		}
		if _, err := nic.Write(iova, 1500); err != nil { // a packet
			return err
		}
		nic.UnmapPage(p.Thread, iova, 1500, dma.FromDevice)
		_, err = nic.Write(iova, 1500) // the bug: after the unmap
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
	for _, d := range sys.Diagnostics() {
		fmt.Printf("%s %s [%s]\n  origin: %s\n", d.Severity, d.Class, d.Buffer, d.Origin)
	}
	// Output:
	// error iommu-stale-iotlb [dma:0xfffff000]
	//   origin: dma_unmap_page(nic0, dma:0xfffff000, 1500, DMA_FROM_DEVICE) at 0s by rx
	// error device-access-unmapped [dma:0xfffff000 +1500]
	//   origin: dma_map_page(nic0, pa:0x100001000, 0, 1500, DMA_FROM_DEVICE) at 0s by rx
}

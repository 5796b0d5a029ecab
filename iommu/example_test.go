package iommu_test

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A NIC behind an IOMMU in strict mode: dma_map_page hands it an IOVA
// below 4 GiB (a PCI device), its write lands in the buffer, and after
// dma_unmap_page the same write faults.
func ExampleAttach() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{})
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	unit, _ := iommu.NewUnit("dmar0", m.Mem, m.Engine, 0, iommu.Strict, iommu.DefaultParams())
	dom, _ := unit.NewDomain()
	nic, _ := x.Device("nic0")
	iommu.Attach(nic, dom, iommu.AttachOptions{PCI: true})

	buf, _ := m.Mem.AllocPages(0, mem.PageSize, mem.ZoneNormal)
	m.Engine.Spawn("driver", func(p *sim.Proc) {
		iova := nic.MapPage(p, buf, 0, 1500, dma.FromDevice)
		fmt.Println("iova:", iova)
		_, err := nic.Write(iova, 1500)
		fmt.Println("write while mapped:", err)
		nic.UnmapPage(p, iova, 1500, dma.FromDevice)
		_, err = nic.Write(iova, 1500)
		fmt.Println("write after unmap faults:", errors.Is(err, iommu.ErrFault))
	})
	m.Engine.Run()
	fmt.Println("table pages:", dom.TablePages())
	// Output:
	// iova: dma:0xfffff000
	// write while mapped: <nil>
	// write after unmap faults: true
	// table pages: 4
}

// A domain's fault handler hears of a device's blocked write; a handler
// that returns -ENOSYS leaves the fault to the IOMMU driver, which logs
// it as VT-d's does.
func ExampleDomain_SetFaultHandler() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{})
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	unit, _ := iommu.NewUnit("dmar0", m.Mem, m.Engine, 0, iommu.Strict, iommu.DefaultParams())
	dom, _ := unit.NewDomain()
	nic, _ := x.Device("nic0")
	iommu.Attach(nic, dom, iommu.AttachOptions{PCI: true})
	unit.Hooks.Hook(func(e *iommu.Event) {
		if e.Op == iommu.OpFault && e.Log != "" {
			fmt.Println("log:", e.Log)
		}
	})
	dom.SetFaultHandler(func(d *iommu.Domain, dev string, iova mem.DMAAddr, flags iommu.FaultFlags, token any) error {
		fmt.Printf("%s: %s fault at %v (%v)\n", token, dev, iova, flags)
		if iova < 0x10000 {
			return nil // handled: nothing logged
		}
		return syscall.ENOSYS
	}, "driver")
	nic.Write(0x1000, 64)
	nic.Read(0x20000, 64)
	// Output:
	// driver: nic0 fault at dma:0x1000 (IOMMU_FAULT_WRITE)
	// driver: nic0 fault at dma:0x20000 (IOMMU_FAULT_READ)
	// log: DMAR: [DMA Read NO_PASID] Request device [nic0] fault addr 0x20000 [fault reason 0x06] PTE Read access is not set
}

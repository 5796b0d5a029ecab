package nic

import (
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// wrongDir is a buggy dma-iommu behind nic0: every streaming mapping
// gets the other direction's permission (rx buffers read-only, tx
// buffers write-only), so every packet's DMA faults.
type wrongDir struct{ *iommu.Translator }

func (w wrongDir) Map(p *sim.Proc, pa mem.PhysAddr, size uint64, dir dma.Direction) (mem.DMAAddr, error) {
	switch dir {
	case dma.ToDevice:
		dir = dma.FromDevice
	case dma.FromDevice:
		dir = dma.ToDevice
	}
	return w.Translator.Map(p, pa, size, dir)
}

// TestIOMMUFaultsReachTheDriver: with every packet's mapping wrong, the
// run still completes. Each tx read faults: the NIC gets an error
// completion, sends nothing, and the driver reaps an error status for
// every packet. Each rx write faults and is dropped: the NIC reports
// the packet received, and the driver finds only the old bytes in its
// buffers (every packet corrupt), and hears of the faults from the
// domain's fault handler, which silences the IOMMU's log.
func TestIOMMUFaultsReachTheDriver(t *testing.T) {
	const packets = 40
	var unit *iommu.Unit
	var handled, logged int
	o := run(t, "2s-4gpu-pcie", true, Options{Dir: Both, Packets: packets, Ring: 16}, func(d *dma.DMA) {
		m := d.Machine()
		var err error
		unit, err = iommu.NewUnit("dmar0", m.Mem, m.Engine, 0, iommu.Strict, iommu.DefaultParams())
		if err != nil {
			t.Fatal(err)
		}
		dom, err := unit.NewDomain()
		if err != nil {
			t.Fatal(err)
		}
		dev, err := d.Device("nic0")
		if err != nil {
			t.Fatal(err)
		}
		dev.SetTranslator(wrongDir{iommu.Attach(dev, dom, iommu.AttachOptions{PCI: true})})
		dom.SetFaultHandler(func(_ *iommu.Domain, dev string, _ mem.DMAAddr, flags iommu.FaultFlags, _ any) error {
			if dev == "nic0" && flags == iommu.FaultWrite {
				handled++
				return nil
			}
			return iommu.ErrFault // not -ENOSYS: taken too
		}, nil)
		unit.Hooks.Hook(func(e *iommu.Event) {
			if e.Op == iommu.OpFault && e.Log != "" {
				logged++
			}
		})
	})
	if o.err != nil || len(o.blocked) > 0 {
		t.Fatalf("run: %v, blocked %v", o.err, o.blocked)
	}
	tx, rx := o.r.Tx, o.r.Rx
	if tx.Errors != packets || tx.Packets != 0 || tx.Bytes != 0 {
		t.Errorf("tx: %d errors, %d packets sent; want %d and 0", tx.Errors, tx.Packets, packets)
	}
	if rx.Errors != 0 || rx.Packets != packets || rx.Verified != packets || rx.Corrupt != packets {
		t.Errorf("rx: %d errors, %d packets, %d verified, %d corrupt; want 0 errors and %d corrupt of %d",
			rx.Errors, rx.Packets, rx.Verified, rx.Corrupt, packets, packets)
	}
	if st := unit.Stats(); st.Faults != 2*packets || handled != packets || logged != 0 {
		t.Errorf("unit faults %d, handler took %d writes, %d logged; want %d, %d, 0", st.Faults, handled, logged, 2*packets, packets)
	}
}

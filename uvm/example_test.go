package uvm_test

import (
	"fmt"

	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// pcie moves data like the H200's PCIe Gen5 link in the h200-pcie
// platform: 360 ns of route latency, then 55.5 GB/s.
type pcie struct{ e *sim.Engine }

func (v pcie) Engine() *sim.Engine { return v.e }

func (v pcie) Move(p *sim.Proc, from, to uvm.Processor, bytes int64) {
	c := v.e.NewCompletion()
	v.e.After(360*sim.Nanosecond+sim.TransferTime(float64(bytes), 55.5e9), c.Complete)
	p.Wait(c)
}

func (v pcie) CacheMaintenance(p *sim.Proc, op uvm.CacheOp, bytes int64) {}

// One GPU thread reads a 2 MiB block of host-resident managed memory page
// by page: the driver's tree prefetcher makes it fault six times, moving
// 64 KiB, 64 KiB, 128 KiB, 256 KiB, 512 KiB and 1 MiB; the first fault
// is the 21.92 us round trip the model is calibrated to.
func Example() {
	e := sim.New(1)
	d, err := uvm.New(pcie{e}, uvm.Config{GPUs: []uvm.GPUConfig{{Generation: uvm.PascalPlus, ManagedMemory: 80 << 30}}})
	if err != nil {
		panic(err)
	}
	a, err := d.Allocate(uvm.BlockSize, uvm.AllocOptions{})
	if err != nil {
		panic(err)
	}
	e.Spawn("app", func(p *sim.Proc) {
		if err := d.Prefetch(p, a.Base, uvm.BlockSize, uvm.CPU); err != nil {
			panic(err)
		}
		for page := range uvm.PagesPerBlock {
			acc, err := d.GPUAccess(p, 0, a.Base+uvm.Addr(page*uvm.PageSize), 4, false)
			if err != nil {
				panic(err)
			}
			if acc.Faults > 0 {
				fmt.Printf("page %3d: fault, %.2f us\n", page, acc.Stall.Seconds()*1e6)
			}
		}
	})
	e.Run()
	st := d.Stats()
	fmt.Printf("%d faults, %d KiB by faults, %d KiB by the prefetcher\n", st.GPUFaults,
		st.MigratedBytes[uvm.CauseFault]>>10, st.MigratedBytes[uvm.CausePrefetcher]>>10)
	// Output:
	// page   0: fault, 21.92 us
	// page  16: fault, 21.92 us
	// page  32: fault, 23.10 us
	// page  64: fault, 25.46 us
	// page 128: fault, 30.19 us
	// page 256: fault, 39.63 us
	// 6 faults, 24 KiB by faults, 2024 KiB by the prefetcher
}

package check_test

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/sim"
)

// A Checker with one rule pack attached to its subject: here the fake
// IOMMU pack of this package's tests, which registers one class. The
// packs of dmalab (check/dmadebug over dma and mem, check/gpumem over
// cuda) attach the same way.
func Example() {
	c := check.New(check.Options{})
	u := &fakeIOMMU{}
	attachIOMMU(c, u)

	u.fault(5*sim.Microsecond, "nvme0", 0x7000, true)

	for _, d := range c.Diagnostics() {
		fmt.Println(d)
		info, _ := check.Lookup(d.Class)
		fmt.Println(info.Source)
	}
	// Output:
	// 5us error iommu-page-fault nvme0 [iova:0x7000]: nvme0 writes an IOVA its domain does not map; made by iommu_unmap(dom0, 0x7000, 4096) at 2us by driver
	// drivers/iommu/io-pgfault.c
}

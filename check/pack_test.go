package check_test

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/sim"
)

// A pack the framework and the other packs have never heard of: the
// shape a new IOMMU, DMA-BUF or GPUDirect pack takes. Its subject is a
// fake IOMMU that delivers its faults through sim.Hooks, as the model's
// components do.

// ioFault is an IOMMU's fault record (struct iommu_fault in
// include/linux/iommu.h, reduced): a device reached an IOVA its domain
// does not map.
type ioFault struct {
	sim.Header
	Device string
	IOVA   uint64
	Write  bool
}

// fakeIOMMU is the subject.
type fakeIOMMU struct {
	Faults sim.Hooks[ioFault]
}

func (u *fakeIOMMU) fault(t sim.Time, dev string, iova uint64, write bool) {
	u.Faults.Emit(&ioFault{
		Header: sim.Header{Time: t, Proc: dev, Component: "iommu", Cause: sim.CauseTranslate},
		Device: dev, IOVA: iova, Write: write,
	})
}

// The pack's class, registered once when the package initialises, with
// a rank after dmalab's packs.
const ioPageFault = "iommu-page-fault"

var ioClasses = check.Register("iommu", 300, check.ClassInfo{
	Code: ioPageFault, Severity: check.Error,
	Summary: "a device reached an IOVA its IOMMU domain does not map",
	Source:  "drivers/iommu/io-pgfault.c",
})

// ioPack is the rule pack over the fake IOMMU.
type ioPack struct{ chk *check.Checker }

// attachIOMMU is the pack's Attach: the framework Checker and the
// subject.
func attachIOMMU(c *check.Checker, u *fakeIOMMU) *ioPack {
	p := &ioPack{chk: c}
	u.Faults.Hook(p.fault)
	return p
}

func (p *ioPack) fault(f *ioFault) {
	verb := "reads"
	if f.Write {
		verb = "writes"
	}
	p.chk.Record(ioClasses[0], check.Diagnostic{
		Time: f.Time, Proc: f.Proc, Device: f.Device,
		Buffer:  fmt.Sprintf("iova:%#x", f.IOVA),
		Message: fmt.Sprintf("%s %s an IOVA its domain does not map", f.Device, verb),
		Origin:  check.Origin(fmt.Sprintf("iommu_unmap(dom0, %#x, 4096)", f.IOVA), 2*sim.Microsecond, "driver"),
	})
}

package iommu

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// FaultFlags are the flags a fault handler gets (include/linux/iommu.h):
// IOMMU_FAULT_READ or IOMMU_FAULT_WRITE.
type FaultFlags int

const (
	// FaultRead is IOMMU_FAULT_READ (0x0).
	FaultRead FaultFlags = 0x0
	// FaultWrite is IOMMU_FAULT_WRITE (0x1).
	FaultWrite FaultFlags = 0x1
)

func (f FaultFlags) String() string {
	if f&FaultWrite != 0 {
		return "IOMMU_FAULT_WRITE"
	}
	return "IOMMU_FAULT_READ"
}

// FaultHandler is iommu_fault_handler_t: called, in the IOMMU's
// interrupt, with the domain, the device that faulted, the IOVA and the
// access's flags, and the token given to SetFaultHandler. It returns nil
// when it handled the fault; an error wrapping syscall.ENOSYS (-ENOSYS)
// leaves the fault to the IOMMU driver, which logs it. It must not block.
type FaultHandler func(d *Domain, dev string, iova mem.DMAAddr, flags FaultFlags, token any) error

// SetFaultHandler is iommu_set_fault_handler: h is called for every
// fault of a device attached to d (nil removes it).
//
// Linux's AMD and Arm SMMU drivers call the handler (report_iommu_fault)
// and log only when it returns -ENOSYS; the VT-d driver logs DMA
// remapping faults from dmar_fault without consulting it. The model
// gives every profile report_iommu_fault's contract, so that a driver
// on any of them learns of its device's faults, and prints each
// profile's own log line for faults no handler took.
func (d *Domain) SetFaultHandler(h FaultHandler, token any) {
	d.handler, d.token = h, token
}

// reportFault is report_iommu_fault, then the IOMMU driver's log line
// when no handler took the fault. It returns the line ("" when handled).
func (d *Domain) reportFault(dev string, iova uint64, write bool, why error) string {
	flags := FaultRead
	if write {
		flags = FaultWrite
	}
	if d.handler != nil {
		if err := d.handler(d, dev, mem.DMAAddr(iova), flags, d.token); err == nil || !errors.Is(err, syscall.ENOSYS) {
			return ""
		}
	}
	return d.unit.faultLog(d.id, dev, iova, write, why)
}

// faultLog is the line the profile's Linux driver prints for an
// unhandled fault; the device is named, for want of a PCI address.
func (u *Unit) faultLog(dom int, dev string, iova uint64, write bool, why error) string {
	perm := errors.Is(why, ErrPermission)
	switch u.params.Profile {
	case "amd-vi":
		// drivers/iommu/amd/iommu.c amd_iommu_report_page_fault:
		// EVENT_FLAG_RW 0x020, EVENT_FLAG_PR 0x010 (the entry was present).
		flags := 0
		if write {
			flags |= 0x020
		}
		if perm {
			flags |= 0x010
		}
		return fmt.Sprintf("%s: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x%04x address=0x%x flags=0x%04x]", dev, dom, iova, flags)
	case "smmuv3":
		// drivers/iommu/arm/arm-smmu-v3/arm-smmu-v3.c
		// arm_smmu_dump_event: F_TRANSLATION (0x10), F_ADDR_SIZE (0x11),
		// F_PERMISSION (0x13).
		ev := "F_TRANSLATION"
		switch {
		case perm:
			ev = "F_PERMISSION"
		case errors.Is(why, ErrTranslatedRequest):
			ev = "C_BAD_STE"
		case iova >= 1<<vaBits:
			ev = "F_ADDR_SIZE"
		}
		return fmt.Sprintf("arm-smmu-v3 %s: event: %s client: %s sid: 0x0 ssid: 0x0 iova: %#x ipa: 0x0 %s", u.name, ev, dev, iova, rwName(write))
	}
	// drivers/iommu/intel/dmar.c dmar_fault_do_one and its
	// dma_remap_fault_reasons: a second-level entry with neither R nor W
	// is "not present", reported as 0x06 for a read and 0x05 for a
	// write, the same as a missing permission.
	reason, text := uint8(0x06), "PTE Read access is not set"
	if write {
		reason, text = 0x05, "PTE Write access is not set"
	}
	switch {
	case errors.Is(why, ErrTranslatedRequest):
		reason, text = 0x0d, "PCE for translation request specifies blocking"
	case iova >= 1<<vaBits:
		reason, text = 0x04, "Access beyond MGAW"
	}
	kind := "DMA Read"
	if write {
		kind = "DMA Write"
	}
	return fmt.Sprintf("DMAR: [%s NO_PASID] Request device [%s] fault addr %#x [fault reason 0x%02x] %s", kind, dev, iova, reason, text)
}

// fault blocks the access: counted, reported to the domain's handler
// (report_iommu_fault) and, unhandled, logged; one OpFault event.
func (t *Translator) fault(iova uint64, write bool, why error) error {
	u := t.dom.unit
	u.stats.Faults++
	log := t.dom.reportFault(t.dev.Name(), iova, write, why)
	if u.Hooks.Active() {
		u.emit(Event{Op: OpFault, Domain: t.dom.id, Device: t.dev.Name(), IOVA: mem.DMAAddr(iova), Write: write, Reason: why, Log: log}, "", sim.CauseFault)
	}
	// The DMA layer wraps it with the device and the access.
	return fmt.Errorf("%s at %v: %w", rwName(write), mem.DMAAddr(iova), why)
}

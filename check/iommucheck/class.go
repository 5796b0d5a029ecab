package iommucheck

import "github.com/dmalab/dmalab/check"

// IOMMU class codes. They never change.
const (
	IOMMUFault      = "iommu-fault"
	IOMMUPermission = "iommu-permission"
	IOMMUStaleIOTLB = "iommu-stale-iotlb"
	IOVALeak        = "iova-leak"
	VFIOUnmapped    = "vfio-dma-unmapped"
)

// cls indexes classes.
type cls uint8

const (
	cFault cls = iota
	cPermission
	cStaleIOTLB
	cLeak
	cVFIO
	nClasses
)

// infos is indexed by cls.
var infos = [nClasses]check.ClassInfo{
	cFault: {Code: IOMMUFault, Severity: check.Error,
		Summary: "a device access to an IOVA its IOMMU domain does not map: blocked, no byte changed (DMAR non-present entry, SMMU F_TRANSLATION)",
		Source:  "drivers/iommu/intel/dmar.c: dmar_fault"},
	cPermission: {Code: IOMMUPermission, Severity: check.Error,
		Summary: "a device write through a read-only IOMMU mapping, or a read through a write-only one: blocked, no byte changed",
		Source:  "drivers/iommu/intel/dmar.c: dmar_fault"},
	cStaleIOTLB: {Code: IOMMUStaleIOTLB, Severity: check.Error,
		Summary: "a device access translated by a stale IOTLB entry after its IOVA was unmapped (lazy invalidation's window): a use after unmap the IOMMU did not stop",
		Source:  "dmalab"},
	cLeak: {Code: IOVALeak, Severity: check.Error,
		Summary: "IOVA mappings made for a device still in its IOMMU domain when its driver is unbound",
		Source:  "dmalab"},
	cVFIO: {Code: VFIOUnmapped, Severity: check.Error,
		Summary: "a device assigned to a user-space driver (VFIO) accessed an IOVA its container or IOAS never mapped (VFIO_IOMMU_MAP_DMA, IOMMU_IOAS_MAP): blocked, no byte changed",
		Source:  "dmalab"},
}

// classes are the registered handles, indexed by cls. The IOMMU ranks
// after the DMA API's classes (100) and GPU memory's (200).
var classes = check.Register("iommu", 300, infos[:]...)

// Classes lists the pack's classes, in the order `dmalab check
// --classes` prints them.
func Classes() []check.ClassInfo { return check.Infos(classes[:]) }

// Package iommucheck is the checker's rule pack for the IOMMU: it
// observes the events of iommu units (maps, unmaps, faults, stale IOTLB
// hits) and, when told to, the DMA API's calls (for the names of the
// calls that made and removed each mapping, and for driver unbinds) and
// a VFIO layer's, and records five classes on a check.Checker:
//
//   - iommu-fault: a device accessed an IOVA its domain does not map.
//     The IOMMU blocked it and no byte of memory changed; Linux logs it
//     from the fault handler (drivers/iommu/intel/dmar.c dmar_fault, the
//     SMMUv3 event queue in arm-smmu-v3.c). When the IOVA was mapped
//     shortly before, the diagnostic names that mapping and its unmap.
//   - iommu-permission: a device wrote through a read-only mapping, or
//     read through a write-only one (DMA_TO_DEVICE maps IOMMU_READ,
//     DMA_FROM_DEVICE IOMMU_WRITE: dma_info_to_prot). Blocked too.
//   - iommu-stale-iotlb: in lazy mode, a device access translated by an
//     IOTLB entry whose mapping was already unmapped, before the flush
//     queue's invalidation: a use after unmap the hardware did not stop,
//     reaching memory no longer mapped for the device. Nothing in Linux
//     sees it; the origin is the unmap. The IOMMU reports each page an
//     access crosses; the pack reports each access once per mapping.
//   - iova-leak: IOVA mappings made for a device through the DMA API
//     still in its domain when its driver is unbound. Linux does not
//     check this (put_iova_domain frees what is left silently); the
//     DMA-API pack's unbind-leak sees the same driver bug from the DMA
//     API's side, this class names the IOVA ranges and the domain.
//   - vfio-dma-unmapped: a device given to a user-space driver (VFIO:
//     a container's group or an iommufd-bound device) accessed an IOVA
//     its container or IOAS never mapped (VFIO_IOMMU_MAP_DMA,
//     IOMMU_IOAS_MAP), in its user domain or, before the user attached
//     one, in its group's blocking domain. The IOMMU blocked it and no
//     byte changed; Linux only logs the fault. The diagnostic's process
//     is the user driver's, its message the ranges the space did map,
//     its origin the space's last map calls, newest first. A fault at an
//     IOVA the space mapped once and unmapped since stays iommu-fault,
//     named by the VFIO calls.
//
// Every diagnostic has the device, the IOVA, the reason, the time and
// the process (the device itself for its own accesses), and as origin
// the call that made the mapping concerned (for a stale hit, the call
// that unmapped it) when known: the DMA API's call ("dma_map_page(nic0,
// ...)") when the pack watches the DMA layer (WatchDMA), else the
// domain's ("iommu_map(dmar0 domain 1, ...)"). Correct use reports
// nothing.
//
// The pack imports only the check framework and its subjects, iommu,
// dma and vfio. Attach hooks a Pack to a unit; AttachUnit adds another
// unit, WatchDMA the DMA layer and WatchVFIO a VFIO layer. Faults also
// reach the DMA layer as failed device accesses, which the DMA-API pack
// reports as device-access-unmapped: the two packs see the driver's bug
// and the IOMMU's answer to it. A device given to user space is not the
// DMA API's (dma.Device.SetUserDMA): only this pack judges its
// accesses.
package iommucheck

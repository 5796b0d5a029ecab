// Package iommu is an IOMMU between bus masters and memory: domains with
// multi-level page tables, the IOVA allocator, the IOTLB of each IOMMU
// unit with strict or lazy (flush-queue) invalidation, and the DMA
// layer's translation for a device attached to a domain.
//
// Real counterparts:
//
//   - drivers/iommu/iommu.c: struct iommu_domain, iommu_map,
//     iommu_unmap (which stops at the first page not mapped and returns
//     what it unmapped), iommu_iova_to_phys, iommu_pgsize (the largest
//     page the alignment of both addresses and the length allow). Domain
//     mirrors them; Unit is one IOMMU (struct intel_iommu, struct
//     arm_smmu_device).
//   - drivers/iommu/io-pgtable-arm.c and drivers/iommu/intel/iommu.c: a
//     4-level table of 512 eight-byte entries per 4 KiB page, with leaves
//     of 4 KiB (level 3), 2 MiB (level 2) and 1 GiB (level 1). The table
//     pages are real pages of package mem, allocated on first use, so a
//     domain costs memory (Domain.TablePages).
//   - drivers/iommu/iommu.c pci_device_group and drivers/pci/pci.c
//     pci_acs_path_enabled: Groups forms a platform's IOMMU groups from
//     its switches and their ACS, and from the functions of multifunction
//     devices, their ACS and DMA aliases (get_pci_function_alias_group,
//     get_pci_alias_group). Profiles (vtd, amd-vi, smmuv3) are the
//     hardware families' numbers, each with its source (the Intel VT-d,
//     AMD IOMMU and Arm SMMUv3 specifications for the table formats;
//     pcie-bench for the IOTLB; the rest assumed, saying why).
//   - drivers/iommu/iova.c: struct iova_domain (IOVADomain): ranges
//     allocated top-down below a limit, aligned to their size rounded up
//     to a power of two, with per-CPU caches of freed ranges up to 128 KiB
//     (IOVA_RANGE_CACHE_MAX_SIZE) in magazines of IOVA_MAG_SIZE and a
//     depot of MAX_GLOBAL_MAGS full magazines.
//   - drivers/iommu/dma-iommu.c: the DMA API over a domain (Translator
//     implements dma.Mapper): iommu_dma_map_page (an IOVA allocated below
//     the device's mask, 32-bit first for PCI devices unless
//     iommu.forcedac), iommu_dma_unmap_page, iommu_dma_map_sg (every
//     segment in one contiguous IOVA range; the DMA layer merges them as
//     __finalise_sg does), strict invalidation at every unmap or the
//     flush queue (IOVA_FQ_SIZE entries, IOVA_FQ_TIMEOUT).
//   - drivers/iommu/iommu.c iommu_set_fault_handler and
//     report_iommu_fault: Domain.SetFaultHandler; a fault no handler
//     takes (none set, or -ENOSYS) is logged as the profile's driver
//     logs it (intel/dmar.c dmar_fault_do_one, amd/iommu.c
//     amd_iommu_report_page_fault, arm-smmu-v3.c's event dump), in
//     Event.Log.
//   - The walk: VT-d's paging-structure caches and the SMMU's walk
//     caches hold non-leaf entries, so a walk reads only the levels
//     below the deepest one cached; Unit.Place charges each read the
//     platform's latency from the unit's root complex to the tables'
//     node memory and back, plus its DRAM latency.
//   - PCIe ATS (drivers/pci/ats.c pci_enable_ats, pci_ats_supported):
//     AttachOptions.ATS gives a device its own translation cache (ATC),
//     translation requests on its misses, and ATS invalidations at every
//     strict unmap and every lazy flush (qi_flush_dev_iotlb,
//     CMD_ATC_INV). A device with ATS may send translated requests
//     (Translator.Translated) that the unit passes unchecked: the reason
//     Linux refuses ATS to untrusted devices.
//
// # Invariants
//
// An access that does not translate (no mapping, or a write through a
// mapping without write permission) is a fault: the translation returns
// an error wrapping ErrFault or ErrPermission and no range, so the DMA
// layer changes no byte of memory; the domain's handler is called and
// the unit counts it. The device learns of a faulting read (its
// completion carries an error: dma.TransferInfo.ReadErr) but not of a
// faulting write, which is posted and dropped. A device without ATS
// reaches memory that is not mapped in one way only: a stale IOTLB
// entry in lazy mode, between an unmap and the flush that follows it;
// every such access is reported (OpStaleHit). A device with ATS also
// through a stale entry of its ATC (reported the same way) and through
// translated requests (OpTranslated), which nothing checks. IOVAs are
// freed only after the IOTLB and every ATC no longer hold them (at the
// unmap in strict mode, at the flush in lazy mode, or at Domain.Free,
// which drains the flush queue and refuses a domain a device is still
// attached to).
//
// The model is single-threaded (one process runs at a time), so nothing
// here locks.
package iommu

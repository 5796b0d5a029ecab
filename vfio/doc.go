// Package vfio is VFIO: the kernel interface through which a
// user-space driver owns a PCI device, maps its own memory for the
// device's DMA through the IOMMU, reaches its registers and receives its
// interrupts. It also holds the part of the PCI core that decides which
// driver a device is bound to (sysfs unbind, driver_override, bind,
// drivers_probe).
//
// Real counterparts:
//
//   - drivers/vfio/vfio_main.c, group.c: the groups (/dev/vfio/N, one
//     per IOMMU group with a device bound to vfio-pci; open once;
//     VFIO_GROUP_GET_STATUS, _SET_CONTAINER, _GET_DEVICE_FD) and device
//     files (VFIO_DEVICE_GET_INFO, _GET_REGION_INFO, _SET_IRQS, _RESET,
//     mmap of a BAR), the device cdev /dev/vfio/devices/vfioN.
//   - drivers/vfio/container.c and vfio_iommu_type1.c: the container
//     (/dev/vfio/vfio: VFIO_GET_API_VERSION, VFIO_CHECK_EXTENSION,
//     VFIO_SET_IOMMU) and its type1v2 IOMMU: one UNMANAGED domain,
//     VFIO_IOMMU_MAP_DMA (the user's pages pinned by
//     vfio_pin_pages_remote against RLIMIT_MEMLOCK and mapped at the
//     user's IOVA) and VFIO_IOMMU_UNMAP_DMA (unmapped, the IOTLB
//     invalidated before the call returns whatever the kernel's
//     strict/lazy setting, unpinned).
//   - drivers/iommu/iommufd (main.c, ioas.c, io_pagetable.c, device.c):
//     /dev/iommu, IOMMU_IOAS_ALLOC, IOMMU_IOAS_MAP (fixed or
//     kernel-chosen IOVA), IOMMU_IOAS_UNMAP, and on a device cdev
//     VFIO_DEVICE_BIND_IOMMUFD and VFIO_DEVICE_ATTACH_IOMMUFD_PT (an
//     automatic domain per IOAS, filled, with the pages pinned, at the
//     first attach).
//   - drivers/iommu/iommu.c: DMA ownership. A kernel driver that does
//     DMA through the DMA API holds its group (owner_cnt); user space
//     claims a group (iommu_group_claim_dma_owner at SET_CONTAINER) or
//     a device (iommu_device_claim_dma_owner at BIND_IOMMUFD) only when
//     nobody else holds it, else EPERM, and the claim puts every device
//     of the group in a blocking domain, where each access faults, until
//     the user's domain is attached. Releasing it puts them back in
//     their default domain. A group is viable (VFIO_GROUP_FLAGS_VIABLE)
//     when every device in it is bound to vfio-pci or to nothing.
//   - drivers/vfio/pci/vfio_pci_core.c, vfio_pci_intrs.c: regions
//     (BARs, config space; a BAR of a page or more can be mmapped),
//     MSI-X vectors as eventfd triggers (vfio_msihandler →
//     eventfd_signal), reset, and at the device file's last close the
//     vectors masked and the function reset.
//
// Calls are methods of VFIO named after the ioctls, taking the calling
// thread, its process and the descriptors the ioctl takes; errors wrap
// the errno Linux returns (errors.Is(err, syscall.EPERM)) and their
// messages name the call and the group or device. Every call that
// changes something is an Event through VFIO.Hooks, and so is every
// call that fails once its descriptors resolve (OpFail); the IOMMU pack
// (check/iommucheck) uses them to name user mappings and to report a
// user device's DMA to memory never mapped for it.
//
// Costs: pinning and unpinning per 4 KiB page (Params, assumed equal to
// the CUDA driver's measured host registration); the invalidation of an
// unmap, the unit's; register accesses through a BAR mapping, what the
// function charges; the wake-up of a thread blocked on an eventfd,
// kernel.EventFDWakeup.
//
// Not modelled: type1 v1 (unmaps that split a mapping), INTx and MSI,
// the MSI window and other reserved IOVA ranges, config-space and region
// read/write through the device file, sub-page iommufd mappings,
// IOMMU_HWPT_ALLOC and nested domains, CAP_IPC_LOCK, and the noiommu
// mode. A vfio-pci device user space has open cannot be unbound (EBUSY;
// Linux waits for user space instead). VFIO exists only over a
// translating unit: the model builds none for iommu=pt.
//
// # Invariants
//
// A device owned by user space translates through its group's blocking
// domain or its space's domain, never its default domain; its
// accesses are marked as the DMA API's no business
// (dma.Device.SetUserDMA). Every pinned page is counted in the locked
// memory of the process that mapped it and is unpinned, and uncounted,
// exactly once: at unmap, at the domain's end (last device detached,
// last group released) or at the process's exit. The model is
// single-threaded, so nothing here locks.
package vfio

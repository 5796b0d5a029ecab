// Package spdk is a polled-mode user-space NVMe driver in the manner of
// SPDK's (lib/nvme: nvme_ctrlr.c, nvme_qpair.c, nvme_pcie.c,
// nvme_pcie_qpair.c): it brings a controller up through its BAR0
// registers, keeps its queues and data buffers in memory the process
// pinned and mapped for the device (SPDK's hugepages, registered with
// VFIO_IOMMU_MAP_DMA or IOMMU_IOAS_MAP), builds PRPs from I/O virtual
// addresses, rings doorbells with plain stores to the mapped BAR, and
// reaps completions by polling their phase tags (or waits on an
// interrupt's eventfd).
//
// The driver does not know how it reached the device: Regs is BAR0
// (a VFIO mmap of region 0, or pci.Registers directly) and Memory is a
// region with a CPU address and a device address. Package vfio gives
// both to a process; the vfio-user-driver scenario runs it end to end.
package spdk

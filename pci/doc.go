// Package pci is a PCI function as its drivers see it: the bus master
// that does its DMA, its BARs (memory-mapped register windows a driver
// reads and writes), its MSI-X vectors, and function-level reset.
//
// Real-world counterpart: struct pci_dev (include/linux/pci.h) with its
// resources and MSI-X table, as a kernel driver (pci_iomap, readl,
// writel, pci_alloc_irq_vectors) or a user-space driver through VFIO
// (VFIO_DEVICE_GET_REGION_INFO, mmap of a region, VFIO_DEVICE_SET_IRQS)
// reaches it. A device model (package nvme) implements Function; a
// driver framework (package vfio) hands it to user space.
package pci

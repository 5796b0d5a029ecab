// Package topo reads the real machine's topology from sysfs and procfs:
// NUMA nodes with their CPUs, memory and SLIT distances; the PCI device
// tree with class, vendor, BAR sizes, link speed and width, NUMA node and
// IOMMU group; the IOMMU (its units, each group's domain type and
// devices, the kernel command line's IOMMU words, and from these the mode
// DMA runs in: off, passthrough, strict, lazy or mixed, with the
// evidence; ReadIOMMU reads this part alone); numa_balancing; the NVIDIA
// GPUs; and a connection matrix among GPUs and NICs.
//
// Its real-world counterparts are hwloc's lstopo (the whole tree),
// "nvidia-smi topo -m" (the matrix and its PIX/PXB/PHB/NODE/SYS
// vocabulary), "lspci -tv" (the PCI tree) and "numactl -H" (nodes and
// distances). Unlike them it reads a tree rooted anywhere, so a copy of a
// machine's /sys and /proc (or a fake one built by a test) reads the same
// as the machine itself.
//
// Sysfs is sparse on virtual machines and containers: a missing file is
// normal and leaves its value unknown (Unknown for integers, zero for
// sizes and link values, empty for strings); Read fails only when the
// root itself cannot be read. Content that is present but cannot be
// parsed is recorded in Topology.Warnings.
//
// NVML is optional. Read's caller may plug in a GPUInfo (the NVML binding
// in hw/nvml implements it) for GPU names, BAR1 usage and NVLink counts;
// without one, GPU names come from the PCI ID database when the root has
// one, BAR1 sizes from sysfs, and the matrix has no NV# entries.
package topo

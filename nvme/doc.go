// Package nvme is an NVMe controller with one namespace, as a PCI
// function (pci.Function) that a driver brings up and drives through
// its registers, queues in host memory and MSI-X vectors: Linux's
// nvme.ko (drivers/nvme/host/pci.c) in the kernel, or SPDK's driver in
// user space through VFIO.
//
// Real-world counterpart: the NVMe Base Specification 2.0 and the NVM
// Command Set Specification 1.0. BAR0 holds CAP, VS, INTMS/INTMC, CC,
// CSTS, AQA, ASQ, ACQ and the doorbells from 0x1000 with CAP.DSTRD's
// stride. The driver writes AQA, ASQ and ACQ, sets CC.EN with the page
// size (CC.MPS) and entry sizes, and waits for CSTS.RDY within CAP.TO
// (nvme_pci_configure_admin_queue, nvme_enable_ctrl, nvme_wait_ready);
// the controller answers after Options.ReadyTime. Admin commands are
// Identify (controller, namespace, active namespace list), Create and
// Delete I/O Completion and Submission Queues, Set and Get Features
// (Number of Queues) and Asynchronous Event Request; NVM commands are
// Read, Write and Flush. Data pointers are PRPs: PRP1 with an offset,
// PRP2 as a second page or a PRP list, lists chained through their last
// entry, pages of CC.MPS.
//
// Everything the controller does is DMA of its dma.Device, so an IOMMU
// domain in front translates it and a bad bus address faults: it fetches
// submission entries from the queue's bus address when a doorbell
// arrives (one read of the entries up to the end of the ring), reads
// PRP lists, moves data, and writes 16-byte completion entries with the
// phase tag, then sends the completion queue's MSI-X vector (Create I/O
// CQ's IV, if IEN and the vector is not masked). A command whose data
// DMA faults completes with Data Transfer Error (SCT 0, SC 04h); the
// fault is the IOMMU's to report; a write that faults changes no block.
// A fetch or a completion write that faults is a controller fatal
// status (CSTS.CFS). A
// doorbell of a queue that does not exist, or with a value outside the
// queue, is an asynchronous error event, delivered on the next
// Asynchronous Event Request.
//
// INTMS and INTMC mask vectors 0 to 31; the specification leaves their
// effect undefined under MSI-X, and the model applies them.
//
// Timing: a register write is posted (the CPU pays Options.MMIOWrite,
// the controller sees it after the one-way latency of the device's
// route); a register read costs the round trip. A read command waits
// Options.ReadLatency, then its bytes flow from the media (the device's
// line_rate link, per direction) through the device's PCIe path into
// host memory as one flow, so a deep queue's throughput is bounded by
// the slower of the two; a write's bytes flow from host memory into the
// media, and it completes Options.WriteLatency after. Up to
// Options.MaxInflight commands are worked on at once, over all queues
// (round robin), and they complete out of order. The media's read and
// write rates are both line_rate: a real drive writes more slowly (the
// Intel D7-P5500 reads at 7.0 GB/s and writes at 4.3 GB/s).
//
// Namespace 1 keeps real bytes: a sparse map of the blocks written;
// blocks never written read as zeros (Identify DLFEAT 001b). The
// controller reads commands from memory, so the machine must run in
// payload mode.
//
// Reset is function-level reset: registers and queues to their reset
// values, the DMA in flight landed before it returns, Options.FLRTime
// (100 ms, pcie_flr's wait) in all. Clearing CC.EN is the controller
// reset: queues dropped, CSTS.RDY clear once the DMA in flight has
// landed and ReadyTime has passed.
//
// Not modelled: SGLs, fused commands, metadata, multiple namespaces,
// the controller memory buffer, interrupt coalescing, arbitration
// weights (queues are served round robin), the error log page (an
// asynchronous event names it, Get Log Page is not implemented).
package nvme

// Package dmaengine models descriptor-ring DMA engines and the drivers'
// side of them: descriptors (source, destination, length, flags) in a
// ring in coherent memory, a doorbell, completion by MSI interrupt or by
// polling a status word, the data moving as fabric flows; and, for
// comparison, the CPU's memcpy path, with the CPU time of both accounted
// per core (Cores).
//
// Real counterparts: Linux's dmaengine subsystem (struct dma_device is
// Controller, struct dma_chan is Chan, dmaengine_submit and its
// dma_cookie_t are Submit and Cookie, dma_async_issue_pending is
// IssuePending, dmaengine_terminate_sync is Terminate, DMA_PREP_INTERRUPT
// and DMA_PREP_FENCE are FlagIRQ and FlagFence, enum
// dma_transfer_direction is Kind), and the ring hardware behind it:
// Xilinx AXI CDMA and AXI DMA in scatter-gather mode (a descriptor with
// control and status words, the status written back on completion, the
// tail-pointer register as the doorbell), Intel I/OAT and DSA, and the
// rx/tx descriptor rings of a NIC (package nic builds one on this).
//
// # Model
//
// The ring is dma_alloc_coherent memory of Entries 32-byte entries (see
// Descriptor for the layout). The driver writes an entry with CPU writes
// through mem (cached on a coherent device; uncached, at the node's
// UncachedRate, on a non-coherent one), then rings the doorbell: a posted
// MMIO write that costs the CPU MMIOWriteCost and reaches the engine
// after the one-way latency of the route between the CPU and the device
// (its links without DRAM: Controller.OneWay).
//
// The engine is hardware, an event-driven state machine per channel,
// never a process. On a doorbell it fetches the new entries in bursts of
// up to Config.Fetch (a DMA read: the request's one-way trip, then the
// entries as a flow over host → device, which pays DRAM's latency, the
// path's latency and the bytes at the path's rate), and never across the
// ring's end. It then runs up to Config.Inflight data phases at once:
//
//   - MemToMem: a read request up, then one flow host → device → host
//     (both directions of the device's link, DRAM twice);
//   - MemToDev: a read request up, then a flow host → device; the device
//     takes the data (Config.OnData) in ring order;
//   - DevToMem: when the device has data (Deliver), a flow device → host
//     (posted writes: no request).
//
// The memory effects go through the DMA API's device (dma.Device Read
// and Write, their Bytes forms in payload mode), so coherency, staleness
// and the checker see every access: a descriptor fetch reads the ring
// when the request reaches memory, a copy reads its source then and
// writes its destination when its flow ends. Descriptors complete in ring
// order whatever order their data landed in: the engine writes each
// status word (a DMA write, posted behind the data, so it lands with the
// data's last byte) and, for FlagIRQ, sends an MSI. A read that fails
// (an IOMMU fault, an address that is not memory) gets an error
// completion, as PCIe answers with Unsupported Request or Completer
// Abort: the descriptor completes with StatusError (a copy then writes
// nothing, and a descriptor whose fetch failed moves no data). A write
// that fails is posted: it is dropped where it is blocked, the engine
// never learns of it and the descriptor completes without error. The vector masks
// itself when it fires (as Intel NICs' auto-mask does for NAPI); the
// handler unmasks it with an MMIO write when done, and completions that
// came meanwhile fire it again then. The handler is a process
// (RequestIRQ, a threaded IRQ) that starts MSILatency after the MSI,
// charges IRQEntryCost and reaps every completed descriptor, reading
// each status word with the CPU. Polling (Poll) reads the oldest status
// word, then spins DefaultPollInterval, and again: every picosecond of
// it is CPU time.
//
// # One descriptor
//
// A 64 KiB copy by nic0 on 2s-4gpu-pcie, completed by interrupt (the
// test TestCopyTimeline checks each line from the platform's numbers):
//
//	0        Submit: CPU writes 32 B of ring (cached, 10 GB/s)        3.2 ns
//	3.2 ns   IssuePending: doorbell posted (CPU busy 100 ns)
//	         one way to nic0: rc0 150 + sw0 link 100 + sw0 115
//	         + nic0 link 100 = P                                      465 ns
//	         read request up                                          P
//	         fetch completion: DRAM 110 ns + P + 32 B at 55.5 GB/s    575.6 ns
//	1.509 µs Fetched = Started; read request up                       P
//	         data: DRAM + P down + P up + DRAM, 64 KiB at 55.5 GB/s   1.151 + 1.181 µs
//	4.305 µs Landed: destination written, status written, MSI sent
//	         MSILatency 1 µs, IRQEntryCost 500 ns, status read 0.8 ns
//	5.805 µs Reaped by the handler; the submitter wakes
//
// By polling it is reaped at the first poll after 4.305 µs, and the
// submitter's CPU was busy all along; by interrupt the submitter spent
// 103.2 ns of CPU and the handler 600.8 ns. On zynq-7000's non-coherent
// axidma0 the same copy spends 291 ns writing the uncached entry and
// 73 ns reading the status, and moves the data at the HP port's 1.2 GB/s.
//
// The constants the platform does not give (MMIOWriteCost, MSILatency,
// IRQEntryCost, DefaultPollInterval) are in timing.go with their sources;
// Config.Timing replaces them.
//
// # Invariants
//
// Free-running indexes, slot = index mod Entries: reaped ≤ retired ≤
// started ≤ fetched ≤ doorbell ≤ tail, tail − reaped ≤ Entries. The
// driver writes entries [reaped, tail) only when submitting them, the
// engine reads [fetched, doorbell) and writes the status words of
// [retired, started). A descriptor costs a fixed number of events and
// flows whatever its length: no per-byte or per-packet events on the
// data path.
//
// # Not modelled
//
// Chained descriptors for one transfer (a long copy is several
// descriptors), interrupt moderation timers, splitting into TLPs of the
// maximum payload or read-request size (the flow model covers their
// bandwidth, not their latency), an MSI's own trip through the fabric
// (folded into MSILatency), and buffers on another NUMA node than the
// device's (routes go to the device's node).
package dmaengine

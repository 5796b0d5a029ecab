// Package check is dmalab's sanitizer framework for data movement: the
// diagnostics, their classes and the report, with rule packs that decide
// the findings.
//
// A Diagnostic is one finding with a stable class code, a severity and
// its provenance: the virtual time, the process, the device, the buffer,
// and the call that made the mapping or allocation concerned (Origin
// formats it). A Checker collects the diagnostics of one run in order of
// detection, keeps at most Options.MaxDiagnostics of them (the kernel
// rate-limits its warnings; dmalab reports every occurrence and counts
// those past the cap: Dropped, Count), and hands each to Options.Notify
// as it is made, for a strict mode that stops there.
//
// # Rule packs
//
// The rules live in packs, each a package under check/ that imports only
// the framework and its subject, and registers its classes with Register
// when its package initialises:
//
//   - check/dmadebug: Linux's DMA-API debugging, CONFIG_DMA_API_DEBUG
//     (kernel/dma/debug.c), over package dma's events, with dmalab's
//     three classes that the memory model decides over package mem's
//     accesses (CPU access to memory the device owns, stale reads proved
//     by content versions, device access to unmapped memory).
//   - check/gpumem: misuse of GPU memory through the CUDA driver API,
//     over package cuda's observations.
//   - check/iommucheck: what an IOMMU blocks (faults, permission
//     faults), what lazy invalidation lets through (stale IOTLB hits)
//     and IOVA mappings left at a driver's unbind, over package iommu's
//     events, with package dma's calls as provenance.
//   - check/dmabufcheck: DMA-BUF and its fences, over package dmabuf's
//     events with package mem's accesses and package kernel's
//     descriptors: races with the fences of a buffer's reservation
//     object, uses after detach, CPU access without
//     DMA_BUF_IOCTL_SYNC proved by stale bytes, descriptors used in the
//     wrong process, buffers released while mapped, fences signalled
//     twice or never.
//
// A pack's Attach takes the Checker and its subject and hooks the
// subject's events; the pack calls Checker.Record with its Class for
// each finding, and BeginBatch and EndBatch around a call over a list
// so that a class is reported once per call. A pack that judges what
// never happened (a fence never signalled) registers a check with
// Checker.AtEnd; the system calls Checker.Finish when a run's engine
// stops. A new pack (GPUDirect) needs nothing of the others: it registers its
// classes with a rank of its own, and Classes lists them after those of
// lower rank.
//
// The packs never change what the API returns: the model returns what
// the real system returns and the pack records the diagnostic. The run
// goes on.
//
// Output is deterministic: diagnostics come in order of detection, and
// Classes in an order fixed by rank and registration, never by map
// iteration.
//
// The class registry is safe for concurrent use; a Checker serves one
// simulation and is not.
package check

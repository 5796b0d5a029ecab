// Package probe measures how data moves between the host and NVIDIA GPUs on
// the machine at hand: the suite behind `dmalab probe`.
//
// The measurements are written against Device, the small part of the CUDA
// driver API they need. OpenCUDA provides the real one (package cuda through
// purego, package nvml, the PTX kernels of package kernels); NewFake a
// deterministic one with real byte buffers and virtual time, so that the
// method itself — warm-up, timing, statistics, data verification, error
// handling, cleanup — is tested without a GPU.
//
// # Method
//
// Every buffer is filled with a pattern before each sample (source and
// destination with different seeds) and the destination is checked after
// it; a mismatch fails the measurement with an error wrapping ErrVerify.
// Each measurement takes Options.Samples samples (at least 3) and reports
// their median, minimum and maximum, with every sample kept.
//
//   - Asynchronous work (copy-engine copies, the copy kernel) uses
//     nvbandwidth's method, MethodSpinEvents: the spin kernel holds a
//     stream while Warmup and then Repetitions operations are queued behind
//     it, the timed ones between two CUDA events; releasing the spin starts
//     them back to back, so the time the host takes to queue them is not
//     measured. A spin that ends by its timeout voids the sample
//     (ErrSpinTimeout). Both directions at once use two streams, the second
//     waiting for the first's start event.
//   - Asynchronous work the driver may act on while it is queued (prefetch,
//     page touches, managed-memory copies) runs between two events on an
//     idle stream, MethodEvents: one enqueue (a few µs) is included.
//   - Work that is synchronous by nature (cuMemcpy from pageable memory,
//     per-call times of small copies, cuMemHostRegister, CPU touches of
//     managed memory) uses the host's monotonic clock, MethodHostTimer.
//   - Kernels that time themselves (pointer chase, single-thread page
//     touches) read %globaltimer, MethodKernelTimer.
//
// Bandwidth is in GB/s (10^9 bytes per second) with each byte counted once,
// also for device-to-device copies; per-operation times are in µs or ns.
// Managed memory never takes more than a quarter of the GPU's free memory.
//
// # Families
//
// ce_copy: copy-engine copies h2d and d2h over a size sweep from pinned
// memory (cuMemHostAlloc PORTABLE), both directions at once, write-combined
// and registered memory, and device to device. sm_copy: the copy kernel
// reading and writing mapped host memory (zero-copy) and device memory.
// sync_copy: synchronous copies from pageable and pinned memory. sync_call:
// the time per call of small synchronous copies. call_overhead: one trivial
// driver call through the binding. host_memcpy: one CPU thread copying
// pageable to pinned memory with the C library's memcpy (operation memcpy,
// the copy C programs and the driver's staging make; left out when the C
// library cannot be loaded) and with Go's copy (go_copy, whose memmove uses
// non-temporal stores from 1 MiB on amd64), and a staging ring's copy-out
// (stream_out): two cache-resident 1 MiB halves of pinned memory copied
// alternately into the whole pageable buffer, 1 MiB at a time, with Go's
// copy. pin: cuMemHostRegister and unregister per size.
// latency: one GPU thread's dependent loads from mapped host memory and from
// device memory. unified: managed memory — CPU first touch
// (managed-cpu-fault), prefetch each way (managed-prefetch), fault-driven
// migration by many GPU threads reading or writing and single-thread
// per-fault latency at 4 KiB, 64 KiB and 2 MiB strides with each 2 MiB
// block's slow touches (managed-fault), CPU fault-back after GPU residency
// (managed-cpu-fault), and GPU reads of host-resident pages under
// AccessedBy and PreferredLocation(CPU) (managed-remote). capabilities:
// dma-buf export of device memory (what the kernel's /proc/self/fdinfo
// says of the fd: size, exp_name, count, flags, ino; the export call's
// time, median of max(samples, 3) exports) and buffer-id behaviour across
// free and re-allocation, next to the device attributes, BAR1 and PCIe link state
// that every GPU report carries.
//
// regcache (opt-in: measured only when Options.Families names it, since it
// frees and maps its memory again every sample) drives the regcache
// package's Cache over the real cuMemHostRegister: a Pinner over
// Device.PinRange registers part of a resident pageable mmap (4 KiB pages,
// exclusive pins, as the driver refuses overlapping registrations). For
// 64 KiB, 1 MiB, 16 MiB and 256 MiB (those not above the largest of
// Options.Sizes), each sample takes a fresh cache and times one Get each:
// miss (the first half: a registration), hit (a range inside it),
// merge_miss (the adjacent second half: the first unregistered, the whole
// registered), hit_after_merge (the whole), invalidate (Invalidate of the
// range, as a memory hook at munmap would, then Flush: the unregister), and
// stale_get (after munmap and an mmap of the same size, which Linux
// usually places at the freed address: the Get must miss and register
// again). The stale_get measurement carries Measurement.Regcache: whether
// the address came back, whether every such Get registered again, and the
// cache's statistics.
//
// # Output
//
// Report.WriteJSON writes one document (schema Schema, stable snake_case
// names: see the struct tags of Report, GPUReport, Measurement, DeviceInfo,
// Machine); ReadJSON reads it back. The machine section records the IOMMU
// the GPUs' DMA crossed (Machine.IOMMU: mode, evidence, units), read by
// hw/topo as dmalab topo reads it. Report.WriteNVBandwidth writes the
// copy-engine and SM results in nvbandwidth's `-j` layout.
// Report.WriteTable writes tables for people.
package probe

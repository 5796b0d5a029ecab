// Package gpu models a GPU's memory and execution as the CUDA driver
// presents them: device memory and its allocator, the unified address
// space shared with the host, the BAR1 aperture, the copy engines,
// kernels described by their memory accesses, and streams and events.
// It sits on package machine (the GPU's VRAM bus, PCIe and NVLink links,
// copy engines) and package mem (VRAM as device memory, so that copies
// and kernels create content versions the checker can follow); the
// cuda façade turns its calls and errors into the CUDA driver API's.
//
// # Real counterparts
//
//   - System is the driver's per-process state: the unified virtual
//     address space (UVA; NVIDIA's "Developing a Linux Kernel Module
//     using GPUDirect RDMA", "Basics of UVA CUDA Memory Management"),
//     in which one pointer value names one place on every GPU and, for
//     pinned host memory, on the CPU too. PointerAttributes is
//     cuPointerGetAttributes (memory type, device ordinal, buffer ID,
//     range), Resolve what the driver does with a pointer given to
//     cuMemcpy.
//   - Device is a CUdevice with its primary context. Device.Alloc and
//     System.Free are cuMemAlloc and cuMemFree: addresses in a per-GPU
//     window; allocations of 2 MiB and more in whole 2 MiB pages,
//     smaller ones sharing 2 MiB chunks at 512 B granularity; a fixed
//     host cost per call (57 µs for the pair, measured on the H200
//     machine 2026-11-21); cudaFree's implicit synchronisation.
//     RegisterHost is the address-map half of cuMemHostAlloc and
//     cuMemHostRegister (the host address is the GPU address), and maps
//     the pages for every GPU whose DMA goes through an IOMMU domain, as
//     the driver's nv_dma_map_sgt does (iommu.go: one IOVA range per
//     buffer, the host's cost per call and per leaf, Spans then giving
//     the IOVAs); AllocManaged is that of cuMemAllocManaged.
//   - Aperture is BAR1 (nvidia-smi -q "BAR1 Memory Usage",
//     nvmlDeviceGetBAR1MemoryInfo): its size from the spec (resizable BAR
//     makes it cover VRAM), the driver's reserve, mappings in 64 KiB
//     pages with their bus addresses (nvidia_p2p_get_pages' page table,
//     gdrcopy's pin), pages shared between overlapping mappings (CUDA
//     7.0+), exhaustion.
//   - Copy engines are the machine's (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT
//     of them); CopyEngine picks one per direction.
//   - Stream and Event follow the CUDA driver API's "Stream
//     synchronization behavior" and event semantics: in-order execution
//     per stream, asynchronous to the host, concurrency between streams,
//     the legacy default stream's implicit synchronisation with blocking
//     streams (CU_STREAM_NON_BLOCKING exempt), cuStreamWaitEvent,
//     cuLaunchHostFunc, cuEventElapsedTime.
//   - Kernel is a kernel as the roofline model sees it (Williams,
//     Waterman and Patterson, "Roofline: an insightful visual
//     performance model for multicore architectures", CACM 2009): bytes
//     moved and compute time, the slower bounding the run. Its memory
//     transactions are 32-byte sectors, as the CUDA C++ Best Practices
//     Guide describes coalescing.
//   - Activity is a CUPTI activity record (memcpy, kernel, memory,
//     ...).
//   - ManagedHandler is the seam to the unified-memory driver
//     (nvidia-uvm.ko; package uvm).
//   - An integrated GPU (Tegra: Jetson TX2, Orin) has no VRAM, BAR1 or
//     PCIe link: its device memory is pages of its node's DRAM, reached
//     over its port into the memory controller and the DRAM bus shared
//     with the CPUs; MemGetInfo reports the node's DRAM; managed memory
//     is backed by the same DRAM from its allocation on (integrated.go,
//     after NVIDIA's CUDA for Tegra application note).
//
// # Time
//
// A call that enqueues stream work costs the host EnqueueCost (CPU
// time) and returns. The stream's worker then runs the item when the
// items before it, and its dependencies, are done:
//
//   - a copy: CopyStreamOverhead, a wait for its copy engine (one copy
//     at a time per engine, FIFO), the route's latency, the bytes at
//     their max-min share of every link on the route;
//   - a kernel: its Launch latency (KernelLaunchLatency by default),
//     then its accesses as concurrent flows (Pattern.Traffic bytes each)
//     and its Compute as a flow through the GPU's SMs, shared max-min
//     with concurrent kernels; it ends with the last;
//   - an event record, a wait, a host function: nothing, their
//     dependencies, the function's own time.
//
// Synchronize blocks the host without CPU time (blocking sync).
// Constants carry their sources: measured on the lent H200 machine
// (2026-11-21, docs/measurements), calibrated from those
// measurements, or assumed and marked so.
//
// What is not modelled: the per-thread default stream, stream
// priorities, graphs, memset, the L2 cache (random accesses to a hot
// region are pessimistic), pacing between a kernel's accesses (a copy
// kernel's writes run as fast as the bus allows, not as fast as its
// reads arrive), TLP overhead of small PCIe reads, the driver's own
// VRAM reservation (nvidia-smi's total is all allocatable), spinning
// synchronisation's CPU time, errors reported asynchronously (launches
// are checked when enqueued instead).
//
// # Invariants
//
//   - The unified address map is sorted and disjoint; every buffer ID
//     is given once per System and never reused.
//   - A discrete GPU's VRAM in use (MemGetInfo) is the sum of its
//     chunks, each backed by one mem.AllocDevice range of the same size
//     as its VA; an integrated GPU's chunks are mem.AllocPagesAligned
//     ranges of its node, and its MemGetInfo is the node's free DRAM.
//   - BAR1 counts each mapped VRAM page once, whatever number of
//     mappings hold it; Used = reserve + mapped pages × 64 KiB.
//   - A stream's items start in enqueue order and each after the one
//     before has completed; a worker process exists only while its
//     stream has work, so a finished run has no blocked process left.
//   - No Go map is iterated: the same program gives the same
//     activities at the same times.
//
// # Concurrency
//
// A System belongs to one simulation and is used from its goroutine;
// sim runs one process at a time, so the package takes no locks.
package gpu

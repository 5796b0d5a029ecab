// Package cuda is a façade shaped like the CUDA driver API (cuda.h,
// libcuda.so) for programs that run on the model: its calls take the
// calling thread (a sim.Proc), cost what the real calls cost, move bytes
// over the machine's links, and fail with the CUresult values the real
// driver returns. It sits on package gpu (the GPUs' memory, unified
// address map, copy engines, streams and kernels) and package uvm (the
// unified-memory driver, nvidia-uvm.ko), which it wires to the machine;
// it reports every use of memory to observers, among them the checker
// (package check: Checker.CUDA).
//
// # Real counterparts
//
//   - Driver is the driver after cuInit: libcuda with nvidia.ko and
//     nvidia-uvm.ko under it, serving the processes of a kernel (package
//     kernel; New's WithKernel, or one of its own). Process is the
//     driver's state in one kernel process (Attach, or NewProcess, which
//     makes the kernel process too): its contexts. Its descriptors,
//     address space and exit are the kernel process's (Malloc's memory
//     is a mapping there, freed at exit if the program did not); at
//     exit the driver destroys its contexts and frees their memory, as
//     nvidia.ko does when a dying process's /dev/nvidia* files are
//     released.
//     Context is a CUcontext (cuDevicePrimaryCtxRetain, cuCtxCreate,
//     cuCtxDestroy, cuCtxSynchronize, cuCtxEnablePeerAccess); its
//     methods are the calls made with it current.
//   - Memory: MemAlloc / MemFree (cuMemAlloc, cuMemFree), MemAllocHost,
//     MemHostAlloc with CU_MEMHOSTALLOC_PORTABLE, _DEVICEMAP and
//     _WRITECOMBINED, MemFreeHost, MemHostRegister / MemHostUnregister
//     (a cost per call and per 4 KiB page, the platform's PinCall and
//     Pin, UnpinCall and Unpin),
//     MemHostGetDevicePointer, MemAllocManaged, MemGetInfo.
//   - Copies: Memcpy and MemcpyAsync with unified addressing (the
//     direction inferred from the addresses, as cuMemcpy with
//     CU_MEMORYTYPE_UNIFIED does). A pageable copy is staged through two
//     pinned buffers in chunks, the CPU memcpy and the DMA pipelined
//     (StagedCopy, the pipeline the transfers scenario used).
//   - Behind an IOMMU (the platform's mode strict or lazy): pinned
//     memory is mapped for every GPU by package gpu; the staging buffers
//     (StagingMemory) are mapped once, when made; managed memory's CPU
//     chunks are mapped per 2 MiB VA block for every GPU (umdma.go,
//     uvm_gpu_map_cpu_pages), so copies, migrations and remote accesses
//     address host memory by IOVA and pay the IOTLB.
//   - Unified memory: MemPrefetchAsync, MemAdvise (the CUmem_advise
//     values), CPU accesses through CPUAccess, kernels' accesses through
//     the gpu.ManagedLaunchHandler this package installs; uvm's
//     migrations, evictions and remote accesses move bytes as fabric
//     flows over the machine's routes (PCIe to host, NVLink or PCIe
//     between GPUs), sharing links with everything else.
//   - PointerGetAttribute / PointerSetAttribute (CONTEXT, MEMORY_TYPE,
//     DEVICE_POINTER, HOST_POINTER, SYNC_MEMOPS, BUFFER_ID, IS_MANAGED,
//     DEVICE_ORDINAL, RANGE_START_ADDR, RANGE_SIZE, MAPPED).
//   - GPUDirect RDMA: DeviceGetAttribute of GPU_DIRECT_RDMA_SUPPORTED,
//     _FLUSH_WRITES_OPTIONS and _WRITES_ORDERING (as the H200 measured
//     here answers them), FlushGPUDirectRDMAWrites, and the seam package
//     nvp2p uses: P2PRange and HostRange (what rm_p2p_get_pages knows of
//     a range: its allocation, owner and SYNC_MEMOPS) and
//     SetMemopsWindow (a synchronous copy into pinned memory without
//     SYNC_MEMOPS returns before a peer can see its data; observers get
//     OpCopyUnflushed with the window, for the GPUDirect checker).
//   - MemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD:
//     a dma-buf (DMABuf: size, the VRAM it covers) whose dmabuf.Buffer,
//     with nvidia.ko's dma_buf_ops as exporter (nv-dmabuf.c: map through
//     BAR1 and dma_map_resource, so that importers' DMA lands in VRAM, mmap refused with ENOTSUPP), is a kernel.File
//     installed in the kernel process's descriptor table; the kernel's
//     Dup, SendFD (SCM_RIGHTS), Close and Exit act on it, importers
//     attach and map it through package dmabuf, and the exporter's
//     release runs when the last reference goes. DMABufOf is
//     dma_buf_get in any process.
//   - LaunchKernel (cuLaunchKernel of a gpu.Kernel), streams
//     (cuStreamCreate, Synchronize, Query, WaitEvent, LaunchHostFunc,
//     Destroy) and events (cuEventCreate, Record, Synchronize, Query,
//     EventElapsedTime).
//   - Result is CUresult, with cuda.h's numbers and names.
//
// # Time
//
// Each call costs what package gpu gives it (cuMemAlloc and cuMemFree
// 28.5 µs each, an enqueue 1 µs) or what the platform says: a
// synchronous copy the GPU's CopyOverhead (calibrated so that a pinned
// 8 B cuMemcpyHtoD takes the 6.6 µs measured on the H200) plus the
// route's latency and the bytes at their max-min share (machine.Copy),
// so 256 MiB of pinned memory move at ~55.4 GB/s; a pageable copy about
// the one-thread memcpy rate (7.4 GB/s there), paid as CPU time;
// cuMemHostRegister the platform's PinCall once and its Pin per 4 KiB
// page (102.6 us and 133.5 ns on the H200: a 2 MiB registration is
// mostly the call); cuMemHostAlloc the same (assumed: the driver locks
// and maps each page as registration does). CPU reads of write-combined memory run at the
// node's uncached rate, CPU writes at the memcpy rate. Managed memory
// costs what uvm's faults, batches and migrations cost, with its fault
// batch overhead recalibrated so that an isolated fault on this machine
// takes the platform's measured FaultLatency.
//
// # NUMA
//
// Host memory follows the kernel's placement. cuMemHostAlloc's pages go
// where the calling thread's policy and node send them
// (kernel.Process.AllocNodes; nv_alloc_system_pages in
// open-gpu-kernel-modules' kernel-open/nvidia/nv-vm.c takes them with
// __get_free_pages, so with the task's mempolicy), Malloc's where the
// process's policy does; cuMemHostRegister faults untouched anonymous
// pages in for the calling thread before it pins them. A copy's host end
// is priced from its first page's node: DMA from another node's memory
// crosses the socket links as a flow that shares them with every other
// (several GPUs contend for them), and a pageable copy's memcpy between
// the pageable pages and the staging buffers (on the calling thread's
// node) costs a remote access when they lie elsewhere
// (machine.CPUCopyBetween to the device, machine.CPUAccess's streaming
// stores from it). Pages of one buffer spread over several nodes are
// priced as if all were on the first page's node.
//
// # Errors and checking
//
// Misuse returns what CUDA returns (CUDA_ERROR_INVALID_VALUE,
// CUDA_ERROR_ILLEGAL_ADDRESS, ...; ErrSegmentationFault where a real
// program would die of SIGSEGV), and the use is reported as an
// Observation: the call, the thread, process and context, the range,
// what it resolved to (device, pinned, pageable, managed, freed; the
// allocating context and process; the allocation call as provenance;
// the call that freed it) and the error. The checker turns them into
// diagnostics: cpu-deref-device-pointer, managed-access-rule,
// use-after-free, kernel-unpinned-host-memory, foreign-context-pointer.
// CUDA reports a kernel's bad access asynchronously; the model refuses
// the launch instead, deterministically.
//
// # What is modelled and what is not
//
// Modelled: one unified address space for all processes (which lets the
// model recognise another process's pointer), per-context ownership of
// memory, the legacy default stream's implicit synchronisation for
// synchronous copies, UVA host pointers as device pointers, portable and
// mapped host allocations, write-combined CPU costs, the
// no-concurrent-access rule of pre-Pascal and Tegra GPUs (the GPU is
// active from a launch until a synchronisation after which nothing is
// in flight), dma-buf and opaque-fd export keeping freed memory alive
// until released, external memory and NvSciSync semaphores (below).
//
// Not modelled: the runtime API, modules and PTX (a kernel is a
// gpu.Kernel), memset, 2D/3D and array copies, cuMemcpyPeer's explicit
// contexts (UVA copies cover them), IPC handles, the virtual memory
// management API (cuMemCreate, cuMemMap), memory pools, graphs, stream
// priorities and stream-attached managed memory (CU_MEM_ATTACH_SINGLE;
// MemAttachHost is accepted and ignored), CU_MEMHOSTREGISTER_IOMEMORY,
// read-only registration being enforced, sticky context errors,
// contexts of one GPU having separate streams (they share the GPU's),
// copies of managed memory on GPUs without concurrent managed access,
// content versions of managed memory (its pages move by uvm's
// bookkeeping; mem does not follow them), the VRAM managed memory uses
// being taken from cuMemAlloc's (uvm has the whole VRAM to itself),
// NvSciBuf objects, Vulkan semaphores (OPAQUE_FD, TIMELINE_SEMAPHORE_FD:
// nothing in the model exports one), EGL interop
// (cuGraphicsEGLRegisterImage), mipmapped arrays of external memory.
//
// # External memory and semaphores
//
// cuImportExternalMemory takes a handle of a type of
// CUexternalMemoryHandleType, and none of them is a dma-buf: on Linux
// the one descriptor type is OPAQUE_FD, the opaque fd another NVIDIA
// API (Vulkan's vkGetMemoryFdKHR) exports. The façade follows what real
// platforms do (docs/cuda-external.md has the table and its sources):
//
//	platform        what is imported                    path                                   model
//	discrete Linux  Vulkan memory of the same GPU       OPAQUE_FD (ExportOpaqueFD's fd)        yes: the same VRAM
//	discrete Linux  dma-buf (V4L2, heap, another GPU)   OPAQUE_FD                              CUDA_ERROR_INVALID_VALUE
//	discrete Linux  V4L2 capture buffer                 cuMemHostRegister of its mmap, or      yes (existing calls)
//	                                                    V4L2 USERPTR into pinned memory
//	Tegra           dma-buf (NvBufSurface, heap)        OPAQUE_FD                              yes: zero copy (assumed, see docs)
//	Tegra           NvSciBuf object                     NVSCIBUF                               CUDA_ERROR_NOT_SUPPORTED (not modelled)
//	Tegra           EGLImage of a dma-buf               cuGraphicsEGLRegisterImage             not modelled
//	Linux           Windows/D3D handles                 OPAQUE_WIN32..D3D11_RESOURCE_KMT       CUDA_ERROR_NOT_SUPPORTED
//
// An imported dma-buf on Tegra is attached to the GPU's DMA device and
// mapped (dma_buf_attach, dma_buf_map_attachment: the exporter's cache
// maintenance where the SoC is not coherent); cuExternalMemoryGetMappedBuffer
// enters its pages in the unified address map as device memory
// (gpu.Device.MapExternal), so kernels and copies read and write the
// buffer's own pages through the DMA layer, checked and costed as any
// device memory. cuMemFree of the pointer gives back the address;
// cuDestroyExternalMemory detaches and drops the driver's reference.
//
// Semaphores: CUexternalSemaphoreHandleType has no sync_file type, so a
// dma_fence exported as a sync_file cannot become a CUDA semaphore on
// any platform. On Tegra, NVSCISYNC imports an NvSciSync object
// (NvSciSyncObj, a syncpoint whose thresholds are dma_fences):
// cuWaitExternalSemaphoresAsync makes the stream wait, in virtual time,
// until the fence signals; cuSignalExternalSemaphoresAsync returns a
// fence that signals when the stream reaches it. Elsewhere the real
// workaround is the CPU's: a thread waits for the sync_file
// (dmabuf.SyncFile.Wait) and then launches, or a host function in the
// stream waits; to hand the GPU's completion to a display, a host
// function (cuLaunchHostFunc) signals the fence the display waits on.
//
// # Integrated GPUs
//
// Tegra (jetson-orin, jetson-tx2) follows NVIDIA's CUDA for Tegra
// application note (tegra.go): device, pinned and managed memory in the
// same DRAM; pinned memory uncached on the CPU before Xavier;
// cuMemHostRegister only with I/O coherence; managed memory never
// migrated, made coherent by CPU cache maintenance at kernel launch and
// completion where the GPU does not snoop, never touched by the CPU
// while the GPU is active; no cuMemPrefetchAsync, dma-buf export or
// peer access.
//
// # Invariants
//
//   - Every live allocation made through the façade has one record,
//     keyed by its buffer ID (never reused); a freed one is in the ring
//     of the last FreedRemembered frees, or in its record until the last
//     dma-buf of it is released.
//   - A Process belongs to one kernel process and is made once for it;
//     its live contexts are listed in it until destroyed, by
//     cuCtxDestroy or its exit. Descriptors are the kernel's (0-2 never
//     handed out, the lowest free for the rest).
//   - A dma-buf holds one export count on its allocation from its
//     export to its release; an allocation freed while exported is freed
//     by the release that drops the count to zero.
//   - No Go map is iterated: the same program gives the same
//     observations, diagnostics and times.
//
// # Concurrency
//
// A Driver belongs to one simulation and is used from its goroutine;
// sim runs one process at a time, so the package takes no locks.
package cuda

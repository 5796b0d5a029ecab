// Package uvm is NVIDIA's unified-memory driver as a model: managed
// memory (cuMemAllocManaged) shared by the CPU and GPUs, moved between
// them by page faults, a prefetcher, eviction and advice, per GPU
// generation.
//
// Real counterparts (open-gpu-kernel-modules, kernel-open/nvidia-uvm;
// read for facts, none copied):
//
//   - Driver is a VA space (uvm_va_space_t) with its GPUs; Allocation a
//     managed VA range (uvm_va_range_t); a 2 MiB VA block
//     (uvm_va_block_t) holds, per 4 KiB page, which processors have a
//     copy and which map it remotely (uvm_page_mask_t as PageMask).
//     Blocks exist once touched, so a 1 TiB allocation costs nothing
//     until used.
//   - GPUAccess raises replayable faults into a per-GPU fault buffer; a
//     bottom half (uvm_gpu_replayable_faults.c) fetches up to 256 entries
//     per batch, sorts and coalesces them by page, services them block by
//     block and replays after every batch (the default replay policy,
//     BATCH_FLUSH), at most 20 batches (or 5 with throttled faults) per
//     run. The buffer holds the entries of one access to one block as a
//     run (address, pages), not an entry per page, and a batch splits a
//     run where its 256 entries end: a kernel faulting 64 GiB costs the
//     model its 32,768 blocks, not its 16 million pages, with the same
//     batches, coalescing and replay order. CPUAccess takes CPU faults
//     (uvm_vm_fault) in the faulting thread.
//   - Residency (uvm_va_block_select_residency: its rules see a page's
//     policy, pin and holders only, so they are applied to page masks,
//     per policy span and closest holder), the tree prefetcher
//     (uvm_perf_prefetch.c, PrefetchPages), eviction of 2 MiB root chunks
//     least recently used first (uvm_pmm_gpu.c), thrashing detection with
//     throttling and pinning (uvm_perf_thrashing.c), cuMemAdvise
//     (ReadMostly, PreferredLocation, AccessedBy) and cuMemPrefetchAsync
//     (uvm_migrate.c).
//   - Pre-Pascal and Tegra follow NVIDIA's "How does NVIDIA implement
//     unified memory on PCIe GPUs and Tegra platforms?" and the CUDA
//     programming guide: migration at kernel launch, cache maintenance
//     at launch, no concurrent access (legacy.go).
//
// # Time and data
//
// The driver's work costs virtual time (Params: a batch's fixed cost, a
// cost per fault entry, per VA block, per CPU fault, per prefetched
// block); data moves through Env.Move, which the integrator implements
// with fabric flows over the route between the two memories (or
// PageEnv.MovePages, told which pages of which VA block move, so that it
// can address their system memory by the DMA mappings a GPU behind an
// IOMMU uses). Accesses
// themselves are not charged here: GPUAccess and CPUAccess return where
// the data was (Access), and the kernel or CPU model charges the path.
//
// # Calibration
//
// One number is calibrated: the isolated fault, one GPU thread reading
// host-resident memory at 2 MiB stride, 21.92 us on the H200 measured
// here. Such a fault migrates one 64 KiB big page (the prefetcher's
// next level would be 16 of 32 pages, 50 %, not over 51 %), which the
// h200-pcie route moves in 1.541 us; with an assumed 0.1 us per fault
// entry and 4 us per serviced block, the batch's fixed cost is 16.279 us
// (CalibrateBatchOverhead redoes this for another Env or measurement).
// The driver's constants are its module parameters' defaults. All else
// the model reports is a prediction; against the same probe run
// (TestPredictionsH200): single-thread faults at 4 and 64 KiB stride
// 24.3 us against 29.4 and 26.1 measured, many-thread fault migration
// 16.1 against 13.5 GB/s, prefetch to the GPU 49.8 against 36.5 GB/s and
// back 49.8 against 19.0, CPU fault-back 12.9 against 9.0 GB/s, CPU
// first touch 5.2 against 4.7 GB/s. The model has nothing that makes
// device-to-host prefetch slower than host-to-device, nor the 4 KiB
// stride slower than the 64 KiB one; they fault and move the same.
//
// # Simplified
//
//   - Blocks are 2 MiB aligned (allocations are placed so) and each uses
//     one whole 2 MiB chunk of a GPU's memory once any page is there; the
//     chunk is freed when its last page leaves. The LRU moves a chunk to
//     the tail when the driver makes pages resident in it, as PMM does;
//     GPU accesses do not count, as in the driver.
//   - A throttled GPU fault waits until the throttling period ends and
//     then faults again, instead of being replayed and refaulting in
//     every batch meanwhile.
//   - Mappings are either local (a processor holding a copy) or remote
//     (a processor mapping the page's single copy); permissions beyond
//     read-only duplicates, system-wide atomics, revocation thrashing,
//     access counters, HMM/ATS and non-replayable faults are not
//     modelled. A read-duplicated page is read-only everywhere.
//   - Peers: a GPU faulting on a page resident on a peer GPU migrates it
//     (the driver's default); it maps it remotely (peer access, no
//     migration) under AccessedBy, a preferred location it can reach, or
//     a thrashing pin, which NVLink peers with native atomics get at once.
//   - Pre-Pascal: CPU faults move 4 KiB each (the legacy driver is not in
//     open-gpu-kernel-modules); all GPUs of a VA space share one
//     generation.
//
// # Invariants and locking
//
// A page is either untouched, or resident on one processor, or
// read-duplicated on several, every copy read-only; a remote mapping
// points at a page's single copy and goes when that copy moves or gets a
// duplicate. A block's state changes only under its lock (the VA block
// lock), held by the servicing process across its migrations; a process
// holding one block lock takes another only to evict it, choosing only
// unlocked victims, so it never waits for one. One process runs at a
// time; the same inputs give the same events.
package uvm

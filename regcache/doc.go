// Package regcache is a registration cache for pinned memory: the
// structure every communication library keeps because pinning is
// expensive (cuMemHostRegister costs tens of milliseconds per GiB, a
// GPUDirect pin an RM call plus a BAR1 mapping per 64 KiB page), so a
// buffer used again should not be pinned again.
//
// Its real counterparts, whose designs it follows:
//
//   - UCX, src/ucs/memory/rcache.c: regions in a page table of
//     intervals, a fast path under a read lock and a slow path, merging
//     of overlapping and adjacent regions aligned to the registration
//     alignment, an LRU of unused regions bounded by count and size,
//     memory-unmap events that invalidate under a trylock and otherwise
//     go through an invalidation queue drained by the next operation,
//     and the statistics named here (hits_fast, hits_slow, misses,
//     merges, unmap invalidates);
//   - libfabric, prov/util/src/util_mr_cache.c: ofi_mr_cache_search,
//     the LRU list and dead-region list, ofi_mr_cache_flush to evict
//     one LRU entry and retry a registration that ran out of resources;
//   - Open MPI, opal/mca/rcache/grdma: reference-counted registrations
//     kept on an LRU after their last release, invalidated ones freed
//     only when unused;
//   - gdrcopy (github.com/NVIDIA/gdrcopy, gdr_pin_buffer) and UCX's
//     cuda_copy/gdr_copy memory domains: GPU memory pinned through
//     nvidia_p2p_get_pages in 64 KiB pages, a free callback when the
//     application frees it, and CU_POINTER_ATTRIBUTE_BUFFER_ID to
//     detect memory freed and allocated again at the same address.
//
// The cache (Cache) knows nothing of what pins: a Pinner pins and
// unpins a range, names the buffer ID of an address and its page size.
// Its calls carry an opaque context (the model's Pinners take the
// sim.Proc of the calling thread; a real-hardware Pinner over the CUDA
// driver can ignore it), so one cache serves the model and the
// hardware. GPUPinner pins through nvp2p.GetPages, HostPinner through
// cuMemHostRegister of the cuda façade.
//
// Frees reach the cache without the program's help. For GPU memory,
// GPUPinner's pins carry a free callback: cuMemFree, or the process's
// exit destroying its context, runs it in the freeing thread, where it
// frees the page table (all nvidia_p2p allows there) and invalidates;
// the cache's put_pages comes later, outside it. For host memory,
// HostPinner is the cache's memory monitor, as libfabric's userfaultfd
// and memhooks monitors and UCX's memory hooks are: it invalidates on
// its process's unmap events (kernel.AddressSpace.OnUnmap: free(3),
// munmap, exit) and on cuMemHostUnregister of its ranges by anyone else
// (cuda.Driver.Hooks: the program, cuCtxDestroy, the exit's teardown),
// and does not unregister such a range again.
//
// The rules it keeps, each tested:
//
//   - A request inside a valid region is a hit and pins nothing.
//   - A miss pins the request aligned out to the page size, merged with
//     every valid region it overlaps or touches (of the same buffer,
//     for GPU memory): one region replaces them.
//   - A region whose last user released it goes on an LRU; beyond
//     Config.MaxUnused regions or Config.MaxUnusedBytes bytes the
//     oldest are unpinned. A region in use is never evicted.
//   - A pin that fails for want of resources (ErrNoSpace: BAR1
//     exhausted, the locked-memory limit) evicts the oldest unused
//     region and tries again, until the LRU is empty.
//   - Invalidate, called from memory events and free callbacks, never
//     pins or unpins: it marks the regions it can reach at once (when
//     the cache's lock is free) and queues the range otherwise; the
//     queue merges ranges and holds at most Config.MaxQueue of them
//     (past that it widens to one covering range: over-invalidation
//     costs a pin, never a stale region). Unpins happen in the next
//     operation, outside the callback.
//   - An invalidated region in use stays pinned until its last Put.
//   - For GPU memory the buffer ID is checked on every hit: a region
//     whose allocation was freed and replaced at the same address is
//     dropped, never served.
//   - A failed registration leaves no pin behind.
//   - With exclusive pins (host memory) a Get unpins the invalidated
//     regions before it pins: memory freed and allocated again comes
//     back at the same address, which one registration may not cover
//     twice.
//
// The cache is safe for concurrent use. It never holds its lock across
// a Pinner call: in the model a pin sleeps in virtual time, and another
// simulated thread must be able to use the cache meanwhile.
package regcache

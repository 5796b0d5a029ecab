// Package rcachecheck is the checker's rule pack for the registration
// cache (package regcache): the misuses that UCX, libfabric, Open MPI
// and NCCL registration caches have shipped. It watches a cache from
// outside — a Pinner wrapper sees every pin and unpin, the caller tells
// it of Gets, Puts and uses — so it proves the cache's own buffer-ID
// check and its invalidation independently instead of trusting them.
//
// Frees it hears itself, from the events the model's drivers emit, for
// the model's Pinners: cuMemFree and nvidia_p2p's free callbacks for
// regcache.GPUPinner; free(3), munmap and exit of the process
// (kernel.AddressSpace.OnUnmap) and cuMemHostUnregister by anyone but
// the cache for regcache.HostPinner. A Pinner over real hardware
// reports frees with Pack.Freed.
//
// Classes:
//
//   - regcache-stale-region: a Get served a region whose buffer ID no
//     longer matches the memory at its address (asked of the Pinner),
//     or a region was used after its memory was freed, unmapped or
//     unregistered behind the cache;
//   - regcache-unpin-in-use: a region unpinned while a Get holds it;
//   - regcache-freed-pinned (a warning, at the end of the run): memory
//     freed while a pin from the cache still held its pages, and the
//     pin never released (the driver revoking it counts as released:
//     nvidia_p2p's free callback, the exit's cuMemHostUnregister).
//
// Every diagnostic carries the thread of the call that revealed it
// (Proc), the region (Buffer), the buffer ID of GPU memory in its
// message with the call that freed the memory, and the pin's call with
// its time and thread as Origin. The pack is for one simulated run: not
// safe for concurrent use by real goroutines.
package rcachecheck

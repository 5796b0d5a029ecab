// Package dma is the Linux DMA API in Go form: coherent allocations,
// streaming mappings (single, page, scatter-gather, resource), syncs,
// DMA masks with swiotlb bounce buffers, and the device side that reads
// and writes bus addresses.
//
// Real counterparts:
//
//   - include/linux/dma-mapping.h: the API (dma_alloc_coherent,
//     dma_map_single, dma_map_page, dma_map_sg, dma_map_sgtable,
//     dma_map_resource, dma_sync_*, dma_mapping_error, DMA_MAPPING_ERROR,
//     enum dma_data_direction, dma_set_mask_and_coherent,
//     dma_set_max_seg_size, dma_set_seg_boundary). Device methods mirror
//     them with the calling process first: dev.MapSingle(p, va, size,
//     dir) is dma_map_single(dev, va, size, dir) called by p.
//   - kernel/dma/direct.c: dma-direct, the path without an IOMMU
//     (dma_direct_map_phys, dma_direct_unmap_phys, dma_direct_sync_*,
//     dma_direct_alloc/free, dma_capable). The bus address is the
//     physical address. The Translator interface is the seam where an
//     IOMMU's translation goes; a Translator that is also a Mapper (an
//     iommu domain) allocates the bus addresses too, and the mapping
//     calls go through it as dma-iommu.c's do.
//   - kernel/dma/swiotlb.c: the bounce pool (struct io_tlb_pool with one
//     area): 2 KiB slots (IO_TLB_SIZE), contiguous runs within
//     128-slot segments (IO_TLB_SEGSIZE, so at most 256 KiB per
//     mapping), next-fit search with page alignment for mappings of a
//     page or more, the device's segment boundary respected, Linux's
//     free-run encoding. Spec.SWIOTLB bytes (64 MiB by default) in
//     ZONE_DMA32 of the first node.
//   - arch_sync_dma_for_device / arch_sync_dma_for_cpu: the cache
//     maintenance of non-coherent devices, as the direction table below.
//   - kernel/dma/debug.c is not here: the checker observes this package's
//     events and reports misuse.
//
// # Direction table
//
// On a non-coherent device (one that does not snoop the CPU caches:
// platform Device.NonCoherentDMA or its root complex's), and only there:
//
//	direction           for_device (map, sync_for_device)   for_cpu (unmap, sync_for_cpu)
//	DMA_TO_DEVICE       flush (write back + invalidate)     nothing
//	DMA_FROM_DEVICE     invalidate                          invalidate
//	DMA_BIDIRECTIONAL   flush                               invalidate
//
// The model keeps this conservative table on every non-coherent device:
// for_device as arch/microblaze/kernel/dma.c does it, for_cpu as the
// table in arch/arc/mm/dma.c; arm64 differs by cleaning (write back,
// keep) at for_device for every direction; see cacheOps. A coherent device gets no cache operation.
// With a bounce buffer the operations apply to the slot, the one the
// device accesses.
//
// # Bounce buffers
//
// A streaming mapping bounces when the buffer's end lies beyond the
// device's mask (a 32-bit device and memory above 4 GiB) or the device
// is forced to (Device.SetForceBounce). As current Linux does: map
// copies the buffer into the slot whatever the direction (the 2022
// information-leak fix); sync_for_device copies it again for TO_DEVICE
// and BIDIRECTIONAL; unmap and sync_for_cpu copy the slot back for
// FROM_DEVICE and BIDIRECTIONAL; unmap releases the slots. A full pool
// or a mapping over 256 KiB returns DMA_MAPPING_ERROR ("swiotlb buffer
// is full"). dma_map_resource (MMIO) never bounces.
//
// # Misuse
//
// Misuse is never a panic, and never an error where Linux returns none.
// A map that Linux fails returns MappingErrorAddr (vmalloc, vmap and
// VMAP_STACK addresses, which dma_map_single rejects; memory that is not
// RAM; an invalid direction, on which the kernel would BUG(); an address
// beyond the mask with no bounce possible; a full pool). An unmap or
// sync trusts its arguments as dma-direct does: an address never mapped
// gets the cache operation at the physical address it names (if RAM), a
// wrong size or direction is used as passed. Every call emits one Event;
// the checker decides what is wrong.
//
// # Events
//
// A call that hands memory to the device (a map, sync_for_device,
// alloc_coherent) does its cache maintenance and bounce copy first and
// reports when it takes effect, with the time it returns; a call that
// hands memory back to the CPU (an unmap, sync_for_cpu) reports first,
// then does its work. Either way the bounce copies, which the CPU does
// inside the DMA layer and mem reports as CPU accesses, fall where the
// CPU owns the buffer, and every consequence of a misuse that an
// observer can see (a stale read) comes after the event that caused it.
// dma_free_coherent reports after freeing, so that its event can carry
// what mem refused. A device access is reported before it happens.
// Events are built only when someone observes; the Call strings of
// repeated calls come from a small cache, so a steady map/unmap loop
// allocates nothing. A transfer marked Transient (a state machine whose
// done keeps nothing of the result) has its state, TransferInfo and flow
// reused for later transfers while no hook listens to the DMA layer or
// the fabric, so a device's stream of them allocates nothing either.
// One marked Fixed as well (made again and again over one route by one
// master: a DMA engine channel's data phases and descriptor fetches)
// keeps the limits its route and master give (the read's lead and rate,
// the copy rate) and finds them again by its route's hops slice, its
// master and its direction, without comparing hops. StartPosted and
// StartRead are StartTransfer for a master that learns nothing of the
// transfer but its end, or only what it read and whether the read
// failed: a one-span transfer of RAM under Direct with nobody observing
// (a DMA engine's data phase or descriptor fetch) then takes a short way
// that makes the same calls of mem, the fabric and the engine, in the
// same order, from a few words of state kept with the transfer, with no
// TransferInfo.
//
// # Cost
//
// The CPU time of a call is the cache maintenance and the bounce copies,
// charged by mem to the calling process (per cache line, and at the
// node's memcpy rate on a CPU of the device's node), plus zeroing a
// coherent buffer; nothing else. The API's own bookkeeping is free in
// virtual time. A coherent device mapping memory it can reach costs
// nothing.
//
// # Not modelled
//
// IOMMUs (dma-iommu, IOVA allocation, merging of sg segments; a later
// issue), DMA attributes (DMA_ATTR_SKIP_CPU_SYNC and others, except as
// dma_map_sg's own failure path uses it), dma_kmalloc_needs_bounce
// (arm64's bouncing of small kmalloc buffers), min_align_mask and bus
// offsets (dma_range_map), ZONE_DMA and masks under 32 bits, restricted
// and per-device pools, dma_alloc_pages / dma_alloc_noncoherent, CMA and
// the atomic pool, P2PDMA. The device's data movement over the fabric is
// the DMA engine's, not this package's.
//
// # Invariants
//
// One DMA per machine, used by one process at a time (the sim runs one
// at a time); it is not safe for concurrent use. dma-direct keeps no
// per-mapping state, and neither does this package except swiotlb's
// per-slot metadata, which is what finds a bounced mapping's buffer at
// sync and unmap (O(1) from the slot index).
package dma

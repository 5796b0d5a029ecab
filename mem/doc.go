// Package mem is a machine's memory as the kernel and the hardware see
// it: physical memory per NUMA node and per device, the page allocator,
// the kernel's virtual address space, the CPU caches, and the content of
// every byte, tracked by versions so that a missing cache flush or
// invalidate produces data that is actually stale, and provably so.
//
// # Real counterparts
//
//   - Physical memory: each NUMA node's DRAM is one contiguous range
//     (pg_data_t), node 0 from physical 0, each next node at the next
//     GiB; its zones are ZONE_DMA32 (below 4 GiB) and ZONE_NORMAL (above).
//     AllocPages is alloc_pages_node with a GFP zone: ZoneNormal prefers
//     ZONE_NORMAL and falls back to ZONE_DMA32, as the zonelist does.
//     The allocator keeps sorted free extents per zone (first-fit), not
//     a struct page per page, so it costs memory per free extent. The
//     first MiB and the kernel image at 16 MiB are reserved, as on x86-64.
//     A GPU's VRAM is device memory, placed above all DRAM (each at the
//     next TiB), with its own allocator (AllocDevice).
//   - The linear map (direct map, page_offset_base = LinearStart):
//     PhysToVirt/VirtToPhys are __va/__pa. Kmalloc hands out
//     power-of-two objects from one-page slabs, never smaller than the
//     node's cache line (ARCH_DMA_MINALIGN), and whole pages beyond half a
//     page (kmalloc_large).
//   - The vmalloc space (vmalloc_base = VmallocStart): vmalloc areas
//     (vm_struct) backed by single pages, kernel stacks (VMAP_STACK,
//     THREAD_SIZE = 16 KiB), and Remap mappings (vmap/ioremap with a
//     pgprot: Uncached is pgprot_dmacoherent/pgprot_noncached), each
//     followed by an unmapped guard page. Vmalloc takes its pages
//     alternately from the low and the high end of free memory, so that
//     virtually consecutive pages are never physically adjacent: code
//     that treats a vmalloc buffer as contiguous reads the wrong memory.
//     Kernel text (_text, TextStart) is backed by RAM.
//   - Anonymous user memory (MapAnon, ClassAnon), also in the vmalloc
//     space: its pages are absent until first touched. A CPU access
//     (Read, Write and their byte forms, with the accessing CPU's node)
//     or Populate (get_user_pages, for pinners) of an absent page calls
//     the area's FaultHandler, which the kernel installs and which picks
//     the node by policy and allocates the page; the page then reads as
//     zeros (clear_page). Translate does not fault (ErrNotPresent).
//     With SetFaultCost, each fault costs the faulting thread a fixed
//     entry plus the page's clearing at its node's streaming rate
//     (FaultIn is Populate paid by a thread). PinPages pins placed
//     pages for a driver's DMA (pin_user_pages; PagePin.Release unpins).
//     MovePage migrates a placed page that no pin holds (ErrBusy) to a
//     new physical page, carrying its versions and bytes (no stale
//     data), at one page of CPU copy;
//     PageNode says where a page lives (move_pages's query). NUMA
//     hinting faults: MarkHint makes placed pages PROT_NONE
//     (change_prot_numa); a CPU access to such a page first calls the
//     area's HintHandler (SetHintHandler: the kernel's do_numa_page,
//     which may migrate the page and spend the thread's time), then
//     proceeds. Accesses to unmarked pages are unchanged.
//   - The CPU cache: one per node, the last-level cache its cores share,
//     with the node's CPUCache parameters: write-allocate, write-back,
//     lines evicted in fill order beyond its size (dirty ones written
//     back), a next-line prefetcher that stays inside a 4 KiB page. The
//     nodes' caches are coherent with each other (MESI over the socket
//     link): a read makes another node's dirty copy write back, a write
//     removes the other copies.
//   - Cache maintenance by address to the point of coherency: Clean,
//     Invalidate and Flush are arm64's DC CVAC, DC IVAC and DC CIVAC (x86:
//     CLWB, —, CLFLUSH), looped over a range as dcache_clean_poc and
//     dcache_inval_poc do, which is what arch_sync_dma_for_device and
//     arch_sync_dma_for_cpu (arch/arm64/mm/dma-mapping.c) run for
//     streaming DMA on a non-coherent device. Each costs its per-line
//     time for every line of the range.
//   - NUMA cost: a CPU access costs by the accessing CPU's node and the
//     home node of each byte. Bytes on the CPU's own node cost size at
//     the node's memcpy (or uncached) rate, through Options.LocalTime
//     when set (the machine's: a flow on the node's DRAM bus capped at
//     that rate, from 64 KiB, so that threads share the DRAM); bytes
//     on another node cost a remote access, Options.RemoteTime (the
//     machine's: a flow over the socket links, shared with every other
//     flow crossing them) or, without it, the closed form: the idle
//     remote load latency (platform.Spec.LoadLatency) plus the bytes at
//     the one-thread rate a core's line fill buffers allow over that
//     latency (platform.Spec.ThreadRate), capped by the narrowest socket
//     link. CopyPhys gives its copy model the home nodes of both ends.
//   - Device accesses: a coherent device (x86 PCIe, which snoops) reads
//     dirty lines and invalidates lines it writes; a non-coherent one
//     (many SoC buses, PCIe No Snoop) reads and writes DRAM only. Devices
//     spend no CPU time here: their bytes move over the fabric
//     (package fabric).
//
// # Content
//
// Every write, by a CPU or a device, takes the next Version of one global
// counter. Interval maps (sorted spans of equal value, split on write,
// merged when equal neighbours touch, kept in small sorted arrays under
// an index of their ends, so that a lookup is two binary searches and a
// write moves at most an array's spans)
// hold the version of every byte in
// DRAM, of the latest write (the logical truth), and of every cached
// copy, with its line's fill and dirty bit. A reader obtains versions
// from where it really reads (its cache, DRAM, a snooped dirty line); a
// byte whose obtained version differs from the latest makes the Access
// Stale, with the first such byte and both versions. While every access
// keeps the copies coherent (cached CPU accesses, coherent devices, no
// Invalidate), no reader can obtain anything but the latest write: the
// map of latest writes is built, and kept, from the first access that
// can leave a copy behind, and until then a cached byte that no CPU
// wrote holds version 0, standing for DRAM's (latest.go). Memory grows
// with the number of distinct written regions and cached runs, never
// with bytes: 64 GiB streamed through 256 buffers costs 640 spans.
// Footprint counts them.
//
// With Options.Payload, the bytes of every write are kept in a journal by
// version, and a reader's bytes are assembled from the versions it
// obtained: a stale read returns the old bytes. Without it, the byte
// forms work on versions and read zeros.
//
// # Invariants
//
//   - Span maps are sorted, disjoint, hold no zero value (a missing span
//     is version 0, or not cached) and have no equal touching neighbours.
//     A cache's map of lines may also hold void spans, lines cut and kept
//     for their refill, which count as missing (spanMap.setLazy).
//   - A cache's presence, fill and dirt change only over whole lines; the
//     bytes it counts as used are the bytes its spans cover, at most its
//     capacity after every operation.
//   - A line dirty in one node's cache is in no other node's cache.
//   - Allocation is deterministic: no map is iterated, and the same calls
//     give the same addresses.
//   - Every access takes effect and is reported at the instant it starts;
//     the process then spends its cost. A failed access (an unmapped
//     address, memory that does not exist) changes nothing, costs
//     nothing, and is reported with Access.Err: it never panics.
//
// checkInvariants turns on a check of all of these after every
// operation.
//
// # Concurrency
//
// A Memory belongs to one simulation and is used from its one goroutine:
// sim runs one process at a time, so the package takes no locks and its
// methods must not be called from other goroutines.
package mem

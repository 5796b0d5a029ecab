// Package dmabuf is Linux's DMA-BUF subsystem (drivers/dma-buf): memory
// that one driver exports and other devices and processes import
// without a copy, the fences that say when each may touch it, and the
// heaps that allocate it.
//
// # Real counterparts
//
//   - dma-buf.c: Buffer is struct dma_buf, made by Layer.Export
//     (dma_buf_export) for an Exporter (struct dma_buf_ops: attach,
//     detach, map_dma_buf, unmap_dma_buf, begin_cpu_access,
//     end_cpu_access, mmap, vmap, vunmap, release). A Buffer is a
//     kernel.File: FD is dma_buf_fd, Layer.Get is dma_buf_get(fd) in an
//     importing driver (EBADF for a descriptor the process does not
//     have: a number sent as plain data rather than by SCM_RIGHTS),
//     Put is dma_buf_put; descriptors are dup'd, passed and closed by
//     the kernel package, and the exporter's release runs once, when
//     the file's last reference (descriptor, Get, mmap) goes.
//     Attachment is struct dma_buf_attachment: Attach, Map
//     (dma_buf_map_attachment: an sg table whose DMA addresses are the
//     importer's own, IOVAs of its IOMMU domain when it has one), Unmap,
//     Detach. BeginCPUAccess and EndCPUAccess (and Sync, the
//     DMA_BUF_IOCTL_SYNC ioctl) wait for the fences a CPU access must,
//     then let the exporter do the cache maintenance its importers need.
//     Mmap maps the buffer into a process (a kernel.VMA holding a file
//     reference), Vmap into the kernel.
//   - dma-fence.c, dma-fence-array.c: Fence (context from
//     ContextAlloc, sequence number, signalled once: a second Signal is
//     EINVAL; an error set before the signal; callbacks run at the
//     signal in the order added; waits with a timeout in virtual time,
//     ETIME when it passes), NewArray.
//   - dma-resv.c: Resv, each buffer's reservation object, with usages
//     KERNEL < WRITE < READ < BOOKKEEP; a wait for a usage waits for
//     the fences of it and of every usage before it, so a reader
//     (UsageRW(false) = WRITE) waits for the kernel and the writers and
//     a writer (UsageRW(true) = READ) for the readers too.
//   - sync_file.c and the DMA_BUF_IOCTL_EXPORT_SYNC_FILE /
//     IMPORT_SYNC_FILE ioctls: SyncFile, a fence as a file; Merge is
//     SYNC_IOC_MERGE.
//   - dma-heap.c, heaps/system_heap.c, heaps/cma_heap.c: Heap, opened
//     by name as /dev/dma_heap/<name> is, whose Allocate is
//     DMA_HEAP_IOCTL_ALLOC (a new buffer, a new descriptor). The system
//     heap's pages are scattered; the CMA heap's buffers are one
//     physically contiguous run from a reserved area of limited size,
//     ENOMEM when it has no room. An importer that takes one DMA range
//     (AttachOptions.Contiguous, as videobuf2-dma-contig's) maps a
//     system-heap buffer only through an IOMMU, which merges its pages
//     into one IOVA range; without one it gets EFAULT.
//
// # Simplifications
//
// The model addresses memory by kernel virtual addresses, so a process's
// mmap of a buffer is a VMA at the buffer's kernel address (a vmalloc
// area over the system heap's pages, the linear map of a CMA run): one
// mapping of a buffer per process. Reservation objects take no locks and
// reserve no slots (one process runs at a time). Importers are not
// dynamic (no move_notify): a mapping waits for the KERNEL fences only.
// Allocation costs the zeroing of the buffer (a CPU write), nothing
// else yet.
//
// Every call is an Event on Layer.Hooks (component "dmabuf"), with
// what the checker's DMA-BUF pack (check/dmabufcheck) needs to judge
// it: the fences by their ids (Fence.ID; a fence's making and the start
// of a wait that may never end are events too), the attachment by its
// number, a get's descriptor, the physical pages of an export (Pages).
//
// # Invariants
//
// A buffer's exporter is released exactly once, after its last
// reference; a released buffer takes no attachment, map or reference.
// An attachment has at most one mapping. A fence signals at most once
// and its callbacks run exactly once each, at that instant, in order.
package dmabuf

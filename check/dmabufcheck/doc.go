// Package dmabufcheck is the checker's rule pack for DMA-BUF and its
// fences (drivers/dma-buf): it observes the events of a dmabuf.Layer
// (exports, gets, attachments and mappings, CPU-access brackets,
// releases, fences made, added to reservation objects, waited on and
// signalled), and, when told to, the memory's accesses (WatchMemory),
// the kernel's descriptor tables (WatchKernel) and the DMA layer's
// devices (WatchDMA, for their coherency). It records eight classes on
// a check.Checker:
//
//   - dmabuf-fence-race: a device or CPU access to a buffer's memory
//     while a fence in its dma_resv that the access must wait for is
//     unsignalled: a reader before a KERNEL or WRITE fence, a writer
//     before any but a BOOKKEEP one (dma_resv_usage_rw). Linux has no
//     such check; the result is torn frames. The fence's own work is no
//     race: an accessor (a device's name, or a thread's or its
//     process's) that names the fence's timeline or driver is its
//     producer (dmabuf.Layer.NewFence). The diagnostic names both
//     parties; its origin is the fence's dma_fence_init. One per fence,
//     accessor and buffer.
//   - dmabuf-use-after-detach: dma_buf_map_attachment,
//     dma_buf_unmap_attachment or dma_buf_detach on an attachment
//     already detached (the layer refuses with EINVAL; the misuse is
//     reported all the same: a map without an attach), or a device's
//     access to a buffer after its last mapping of it was unmapped or
//     detached (dma-direct lets it through; behind an IOMMU it faults,
//     and check/iommucheck reports that). Origin: the attach.
//   - dmabuf-cpu-access-unsynced: a stale access, proved by package
//     mem's content versions, between the CPU and a buffer mapped by a
//     non-coherent importer: a CPU read without
//     DMA_BUF_IOCTL_SYNC(START) (dma_buf_begin_cpu_access) after the
//     device wrote, or a device read of what a CPU wrote without
//     DMA_BUF_IOCTL_SYNC(END) (dma_buf_end_cpu_access). Origin: the
//     importer's map. A missing sync that leaves no stale byte (a
//     coherent importer, nothing cached) is not reported: there is no
//     proof, and on that machine no harm.
//   - dmabuf-fd-not-owned: dma_buf_get of a descriptor the process does
//     not have (EBADF) or that is not a dma-buf (EINVAL): a descriptor
//     number sent as plain data instead of by SCM_RIGHTS
//     (net/core/scm.c). When another process has a dma-buf at that
//     number, the diagnostic names it, and its origin is that
//     descriptor's installation.
//   - dmabuf-fd-aliased (a warning): dma_buf_get succeeded, but the
//     number is another dma-buf in another process that never passed
//     this one a descriptor, a buffer this process never had: what a
//     number sent as data silently gives when it happens to name a
//     buffer of the receiver's own. The pack cannot know the intent,
//     hence a warning.
//   - dmabuf-release-mapped: a buffer's last reference went and its
//     exporter's release ran (dma_buf_release) while an importer's
//     attachment was still mapped: the importer's device may reach
//     memory the exporter freed. Origin: the oldest map still there.
//   - fence-never-signaled: at the end of the run (check.Checker's
//     Finish, which the system calls when its engine stops), each fence
//     that a process waited on or that sat in a reservation object and
//     never signalled, with its waiters (still blocked, or given up with
//     ETIME) and buffers. Origin: the fence's dma_fence_init.
//   - fence-double-signal: dma_fence_signal of a signalled fence
//     (-EINVAL in dma_fence_signal_timestamp_locked), naming the first
//     signal.
//
// Correct use reports nothing. The pack imports only the framework and
// its subjects: dmabuf, mem, kernel and dma. Buffers whose memory the
// model does not address physically (a GPU's VRAM exported by the CUDA
// façade) are judged on their calls and fences only; their accesses
// are not seen (dmabuf.Pages).
package dmabufcheck

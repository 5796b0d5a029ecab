// Package gpudirect is the checker's GPUDirect RDMA rule pack: the
// rules NVIDIA's "GPUDirect RDMA" guide (docs.nvidia.com/cuda/
// gpudirect-rdma) and kernel-open/nvidia/nv-p2p.h set for third-party
// drivers that pin GPU memory with nvidia_p2p (package nvp2p) and for
// the devices that then read and write it over PCIe.
//
// Classes, each with the guide's rule:
//
//	gpudirect-put-pages-in-callback  "Unpin Callback": the callback must call
//	                                 nvidia_p2p_free_page_table only;
//	                                 put_pages there deadlocks
//	gpudirect-callback-blocks        the callback "may block briefly"; one
//	                                 that waits on what the freeing thread
//	                                 holds never returns (reported at the
//	                                 end of the run), one that holds it past
//	                                 CallbackBlockLimit is reported when it
//	                                 returns
//	gpudirect-pin-unaligned          pins are of 64 KiB GPU pages (-EINVAL)
//	gpudirect-bar1-exhausted         BAR1 has no room for the pin (-ENOMEM)
//	gpudirect-token-not-owner        with tokens 0 only the owning process
//	                                 may pin ("Tokens Usage")
//	gpudirect-read-before-visible    a peer read after a synchronous
//	                                 cuMemcpy returned but before its writes
//	                                 are visible, the buffer lacking
//	                                 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
//	                                 ("Synchronization and Memory Ordering")
//	gpudirect-write-during-kernel    a peer write into memory a running
//	                                 kernel uses: only CUDA synchronisation
//	                                 orders the two
//	gpudirect-iommu-translating      GPUDirect RDMA wants the IOMMU off or
//	                                 in passthrough ("Supported Systems")
//	gpudirect-pin-leak               a pin never released: persistent pins'
//	                                 memory freed (or its process exited),
//	                                 a pin its process still holds when it
//	                                 exits, pins held at the end of the run
//
// The pack reads events only: nvp2p's (calls, callbacks, the BAR1
// pages of each pin), the DMA layer's device accesses (a peer's access
// to a pinned BAR1 page is named by the GPU memory behind it), cuda's
// observations (a copy that returned before it is visible, kernel
// launches with their buffers), the GPUs' activities (when each
// kernel ran) and the kernel's process exits. A peer write is judged when the GPU reports the kernel
// it may have raced, so its diagnostic comes at the kernel's end with
// the write's time. The root package attaches the pack when a checking
// system loads nvidia_p2p (System.NVP2P).
package gpudirect

// Package peermem is nvidia-peermem: the peer-memory client that lets
// an RDMA HCA register GPU memory (ibv_reg_mr of a cudaMalloc address)
// by pinning it through nvidia_p2p. Its real counterpart is
// kernel-open/nvidia-peermem/nvidia-peermem.c of open-gpu-kernel-modules
// (and Mellanox's nv_peer_mem before it); the client interface is
// package rdma's PeerMemoryClient (MLNX_OFED's struct
// peer_memory_client).
//
// What it keeps of the original: acquire asks whether the range is GPU
// memory; get_pages pins the 64 KiB-aligned range around it with tokens
// 0 (in the registering process) and a free callback; dma_map hands the
// HCA the BAR1 addresses; page size 64 KiB. When the application frees
// the memory (or exits), nvidia_p2p calls the free callback, which calls
// the RDMA core's invalidate: the core stops the MR and calls dma_unmap
// and put_pages, which the client must then skip (calling
// nvidia_p2p_put_pages from inside the callback deadlocks), and the
// callback ends by freeing the DMA mapping and the page table.
package peermem

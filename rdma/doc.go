// Package rdma models an RDMA NIC (an HCA) and the verbs a program uses
// on it, and two hosts joined by a wire, so that one host's HCA reads
// and writes memory the other registered.
//
// Real counterparts: libibverbs (ibv_open_device, ibv_alloc_pd,
// ibv_reg_mr, ibv_create_cq, ibv_create_qp, ibv_modify_qp,
// ibv_post_send, ibv_post_recv, ibv_poll_cq; include/rdma/ib_verbs.h
// and drivers/infiniband/core/verbs.c in the kernel) with mlx5's
// semantics (ConnectX: lkey = rkey = mkey index << 8 | variant,
// ibv_post_send refused with EINVAL before RTS and ENOMEM on a full
// queue, 64-byte WQEs and CQEs); ib_umem_get's pinning of user memory
// against RLIMIT_MEMLOCK; the peer-memory client API of MLNX_OFED
// (include/rdma/peer_mem.h: acquire, get_pages, dma_map, dma_unmap,
// put_pages, get_page_size, release, and the invalidate callback),
// which nvidia_peermem implements over nvidia_p2p for GPU memory;
// InfiniBand RC transport (IBA vol. 1 ch. 9: ACK/NAK, RNR NAK and its
// timer, the local ACK timeout and retry count).
//
// # Two hosts
//
// Each host is its own machine (its fabric, memory, kernel, DMA layer)
// on ONE engine: machine.Options.Engine (dmalab.Options.Engine at the
// front door) builds the second on the first's engine, so both share
// virtual time. Connect joins one NIC of each by a Cable (a latency
// with its source): a full-duplex link at the slower port's line
// rate, in a fabric of its own on that engine, that every message's
// packets share with the other flows by max-min fairness.
//
// # One RDMA WRITE, B into A
//
//  1. Host A's process registers a buffer (RegMR): every page must be
//     mapped in the process (EFAULT), counts against RLIMIT_MEMLOCK
//     (ENOMEM past it), costs PinCost, and is mapped for A's NIC in its
//     IOMMU domain if it has one (else at its physical addresses): the
//     bus addresses the NIC will drive. That mapping is the RDMA core's
//     own for the MR's life (ib_umem: user space never syncs), so the
//     DMA layer reports the NIC's accesses as Pinned, as it does a
//     GPU's pinned memory. Memory a peer-memory client acquires (GPU
//     memory) is pinned and mapped by the client instead, and is not
//     counted.
//  2. B posts a WQE (PostSend: the CPU writes 64 bytes into the send
//     queue, then the doorbell); B's NIC fetches it by DMA, checks the
//     local keys (IBV_WC_LOC_PROT_ERR), and moves the message in at most
//     MaxChunks pieces of whole MTUs that overlap: B's NIC DMA-reads
//     piece i+1 from B's memory, the wire carries piece i (its bytes
//     and a header per MTU packet), A's NIC DMA-writes piece i-1 into
//     the registered memory, each a flow over the real route (PCIe
//     links, root complex, DRAM) and each DMA through dma.Device, so
//     IOMMUs translate and the checker sees every access.
//  3. A's NIC checks the rkey when the first piece arrives: a key that
//     names no MR, of another PD, a range outside it, an MR or QP
//     without REMOTE_WRITE, or peer memory invalidated is a NAK, and
//     no piece is written (IBV_WC_REM_ACCESS_ERR); a QP that is not
//     there or not ready drops the packets and B times out after its
//     retries (IBV_WC_RETRY_EXC_ERR). A SEND takes the oldest receive
//     WQE, or is RNR-NAKed: B waits the responder's RNR timer and
//     retries, up to rnr_retry times (7: for ever), then
//     IBV_WC_RNR_RETRY_EXC_ERR.
//  4. After the last piece lands, A's ACK crosses back and B's NIC
//     writes the CQE into the CQ's ring by DMA; PollCQ reads it with
//     the CPU. An error completion moves the QP to ERR and flushes the
//     WQEs behind it (IBV_WC_WR_FLUSH_ERR).
//
// An RDMA READ sends a request, the responder checks REMOTE_READ,
// reads its memory and sends the response, which the requester writes
// into its own registered memory, in the same overlapping pieces.
//
// In payload mode the bytes read are the bytes written, end to end;
// without it, versions prove what was and was not written.
//
// # What is left out
//
// One WQE executes at a time per QP (a message's pieces overlap, two
// messages of one QP do not: use several QPs for small-message rates);
// no UD or UC, SRQ, memory windows, atomics or immediate data; the
// HCA's internal latency beyond its DMA and the wire is not modelled;
// the responder's QP is not moved to ERR by the errors it NAKs.
package rdma

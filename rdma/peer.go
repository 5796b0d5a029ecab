package rdma

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// PeerMemoryClient is a peer-memory client (struct peer_memory_client
// of include/rdma/peer_mem.h in MLNX_OFED, which the nvidia_peermem
// module implements over nvidia_p2p): the owner of memory that is not
// the process's pages (GPU memory), asked by ibv_reg_mr whether it owns
// an address range and, if so, to pin it and map it for the HCA. Each
// call takes the thread that makes it (t), for the time it costs. ctx is
// the client's own context, returned by Acquire (client_context).
type PeerMemoryClient interface {
	// Name is peer_memory_client.name ("nv_mem").
	Name() string
	// Acquire is acquire: whether [addr, addr+size) is the client's,
	// with its context if so.
	Acquire(t *sim.Proc, addr, size uint64) (ctx any, ok bool)
	// GetPages is get_pages: pin the range (nvidia_p2p_get_pages);
	// core is the core's context, to pass to the invalidate callback
	// when the memory goes away.
	GetPages(t *sim.Proc, ctx any, addr, size uint64, write bool, core CoreContext) error
	// DMAMap is dma_map: map the pinned pages for the HCA's device
	// (nvidia_p2p_dma_map_pages): the bus addresses the HCA drives.
	DMAMap(t *sim.Proc, ctx any, dev *dma.Device) (PeerMapping, error)
	// DMAUnmap is dma_unmap.
	DMAUnmap(t *sim.Proc, ctx any, dev *dma.Device) error
	// PutPages is put_pages: unpin (nvidia_p2p_put_pages).
	PutPages(t *sim.Proc, ctx any)
	// PageSize is get_page_size (64 KiB for NVIDIA GPU memory).
	PageSize(ctx any) uint64
	// Release is release: the context is no longer used.
	Release(ctx any)
}

// PeerMapping is what dma_map gives: the sg_table's bus segments, in
// address order, covering the range from the page that holds its start.
// Memory is where the pages are (a GPU's memory, for the route of the
// HCA's transfers): the model's addition to the sg_table.
type PeerMapping struct {
	Segments []PeerSegment
	Memory   machine.Endpoint
	// Offset is the registered address's offset into the first segment
	// (the pages start at the page boundary below it).
	Offset uint64
}

// PeerSegment is one DMA segment (sg_dma_address, sg_dma_len).
type PeerSegment struct {
	Bus mem.DMAAddr
	Len uint64
}

// CoreContext identifies one registration to the core
// (core_context): the client passes it to the invalidate callback.
type CoreContext uint64

// Invalidate is the callback ib_register_peer_memory_client hands the
// client (invalidate_peer_memory): the client calls it, from its own
// free callback, when registered memory goes away (cudaFree, the
// process's exit). The core stops the HCA's access to the MR (its key
// no longer resolves: later accesses are protection or remote access
// errors), then calls the client's DMAUnmap and PutPages, which a
// client must tell apart from the application's own dereg (nvidia_peermem
// must not call nvidia_p2p_put_pages from inside nvidia_p2p's free
// callback). Unknown contexts are ignored, as a race with dereg is.
type Invalidate func(t *sim.Proc, core CoreContext)

type peerClient struct {
	c PeerMemoryClient
}

// RegisterPeerMemoryClient is ib_register_peer_memory_client: from now
// on ibv_reg_mr asks c (after the clients registered before it) whether
// it owns a range before pinning the process's pages.
func (d *Device) RegisterPeerMemoryClient(c PeerMemoryClient) Invalidate {
	d.peers = append(d.peers, &peerClient{c: c})
	return func(t *sim.Proc, core CoreContext) {
		for _, mr := range d.mrs {
			if mr.peer != nil && mr.core == core && !mr.invalid {
				mr.invalidate(t)
				return
			}
		}
	}
}

// regPeer registers through the first client that acquires the range;
// ok is false when none does.
func (mr *MR) regPeer(t *sim.Proc) (ok bool, err error) {
	d := mr.pd.d
	for _, pc := range d.peers {
		ctx, mine := pc.c.Acquire(t, mr.Addr, mr.Length)
		if !mine {
			continue
		}
		mr.peer, mr.peerCtx, mr.core = pc, ctx, CoreContext(d.nextMkey)
		write := mr.access&(AccessLocalWrite|AccessRemoteWrite) != 0
		if err := pc.c.GetPages(t, ctx, mr.Addr, mr.Length, write, mr.core); err != nil {
			pc.c.Release(ctx)
			return true, fmt.Errorf("ibv_reg_mr: %s get_pages: %w", pc.c.Name(), err)
		}
		m, err := pc.c.DMAMap(t, ctx, d.dev)
		if err != nil {
			pc.c.PutPages(t, ctx)
			pc.c.Release(ctx)
			return true, fmt.Errorf("ibv_reg_mr: %s dma_map: %w", pc.c.Name(), err)
		}
		mr.memory = m.Memory
		mr.pageSize = pc.c.PageSize(ctx)
		off := m.Offset
		left := mr.Length
		for _, s := range m.Segments {
			if left == 0 {
				break
			}
			if off >= s.Len {
				off -= s.Len
				continue
			}
			n := min(s.Len-off, left)
			mr.segs = append(mr.segs, seg{bus: s.Bus + mem.DMAAddr(off), len: n})
			left -= n
			off = 0
		}
		if left != 0 {
			_ = pc.c.DMAUnmap(t, ctx, d.dev)
			pc.c.PutPages(t, ctx)
			pc.c.Release(ctx)
			return true, fmt.Errorf("ibv_reg_mr: %s dma_map covers %#x bytes too few: %w", pc.c.Name(), left, errInval)
		}
		return true, nil
	}
	return false, nil
}

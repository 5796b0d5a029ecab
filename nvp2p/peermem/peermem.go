package peermem

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/rdma"
	"github.com/dmalab/dmalab/sim"
)

// Name is the client's name (nvidia-peermem's "nv_mem").
const Name = "nv_mem"

// Client is nvidia-peermem over one nvidia_p2p driver.
type Client struct {
	d *nvp2p.Driver
	// current says which process a thread runs in (the kernel's
	// current); nil takes the memory's owner, as a program registering
	// its own memory is.
	current    func(*sim.Proc) *kern.Process
	invalidate rdma.Invalidate
}

// context is nv_mem_context: one registration.
type context struct {
	addr, size uint64 // the registered range
	start, end uint64 // aligned to 64 KiB
	core       rdma.CoreContext
	pt         *nvp2p.PageTable
	m          *nvp2p.DMAMapping
	inCallback bool
}

// New is the client over d; current may be nil.
func New(d *nvp2p.Driver, current func(*sim.Proc) *kern.Process) *Client {
	return &Client{d: d, current: current}
}

// Register registers the client with an HCA's RDMA core
// (ib_register_peer_memory_client) and keeps the invalidate callback it
// returns.
func (c *Client) Register(dev *rdma.Device) {
	c.invalidate = dev.RegisterPeerMemoryClient(c)
}

// Name is "nv_mem".
func (c *Client) Name() string { return Name }

// Acquire is nv_mem_acquire: the range is device memory of a discrete
// GPU.
func (c *Client) Acquire(t *sim.Proc, addr, size uint64) (any, bool) {
	if !c.d.Acquire(mem.GPUAddr(addr), size) {
		return nil, false
	}
	start := addr &^ (nvp2p.GPUPageSize - 1)
	end := (addr + size + nvp2p.GPUPageSize - 1) &^ (nvp2p.GPUPageSize - 1)
	return &context{addr: addr, size: size, start: start, end: end}, true
}

// GetPages is nv_mem_get_pages: nvidia_p2p_get_pages(0, 0, ...) of the
// aligned range, with the free callback.
func (c *Client) GetPages(t *sim.Proc, ctx any, addr, size uint64, write bool, core rdma.CoreContext) error {
	x := ctx.(*context)
	x.core = core
	caller := c.d.Owner(mem.GPUAddr(x.start))
	if c.current != nil {
		caller = c.current(t)
	}
	pt, err := c.d.GetPages(t, caller, 0, 0, mem.GPUAddr(x.start), x.end-x.start, c.freeCallback, x)
	if err != nil {
		return fmt.Errorf("nv_mem: %w", err)
	}
	x.pt = pt
	return nil
}

// freeCallback is nv_mem_free_callback: the memory is going. It asks
// the core to invalidate the MR (which calls DMAUnmap and PutPages,
// skipped here), then frees the mapping and the table, as the guide
// requires of a free callback.
func (c *Client) freeCallback(t *sim.Proc, data any) {
	x := data.(*context)
	x.inCallback = true
	if c.invalidate != nil {
		c.invalidate(t, x.core)
	}
	if x.m != nil {
		_ = c.d.FreeDMAMapping(t, x.m) // a no-op returning 0
		x.m = nil
	}
	_ = c.d.FreePageTable(t, x.pt) // a no-op returning 0
}

// DMAMap is nv_dma_map: nvidia_p2p_dma_map_pages for the HCA, as
// segments (adjacent BAR1 pages merged) over the GPU's memory.
func (c *Client) DMAMap(t *sim.Proc, ctx any, dev *dma.Device) (rdma.PeerMapping, error) {
	x := ctx.(*context)
	m, err := c.d.DMAMapPages(t, dev, x.pt)
	if err != nil {
		return rdma.PeerMapping{}, fmt.Errorf("nv_mem: %w", err)
	}
	x.m = m
	pm := rdma.PeerMapping{Memory: x.pt.GPU().GPU.Memory(), Offset: x.addr - x.start}
	for _, a := range m.DMAAddresses {
		if k := len(pm.Segments); k > 0 && pm.Segments[k-1].Bus+mem.DMAAddr(pm.Segments[k-1].Len) == a {
			pm.Segments[k-1].Len += nvp2p.GPUPageSize
			continue
		}
		pm.Segments = append(pm.Segments, rdma.PeerSegment{Bus: a, Len: nvp2p.GPUPageSize})
	}
	return pm, nil
}

// DMAUnmap is nv_dma_unmap: skipped inside the free callback (the
// driver tears the mapping down itself).
func (c *Client) DMAUnmap(t *sim.Proc, ctx any, dev *dma.Device) error {
	x := ctx.(*context)
	if x.inCallback || x.m == nil {
		return nil
	}
	err := c.d.DMAUnmapPages(t, dev, x.pt, x.m)
	x.m = nil
	return err
}

// PutPages is nv_mem_put_pages: nvidia_p2p_put_pages, skipped inside
// the free callback.
func (c *Client) PutPages(t *sim.Proc, ctx any) {
	x := ctx.(*context)
	if x.inCallback || x.pt == nil {
		return
	}
	_ = c.d.PutPages(t, 0, 0, mem.GPUAddr(x.start), x.pt) // errors are the driver's events
}

// PageSize is nv_mem_get_page_size: 64 KiB.
func (c *Client) PageSize(any) uint64 { return nvp2p.GPUPageSize }

// Release is nv_mem_release: nothing left to free.
func (c *Client) Release(any) {}

var _ rdma.PeerMemoryClient = (*Client)(nil)

package regcache

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/cuda"
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/sim"
)

// proc is the simulated thread a model Pinner's ctx must be.
func proc(op string, ctx any) (*sim.Proc, error) {
	t, ok := ctx.(*sim.Proc)
	if !ok || t == nil {
		return nil, fmt.Errorf("regcache: %s: the context is %T, not the calling *sim.Proc", op, ctx)
	}
	return t, nil
}

// GPUPinner pins device memory of the model through nvidia_p2p, as a
// third-party driver does for a process (gdrcopy's gdr_pin_buffer,
// nvidia-peermem): get_pages with tokens 0 in the calling process, a
// free callback that frees the page table (all nvidia_p2p allows
// inside it) and invalidates the cache's range, put_pages to unpin.
// Buffer IDs are CU_POINTER_ATTRIBUTE_BUFFER_ID of Ctx.
type GPUPinner struct {
	P2P    *nvp2p.Driver
	Ctx    *cuda.Context
	Caller *kern.Process
}

// Traits: 64 KiB pages, buffer IDs, overlapping pins allowed (they
// share BAR1 pages).
func (g *GPUPinner) Traits() Traits {
	return Traits{PageSize: nvp2p.GPUPageSize, BufferIDs: true}
}

// Pin is nvidia_p2p_get_pages of r; -ENOMEM (BAR1 exhausted) is
// ErrNoSpace.
func (g *GPUPinner) Pin(ctx any, r Range, inval func(Range)) (any, error) {
	t, err := proc("pin", ctx)
	if err != nil {
		return nil, err
	}
	var pt *nvp2p.PageTable
	cb := func(t *sim.Proc, _ any) {
		// Inside the callback only FreePageTable is allowed; the
		// cache's put_pages comes later, outside, and is then 0.
		_ = g.P2P.FreePageTable(t, pt)
		inval(r)
	}
	pt, err = g.P2P.GetPages(t, g.Caller, 0, 0, mem.GPUAddr(r.Addr), r.Len, cb, nil)
	if errors.Is(err, syscall.ENOMEM) {
		return nil, fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	if err != nil {
		return nil, err
	}
	return pt, nil
}

// Unpin is nvidia_p2p_put_pages (0 for a table its free callback
// revoked).
func (g *GPUPinner) Unpin(ctx any, r Range, h any) error {
	t, err := proc("unpin", ctx)
	if err != nil {
		return err
	}
	pt, ok := h.(*nvp2p.PageTable)
	if !ok {
		return fmt.Errorf("regcache: unpin %v: handle %T is not a page table", r, h)
	}
	return g.P2P.PutPages(t, 0, 0, mem.GPUAddr(r.Addr), pt)
}

// BufferID is cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_BUFFER_ID).
func (g *GPUPinner) BufferID(_ any, addr uint64) (uint64, error) {
	return g.Ctx.PointerGetAttribute(cuda.PointerAttributeBufferID, mem.GPUAddr(addr))
}

// HostPinner pins host memory of the model with cuMemHostRegister of
// Ctx (flags Flags) and unpins it with cuMemHostUnregister.
type HostPinner struct {
	Ctx   *cuda.Context
	Flags uint32
}

// Traits: CPU pages, no buffer IDs (host memory has none until it is
// registered), exclusive (a range cannot be registered twice).
func (h *HostPinner) Traits() Traits {
	return Traits{PageSize: mem.PageSize, Exclusive: true}
}

// Pin is cuMemHostRegister; CUDA_ERROR_OUT_OF_MEMORY is ErrNoSpace.
// (The CUDA driver pins without charging RLIMIT_MEMLOCK; a Pinner over
// a pinning that does charge it, ibv_reg_mr or VFIO through
// account_locked_vm in mm/util.c, maps that ENOMEM to ErrNoSpace too.)
func (h *HostPinner) Pin(ctx any, r Range, _ func(Range)) (any, error) {
	t, err := proc("pin", ctx)
	if err != nil {
		return nil, err
	}
	err = h.Ctx.MemHostRegister(t, mem.VirtAddr(r.Addr), r.Len, h.Flags)
	if cuda.ResultOf(err) == cuda.ErrorOutOfMemory {
		return nil, fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	if err != nil {
		return nil, err
	}
	return mem.VirtAddr(r.Addr), nil
}

// Unpin is cuMemHostUnregister.
func (h *HostPinner) Unpin(ctx any, r Range, _ any) error {
	t, err := proc("unpin", ctx)
	if err != nil {
		return err
	}
	return h.Ctx.MemHostUnregister(t, mem.VirtAddr(r.Addr))
}

// BufferID is not asked for host memory.
func (h *HostPinner) BufferID(any, uint64) (uint64, error) { return 0, nil }

package regcache

import (
	"errors"
	"fmt"
	"slices"
	"sync"
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
//
// It is also the cache's memory monitor for what it pinned, as
// libfabric's (prov/util/src/util_mem_monitor.c: the userfaultfd
// monitor's UFFD_EVENT_UNMAP, the memhooks monitor) and UCX's memory
// hooks (src/ucm) are: from its first pin it listens to the unmap
// events of Ctx's process (kernel.AddressSpace.OnUnmap: free(3) and
// munmap of the range, the process's exit) and to the CUDA driver's
// cuMemHostUnregister calls (cuda.Driver.Hooks: another part of the
// program unregistering the range, cuCtxDestroy, the exit's teardown),
// and invalidates the cache's regions over them. Memory unmapped stays
// pinned until the cache unregisters it, outside the event; a range
// someone else unregistered is not unregistered again.
type HostPinner struct {
	Ctx   *cuda.Context
	Flags uint32

	// mu guards pins and watching; it is never held across a call to
	// the driver or to inval, since both may come back here.
	mu       sync.Mutex
	pins     []*hostPin // live registrations, in pin order
	watching bool
}

// hostPin is one registration the Pinner made for a cache.
type hostPin struct {
	r     Range
	inval func(Range)
	// revoked: unregistered by someone else; Unpin has nothing to do.
	revoked bool
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
func (h *HostPinner) Pin(ctx any, r Range, inval func(Range)) (any, error) {
	t, err := proc("pin", ctx)
	if err != nil {
		return nil, err
	}
	h.watch()
	// Watched from before the call: an event while it pins (it sleeps)
	// reaches the cache, which then drops the pin it is making.
	hp := &hostPin{r: r, inval: inval}
	h.mu.Lock()
	h.pins = append(h.pins, hp)
	h.mu.Unlock()
	err = h.Ctx.MemHostRegister(t, mem.VirtAddr(r.Addr), r.Len, h.Flags)
	if err != nil {
		h.forget(hp)
	}
	if cuda.ResultOf(err) == cuda.ErrorOutOfMemory {
		return nil, fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	if err != nil {
		return nil, err
	}
	return hp, nil
}

// forget drops hp from the live registrations; it says whether it was
// there.
func (h *HostPinner) forget(hp *hostPin) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.Index(h.pins, hp)
	if i >= 0 {
		h.pins = slices.Delete(h.pins, i, i+1)
	}
	return i >= 0
}

// Unpin is cuMemHostUnregister, unless the driver already unregistered
// the range for someone else.
func (h *HostPinner) Unpin(ctx any, r Range, handle any) error {
	t, err := proc("unpin", ctx)
	if err != nil {
		return err
	}
	hp, ok := handle.(*hostPin)
	if !ok {
		return fmt.Errorf("regcache: unpin %v: handle %T is not a registration of this Pinner", r, handle)
	}
	// Forget it first: the unregister's own event must not invalidate
	// the cache's range (a merge unpins before it pins the union).
	if !h.forget(hp) {
		return fmt.Errorf("regcache: unpin %v: not a live registration", r)
	}
	if hp.revoked {
		return nil
	}
	return h.Ctx.MemHostUnregister(t, mem.VirtAddr(r.Addr))
}

// BufferID is not asked for host memory.
func (h *HostPinner) BufferID(any, uint64) (uint64, error) { return 0, nil }

// watch subscribes to the memory events, once.
func (h *HostPinner) watch() {
	h.mu.Lock()
	done := h.watching
	h.watching = true
	h.mu.Unlock()
	if done {
		return
	}
	pr := h.Ctx.Process()
	pr.KernelProcess().MM.OnUnmap(func(_ *sim.Proc, v kern.VMA) {
		h.event(Range{uint64(v.Start), v.Size}, false)
	})
	h.Ctx.Driver().Hooks.Hook(func(o *cuda.Observation) {
		if o.Op != cuda.OpFree || o.Err != nil || o.Call != "cuMemHostUnregister" || o.Process != pr.Name() {
			return
		}
		r := Range{uint64(o.Target.Base), o.Target.Size}
		if r.Len == 0 {
			r = Range{uint64(o.Addr), 1}
		}
		h.event(r, true)
	})
}

// event invalidates the cache's regions over r: memory unmapped, or
// (revoked) unregistered by someone else.
func (h *HostPinner) event(r Range, revoked bool) {
	var calls []func()
	h.mu.Lock()
	for _, hp := range h.pins {
		if hp.r.overlaps(r) {
			if revoked {
				hp.revoked = true
			}
			inval, pr := hp.inval, hp.r
			if inval == nil {
				continue
			}
			calls = append(calls, func() { inval(pr) })
		}
	}
	h.mu.Unlock()
	for _, f := range calls {
		f()
	}
}

package regcache

import (
	"errors"
	"testing"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/sim"
)

// putPagesAfterCallback checks the nvp2p events: no put_pages inside a
// free callback, and every revoked table put only after its callback
// returned. It returns the number of callbacks.
func (r *rig) putPagesAfterCallback() int {
	r.t.Helper()
	returned := map[mem.GPUAddr]bool{}
	callbacks := 0
	for _, e := range r.ev {
		switch e.Op {
		case nvp2p.OpFreeCallback:
			callbacks++
		case nvp2p.OpCallbackReturned:
			if !e.FreedTable {
				r.t.Errorf("the free callback of %v did not free its page table", e.Addr)
			}
			returned[e.Addr] = true
		case nvp2p.OpPutPages:
			if e.InCallback {
				r.t.Errorf("put_pages of %v inside a free callback", e.Addr)
			}
		}
	}
	return callbacks
}

// cuMemFree of a buffer under a cached pin: the free callback
// invalidates the regions (one unused, one in use) and unpins nothing;
// the next Get at the same address, allocated again, misses and pins
// the new buffer; the region in use stays pinned until its Put; no pin
// is left.
func TestModelGPUMemFreeInvalidates(t *testing.T) {
	r := newRig(t)
	c, _ := r.gpuCache(Config{})
	r.run(func(p *sim.Proc) {
		free0 := r.barFree()
		buf, err := r.ctx.MemAlloc(p, 2<<20)
		must(t, err)
		unused, err := c.Get(p, uint64(buf), 64<<10)
		must(t, err)
		must(t, c.Put(p, unused))
		held, err := c.Get(p, uint64(buf)+1<<20, 64<<10)
		must(t, err)
		must(t, r.ctx.MemFree(p, buf))
		s := c.Stats()
		if s.Invalidations != 2 || s.Regions != 0 || s.Unpins != 0 {
			t.Fatalf("after cuMemFree: %+v (want 2 invalidated, none served, none unpinned yet)", s)
		}
		if r.barFree() != free0 {
			t.Fatalf("BAR1 free %d, want %d: the driver releases a revoked pin's pages", r.barFree(), free0)
		}
		again, err := r.ctx.MemAlloc(p, 2<<20)
		must(t, err)
		if again != buf {
			t.Fatalf("re-allocation at %v, not %v: the test needs the same address", again, buf)
		}
		n, err := c.Get(p, uint64(buf), 64<<10)
		must(t, err)
		id, _ := r.ctx.PointerGetAttribute(cuda.PointerAttributeBufferID, again)
		if s := c.Stats(); s.Misses != 3 || s.HitsFast != 0 || s.HitsSlow != 0 || s.Stale != 0 || n == unused || n.BufferID != id {
			t.Fatalf("after re-allocation: region of buffer %d (allocation %d), stats %+v", n.BufferID, id, s)
		}
		must(t, c.Put(p, n))
		if s := c.Stats(); s.Pinned != 2 {
			t.Fatalf("pinned %d, want the new region and the one in use", s.Pinned)
		}
		must(t, c.Put(p, held))
		must(t, c.Flush(p))
		if s := c.Stats(); s.Pinned != 0 || s.Pins != s.Unpins || r.barFree() != free0 {
			t.Fatalf("after release: %+v, BAR1 free %d of %d", s, r.barFree(), free0)
		}
	})
	if n := r.putPagesAfterCallback(); n != 2 {
		t.Fatalf("%d free callbacks, want 2", n)
	}
}

// The process's exit destroys its context, whose memory goes with it:
// each pin's free callback runs in the exiting thread and invalidates;
// the cache's later put_pages of the revoked tables return 0.
func TestModelGPUProcessExit(t *testing.T) {
	r := newRig(t)
	c, _ := r.gpuCache(Config{})
	r.run(func(p *sim.Proc) {
		free0 := r.barFree()
		a, err := r.ctx.MemAlloc(p, 2<<20)
		must(t, err)
		b, err := r.ctx.MemAlloc(p, 2<<20)
		must(t, err)
		ra, err := c.Get(p, uint64(a), 128<<10)
		must(t, err)
		must(t, c.Put(p, ra))
		rb, err := c.Get(p, uint64(b), 64<<10)
		must(t, err)
		must(t, r.app.KernelProcess().Exit(p))
		if s := c.Stats(); s.Invalidations != 2 || s.Regions != 0 || s.Unpins != 0 {
			t.Fatalf("after exit: %+v", s)
		}
		if r.barFree() != free0 {
			t.Fatalf("BAR1 free %d after exit, want %d", r.barFree(), free0)
		}
		must(t, c.Put(p, rb))
		must(t, c.Flush(p))
		if s := c.Stats(); s.Pinned != 0 || s.Pins != s.Unpins {
			t.Fatalf("after release: %+v", s)
		}
	})
	if n := r.putPagesAfterCallback(); n != 2 {
		t.Fatalf("%d free callbacks, want 2", n)
	}
}

func (r *rig) hostCache(cfg Config) (*Cache, *HostPinner) {
	h := &HostPinner{Ctx: r.ctx}
	c, err := New(h, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return c, h
}

func (r *rig) registered(va mem.VirtAddr) bool { return registered(r.ctx, va) }

func registered(ctx *cuda.Context, va mem.VirtAddr) bool {
	v, err := ctx.PointerGetAttribute(cuda.PointerAttributeMemoryType, mem.GPUAddr(va))
	return err == nil && v == cuda.MemoryTypeHost
}

// Another part of the program unregisters memory the cache registered:
// the driver's event invalidates the region, the cache does not
// unregister it again (no error), and the next Get registers anew.
func TestModelHostUnregisterBehindTheCache(t *testing.T) {
	r := newRig(t)
	c, _ := r.hostCache(Config{})
	r.run(func(p *sim.Proc) {
		va, err := r.app.Malloc(1 << 20)
		must(t, err)
		a, err := c.Get(p, uint64(va), 4*mem.PageSize)
		must(t, err)
		must(t, c.Put(p, a))
		held, err := c.Get(p, uint64(va)+512<<10, mem.PageSize)
		must(t, err)
		must(t, r.ctx.MemHostUnregister(p, mem.VirtAddr(a.Addr)))
		must(t, r.ctx.MemHostUnregister(p, mem.VirtAddr(held.Addr)))
		if s := c.Stats(); s.Invalidations != 2 || s.Regions != 0 {
			t.Fatalf("after the unregisters: %+v", s)
		}
		n, err := c.Get(p, uint64(va), 4*mem.PageSize)
		must(t, err)
		if n == a || !r.registered(va) {
			t.Fatalf("served the unregistered region (%v) or did not register", n == a)
		}
		if s := c.Stats(); s.Misses != 3 || s.Pins != 3 {
			t.Fatalf("stats %+v", s)
		}
		must(t, c.Put(p, n))
		must(t, c.Put(p, held))
		must(t, c.Flush(p))
		if s := c.Stats(); s.Pinned != 0 || r.registered(va) {
			t.Fatalf("after Flush: %+v, registered %v", s, r.registered(va))
		}
	})
}

// hugeMalloc is a malloc size the model backs contiguously, so that
// free and malloc give the same address back.
const hugeMalloc = cuda.HugePage

// free(3) of registered memory: the unmap event invalidates the
// region; the cache unregisters it at its next operation (outside the
// event), before it registers memory malloc hands out again at the
// same address.
func TestModelHostFreeInvalidates(t *testing.T) {
	r := newRig(t)
	c, _ := r.hostCache(Config{})
	r.run(func(p *sim.Proc) {
		va, err := r.app.Malloc(hugeMalloc)
		must(t, err)
		a, err := c.Get(p, uint64(va), 64<<10)
		must(t, err)
		must(t, c.Put(p, a))
		must(t, r.app.FreePageable(va))
		if s := c.Stats(); s.Invalidations != 1 || s.Regions != 0 || s.Unpins != 0 || s.Pinned != 1 {
			t.Fatalf("after free: %+v (want invalidated, still pinned)", s)
		}
		again, err := r.app.Malloc(hugeMalloc)
		must(t, err)
		if again != va {
			t.Fatalf("malloc after free at %v, not %v: the test needs the same address", again, va)
		}
		n, err := c.Get(p, uint64(again), 64<<10)
		must(t, err)
		if s := c.Stats(); s.Misses != 2 || s.HitsFast+s.HitsSlow != 0 || s.Unpins != 1 || s.Pinned != 1 {
			t.Fatalf("after malloc at %v (freed %v): %+v", again, va, s)
		}
		if n == a || !r.registered(again) {
			t.Fatal("stale region served or the new memory not registered")
		}
		must(t, c.Put(p, n))
		must(t, c.Flush(p))
		if r.registered(again) {
			t.Fatal("still registered after Flush")
		}
	})
}

// The process's exit: the driver unregisters what its context
// registered (an event the cache hears), then the mappings go; a region
// in use is released afterwards without an error.
func TestModelHostProcessExit(t *testing.T) {
	r := newRig(t)
	c, _ := r.hostCache(Config{})
	r.run(func(p *sim.Proc) {
		va, err := r.app.Malloc(1 << 20)
		must(t, err)
		a, err := c.Get(p, uint64(va), 64<<10)
		must(t, err)
		must(t, c.Put(p, a))
		held, err := c.Get(p, uint64(va)+512<<10, 64<<10)
		must(t, err)
		must(t, r.app.KernelProcess().Exit(p))
		if s := c.Stats(); s.Invalidations != 2 || s.Regions != 0 {
			t.Fatalf("after exit: %+v", s)
		}
		must(t, c.Put(p, held))
		must(t, c.Flush(p))
		if s := c.Stats(); s.Pinned != 0 || s.Pins != s.Unpins {
			t.Fatalf("after release: %+v", s)
		}
	})
}

// Another thread unregisters the range while the cache's registration
// of it is still sleeping: the event dooms the pin in progress, the Get
// fails with ErrStale, and the cache does not unregister it again.
func TestModelHostUnregisterDuringPin(t *testing.T) {
	r := newRig(t)
	c, _ := r.hostCache(Config{})
	r.run(func(p *sim.Proc) {
		va, err := r.app.Malloc(1 << 20)
		must(t, err)
		other := p.Spawn("other", func(q *sim.Proc) {
			q.Sleep(sim.Nanosecond) // the Get has registered and sleeps
			must(t, r.ctx.MemHostUnregister(q, va))
		})
		if _, err := c.Get(p, uint64(va), 64<<10); !errors.Is(err, ErrStale) {
			t.Fatalf("Get: %v, want ErrStale", err)
		}
		p.Join(other)
		must(t, c.Flush(p))
		if s := c.Stats(); s.Pinned != 0 || s.Pins != 1 || s.Unpins != 1 || r.registered(va) {
			t.Fatalf("stats %+v, registered %v", s, r.registered(va))
		}
	})
}

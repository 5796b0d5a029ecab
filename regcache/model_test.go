package regcache

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is h200-pcie with a 16 MiB BAR1 (176 free 64 KiB pages after the
// driver's reserve), CUDA, nvidia_p2p and a process "app" with a
// context on GPU 0; nvp2p events recorded.
type rig struct {
	t   *testing.T
	m   *machine.Machine
	cu  *cuda.Driver
	p2p *nvp2p.Driver
	app *cuda.Process
	ctx *cuda.Context
	ev  []nvp2p.Event
}

func newRig(t *testing.T) *rig {
	t.Helper()
	spec, err := platform.Preset("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	spec.GPUs[0].BAR1 = platform.P(platform.Bytes(16<<20), "test")
	m, err := machine.New(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := gpu.New(x)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m}
	if r.cu, err = cuda.New(sys); err != nil {
		t.Fatal(err)
	}
	if r.p2p, err = nvp2p.New(r.cu, x); err != nil {
		t.Fatal(err)
	}
	r.p2p.Hooks.Hook(func(e *nvp2p.Event) { r.ev = append(r.ev, *e) })
	if r.app, err = r.cu.NewProcess("app", 0); err != nil {
		t.Fatal(err)
	}
	if r.ctx, err = r.app.PrimaryContext(0); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("app", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked: %v", b)
	}
}

func (r *rig) gpuCache(cfg Config) (*Cache, *GPUPinner) {
	g := &GPUPinner{P2P: r.p2p, Ctx: r.ctx, Caller: r.app.KernelProcess()}
	c, err := New(g, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return c, g
}

func (r *rig) barFree() uint64 { return r.cu.System().Devices[0].BAR1().Info().Free }

// deadlocks counts put_pages calls made inside a free callback.
func (r *rig) deadlocks() int {
	n := 0
	for _, e := range r.ev {
		if e.Err != nil && errors.Is(e.Err, syscall.EDEADLK) {
			n++
		}
	}
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestModelGPUHitMergeAndFree(t *testing.T) {
	r := newRig(t)
	c, _ := r.gpuCache(Config{})
	r.run(func(p *sim.Proc) {
		buf, err := r.ctx.MemAlloc(p, 4<<20)
		must(t, err)
		a, err := c.Get(p, uint64(buf)+100, 1000)
		must(t, err)
		if a.Range != (Range{uint64(buf), 64 << 10}) {
			t.Fatalf("region %v, want the 64 KiB page at %v", a.Range, buf)
		}
		t0 := p.Now()
		h, err := c.Get(p, uint64(buf)+2000, 100)
		must(t, err)
		if h != a || p.Now() != t0 {
			t.Fatalf("a contained request pinned again (took %v)", p.Now()-t0)
		}
		must(t, c.Put(p, h))
		b, err := c.Get(p, uint64(buf)+64<<10, 64<<10) // adjacent: merged
		must(t, err)
		if b.Range != (Range{uint64(buf), 128 << 10}) {
			t.Fatalf("merged region %v", b.Range)
		}
		must(t, c.Put(p, a)) // the merged-away region goes now
		if s := c.Stats(); s.Pinned != 1 || s.Merges != 1 {
			t.Fatalf("stats %+v", s)
		}
		// cuMemFree while the region is in use: the free callback
		// revokes the pin; the cache unpins at the last release,
		// outside the callback.
		must(t, r.ctx.MemFree(p, buf))
		if s := c.Stats(); s.Invalidations != 1 || s.Pinned != 1 {
			t.Fatalf("after the free: stats %+v", s)
		}
		must(t, c.Put(p, b))
		if s := c.Stats(); s.Pinned != 0 || s.Unpins != 2 {
			t.Fatalf("after the release: stats %+v", s)
		}
	})
	if n := r.deadlocks(); n != 0 {
		t.Fatalf("%d put_pages inside a free callback", n)
	}
}

func TestModelEvictAndRetryOnBAR1(t *testing.T) {
	r := newRig(t)
	c, _ := r.gpuCache(Config{})
	r.run(func(p *sim.Proc) {
		a, err := r.ctx.MemAlloc(p, 8<<20)
		must(t, err)
		b, err := r.ctx.MemAlloc(p, 8<<20)
		must(t, err)
		free0 := r.barFree()
		ra, err := c.Get(p, uint64(a), 6<<20)
		must(t, err)
		must(t, c.Put(p, ra)) // unused, still holding 6 MiB of BAR1
		rb, err := c.Get(p, uint64(b), 6<<20)
		must(t, err) // 12 MiB do not fit in 11: a is evicted
		if s := c.Stats(); s.Evictions != 1 || s.Pinned != 1 {
			t.Fatalf("stats %+v", s)
		}
		if used := free0 - r.barFree(); used != 6<<20 {
			t.Fatalf("BAR1 used %d, want 6 MiB", used)
		}
		// b in use: nothing to evict, so ENOMEM comes back as ErrNoSpace
		// and pins nothing.
		if _, err := c.Get(p, uint64(a), 6<<20); !errors.Is(err, ErrNoSpace) {
			t.Fatalf("got %v, want ErrNoSpace", err)
		}
		if used := free0 - r.barFree(); used != 6<<20 {
			t.Fatalf("BAR1 used %d after a failed registration", used)
		}
		must(t, c.Put(p, rb))
	})
}

// noEvents hides the free callback from the cache, as if it missed the
// event: the buffer ID check alone must refuse the stale region.
type noEvents struct{ *GPUPinner }

func (n noEvents) Pin(ctx any, r Range, _ func(Range)) (any, error) {
	return n.GPUPinner.Pin(ctx, r, func(Range) {})
}

func TestModelStaleBufferIDNeverServed(t *testing.T) {
	r := newRig(t)
	_, g := r.gpuCache(Config{})
	c, err := New(noEvents{g}, Config{})
	must(t, err)
	r.run(func(p *sim.Proc) {
		buf, err := r.ctx.MemAlloc(p, 2<<20)
		must(t, err)
		old, err := c.Get(p, uint64(buf), 64<<10)
		must(t, err)
		must(t, c.Put(p, old))
		must(t, r.ctx.MemFree(p, buf))
		again, err := r.ctx.MemAlloc(p, 2<<20)
		must(t, err)
		if again != buf {
			t.Fatalf("re-allocation at %v, not %v: the test needs the same address", again, buf)
		}
		n, err := c.Get(p, uint64(buf), 64<<10)
		must(t, err)
		id, _ := r.ctx.PointerGetAttribute(cuda.PointerAttributeBufferID, buf)
		if n == old || n.BufferID != id || n.BufferID == old.BufferID {
			t.Fatalf("served buffer %d (old %d), allocation is %d", n.BufferID, old.BufferID, id)
		}
		if pt := n.Handle.(*nvp2p.PageTable); !pt.Live() {
			t.Fatal("the served pin is not live")
		}
		if s := c.Stats(); s.Stale != 1 {
			t.Fatalf("stats %+v", s)
		}
		must(t, c.Put(p, n))
		must(t, c.Flush(p))
	})
	if n := r.deadlocks(); n != 0 {
		t.Fatalf("%d put_pages inside a free callback", n)
	}
}

// 40,000 cycles of cuMemAlloc, a registration, cuMemFree: every one
// served the live buffer, every free callback invalidated, BAR1 back
// to where it was, nothing queued.
func TestModelChurn(t *testing.T) {
	r := newRig(t)
	c, _ := r.gpuCache(Config{MaxUnused: 4, MaxQueue: 8})
	r.run(func(p *sim.Proc) {
		free0 := r.barFree()
		for i := 0; i < 40000; i++ {
			buf, err := r.ctx.MemAlloc(p, 2<<20)
			must(t, err)
			reg, err := c.Get(p, uint64(buf)+uint64(i%4)<<16, 64<<10)
			must(t, err)
			id, _ := r.ctx.PointerGetAttribute(cuda.PointerAttributeBufferID, buf)
			if reg.BufferID != id {
				t.Fatalf("cycle %d: served buffer %d, allocation is %d", i, reg.BufferID, id)
			}
			must(t, c.Put(p, reg))
			must(t, r.ctx.MemFree(p, buf))
		}
		must(t, c.Flush(p))
		s := c.Stats()
		if s.Pinned != 0 || s.Queued != 0 || r.barFree() != free0 || s.Invalidations != 40000 {
			t.Fatalf("stats %+v, BAR1 free %d of %d", s, r.barFree(), free0)
		}
	})
	if n := r.deadlocks(); n != 0 {
		t.Fatalf("%d put_pages inside a free callback", n)
	}
}

func TestModelHostRegister(t *testing.T) {
	r := newRig(t)
	c, err := New(&HostPinner{Ctx: r.ctx}, Config{})
	must(t, err)
	r.run(func(p *sim.Proc) {
		va, err := r.app.Malloc(1 << 20)
		must(t, err)
		a, err := c.Get(p, uint64(va)+10, 100)
		must(t, err)
		if a.Range != (Range{uint64(va) &^ (mem.PageSize - 1), mem.PageSize}) {
			t.Fatalf("region %v", a.Range)
		}
		must(t, c.Put(p, a))
		b, err := c.Get(p, uint64(va)+mem.PageSize, 3*mem.PageSize) // adjacent: merged
		must(t, err)
		if b.Len != 4*mem.PageSize || b.Addr != a.Addr {
			t.Fatalf("merged region %v", b.Range)
		}
		// The merged-away registration is gone: registering it alone
		// now succeeds.
		if v, err := r.ctx.PointerGetAttribute(cuda.PointerAttributeMemoryType, mem.GPUAddr(va)); err != nil || v != cuda.MemoryTypeHost {
			t.Fatalf("the merged region is not registered: %v %v", v, err)
		}
		// The context is opaque to the cache, but the model needs its
		// thread.
		if _, err := c.Get("not a thread", uint64(va)+512<<10, 1); err == nil || !strings.Contains(err.Error(), "sim.Proc") {
			t.Fatalf("got %v", err)
		}
		must(t, c.Put(p, b))
		must(t, c.Flush(p))
		if err := r.ctx.MemHostUnregister(p, va); err == nil {
			t.Fatal("still registered after Flush")
		}
	})
}

// Several simulated threads of one process share the cache; pins sleep
// in virtual time, so they interleave inside Get. One thread frees and
// re-allocates its buffer meanwhile.
func TestModelThreadsShareCache(t *testing.T) {
	r := newRig(t)
	c, _ := r.gpuCache(Config{MaxUnused: 3})
	var shared mem.GPUAddr
	r.run(func(p *sim.Proc) {
		var err error
		shared, err = r.ctx.MemAlloc(p, 4<<20)
		must(t, err)
		free0 := r.barFree()
		var procs []*sim.Proc
		for w := 0; w < 4; w++ {
			w := w
			procs = append(procs, p.Spawn("worker", func(q *sim.Proc) {
				for i := 0; i < 50; i++ {
					off := uint64((i*7+w*3)%48) << 16
					reg, err := c.Get(q, uint64(shared)+off, uint64(1+i%3)<<16)
					if err != nil {
						t.Error(err)
						return
					}
					q.Sleep(sim.Microsecond)
					if err := c.Put(q, reg); err != nil {
						t.Error(err)
					}
				}
			}))
		}
		procs = append(procs, p.Spawn("churn", func(q *sim.Proc) {
			for i := 0; i < 50; i++ {
				b, err := r.ctx.MemAlloc(q, 2<<20)
				must(t, err)
				reg, err := c.Get(q, uint64(b), 64<<10)
				must(t, err)
				must(t, c.Put(q, reg))
				must(t, r.ctx.MemFree(q, b))
			}
		}))
		for _, w := range procs {
			p.Join(w)
		}
		must(t, c.Flush(p))
		if s := c.Stats(); s.Pinned != 0 || s.Pins != s.Unpins || r.barFree() != free0 || s.HitsFast == 0 {
			t.Fatalf("stats %+v, BAR1 free %d of %d", s, r.barFree(), free0)
		}
	})
	if n := r.deadlocks(); n != 0 {
		t.Fatalf("%d put_pages inside a free callback", n)
	}
}

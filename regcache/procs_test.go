package regcache

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Several simulated processes, two threads each, with a GPU cache and a
// host cache per process, allocate, register, release and free while
// the others do; pins sleep in virtual time, so the threads interleave
// inside Get. Process 0 exits with its regions cached. Every region
// served holds the live buffer, nothing is put inside a free callback,
// and BAR1 and the registrations come back. (CI runs it under -race.)
func TestModelProcesses(t *testing.T) {
	r := newRig(t)
	type app struct {
		pr     *cuda.Process
		ctx    *cuda.Context
		gc, hc *Cache
	}
	var apps []*app
	for i := 0; i < 3; i++ {
		pr := r.app
		if i > 0 {
			var err error
			pr, err = r.cu.NewProcess(fmt.Sprintf("app%d", i), 0)
			must(t, err)
		}
		ctx, err := pr.PrimaryContext(0)
		must(t, err)
		gc, err := New(&GPUPinner{P2P: r.p2p, Ctx: ctx, Caller: pr.KernelProcess()}, Config{MaxUnused: 4})
		must(t, err)
		hc, err := New(&HostPinner{Ctx: ctx}, Config{MaxUnused: 4})
		must(t, err)
		apps = append(apps, &app{pr, ctx, gc, hc})
	}
	thread := func(a *app, seed int64) func(q *sim.Proc) {
		return func(q *sim.Proc) {
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < 20; i++ {
				buf, err := a.ctx.MemAlloc(q, 2<<20)
				must(t, err)
				id, _ := a.ctx.PointerGetAttribute(cuda.PointerAttributeBufferID, buf)
				for k := 0; k < 3; k++ {
					g, err := a.gc.Get(q, uint64(buf)+uint64(rng.Intn(16))<<16, 64<<10)
					must(t, err)
					if g.BufferID != id {
						t.Errorf("%s: served buffer %d, the allocation is %d", q.Name(), g.BufferID, id)
					}
					q.Sleep(sim.Time(1+rng.Intn(3)) * sim.Microsecond)
					must(t, a.gc.Put(q, g))
				}
				must(t, a.ctx.MemFree(q, buf))

				// Below the huge-page size: the model's processes share
				// one address space, and its free(3) gives the pages
				// back at once (no page references), so another
				// process's malloc could land on a range this cache
				// has not unregistered yet; real processes' address
				// spaces are apart.
				va, err := a.pr.Malloc(256 << 10)
				must(t, err)
				h, err := a.hc.Get(q, uint64(va)+uint64(rng.Intn(3))<<16, 1+uint64(rng.Intn(3))*mem.PageSize)
				must(t, err)
				if !registered(a.ctx, mem.VirtAddr(h.Addr)) {
					t.Errorf("%s: region %v served but not registered", q.Name(), h.Range)
				}
				q.Sleep(sim.Microsecond)
				must(t, a.hc.Put(q, h))
				must(t, a.pr.FreePageable(va))
			}
		}
	}
	r.run(func(p *sim.Proc) {
		free0 := r.barFree()
		var mains []*sim.Proc
		for i, a := range apps {
			mains = append(mains, p.Spawn(a.pr.Name(), func(q *sim.Proc) {
				ws := []*sim.Proc{q.Spawn("t0", thread(a, int64(2*i))), q.Spawn("t1", thread(a, int64(2*i+1)))}
				for _, w := range ws {
					q.Join(w)
				}
				if i == 0 {
					// Exit with what the caches hold: the driver's
					// teardown revokes it, the caches unpin later.
					must(t, a.pr.KernelProcess().Exit(q))
				}
				must(t, a.gc.Flush(q))
				must(t, a.hc.Flush(q))
			}))
		}
		for _, m := range mains {
			p.Join(m)
		}
		for i, a := range apps {
			for _, c := range []*Cache{a.gc, a.hc} {
				if s := c.Stats(); s.Pinned != 0 || s.Pins != s.Unpins || s.Gets == 0 || s.Invalidations == 0 {
					t.Errorf("app %d: stats %+v", i, s)
				}
			}
		}
		if r.barFree() != free0 {
			t.Errorf("BAR1 free %d, want %d", r.barFree(), free0)
		}
	})
	r.putPagesAfterCallback()
}

// The hardware path: real goroutines share one cache over a Pinner
// that ignores its context (as the real cuMemHostRegister's does),
// while another goroutine plays the memory hook: it frees buffers and
// allocates them again at the same addresses (new buffer IDs) and
// invalidates their ranges, as a free callback on another thread
// would. No region of a buffer freed before the Get began is served
// (its buffer ID lies between those seen before and after the Get),
// and no pin is left.
func TestConcurrentFreeHook(t *testing.T) {
	f := newFake(4096)
	f.tr.BufferIDs = true
	var gen sync.Map // page -> generation (buffer ID)
	f.bid = func(addr uint64) uint64 {
		v, ok := gen.Load(addr >> 16)
		if !ok {
			return 1
		}
		return v.(uint64)
	}
	c := newCache(t, f, Config{MaxUnused: 8, MaxQueue: 4})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the memory hook
		defer wg.Done()
		rng := rand.New(rand.NewSource(99))
		for i := uint64(2); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			page := uint64(rng.Intn(16))
			gen.Store(page, i)
			c.Invalidate(Range{page << 16, 1 << 16})
		}
	}()
	var users sync.WaitGroup
	for g := 0; g < 6; g++ {
		users.Add(1)
		go func(seed int64) {
			defer users.Done()
			rng := rand.New(rand.NewSource(seed))
			for i := 0; i < 2000; i++ {
				addr := uint64(rng.Intn(16))<<16 + uint64(rng.Intn(8))*4096
				before := f.bid(addr)
				r, err := c.Get(nil, addr, 4096)
				if err != nil {
					if !errorsIsStale(err) {
						t.Error(err)
					}
					continue
				}
				after := f.bid(addr)
				// Generations only grow: a region pinned before
				// the Get began is of a buffer freed since.
				if r.BufferID < before || r.BufferID > after {
					t.Errorf("served buffer %d at %#x, the memory was %d then %d", r.BufferID, addr, before, after)
				}
				if err := c.Put(nil, r); err != nil {
					t.Error(err)
				}
			}
		}(int64(g))
	}
	users.Wait()
	close(stop)
	wg.Wait()
	if err := c.Flush(nil); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); f.liveCount() != 0 || s.Pinned != 0 || s.Pins != s.Unpins || s.Invalidations == 0 {
		t.Fatalf("live %d, stats %+v", f.liveCount(), s)
	}
}

func errorsIsStale(err error) bool { return errors.Is(err, ErrStale) }

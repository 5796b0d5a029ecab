package regcache_test

import (
	"fmt"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/regcache"
	"github.com/dmalab/dmalab/sim"
)

// A communication library registers a GPU buffer through the cache for
// each send: the first registration pins through nvidia_p2p, the next
// ones are hits that cost nothing. cuMemFree runs the free callback,
// which invalidates the region; a new allocation at the same address
// is pinned afresh, never served from the old pin.
func Example() {
	spec, _ := platform.Preset("h200-pcie")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	cu, _ := cuda.New(sys)
	p2p, _ := nvp2p.New(cu, x)
	app, _ := cu.NewProcess("app", 0)
	ctx, _ := app.PrimaryContext(0)
	cache, _ := regcache.New(&regcache.GPUPinner{P2P: p2p, Ctx: ctx, Caller: app.KernelProcess()}, regcache.Config{})
	m.Engine.Spawn("app", func(p *sim.Proc) {
		buf, _ := ctx.MemAlloc(p, 2<<20)
		for i := 0; i < 3; i++ {
			t0 := p.Now()
			r, err := cache.Get(p, uint64(buf), 1<<20)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("send %d: region %v, registration took %v\n", i, r.Range, p.Now()-t0)
			cache.Put(p, r)
		}
		ctx.MemFree(p, buf)
		buf, _ = ctx.MemAlloc(p, 2<<20)
		r, _ := cache.Get(p, uint64(buf), 1<<20)
		cache.Put(p, r)
		s := cache.Stats()
		fmt.Printf("hits %d, misses %d, invalidations %d, pins %d, unpins %d\n",
			s.HitsFast+s.HitsSlow, s.Misses, s.Invalidations, s.Pins, s.Unpins)
	})
	m.Engine.Run()
	// Output:
	// send 0: region [0x1000000000, 0x1000100000), registration took 21us
	// send 1: region [0x1000000000, 0x1000100000), registration took 0s
	// send 2: region [0x1000000000, 0x1000100000), registration took 0s
	// hits 2, misses 2, invalidations 1, pins 2, unpins 1
}

// Host memory registered through the cache and then freed by the
// program: the process's unmap event invalidates the region, and the
// next Get, on memory malloc handed back at the same address,
// unregisters the old range and registers the new memory.
func ExampleHostPinner() {
	spec, _ := platform.Preset("h200-pcie")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	cu, _ := cuda.New(sys)
	app, _ := cu.NewProcess("app", 0)
	ctx, _ := app.PrimaryContext(0)
	cache, _ := regcache.New(&regcache.HostPinner{Ctx: ctx}, regcache.Config{})
	m.Engine.Spawn("app", func(p *sim.Proc) {
		va, _ := app.Malloc(cuda.HugePage)
		r, _ := cache.Get(p, uint64(va), 64<<10)
		cache.Put(p, r)
		app.FreePageable(va)
		s := cache.Stats()
		fmt.Printf("after free: invalidations %d, served %d, still pinned %d\n", s.Invalidations, s.Regions, s.Pinned)
		again, _ := app.Malloc(cuda.HugePage)
		r, err := cache.Get(p, uint64(again), 64<<10)
		if err != nil {
			fmt.Println(err)
			return
		}
		cache.Put(p, r)
		s = cache.Stats()
		fmt.Printf("same address %v: misses %d, pins %d, unpins %d\n", again == va, s.Misses, s.Pins, s.Unpins)
	})
	m.Engine.Run()
	// Output:
	// after free: invalidations 1, served 0, still pinned 1
	// same address true: misses 2, pins 2, unpins 1
}

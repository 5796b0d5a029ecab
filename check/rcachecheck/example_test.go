package rcachecheck_test

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/rcachecheck"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/regcache"
	"github.com/dmalab/dmalab/sim"
)

// A Pinner over real hardware: the pack is told of the free, and a
// pin nothing invalidated is reported when the run ends.
func ExampleAttach() {
	chk := check.New(check.Options{})
	x, w := rcachecheck.Attach(chk, &fake{bids: map[uint64]uint64{0x10000: 1}})
	c, _ := regcache.New(w, regcache.Config{})
	r, _ := c.Get(nil, 0x10000, 0x1000)
	x.Got(nil, r)
	x.Put(r)
	_ = c.Put(nil, r)
	x.Freed(nil, regcache.Range{Addr: 0x10000, Len: 0x1000}, "munmap")
	chk.Finish(0)
	fmt.Println(chk.Count(rcachecheck.FreedPinned))
	// Output: 1
}

// In the model the pack hears the free itself: a transfer through a
// region whose host memory the program freed (the cache invalidated
// it, but the transfer still held it) is a stale region, with the
// free and the registration as provenance.
func ExampleAttach_model() {
	spec, _ := platform.Preset("h200-pcie")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	dx, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(dx)
	cu, _ := cuda.New(sys)
	app, _ := cu.NewProcess("app", 0)
	ctx, _ := app.PrimaryContext(0)
	chk := check.New(check.Options{})
	x, w := rcachecheck.Attach(chk, &regcache.HostPinner{Ctx: ctx})
	cache, _ := regcache.New(w, regcache.Config{})
	m.Engine.Spawn("sender", func(p *sim.Proc) {
		va, _ := app.Malloc(1 << 20)
		r, _ := cache.Get(p, uint64(va), 64<<10)
		x.Got(p, r)
		app.FreePageable(va)
		x.Used(p, r)
		x.Put(r)
		cache.Put(p, r)
	})
	m.Engine.Run()
	chk.Finish(m.Engine.Now())
	for _, d := range chk.Diagnostics() {
		fmt.Println(d.Class, d.Proc)
		fmt.Println(d.Message)
		fmt.Println(d.Origin)
	}
	// Output:
	// regcache-stale-region sender
	// region used after its memory [0xffffc90000000000, 0xffffc90000100000) went: munmap(va:0xffffc90000000000, 0x100000) of anon at 104.736us by app
	// cuMemHostRegister(0xffffc90000000000, 65536) at 0s by sender
}

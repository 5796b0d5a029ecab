package rcachecheck_test

import (
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/rcachecheck"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/regcache"
	"github.com/dmalab/dmalab/sim"
)

// world is h200-pcie with CUDA, nvidia_p2p, a process "app" with a
// context on GPU 0, and a cache under the pack over a GPU or a host
// Pinner.
type world struct {
	t   *testing.T
	m   *machine.Machine
	p2p *nvp2p.Driver
	app *cuda.Process
	ctx *cuda.Context
	chk *check.Checker
	x   *rcachecheck.Pack
	w   regcache.Pinner
	c   *regcache.Cache
}

func newWorld(t *testing.T, host bool) *world {
	t.Helper()
	spec, err := platform.Preset("h200-pcie")
	must(t, err)
	m, err := machine.New(spec, 1)
	must(t, err)
	t.Cleanup(m.Close)
	dx, err := dma.New(m, m.Mem)
	must(t, err)
	sys, err := gpu.New(dx)
	must(t, err)
	cu, err := cuda.New(sys)
	must(t, err)
	wd := &world{t: t, m: m, chk: check.New(check.Options{})}
	wd.p2p, err = nvp2p.New(cu, dx)
	must(t, err)
	wd.app, err = cu.NewProcess("app", 0)
	must(t, err)
	wd.ctx, err = wd.app.PrimaryContext(0)
	must(t, err)
	var p regcache.Pinner = &regcache.GPUPinner{P2P: wd.p2p, Ctx: wd.ctx, Caller: wd.app.KernelProcess()}
	if host {
		p = &regcache.HostPinner{Ctx: wd.ctx}
	}
	wd.x, wd.w = rcachecheck.Attach(wd.chk, p)
	wd.c, err = regcache.New(wd.w, regcache.Config{})
	must(t, err)
	return wd
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// get is a Get told to the pack.
func (wd *world) get(p *sim.Proc, addr, n uint64) *regcache.Region {
	wd.t.Helper()
	r, err := wd.c.Get(p, addr, n)
	must(wd.t, err)
	wd.x.Got(p, r)
	return r
}

func (wd *world) put(p *sim.Proc, r *regcache.Region) {
	wd.t.Helper()
	wd.x.Put(r)
	must(wd.t, wd.c.Put(p, r))
}

// The pack hears the frees itself (cuMemFree, nvidia_p2p's free
// callback, free(3)/munmap, cuMemHostUnregister, exit): misuse is
// reported with the thread, the region, the buffer and the pin's call
// as origin; correct programs are silent.
func TestFreesFromTheModel(t *testing.T) {
	tests := []struct {
		name string
		host bool
		run  func(t *testing.T, wd *world, p *sim.Proc)
		want map[string]int
		// msg is in every diagnostic's message.
		msg string
	}{
		{"gpu: use after cuMemFree", false, func(t *testing.T, wd *world, p *sim.Proc) {
			buf, err := wd.ctx.MemAlloc(p, 2<<20)
			must(t, err)
			r := wd.get(p, uint64(buf), 64<<10)
			must(t, wd.ctx.MemFree(p, buf))
			wd.x.Used(p, r) // a transfer through the region after the free
			wd.put(p, r)
		}, map[string]int{rcachecheck.StaleRegion: 1}, "cuMemFree"},
		{"gpu: a buggy cache serves the old region", false, func(t *testing.T, wd *world, p *sim.Proc) {
			buf, err := wd.ctx.MemAlloc(p, 2<<20)
			must(t, err)
			old := wd.get(p, uint64(buf), 64<<10)
			wd.put(p, old)
			must(t, wd.ctx.MemFree(p, buf))
			_, err = wd.ctx.MemAlloc(p, 2<<20)
			must(t, err)
			wd.x.Got(p, old) // what a cache without invalidation would serve
		}, map[string]int{rcachecheck.StaleRegion: 1}, "buffer"},
		{"gpu: free, allocate again, Get", false, func(t *testing.T, wd *world, p *sim.Proc) {
			buf, err := wd.ctx.MemAlloc(p, 2<<20)
			must(t, err)
			wd.put(p, wd.get(p, uint64(buf), 64<<10))
			must(t, wd.ctx.MemFree(p, buf))
			buf, err = wd.ctx.MemAlloc(p, 2<<20)
			must(t, err)
			r := wd.get(p, uint64(buf), 64<<10)
			wd.x.Used(p, r)
			wd.put(p, r)
			must(t, wd.c.Flush(p))
		}, nil, ""},
		{"gpu: exit with regions cached", false, func(t *testing.T, wd *world, p *sim.Proc) {
			buf, err := wd.ctx.MemAlloc(p, 2<<20)
			must(t, err)
			wd.put(p, wd.get(p, uint64(buf), 64<<10))
			must(t, wd.app.KernelProcess().Exit(p))
		}, nil, ""},
		{"host: free(3) under a pin never unpinned", true, func(t *testing.T, wd *world, p *sim.Proc) {
			va, err := wd.app.Malloc(1 << 20)
			must(t, err)
			wd.put(p, wd.get(p, uint64(va), 64<<10))
			must(t, wd.app.FreePageable(va)) // invalidated; nothing unpins it after
		}, map[string]int{rcachecheck.FreedPinned: 1}, "munmap"},
		{"host: free(3), then the cache's next operation", true, func(t *testing.T, wd *world, p *sim.Proc) {
			va, err := wd.app.Malloc(1 << 20)
			must(t, err)
			other, err := wd.app.Malloc(1 << 20)
			must(t, err)
			wd.put(p, wd.get(p, uint64(va), 64<<10))
			must(t, wd.app.FreePageable(va))
			wd.put(p, wd.get(p, uint64(other), 64<<10)) // unpins the invalidated region
			must(t, wd.c.Flush(p))
		}, nil, ""},
		{"host: use after free(3)", true, func(t *testing.T, wd *world, p *sim.Proc) {
			va, err := wd.app.Malloc(1 << 20)
			must(t, err)
			r := wd.get(p, uint64(va), 64<<10)
			must(t, wd.app.FreePageable(va))
			wd.x.Used(p, r)
			wd.put(p, r) // the last release unpins it
		}, map[string]int{rcachecheck.StaleRegion: 1}, "munmap"},
		{"host: use after cuMemHostUnregister behind the cache", true, func(t *testing.T, wd *world, p *sim.Proc) {
			va, err := wd.app.Malloc(1 << 20)
			must(t, err)
			r := wd.get(p, uint64(va), 64<<10)
			must(t, wd.ctx.MemHostUnregister(p, mem.VirtAddr(r.Addr)))
			wd.x.Used(p, r)
			wd.put(p, r)
		}, map[string]int{rcachecheck.StaleRegion: 1}, "cuMemHostUnregister"},
		{"host: exit with regions cached and held", true, func(t *testing.T, wd *world, p *sim.Proc) {
			va, err := wd.app.Malloc(1 << 20)
			must(t, err)
			wd.put(p, wd.get(p, uint64(va), 64<<10))
			r := wd.get(p, uint64(va)+512<<10, 64<<10)
			must(t, wd.app.KernelProcess().Exit(p))
			wd.put(p, r)
		}, nil, ""},
		{"host: unpin in use", true, func(t *testing.T, wd *world, p *sim.Proc) {
			va, err := wd.app.Malloc(1 << 20)
			must(t, err)
			r := wd.get(p, uint64(va), 64<<10)
			must(t, wd.w.Unpin(p, r.Range, r.Handle)) // behind the cache
		}, map[string]int{rcachecheck.UnpinInUse: 1}, "1 Get"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd := newWorld(t, tt.host)
			wd.m.Engine.Spawn("app-main", func(p *sim.Proc) { tt.run(t, wd, p) })
			wd.m.Engine.Run()
			wd.chk.Finish(wd.m.Engine.Now())
			for _, code := range []string{rcachecheck.StaleRegion, rcachecheck.UnpinInUse, rcachecheck.FreedPinned} {
				if got := wd.chk.Count(code); got != tt.want[code] {
					t.Errorf("%s: %d, want %d (%v)", code, got, tt.want[code], wd.chk.Diagnostics())
				}
			}
			pinCall := "nvidia_p2p_get_pages("
			if tt.host {
				pinCall = "cuMemHostRegister("
			}
			for _, d := range wd.chk.Diagnostics() {
				if d.Proc == "" || !strings.HasPrefix(d.Buffer, "va:0x") || !strings.HasPrefix(d.Origin, pinCall) ||
					!strings.Contains(d.Origin, " by app-main") || !strings.Contains(d.Message, tt.msg) {
					t.Errorf("provenance missing: %+v", d)
				}
			}
		})
	}
}

package gpudirect_test

import (
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/gpudirect"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a machine with the DMA layer, GPUs, CUDA, nvidia_p2p and a
// checker with the gpudirect pack; a process "app" with a context on
// GPU 0 and a process "other".
type rig struct {
	t     *testing.T
	m     *machine.Machine
	x     *dma.DMA
	cu    *cuda.Driver
	p2p   *nvp2p.Driver
	chk   *check.Checker
	app   *cuda.Process
	other *cuda.Process
	ctx   *cuda.Context
}

func newRig(t *testing.T, preset string, edit func(*platform.Spec)) *rig {
	t.Helper()
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(spec)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: true})
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
	cu, err := cuda.New(sys)
	if err != nil {
		t.Fatal(err)
	}
	p2p, err := nvp2p.New(cu, x)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, x: x, cu: cu, p2p: p2p, chk: check.New(check.Options{})}
	pack := gpudirect.Attach(r.chk, p2p)
	pack.WatchDMA(x)
	pack.WatchCUDA(cu)
	pack.WatchMemory(m.Mem)
	pack.WatchKernel(cu.Kernel())
	if r.app, err = cu.NewProcess("app", 0); err != nil {
		t.Fatal(err)
	}
	if r.other, err = cu.NewProcess("other", 0); err != nil {
		t.Fatal(err)
	}
	if r.ctx, err = r.app.PrimaryContext(0); err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs body in a thread "main" to the end, then ends the checker's
// run; a thread still blocked then is the test's failure unless
// blocked says it may be.
func (r *rig) run(blocked bool, body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("main", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 && !blocked {
		r.t.Fatalf("blocked at the end: %v", b)
	}
	r.chk.Finish(r.m.Engine.Now())
}

func (r *rig) alloc(p *sim.Proc, size uint64) mem.GPUAddr {
	r.t.Helper()
	a, err := r.ctx.MemAlloc(p, size)
	if err != nil {
		r.t.Fatal(err)
	}
	return a
}

func (r *rig) dev(name string) *dma.Device {
	r.t.Helper()
	d, err := r.x.Device(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

func (r *rig) mdev(name string) *machine.Device {
	for _, d := range r.m.Devices {
		if d.Name == name {
			return d
		}
	}
	r.t.Fatalf("no device %s", name)
	return nil
}

// pin pins n bytes at a for the app with a callback that frees the
// table, and maps them for nic0.
func (r *rig) pin(p *sim.Proc, a mem.GPUAddr, n uint64) (*nvp2p.PageTable, *nvp2p.DMAMapping) {
	r.t.Helper()
	var pt *nvp2p.PageTable
	pt, err := r.p2p.GetPages(p, r.app.KernelProcess(), 0, 0, a, n, func(t *sim.Proc, _ any) {
		_ = r.p2p.FreePageTable(t, pt)
	}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	m, err := r.p2p.DMAMapPages(p, r.dev("nic0"), pt)
	if err != nil {
		r.t.Fatal(err)
	}
	return pt, m
}

// unpin releases a pin as a third-party driver should.
func (r *rig) unpin(p *sim.Proc, pt *nvp2p.PageTable, m *nvp2p.DMAMapping) {
	r.t.Helper()
	if err := r.p2p.DMAUnmapPages(p, r.dev("nic0"), pt, m); err != nil {
		r.t.Fatal(err)
	}
	if err := r.p2p.PutPages(p, 0, 0, pt.Addr(), pt); err != nil {
		r.t.Fatal(err)
	}
}

// peer has nic0 read (data nil) or write n bytes at bus address a.
func (r *rig) peer(p *sim.Proc, a mem.DMAAddr, n uint64, write bool) dma.TransferInfo {
	r.t.Helper()
	md := r.mdev("nic0")
	host, _ := r.m.HostMemory(0)
	t := &dma.Transfer{Name: "nic0 p2p", Master: md.DMA(), Bytes: int64(n)}
	if write {
		t.Src, t.Dst, t.Write, t.Data = md.Side(), host, []dma.Span{dma.BusSpan(a, n)}, make([]byte, n)
	} else {
		t.Src, t.Dst, t.Read = host, md.Side(), []dma.Span{dma.BusSpan(a, n)}
	}
	info, err := r.dev("nic0").Transfer(p, t)
	if err != nil {
		r.t.Fatal(err)
	}
	return info
}

// counts are the checker's counts of the pack's classes, zeros left
// out.
func (r *rig) counts() map[string]int {
	out := map[string]int{}
	for _, c := range gpudirect.Classes() {
		if n := r.chk.Count(c.Code); n > 0 {
			out[c.Code] = n
		}
	}
	return out
}

package gdr

import (
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

// rig is a machine with the CUDA driver, nvidia_p2p and gdrdrv; a
// process "app" with a context on GPU 0 and a process "other"; every gdr
// event recorded.
type rig struct {
	t     *testing.T
	m     *machine.Machine
	cu    *cuda.Driver
	p2p   *nvp2p.Driver
	gdr   *Driver
	app   *cuda.Process
	other *cuda.Process
	ctx   *cuda.Context
	ev    []Event
}

func newRig(t *testing.T, preset string, payload bool, edit func(*platform.Spec)) *rig {
	t.Helper()
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(spec)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: payload})
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
	g, err := New(cu, p2p)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, cu: cu, p2p: p2p, gdr: g}
	g.Hooks.Hook(func(e *Event) { r.ev = append(r.ev, *e) })
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

func (r *rig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("main", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked at the end: %v", b)
	}
}

func (r *rig) alloc(p *sim.Proc, size uint64) mem.GPUAddr {
	r.t.Helper()
	a, err := r.ctx.MemAlloc(p, size)
	if err != nil {
		r.t.Fatal(err)
	}
	return a
}

// mapped opens gdrdrv in app, pins size bytes at a and maps them.
func (r *rig) mapped(p *sim.Proc, a mem.GPUAddr, size uint64) (*Handle, *MemHandle, *Mapping) {
	r.t.Helper()
	h, err := r.gdr.Open(p, r.app.KernelProcess())
	if err != nil {
		r.t.Fatal(err)
	}
	mh, err := h.PinBuffer(p, a, size, 0, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	mp, err := h.Map(p, mh, size)
	if err != nil {
		r.t.Fatal(err)
	}
	return h, mh, mp
}

// timed is how long fn takes in virtual time.
func timed(p *sim.Proc, fn func() error) (sim.Time, error) {
	s := p.Now()
	err := fn()
	return p.Now() - s, err
}

// near says got is within frac of want.
func near(got, want sim.Time, frac float64) bool {
	d := float64(got - want)
	if d < 0 {
		d = -d
	}
	return d <= frac*float64(want)
}

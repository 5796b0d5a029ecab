package nvp2p

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a machine with the DMA layer, GPUs, the CUDA driver and the
// nvidia_p2p interface; a process "app" with a context on GPU 0 and a
// process "other"; every nvp2p event recorded.
type rig struct {
	t     *testing.T
	m     *machine.Machine
	x     *dma.DMA
	cu    *cuda.Driver
	p2p   *Driver
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
	p2p, err := New(cu, x)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, x: x, cu: cu, p2p: p2p}
	p2p.Hooks.Hook(func(e *Event) { r.ev = append(r.ev, *e) })
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

// ops are the recorded events of op.
func (r *rig) ops(op Op) []Event {
	var out []Event
	for _, e := range r.ev {
		if e.Op == op {
			out = append(out, e)
		}
	}
	return out
}

// noop is a free callback that does what it must: free the table.
func (r *rig) freeing(pt **PageTable, calls *int) FreeCallback {
	return func(t *sim.Proc, _ any) {
		*calls++
		if err := r.p2p.FreePageTable(t, *pt); err != nil {
			r.t.Error(err)
		}
	}
}

func nop(*sim.Proc, any) {}

func isErrno(err error, e syscall.Errno) bool { return errors.Is(err, e) }

package gpu

import (
	"errors"
	"github.com/dmalab/dmalab/dma"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a machine with its GPU model, recording every Activity.
type rig struct {
	t   testing.TB
	m   *machine.Machine
	sys *System
	d   *Device // GPU 0
	log []Activity
}

func newRig(t testing.TB, spec *platform.Spec, payload bool) *rig {
	t.Helper()
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := New(x)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, sys: sys, d: sys.Devices[0]}
	sys.Hooks.Hook(func(a *Activity) { r.log = append(r.log, *a) })
	return r
}

func preset(t testing.TB, name string) *platform.Spec {
	t.Helper()
	spec, err := platform.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func h200(t testing.TB) *rig { return newRig(t, preset(t, "h200-pcie"), false) }

// run runs body as the host process "app" to the end of the simulation
// and fails if anything is left blocked (a stream worker included).
func (r *rig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("app", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked at the end: %v", b)
	}
}

// hostBuf allocates size bytes of DRAM on node 0 and registers them as
// pinned host memory with flags.
func (r *rig) hostBuf(size uint64, flags HostFlags) mem.GPUAddr {
	r.t.Helper()
	pa, err := r.m.Mem.AllocPages(0, size, mem.ZoneNormal)
	if err != nil {
		r.t.Fatal(err)
	}
	a, err := r.sys.RegisterHost(nil, r.m.Mem.PhysToVirt(pa), size, flags)
	if err != nil {
		r.t.Fatal(err)
	}
	return a.Addr
}

func (r *rig) alloc(p *sim.Proc, d *Device, size uint64) mem.GPUAddr {
	r.t.Helper()
	a, err := d.Alloc(p, size)
	if err != nil {
		r.t.Fatal(err)
	}
	return a.Addr
}

// find is the first activity called name.
func (r *rig) find(name string) Activity {
	r.t.Helper()
	for _, a := range r.log {
		if a.Name == name {
			return a
		}
	}
	r.t.Fatalf("no activity %q in %v", name, r.log)
	return Activity{}
}

// rate is what a lone flow over route gets: the tightest hop.
func rate(route fabric.Route) float64 {
	best := 0.0
	for _, h := range route.Hops {
		w := h.Weight
		if w == 0 {
			w = 1
		}
		if c := h.Link.Effective() / w; best == 0 || c < best {
			best = c
		}
	}
	return best
}

// copyTime is a lone copy's time in a stream: the overhead, the route's
// latency, the bytes at the route's rate.
// latency is the route's latency from src to dst.
func latency(t testing.TB, m *machine.Machine, src, dst machine.Endpoint) sim.Time {
	t.Helper()
	route, err := m.Route(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return route.Latency()
}

func copyTime(t testing.TB, m *machine.Machine, src, dst machine.Endpoint, bytes int64) sim.Time {
	t.Helper()
	route, err := m.Route(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return CopyStreamOverhead + route.Latency() + readLead(m, src, dst, route) + sim.TransferTime(float64(bytes), rate(route))
}

// readLead is the request's way out that a copy engine's read waits
// before its data starts back (machine.ReadLimit); 0 for a write.
func readLead(m *machine.Machine, src, dst machine.Endpoint, route fabric.Route) sim.Time {
	for _, g := range m.GPUs {
		if g.Memory() == dst && src != dst {
			lead, _ := m.ReadLimit(route, g.CE())
			return lead
		}
	}
	return 0
}

// smLead is the same for a kernel's loads over route r.
func smLead(d *Device, r fabric.Route) sim.Time {
	lead, _ := d.sys.m.ReadLimit(r, d.GPU.SMs())
	return lead
}

func mustErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("error %v, want %v", err, want)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// spin is a kernel that only occupies its stream for d (its launch
// latency), touching nothing: the spin kernel nvbandwidth queues copies
// behind.
func spin(name string, d sim.Time) Kernel { return Kernel{Name: name, Launch: d} }

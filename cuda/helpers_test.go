package cuda

import (
	"errors"
	"github.com/dmalab/dmalab/dma"
	"math"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a machine with its GPU model and the driver, a process "app"
// on node 0 and its primary context on GPU 0, recording every
// Observation and every machine transfer.
type rig struct {
	t   testing.TB
	m   *machine.Machine
	d   *Driver
	pr  *Process
	ctx *Context
	obs []Observation
	tr  []dma.TransferInfo
}

type rigOpt struct {
	payload bool
	edit    func(*platform.Spec)
}

func newRig(t testing.TB, preset string, opt rigOpt) *rig {
	t.Helper()
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	if opt.edit != nil {
		opt.edit(spec)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: opt.payload})
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
	d, err := New(sys)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, d: d}
	d.Hooks.Hook(func(o *Observation) { r.obs = append(r.obs, *o) })
	x.Hooks.Hook(func(e *dma.Event) {
		if e.Op == dma.OpTransfer && e.Transfer.Engine != "" {
			r.tr = append(r.tr, *e.Transfer)
		}
	})
	if r.pr, err = d.NewProcess("app", 0); err != nil {
		t.Fatal(err)
	}
	if r.ctx, err = r.pr.PrimaryContext(0); err != nil {
		t.Fatal(err)
	}
	return r
}

func h200(t testing.TB) *rig { return newRig(t, "h200-pcie", rigOpt{}) }

// arch is an edit that makes every GPU of the platform of generation a.
func arch(a string) func(*platform.Spec) {
	return func(s *platform.Spec) {
		for i := range s.GPUs {
			s.GPUs[i].Arch = a
		}
	}
}

// run runs body as the thread "main" to the end of the simulation and
// fails if anything is left blocked.
func (r *rig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("main", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked at the end: %v", b)
	}
}

// timed is how long f takes p.
func timed(p *sim.Proc, f func()) sim.Time {
	t0 := p.Now()
	f()
	return p.Now() - t0
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantResult fails unless err carries r (and, for a failure, says what
// the model's cause was in the log).
func wantResult(t testing.TB, err error, r Result) {
	t.Helper()
	if got := ResultOf(err); got != r {
		t.Errorf("result %v (%v), want %v", got, err, r)
	}
	if r != Success && !errors.Is(err, r) {
		t.Errorf("errors.Is(%v, %v) is false", err, r)
	}
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

// copyTime is a lone synchronous copy's time: the overhead, the route's
// latency, the bytes at the route's rate (machine.Copy).
func (r *rig) copyTime(src, dst machine.Endpoint, bytes int64) sim.Time {
	r.t.Helper()
	route, err := r.m.Route(src, dst)
	if err != nil {
		r.t.Fatal(err)
	}
	// A copy into the GPU reads: its request's way out comes first.
	var lead sim.Time
	if g := r.m.GPUs[0]; r.m.Reads(dst, g.CE()) {
		lead, _ = r.m.ReadLimit(route, g.CE())
	}
	return r.m.GPUs[0].Spec.CopyOverhead.V + route.Latency() + lead + sim.TransferTime(float64(bytes), rate(route))
}

func (r *rig) host() machine.Endpoint {
	h, err := r.m.HostMemory(0)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func gbps(bytes uint64, t sim.Time) float64 { return float64(bytes) / t.Seconds() / 1e9 }

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

// ops are the observations of one op.
func (r *rig) ops(op Op) []Observation {
	var out []Observation
	for _, o := range r.obs {
		if o.Op == op {
			out = append(out, o)
		}
	}
	return out
}

// kernel reads (or writes) size bytes at addr.
func kernel(name string, addr mem.GPUAddr, size uint64, write bool) gpu.Kernel {
	return gpu.Kernel{Name: name, Accesses: []gpu.Access{{Addr: addr, Size: size, Write: write}}}
}

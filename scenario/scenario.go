package scenario

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/check/gpumem"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

// Scenario is a built-in program run on a machine: it declares its
// parameters and fills a report.
type Scenario struct {
	Name    string
	Summary string
	// Doc is the longer description shown by "dmalab run NAME --help".
	Doc string
	// Platform is the preset used when none is given.
	Platform string
	Params   []Param
	// Run executes the scenario on c.Machine, appending to c.Result.
	Run func(c *Context) error
}

// Param is one scenario parameter, set with --set name=value.
type Param struct {
	Name    string
	Default string
	Help    string
	// Check validates a value; nil accepts any.
	Check func(string) error
}

// Context is what a running scenario sees.
type Context struct {
	Machine *machine.Machine
	// DMA is the machine's DMA API layer (dma-direct and swiotlb).
	DMA *dma.DMA
	// Checker collects the diagnostics when the run checks (dmalab
	// check); nil otherwise. The DMA-API pack is attached to the DMA
	// layer and the memory, the GPU-memory pack to the CUDA driver.
	Checker *check.Checker
	// Params holds every parameter's value, defaults filled in.
	Params map[string]string
	// Explicit holds the parameters the user set.
	Explicit map[string]bool
	Result   *report.Result
	Trace    *report.Trace

	cuda     *cuda.Driver
	dmaDebug *dmadebug.Pack
	progress io.Writer
}

// Progressf reports a step of the run to Options.Progress, if any, on one
// line that the next step overwrites.
func (c *Context) Progressf(format string, a ...any) {
	if c.progress == nil {
		return
	}
	fmt.Fprintf(c.progress, "\r\033[K"+format, a...)
}

// noGPU explains a GPU index the platform does not have: it has none at
// all (the scenario needs one), or fewer than the --set gpu asked for.
func (c *Context) noGPU(i int) error {
	if len(c.Machine.GPUs) == 0 {
		return usagef("platform %s has no GPU; this scenario needs one", c.Machine.Spec.Name)
	}
	return usagef("--set gpu=%d: platform %s has %d GPU(s); there is no GPU %d", i, c.Machine.Spec.Name, len(c.Machine.GPUs), i)
}

// progressDone clears the progress line.
func (c *Context) progressDone() {
	if c.progress != nil {
		fmt.Fprint(c.progress, "\r\033[K")
	}
}

// CUDA is the machine's CUDA driver (the façade over the GPU and
// unified-memory models), built on first use, with the checker attached
// when the run checks. A platform whose GPUs the façade cannot drive is
// bad input for the scenario.
func (c *Context) CUDA() (*cuda.Driver, error) {
	if c.cuda != nil {
		return c.cuda, nil
	}
	sys, err := gpu.New(c.DMA)
	if err != nil {
		return nil, usagef("platform %s: %v", c.Machine.Spec.Name, err)
	}
	d, err := cuda.New(sys, cuda.WithKernel(kernel.New(c.Machine.Engine, c.Machine.Mem.Nodes())))
	if err != nil {
		return nil, usagef("platform %s: %v", c.Machine.Spec.Name, err)
	}
	if c.Checker != nil {
		gpumem.Attach(c.Checker, d)
	}
	c.cuda = d
	return d, nil
}

// ErrUsage is wrapped by errors caused by bad input (unknown scenario,
// parameter or platform, a bad value): the CLI exits 2 on them.
var ErrUsage = errors.New("usage")

func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// UsageMessage strips the ErrUsage marker from an error's text.
func UsageMessage(err error) string {
	return strings.TrimPrefix(err.Error(), ErrUsage.Error()+": ")
}

var catalogue []*Scenario

func register(s *Scenario) { catalogue = append(catalogue, s) }

// Default is the scenario "dmalab run" runs without a name.
const Default = "host-memory"

// All lists the scenarios by name.
func All() []*Scenario {
	out := slices.Clone(catalogue)
	slices.SortFunc(out, func(a, b *Scenario) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup finds a scenario by name.
func Lookup(name string) (*Scenario, error) {
	for _, s := range catalogue {
		if s.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range All() {
		names = append(names, s.Name)
	}
	return nil, usagef("unknown scenario %q (scenarios: %s)", name, strings.Join(names, ", "))
}

// Options are what a run takes besides the scenario.
type Options struct {
	// Platform is a preset name or a YAML file; empty means the
	// scenario's default.
	Platform string
	// Sets are "key=value" assignments: a scenario parameter, "seed", or
	// "platform.<path>" to change one platform field.
	Sets []string
	// Trace, when true, collects a trace of links and engines.
	Trace bool
	// Check attaches the checker (dmalab check).
	Check bool
	// Payload keeps real bytes in memory (mem.Options.Payload).
	Payload bool
	// Progress, when set, receives a line per step of long scenarios
	// (the CLI passes stderr when it is a terminal).
	Progress io.Writer
}

// Outcome is what a run produced.
type Outcome struct {
	Result *report.Result
	// Trace is nil unless Options.Trace.
	Trace *report.Trace
	// Check is nil unless Options.Check.
	Check *check.Report
}

// Run resolves the platform and parameters, builds the machine, runs the
// scenario and returns its outcome.
func Run(s *Scenario, opt Options) (*Outcome, error) {
	platName := opt.Platform
	if platName == "" {
		platName = s.Platform
	}
	spec, err := platform.Resolve(platName)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	params := map[string]string{"seed": "1"}
	for _, p := range s.Params {
		params[p.Name] = p.Default
	}
	explicit := map[string]bool{}
	for _, kv := range opt.Sets {
		key, value, ok := strings.Cut(kv, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, usagef("--set %q: want key=value", kv)
		}
		switch {
		case strings.HasPrefix(key, "platform."):
			spec, err = platform.Set(spec, strings.TrimPrefix(key, "platform."), value)
			if err != nil {
				return nil, usagef("--set %s: %v", key, err)
			}
		case key == "seed":
			if _, err := strconv.ParseUint(value, 10, 64); err != nil {
				return nil, usagef("--set seed=%q: want a non-negative integer", value)
			}
		default:
			i := slices.IndexFunc(s.Params, func(p Param) bool { return p.Name == key })
			if i < 0 {
				return nil, usagef("--set %s: unknown key for scenario %s (keys: %s)", key, s.Name, strings.Join(paramNames(s), ", "))
			}
			if chk := s.Params[i].Check; chk != nil {
				if err := chk(value); err != nil {
					return nil, usagef("--set %s=%s: %v", key, value, err)
				}
			}
		}
		if !strings.HasPrefix(key, "platform.") {
			params[key] = value
			explicit[key] = true
		}
	}
	seed, _ := strconv.ParseUint(params["seed"], 10, 64)
	m, err := machine.NewWithOptions(spec, seed, machine.Options{Payload: opt.Payload})
	if err != nil {
		return nil, fmt.Errorf("%w: platform %s: %v", ErrUsage, spec.Name, err)
	}
	defer m.Close()
	d, err := dma.New(m, m.Mem)
	if err != nil {
		return nil, fmt.Errorf("%w: platform %s: %v", ErrUsage, spec.Name, err)
	}
	c := &Context{
		Machine:  m,
		DMA:      d,
		progress: opt.Progress,
		Params:   params,
		Explicit: explicit,
		Result: &report.Result{
			Scenario: s.Name,
			Platform: spec.Name,
			Params:   params,
			Results:  []report.Row{},
			Factors:  factors(spec),
		},
	}
	if opt.Trace {
		c.Trace = report.NewTrace(fmt.Sprintf("dmalab %s on %s", s.Name, spec.Name))
		traceMachine(m, d, c.Trace)
	}
	if opt.Check {
		c.Checker = check.New(check.Options{})
		c.dmaDebug = dmadebug.Attach(c.Checker, d, m.Mem, dmadebug.Options{})
	}
	err = s.Run(c)
	c.progressDone()
	if err != nil {
		return nil, err
	}
	out := &Outcome{Result: c.Result, Trace: c.Trace}
	if c.Checker != nil {
		r := c.Checker.Report()
		out.Check = &r
	}
	return out, nil
}

func paramNames(s *Scenario) []string {
	names := []string{"seed", "platform.<field path>"}
	for _, p := range s.Params {
		names = append(names, p.Name)
	}
	return names
}

// factors lists the platform's efficiency factors with their sources.
func factors(spec *platform.Spec) map[string]report.Factor {
	f := map[string]report.Factor{
		"fabric.bandwidth_factor": {Value: spec.Fabric.Bandwidth(), Source: spec.Fabric.BandwidthFactor.Source},
		"fabric.latency_factor":   {Value: spec.Fabric.Latency(), Source: spec.Fabric.LatencyFactor.Source},
		"fabric.cross_traffic":    {Value: spec.Fabric.Cross(), Source: spec.Fabric.CrossTraffic.Source},
	}
	link := func(name string, l platform.PCIeLink) {
		if l.Bandwidth.V > 0 {
			return // a link given by its bandwidth has no efficiency factor
		}
		f[name+".link.efficiency"] = report.Factor{Value: l.Efficiency.V, Source: l.Efficiency.Source}
	}
	for _, s := range spec.Switches {
		link(s.Name, s.Link)
	}
	for _, g := range spec.GPUs {
		if !g.Integrated {
			link(g.Name, g.Link)
		}
	}
	for _, d := range spec.Devices {
		link(d.Name, d.Link)
	}
	for _, l := range spec.NVLinks {
		f["nvlink."+l.A+"-"+l.B+".efficiency"] = report.Factor{Value: l.Efficiency.V, Source: l.Efficiency.Source}
	}
	return f
}

// traceMachine records a slice per transfer of a copy engine (the DMA
// layer's OpTransfer events) on the engine's track and a slice per flow
// on every link direction it crossed.
func traceMachine(m *machine.Machine, d *dma.DMA, t *report.Trace) {
	d.Hooks.Hook(func(e *dma.Event) {
		tr := e.Transfer
		if e.Op != dma.OpTransfer || tr.Engine == "" {
			return
		}
		t.Slice(tr.Engine, tr.Name, tr.Start, tr.End, map[string]any{
			"bytes": tr.Bytes, "src": tr.Src.String(), "dst": tr.Dst.String(),
			"call_us": float64(tr.Call) / 1e6,
		})
	})
	m.Fabric.Hooks.Hook(func(ev *fabric.Event) {
		if ev.Kind != fabric.FlowEnd {
			return
		}
		fl := ev.Flow
		for _, h := range fl.Route().Hops {
			track := h.Link.Name() + " " + h.Dir.String()
			if h.Link.Sharing() == fabric.Shared {
				track = h.Link.Name()
			}
			t.Slice(track, fl.Name(), fl.ActiveAt(), fl.End(), map[string]any{"bytes": fl.Bytes()})
		}
	})
}

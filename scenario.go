package dmalab

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

// Scenario is a program run on a modelled machine: it declares its
// parameters and a default platform, and fills a report.
type Scenario struct {
	Name    string
	Summary string
	// Doc is the longer description shown by "dmalab run NAME --help".
	Doc string
	// Platform is the preset used when none is given.
	Platform string
	Params   []Param
	// Adjust, when set, changes the platform from the parameters before
	// the system boots (um-oversubscribe gives its GPU less memory):
	// the system is built once, from the spec Adjust returns.
	Adjust func(spec *platform.Spec, v *Values) (*platform.Spec, error)
	// Payload says the scenario needs memory to keep real bytes (a device
	// model that parses what a driver wrote, a test of data read back):
	// its system boots in payload mode whatever the run's options say.
	Payload bool
	// Run executes the scenario on c's system, appending to c.Result.
	Run func(c *Context) error
}

// Context is what a running scenario sees: the booted system and its
// parameters, parsed.
type Context struct {
	*System
	*Values
	// Scenario is the scenario running.
	Scenario *Scenario
}

var (
	catalogueMu sync.Mutex
	catalogue   = map[string]*Scenario{}
)

// Register adds a scenario to the catalogue that Lookup, Scenarios and
// the CLI use. Programs register theirs from init; a second scenario of
// the same name, or one without a name or Run, is a programming error and
// panics.
func Register(s *Scenario) {
	if s == nil || s.Name == "" || s.Run == nil {
		panic("dmalab: Register of a scenario without a name or a Run")
	}
	catalogueMu.Lock()
	defer catalogueMu.Unlock()
	if _, dup := catalogue[s.Name]; dup {
		panic("dmalab: duplicate scenario " + s.Name)
	}
	catalogue[s.Name] = s
}

// Scenarios lists the registered scenarios by name.
func Scenarios() []*Scenario {
	catalogueMu.Lock()
	defer catalogueMu.Unlock()
	out := make([]*Scenario, 0, len(catalogue))
	for _, s := range catalogue {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Scenario) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup finds a registered scenario by name.
func Lookup(name string) (*Scenario, error) {
	catalogueMu.Lock()
	s, ok := catalogue[name]
	catalogueMu.Unlock()
	if ok {
		return s, nil
	}
	var names []string
	for _, s := range Scenarios() {
		names = append(names, s.Name)
	}
	return nil, Usagef("unknown scenario %q (scenarios: %s)", name, strings.Join(names, ", "))
}

// RunOptions are what a scenario run takes besides the scenario.
type RunOptions struct {
	// Platform is a preset name or a YAML file; empty means the
	// scenario's default.
	Platform string
	// Sets are "key=value" assignments: a scenario parameter, "seed", or
	// "platform.<path>" to change one platform field.
	Sets []string
	// Trace, when true, collects a trace of links, engines and CPU
	// threads.
	Trace bool
	// TraceTo, when Trace is set, is where the trace streams as the run
	// goes (Options.TraceTo); nil keeps it in memory (Outcome.Trace).
	TraceTo io.Writer
	// TraceTimeline keeps what the trace's Timeline draws
	// (Options.TraceTimeline).
	TraceTimeline bool
	// Check attaches the checker (dmalab check).
	Check bool
	// Payload keeps real bytes in memory (mem.Options.Payload).
	Payload bool
	// Progress, when set, receives a line per step of long scenarios
	// (the CLI passes stderr when it is a terminal).
	Progress io.Writer
	// EventBudget bounds the run's events (Options.EventBudget).
	EventBudget uint64
	// Attribution fills the result's time split (Options.Attribution).
	Attribution bool
	// NUMACtl is numactl's placement options for every process of the
	// run (Options.NUMACtl), recorded in the params as "numactl".
	NUMACtl string
}

// Outcome is what a run produced.
type Outcome struct {
	Result *report.Result
	// Trace is nil unless RunOptions.Trace.
	Trace *report.Trace
	// Check is nil unless RunOptions.Check.
	Check *check.Report
}

// RunScenario resolves the platform, applies the --set assignments,
// parses the parameters once, boots a system and runs the scenario on it.
// Errors caused by bad input wrap ErrUsage.
func RunScenario(s *Scenario, opt RunOptions) (*Outcome, error) {
	platName := opt.Platform
	if platName == "" {
		platName = s.Platform
	}
	spec, err := platform.Resolve(platName)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	seedText := "1"
	set := map[string]setting{}
	var platformSets [][2]string
	for _, kv := range opt.Sets {
		key, value, ok := strings.Cut(kv, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, Usagef("--set %q: want key=value", kv)
		}
		switch {
		case strings.HasPrefix(key, "platform."):
			spec, err = platform.Set(spec, strings.TrimPrefix(key, "platform."), value)
			if err != nil {
				return nil, Usagef("--set %s: %v", key, err)
			}
			platformSets = append(platformSets, [2]string{strings.TrimPrefix(key, "platform."), value})
		case key == "seed":
			if _, err := strconv.ParseUint(value, 10, 64); err != nil {
				return nil, Usagef("--set seed=%q: want a non-negative integer", value)
			}
			seedText = value
		default:
			i := slices.IndexFunc(s.Params, func(p Param) bool { return p.Name == key })
			if i < 0 {
				return nil, Usagef("--set %s: unknown key for scenario %s (keys: %s)", key, s.Name, strings.Join(paramNames(s), ", "))
			}
			// Parsed here, in the order given, so that the first bad
			// assignment is the one reported.
			x, err := s.Params[i].parse(value)
			if err != nil {
				return nil, Usagef("--set %s=%s: %v", key, value, err)
			}
			set[key] = setting{value, x}
		}
	}
	v, err := parseParams(s.Name, s.Params, set)
	if err != nil {
		return nil, err
	}
	if s.Adjust != nil {
		if spec, err = s.Adjust(spec, v); err != nil {
			return nil, err
		}
	}
	seed, _ := strconv.ParseUint(seedText, 10, 64) // checked above
	sys, err := boot(spec, Options{
		Name: s.Name, Seed: seed, Payload: opt.Payload || s.Payload, Check: opt.Check, Trace: opt.Trace, TraceTo: opt.TraceTo, TraceTimeline: opt.TraceTimeline, Progress: opt.Progress,
		EventBudget: opt.EventBudget, Attribution: opt.Attribution, NUMACtl: opt.NUMACtl,
	})
	if err != nil {
		return nil, err
	}
	defer sys.Close()
	params := map[string]string{"seed": seedText}
	if l, ok := sys.Result.Params["numactl"]; ok {
		params["numactl"] = l
	}
	for name, text := range v.text {
		params[name] = text
	}
	sys.Result.Params = params
	recordPlatformSets(sys.Result, platformSets)
	c := &Context{System: sys, Values: v, Scenario: s}
	err = s.Run(c)
	sys.progressDone()
	if err != nil {
		// The trace ends with the error in its metadata: a valid
		// document of what ran.
		sys.closeTrace(err)
		return nil, err
	}
	sys.Result.NUMAStat = numaStat(sys.Kernel)
	if err := sys.closeTrace(nil); err != nil {
		return nil, err
	}
	return &Outcome{Result: sys.Result, Trace: sys.Trace, Check: sys.Report()}, nil
}

func paramNames(s *Scenario) []string {
	names := []string{"seed", "platform.<field path>"}
	for _, p := range s.Params {
		names = append(names, p.Name)
	}
	return names
}

// numaStat is the kernel's numastat for the result, nil when the run
// placed no anonymous memory (so that the field stays out of the JSON).
func numaStat(k *kernel.Kernel) []report.NUMANode {
	if k.AnonPages() == 0 {
		return nil
	}
	var out []report.NUMANode
	for n, s := range k.NUMAStats() {
		out = append(out, report.NUMANode{Node: n, NumaHit: s.NumaHit, NumaMiss: s.NumaMiss, NumaForeign: s.NumaForeign,
			InterleaveHit: s.InterleaveHit, LocalNode: s.LocalNode, OtherNode: s.OtherNode})
	}
	return out
}

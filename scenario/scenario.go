package scenario

import (
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/platform"
)

// The registry's types and functions under the names this package has
// always had, so that callers of package scenario keep working; the
// registry itself is the root package's (dmalab.Register).
type (
	// Scenario is dmalab.Scenario.
	Scenario = dmalab.Scenario
	// Param is dmalab.Param.
	Param = dmalab.Param
	// Context is dmalab.Context.
	Context = dmalab.Context
	// Options is dmalab.RunOptions.
	Options = dmalab.RunOptions
	// Outcome is dmalab.Outcome.
	Outcome = dmalab.Outcome
)

// ErrUsage is dmalab.ErrUsage: bad input.
var ErrUsage = dmalab.ErrUsage

// Default is the scenario "dmalab run" runs without a name.
const Default = "camera-pipeline"

// All lists the registered scenarios by name (dmalab.Scenarios).
func All() []*Scenario { return dmalab.Scenarios() }

// Lookup finds a scenario by name (dmalab.Lookup).
func Lookup(name string) (*Scenario, error) { return dmalab.Lookup(name) }

// Run runs a scenario (dmalab.RunScenario).
func Run(s *Scenario, opt Options) (*Outcome, error) { return dmalab.RunScenario(s, opt) }

// UsageMessage strips the ErrUsage marker from an error's text.
func UsageMessage(err error) string { return dmalab.UsageMessage(err) }

var usagef = dmalab.Usagef

func register(s *Scenario) { dmalab.Register(s) }

// noGPU explains a GPU index the platform does not have: it has none at
// all (the scenario needs one), or fewer than the --set gpu asked for.
func noGPU(c *Context, i int) error {
	return noGPUIn(c.Machine.Spec.Name, len(c.Machine.GPUs), i)
}

func noGPUIn(platform string, gpus, i int) error {
	if gpus == 0 {
		return usagef("platform %s has no GPU; this scenario needs one", platform)
	}
	return usagef("--set gpu=%d: platform %s has %d GPU(s); there is no GPU %d", i, platform, gpus, i)
}

// platformsParam is the platforms a scenario with a `platforms` parameter
// runs on: the names given (the run's own platform with its --set
// changes where named), or, when none are given and the run is on the
// scenario's default platform, defaults; otherwise the run's platform.
func platformsParam(c *Context, defaults []string) ([]*platform.Spec, error) {
	specs := []*platform.Spec{c.Machine.Spec}
	names := c.Value("platforms")
	if names == "" && c.Machine.Spec.Name == c.Scenario.Platform {
		names = strings.Join(defaults, ",")
	}
	if names == "" {
		return specs, nil
	}
	specs = specs[:0]
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		if n == c.Machine.Spec.Name {
			specs = append(specs, c.Machine.Spec) // with its --set changes
			continue
		}
		s, err := platform.Resolve(n)
		if err != nil {
			return nil, usagef("--set platforms=%s: %v", names, err)
		}
		specs = append(specs, s)
	}
	return specs, nil
}

package scenario

import (
	"errors"
	"github.com/dmalab/dmalab"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// TestGuardEveryScenario starves every scenario of memory bandwidth
// (1 B/s): each must stop with a usage error that says why and which
// parameter to change, never panic (host-memory did, closing processes
// that block in their cleanups) nor succeed with an empty table
// (um-prefetch and um-oversubscribe did).
func TestGuardEveryScenario(t *testing.T) {
	const starve = "platform.nodes.0.dram_bandwidth=1B/s"
	for _, tt := range []struct {
		scenario string
		sets     []string
		// want are substrings of the error: the reason and the knob.
		want []string
		// budget, when set, lowers the event budget (a polling driver
		// would otherwise spin 2^28 events).
		budget uint64
	}{
		{"host-memory", nil, []string{"longer than the model's clock can count", "--set size=", "node0.dram at 1 B/s"}, 0},
		{"transfers", []string{"sizes=1GiB", "paths=pinned", "directions=h2d"}, []string{"longer than the model's clock", "--set sizes="}, 0},
		{"um-prefetch", nil, []string{"more than 50 days of virtual time", "--set size="}, 0},
		{"um-oversubscribe", nil, []string{"more than 50 days of virtual time", "vram or ratios", "--set vram="}, 0},
		{"dma-streaming", []string{"packets=100000"}, []string{"virtual time", "packets or size", "--set packets="}, 0},
		{"dma-vs-memcpy", []string{"sizes=64B"}, []string{"more than 100000 events", "--set sizes="}, 100000},
	} {
		t.Run(tt.scenario, func(t *testing.T) {
			s, err := Lookup(tt.scenario)
			if err != nil {
				t.Fatal(err)
			}
			out, err := Run(s, Options{Sets: append(tt.sets, starve), EventBudget: tt.budget})
			if err == nil {
				t.Fatalf("run succeeded with %d rows; want an error", len(out.Result.Results))
			}
			if !errors.Is(err, ErrUsage) || !(errors.Is(err, sim.ErrStalled) || errors.Is(err, sim.ErrLimit)) {
				t.Fatalf("error %v: want a usage error wrapping sim.ErrStalled or sim.ErrLimit", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestGuardCleanRuns: the guard lets every scenario's default run
// through (no stall, no limit) on its default platform.
func TestGuardCleanRuns(t *testing.T) {
	for _, s := range All() {
		t.Run(s.Name, func(t *testing.T) {
			if _, err := Run(s, Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDeviceNotThere: a device the platform lacks is bad input, with the
// devices it has (dma-streaming failed as a model error, exit 1).
func TestDeviceNotThere(t *testing.T) {
	for _, name := range []string{"dma-streaming", "dma-bugs", "dma-vs-memcpy"} {
		s, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(s, Options{Sets: []string{"device=nosuch"}})
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "nosuch") {
			t.Errorf("%s --set device=nosuch: %v, want a usage error naming it", name, err)
		}
	}
}

// TestGuardDeadlockIsAModelError: processes blocked with no transfer
// pending are a deadlock of the model, not of the input: ErrModel, with
// each process and what it waits on, and the knobs still named.
func TestGuardDeadlockIsAModelError(t *testing.T) {
	spec, err := platform.Preset("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	sys, err := dmalab.BootSpec(spec, dmalab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	c := &Context{System: sys}
	irq := sys.Engine.NewNamedCompletion("irq")
	sys.Engine.Spawn("driver", func(p *sim.Proc) { p.Wait(irq) })
	err = c.RunEngine("size")
	if !errors.Is(err, dmalab.ErrModel) || errors.Is(err, ErrUsage) || !errors.Is(err, sim.ErrStalled) {
		t.Fatalf("RunEngine = %v, want a model error wrapping sim.ErrStalled", err)
	}
	for _, want := range []string{"driver (waiting on completion irq)", "please report it", "other values of size"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

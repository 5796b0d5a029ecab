package dmalab

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

func TestBootErrors(t *testing.T) {
	cases := []struct {
		name, platform string
		want           string
	}{
		{"unknown preset", "no-such-machine", `"no-such-machine"`},
		{"missing file", "/nonexistent/mine.yaml", "mine.yaml"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sys, err := Boot(c.platform, Options{})
			if err == nil {
				sys.Close()
				t.Fatalf("Boot(%q) booted", c.platform)
			}
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Boot(%q) = %v; want a usage error naming %s", c.platform, err, c.want)
			}
		})
	}
	if _, err := BootSpec(nil, Options{}); err == nil {
		t.Error("BootSpec(nil) booted")
	}
}

// TestBootParts: a booted system has every part, wired with the
// platform's own numbers.
func TestBootParts(t *testing.T) {
	cases := []struct {
		platform string
		line     uint64
		gpus     int
		device   string
	}{
		{"zynq-7000", 32, 0, "gem0"},
		{"h200-pcie", 64, 1, ""},
		{"jetson-orin", 64, 1, ""},
	}
	for _, c := range cases {
		t.Run(c.platform, func(t *testing.T) {
			sys, err := Boot(c.platform, Options{Check: true, Trace: true, Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer sys.Close()
			if sys.Machine == nil || sys.Engine != sys.Machine.Engine || sys.Mem != sys.Machine.Mem || sys.Kernel == nil || sys.DMA == nil {
				t.Fatalf("parts missing: %+v", sys)
			}
			if sys.Checker == nil || sys.Trace == nil || sys.Result == nil {
				t.Fatal("checker, trace or result missing")
			}
			if got := sys.LineSize(); got != c.line {
				t.Errorf("LineSize = %d, want %d", got, c.line)
			}
			if got := sys.Options().Seed; got != 7 {
				t.Errorf("seed %d, want 7", got)
			}
			d, err := sys.CUDA()
			if err != nil {
				t.Fatalf("CUDA: %v", err)
			}
			if n := len(d.System().Devices); n != c.gpus {
				t.Errorf("%d GPUs, want %d", n, c.gpus)
			}
			if c.device != "" {
				if _, err := sys.Device(c.device); err != nil {
					t.Errorf("Device(%s): %v", c.device, err)
				}
			}
			if _, err := sys.Device("nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
				t.Errorf("Device(nosuch) = %v", err)
			}
		})
	}
	sys, err := Boot("zynq-7000", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	if sys.Options().Seed != 1 || sys.Checker != nil || sys.Trace != nil || sys.Diagnostics() != nil || sys.Report() != nil {
		t.Errorf("default options: seed %d, checker %v, trace %v", sys.Options().Seed, sys.Checker, sys.Trace)
	}
}

// TestBootUndrivableGPU: a platform whose GPU the CUDA façade cannot
// drive (a BAR1 smaller than one 64 KiB page) still boots; CUDA returns
// the error.
func TestBootUndrivableGPU(t *testing.T) {
	spec, err := platform.Preset("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = platform.Set(spec, "gpus.gpu0.bar1", "32KiB"); err != nil {
		t.Fatal(err)
	}
	sys, err := BootSpec(spec, Options{})
	if err != nil {
		t.Fatalf("BootSpec: %v", err)
	}
	defer sys.Close()
	if _, err := sys.CUDA(); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "BAR1") {
		t.Errorf("CUDA() = %v, want a usage error about BAR1", err)
	}
	if _, err := sys.Device("nosuch"); err == nil {
		t.Error("the DMA layer has a device nosuch")
	}
}

func TestRun(t *testing.T) {
	sys, err := Boot("2s-4gpu-pcie", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	boom := errors.New("boom")
	var node int
	var at sim.Time
	err = sys.RunOn(1, "app", func(p *Process) error {
		node = p.Node()
		p.Thread.Sleep(5 * sim.Microsecond)
		at = p.Now()
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("Run returned %v, want the program's error", err)
	}
	if node != 1 || at != 5*sim.Microsecond {
		t.Errorf("program ran on node %d until %v", node, at)
	}
	kp, ok := sys.Kernel.Process("app")
	if !ok || !kp.Exited() {
		t.Errorf("process app: found %v, exited %v", ok, ok && kp.Exited())
	}
	if err := sys.Run("app", func(*Process) error { return nil }); err == nil {
		t.Error("a second process called app ran")
	}
	// A program that blocks for good is reported, not taken for done.
	err = sys.Run("stuck", func(p *Process) error {
		p.Thread.Wait(sys.Engine.NewCompletion())
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "never finished") {
		t.Errorf("a blocked program: %v", err)
	}
}

func testScenario(run func(c *Context) error) *Scenario {
	return &Scenario{
		Name: "test", Platform: "zynq-7000",
		Params: []Param{
			{Name: "n", Kind: ParamInt, Min: 1, Max: 100, Default: "3"},
			{Name: "size", Kind: ParamSize, Max: 1 << 20, Default: "4KiB"},
			{Name: "sizes", Kind: ParamSizes, Default: "1KiB,2MiB"},
			{Name: "dir", Kind: ParamEnum, Values: []string{"rx", "tx"}, Default: "rx"},
			{Name: "paths", Kind: ParamList, Item: "path", Values: []string{"a", "b", "c"}, Default: "c,a,c"},
			{Name: "ratios", Kind: ParamFloats, Item: "ratio", Max: 8, Default: "0.5,2"},
			{Name: "on", Kind: ParamBool, Default: "false"},
			{Name: "wait", Kind: ParamDuration, Default: "20us"},
			{Name: "node", Kind: ParamInt, Word: "any", Default: "any"},
			{Name: "name", Default: ""},
		},
		Run: run,
	}
}

func TestParams(t *testing.T) {
	var got *Context
	s := testScenario(func(c *Context) error { got = c; return nil })
	out, err := RunScenario(s, RunOptions{Sets: []string{"n=7", "on=true", "node=1", "seed=0"}})
	if err != nil {
		t.Fatal(err)
	}
	c := got
	if c.Int("n") != 7 || c.Size("size") != 4096 || !slices.Equal(c.Sizes("sizes"), []int64{1024, 2 << 20}) ||
		c.Value("dir") != "rx" || !slices.Equal(c.List("paths"), []string{"c", "a"}) ||
		!slices.Equal(c.Floats("ratios"), []float64{0.5, 2}) || !c.Bool("on") ||
		c.Duration("wait") != 20*sim.Microsecond || c.IsWord("node") || c.Int("node") != 1 || c.Value("name") != "" {
		t.Errorf("values: n %d size %d sizes %v dir %s paths %v ratios %v on %v wait %v node %d",
			c.Int("n"), c.Size("size"), c.Sizes("sizes"), c.Value("dir"), c.List("paths"), c.Floats("ratios"), c.Bool("on"), c.Duration("wait"), c.Int("node"))
	}
	if !c.Explicit("n") || c.Explicit("size") {
		t.Error("Explicit does not tell set from defaulted")
	}
	if c.Options().Seed != 0 || out.Result.Params["seed"] != "0" || out.Result.Params["n"] != "7" || out.Result.Params["size"] != "4KiB" {
		t.Errorf("seed %d, params %v", c.Options().Seed, out.Result.Params)
	}
	if out.Result.Scenario != "test" || out.Result.Platform != "zynq-7000" {
		t.Errorf("result of %s on %s", out.Result.Scenario, out.Result.Platform)
	}
}

// TestParamErrors: a bad value is a usage error naming the parameter and
// the value, found before anything boots or runs.
func TestParamErrors(t *testing.T) {
	ran := false
	s := testScenario(func(*Context) error { ran = true; return nil })
	cases := []struct{ set, want string }{
		{"n=0", "n=0: want an integer from 1 to 100"},
		{"n=101", "n=101"},
		{"n=x", "n=x"},
		{"size=2MiB", "size=2MiB: size \"2MiB\": at most 1 MiB"},
		{"size=0B", "must be positive"},
		{"sizes=1KiB,parsec", "sizes=1KiB,parsec"},
		{"sizes=,", "no sizes"},
		{"dir=up", `dir=up: want one of rx, tx, got "up"`},
		{"paths=a,d", `unknown path "d"`},
		{"paths=", "no paths"},
		{"ratios=9", `ratio "9": want a number above 0, at most 8`},
		{"ratios=-1", "ratios=-1"},
		{"on=maybe", "on=maybe"},
		{"wait=-1us", "wait=-1us"},
		{"wait=2562047h", "wait=2562047h"},
		{"node=some", "node=some"},
		{"colour=blue", "unknown key"},
	}
	for _, c := range cases {
		t.Run(c.set, func(t *testing.T) {
			_, err := RunScenario(s, RunOptions{Sets: []string{c.set}})
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("--set %s: %v; want a usage error with %q", c.set, err, c.want)
			}
		})
	}
	if ran {
		t.Error("the scenario ran with a bad parameter")
	}
	// A bad default is the scenario's bug, not the user's.
	bad := testScenario(func(*Context) error { return nil })
	bad.Params[0].Default = "0"
	if _, err := RunScenario(bad, RunOptions{}); err == nil || errors.Is(err, ErrUsage) {
		t.Errorf("bad default: %v", err)
	}
}

// registered counts TestRegister's runs: the catalogue lives as long as
// the test binary, and go test -count=2 runs the test twice.
var registered int

func TestRegister(t *testing.T) {
	s := testScenario(func(*Context) error { return nil })
	registered++
	s.Name = fmt.Sprintf("test-register-%d", registered)
	Register(s)
	if got, err := Lookup(s.Name); err != nil || got != s {
		t.Fatalf("Lookup = %v, %v", got, err)
	}
	if !slices.Contains(Scenarios(), s) {
		t.Error("Scenarios lacks the registered scenario")
	}
	if _, err := Lookup("test-nosuch"); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), s.Name) {
		t.Errorf("Lookup(test-nosuch) = %v; want a usage error listing the scenarios", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a duplicate name did not panic")
		}
	}()
	Register(s)
}

// TestAdjust: a scenario's Adjust changes the platform before the one
// boot, and the system keeps every option of the run.
func TestAdjust(t *testing.T) {
	var sys *System
	s := &Scenario{
		Name: "adjust", Platform: "h200-pcie",
		Adjust: func(spec *platform.Spec, _ *Values) (*platform.Spec, error) {
			return platform.Set(spec, "gpus.gpu0.vram.value", "1GiB")
		},
		Run: func(c *Context) error { sys = c.System; return nil },
	}
	if _, err := RunScenario(s, RunOptions{Payload: true, Check: true, Trace: true}); err != nil {
		t.Fatal(err)
	}
	if v := sys.Machine.Spec.GPUs[0].VRAM.V; v != 1<<30 {
		t.Errorf("GPU memory %v, want 1 GiB", v)
	}
	if !sys.Mem.Payload() || sys.Checker == nil || sys.Trace == nil {
		t.Errorf("options lost: payload %v, checker %v, trace %v", sys.Mem.Payload(), sys.Checker != nil, sys.Trace != nil)
	}
}

// FuzzParam: any text given to any kind of parameter parses to a value
// within the parameter's bounds, or is refused; it never panics.
func FuzzParam(f *testing.F) {
	for _, s := range []string{"3", "4KiB", "1KiB,2MiB", "rx", "c,a", "0.5,2", "true", "20us", "any", "-1", "1e9", ",,", "NaN"} {
		f.Add(s)
	}
	params := testScenario(nil).Params
	f.Fuzz(func(t *testing.T, s string) {
		for i := range params {
			p := &params[i]
			x, err := p.parse(s)
			if err != nil || x == nil {
				continue
			}
			switch v := x.(type) {
			case int:
				if int64(v) < p.Min || p.Max != 0 && int64(v) > p.Max {
					t.Errorf("%s=%q: %d outside [%d, %d]", p.Name, s, v, p.Min, p.Max)
				}
			case int64:
				if v <= 0 || p.Max != 0 && v > p.Max {
					t.Errorf("%s=%q: size %d outside (0, %d]", p.Name, s, v, p.Max)
				}
			case []int64:
				for _, n := range v {
					if n <= 0 {
						t.Errorf("%s=%q: size %d", p.Name, s, n)
					}
				}
			case []float64:
				for _, r := range v {
					if !(r > 0) || r > float64(p.Max) {
						t.Errorf("%s=%q: %g outside (0, %d]", p.Name, s, r, p.Max)
					}
				}
			case sim.Time:
				if v < 0 {
					t.Errorf("%s=%q: negative duration %v", p.Name, s, v)
				}
			}
		}
	})
}

// TestProcessCUDA: a program's CUDA state belongs to its kernel process,
// and the process's exit reclaims what it left allocated.
func TestProcessCUDA(t *testing.T) {
	sys, err := Boot("h200-pcie", Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	err = sys.Run("app", func(p *Process) error {
		pr, err := p.CUDA()
		if err != nil {
			return err
		}
		ctx, err := pr.PrimaryContext(0)
		if err != nil {
			return err
		}
		_, err = ctx.MemAlloc(p.Thread, 1<<20) // left for exit to free
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := sys.CUDA()
	if free, total := d.System().Devices[0].MemGetInfo(); free != total {
		t.Errorf("after exit %d of %d bytes of VRAM free", free, total)
	}
	if n := len(sys.Diagnostics()); n != 0 {
		t.Errorf("%d diagnostics: %v", n, sys.Diagnostics())
	}
}

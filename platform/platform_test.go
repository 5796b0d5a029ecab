package platform

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

func TestPresets(t *testing.T) {
	names := Presets()
	if want := []string{"2s-4gpu-pcie", "dgx-h100", "h200-pcie", "jetson-orin", "jetson-tx2", "zynq-7000"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Presets() = %v, want %v", names, want)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			s, err := Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != name {
				t.Errorf("Name = %q, want the preset's name %q", s.Name, name)
			}
			if err := s.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			out, err := Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse("marshalled.yaml", out)
			if err != nil {
				t.Fatalf("Parse(Marshal): %v\n%s", err, out)
			}
			if !reflect.DeepEqual(back, s) {
				t.Errorf("Marshal→Parse changed the spec:\n%s", out)
			}
			again, _ := Marshal(back)
			if string(again) != string(out) {
				t.Errorf("Marshal is not deterministic")
			}
			forEachParam(reflect.ValueOf(s).Elem(), "", func(path string, p reflect.Value) {
				if p.Field(1).String() == "" && !p.Field(0).IsZero() {
					t.Errorf("%s: no source", path)
				}
			})
		})
	}
}

// forEachParam calls f for every Param in x, with its path.
func forEachParam(x reflect.Value, path string, f func(string, reflect.Value)) {
	switch {
	case x.Type().Implements(paramType):
		f(path, x)
	case x.Kind() == reflect.Struct:
		for _, fl := range schema[x.Type()] {
			forEachParam(x.Field(fl.index), join(path, fl.name), f)
		}
	case x.Kind() == reflect.Slice:
		for i := range x.Len() {
			forEachParam(x.Index(i), path+"["+strconv.Itoa(i)+"]", f)
		}
	}
}

func TestPresetIsAFreshCopy(t *testing.T) {
	a, _ := Preset("dgx-h100")
	a.GPUs[0].Name = "changed"
	a.Distances[0][1] = 99
	b, _ := Preset("dgx-h100")
	if b.GPUs[0].Name != "gpu0" || b.Distances[0][1] != 21 {
		t.Errorf("a change to one Preset result shows in the next")
	}
}

func TestH200LinkRate(t *testing.T) {
	s, err := Preset("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.GPU("gpu0")
	if err != nil {
		t.Fatal(err)
	}
	raw := 32e9 * 16 * 128 / 130 / 8
	if got := float64(g.Link.RawRate()); math.Abs(got/raw-1) > 1e-15 {
		t.Errorf("RawRate = %v, want %v", got, raw)
	}
	if got := g.Link.RawRate().String(); !strings.HasPrefix(got, "63.015") {
		t.Errorf("RawRate = %s, want 63.015 GB/s", got)
	}
	if got := float64(g.Link.Rate()); math.Abs(got/55.5e9-1) > 1e-9 {
		t.Errorf("Rate = %v, want 55.5 GB/s within 1e-9", got)
	}
	rc, _ := s.RootComplex(g.Parent)
	node, _ := s.Node(rc.Node)
	// A d2h copy's posted writes pay the route one way: the measured
	// 8 B d2h call. (An h2d copy waits for a read's round trip too.)
	if total := g.CopyOverhead.V + node.DRAMLatency.V + rc.Latency.V + g.Link.Latency.V; total != 6600*sim.Nanosecond {
		t.Errorf("copy overhead + route latency (DRAM, root complex, link) = %v, want the measured 6.6us", total)
	}
	if g.VRAM.V != 143771<<20 || g.BAR1.V != 256<<30 || g.CopyEngines.V != 3 {
		t.Errorf("VRAM %v, BAR1 %v, copy engines %d: want the measured 143771 MiB, 256 GiB, 3", g.VRAM.V, g.BAR1.V, g.CopyEngines.V)
	}
}

func TestRawRate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		link  PCIeLink
		bytes float64
	}{
		{"gen1 x1 8b/10b", PCIeLink{Gen: 1, Width: 1}, 250e6},
		{"gen2 x4 8b/10b", PCIeLink{Gen: 2, Width: 4}, 2e9},
		{"gen3 x16 128b/130b", PCIeLink{Gen: 3, Width: 16}, 8e9 * 16 / 8 * 128 / 130},
		{"gen4 x16", PCIeLink{Gen: 4, Width: 16}, 16e9 * 16 / 8 * 128 / 130},
		{"gen5 x16", PCIeLink{Gen: 5, Width: 16}, 63.015384615384615e9},
		{"gen6 x16 flit counted as 1", PCIeLink{Gen: 6, Width: 16}, 128e9},
		{"gen0 invalid", PCIeLink{Gen: 0, Width: 16}, 0},
		{"gen7 invalid", PCIeLink{Gen: 7, Width: 16}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := float64(tc.link.RawRate())
			if math.Abs(got-tc.bytes) > 1e-12*tc.bytes {
				t.Errorf("RawRate = %v, want %v", got, tc.bytes)
			}
			tc.link.Efficiency.V = 0.5
			if r := float64(tc.link.Rate()); math.Abs(r-got/2) > 1e-12*got {
				t.Errorf("Rate = %v, want half of %v", r, got)
			}
		})
	}
}

func TestNVLinkRate(t *testing.T) {
	s, _ := Preset("dgx-h100")
	l := s.NVLinks[0]
	if got := float64(l.RawRate()); got != 450e9 {
		t.Errorf("RawRate = %v, want 450 GB/s", got)
	}
	// No efficiency given: 128 B of data per 144 B packet (one 16 B
	// header flit) is 400 GB/s of the 450.
	if got := float64(l.Rate()); math.Abs(got/400e9-1) > 1e-12 {
		t.Errorf("Rate = %v, want 400 GB/s (450 x 128/144)", got)
	}
	// An efficiency given replaces the packets.
	l.Efficiency = Param[float64]{V: 0.5}
	if got := float64(l.Rate()); got != 225e9 {
		t.Errorf("Rate with efficiency 0.5 = %v, want 225 GB/s", got)
	}
	l.Efficiency = Param[float64]{}
	l.Payload, l.Header = Param[Bytes]{V: 256}, Param[Bytes]{V: 16}
	if got, want := l.Share(), 256.0/272; got != want {
		t.Errorf("Share with 256 B packets = %v, want %v", got, want)
	}
}

func TestNodeOf(t *testing.T) {
	s2, _ := Preset("2s-4gpu-pcie")
	dgx, _ := Preset("dgx-h100")
	for _, tc := range []struct {
		spec *Spec
		name string
		node int
		err  string
	}{
		{s2, "rc0", 0, ""},
		{s2, "rc1", 1, ""},
		{s2, "sw1", 1, ""},
		{s2, "gpu0", 0, ""},
		{s2, "gpu3", 1, ""},
		{s2, "nic1", 1, ""},
		{dgx, "gpu5", 1, ""},
		{dgx, "nic2", 0, ""},
		{dgx, "nvswitch", 0, `platform dgx-h100: NVSwitch "nvswitch" is not on PCIe`},
		{dgx, "upi", 0, `platform dgx-h100: socket link "upi" is not on PCIe`},
		{dgx, "gpu9", 0, `platform dgx-h100 has no component "gpu9": not found`},
	} {
		t.Run(tc.spec.Name+"/"+tc.name, func(t *testing.T) {
			node, err := tc.spec.NodeOf(tc.name)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("NodeOf error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil || node != tc.node {
				t.Errorf("NodeOf = %d, %v; want %d", node, err, tc.node)
			}
		})
	}
}

func TestPathToRoot(t *testing.T) {
	s, _ := Preset("dgx-h100")
	got, err := s.PathToRoot("gpu6")
	if want := []string{"gpu6", "pcie3", "rc1"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("PathToRoot(gpu6) = %v, %v; want %v", got, err, want)
	}
	parent, link, err := s.Uplink("nic3")
	if err != nil || parent != "pcie1" || link.Gen != 5 || link.Width != 16 {
		t.Errorf("Uplink(nic3) = %s, %+v, %v", parent, link, err)
	}
}

func TestLookups(t *testing.T) {
	s, _ := Preset("2s-4gpu-pcie")
	if _, err := s.GPU("gpu9"); !errors.Is(err, ErrNotFound) ||
		err.Error() != `platform 2s-4gpu-pcie has no GPU "gpu9" (GPUs: gpu0, gpu1, gpu2, gpu3): not found` {
		t.Errorf("GPU(gpu9) error = %v", err)
	}
	if d, err := s.Device("nic1"); err != nil || d.Parent != "sw1" || d.LineRate.V != 50e9 {
		t.Errorf("Device(nic1) = %+v, %v; want parent sw1, 400 Gb/s", d, err)
	}
	if n, err := s.Node(1); err != nil || n.Cores.V != 56 {
		t.Errorf("Node(1) = %+v, %v", n, err)
	}
	if _, err := s.Node(2); !errors.Is(err, ErrNotFound) {
		t.Errorf("Node(2) error = %v, want ErrNotFound", err)
	}
	for _, tc := range []struct {
		name string
		kind Kind
	}{{"rc1", KindRootComplex}, {"sw0", KindSwitch}, {"gpu2", KindGPU}, {"nic0", KindDevice}, {"upi", KindSocketLink}, {"x", KindNone}} {
		if got := s.KindOf(tc.name); got != tc.kind {
			t.Errorf("KindOf(%s) = %v, want %v", tc.name, got, tc.kind)
		}
	}
	if d := s.Distance(0, 1); d != 21 {
		t.Errorf("Distance(0, 1) = %d, want 21", d)
	}
	if d := (&Spec{}).Distance(1, 1); d != 10 {
		t.Errorf("default Distance(1, 1) = %d, want 10", d)
	}
}

func TestClone(t *testing.T) {
	s, _ := Preset("dgx-h100")
	c := s.Clone()
	if !reflect.DeepEqual(c, s) {
		t.Fatal("Clone differs from the original")
	}
	c.Nodes[0].Cores.V = 1
	c.Distances[1][0] = 30
	c.NVLinks[0].Links.V = 1
	if s.Nodes[0].Cores.V == 1 || s.Distances[1][0] == 30 || s.NVLinks[0].Links.V == 1 {
		t.Error("changing the clone changed the original")
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	data, err := PresetYAML("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(dir, "machine")
	if err := os.WriteFile(bare, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want, _ := Preset("h200-pcie")
	for _, tc := range []struct{ name, arg, err string }{
		{"preset", "h200-pcie", ""},
		{"file path", file, ""},
		{"existing file without extension", bare, ""},
		{"unknown name", "h300", `unknown platform preset "h300": not a preset (2s-4gpu-pcie, dgx-h100, h200-pcie, jetson-orin, jetson-tx2, zynq-7000) and no such file`},
		{"missing file", filepath.Join(dir, "nope.yaml"), "load platform: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.arg)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("Resolve(%q) error = %v, want %s", tc.arg, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Resolve(%q) differs from the preset", tc.arg)
			}
		})
	}
	if _, err := Preset("nope"); !errors.Is(err, ErrUnknownPreset) ||
		err.Error() != `unknown platform preset "nope" (presets: 2s-4gpu-pcie, dgx-h100, h200-pcie, jetson-orin, jetson-tx2, zynq-7000)` {
		t.Errorf("Preset(nope) error = %v", err)
	}
}

func TestSchemaNamesUnique(t *testing.T) {
	for typ, fields := range schema {
		seen := map[string]bool{}
		for _, f := range fields {
			if seen[f.name] {
				t.Errorf("%s: YAML name %q twice", typ, f.name)
			}
			seen[f.name] = true
		}
	}
}

func TestMarshalTrickyStrings(t *testing.T) {
	for _, str := range []string{
		"null", "~", "", " lead", "trail ", "a: b", "#x", "x #y", "'", `"`, "\t", "\n", "a\n", "\n\nb",
		"é", "\u2028", "\ufeff", "\x00", "\x7f", "- x", "[x]", "{x}", "&a", "*a", "!x", "%x", "@x", "`x",
		"|", ">", "0x10", "1e3", "yes", "true", "10", "-", "---", "...", "? x", "a,b", "\\",
	} {
		t.Run(strconv.Quote(str), func(t *testing.T) {
			s, _ := Preset("h200-pcie")
			s.Description = str
			s.GPUs[0].Model = str
			s.GPUs[0].VRAM.Source = str
			s.RootComplexes[0].Bandwidth = P(Rate(0), str)
			out, err := Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse("m.yaml", out)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !reflect.DeepEqual(back, s) {
				t.Errorf("round trip changed %q:\n%s", str, out)
			}
		})
	}
}

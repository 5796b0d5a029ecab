package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/platform"
)

// TestPlatformShowGroups: show ends with the IOMMU groups as comments
// where the platform has an IOMMU (devices below a switch without ACS
// share one), and a platform without one (zynq-7000) prints none.
func TestPlatformShowGroups(t *testing.T) {
	tests := []struct {
		name string
		want []string // lines that must be present; nil: no groups at all
	}{
		{"2s-4gpu-pcie", []string{
			"#   group 0: gpu0, gpu1, nic0, nic2 (below sw0, whose ports lack ACS)",
			"#   group 1: gpu2, gpu3, nic1 (below sw1, whose ports lack ACS)",
		}},
		{"h200-pcie", []string{"#   group 0: gpu0 (alone: directly below root complex rc0)"}},
		{"zynq-7000", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := dmalab(t, "platform", "show", tt.name)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if tt.want == nil && strings.Contains(out, "IOMMU groups") {
				t.Errorf("groups printed for a platform without an IOMMU:\n%s", out)
			}
			for _, l := range tt.want {
				if !strings.Contains(out, "\n"+l+"\n") {
					t.Errorf("no line %q in:\n%s", l, out)
				}
			}
		})
	}
}

// TestPlatformShowFunctions: a platform file with a two-function NIC
// shows the functions in one group without ACS and in two with it, and
// the output still loads back to the same platform.
func TestPlatformShowFunctions(t *testing.T) {
	tests := []struct {
		name string
		acs  bool
		want []string
	}{
		{"no ACS", false, []string{"#   group 3: nic3, nic4 (functions of slot cx7, which lack ACS)"}},
		{"ACS", true, []string{
			"#   group 3: nic3 (alone: directly below root complex rc0; function 0 of slot cx7, with ACS)",
			"#   group 4: nic4 (alone: directly below root complex rc0; function 1 of slot cx7, with ACS)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := platform.Preset("2s-4gpu-pcie")
			if err != nil {
				t.Fatal(err)
			}
			for f := range 2 {
				d := s.Devices[0]
				d.Name, d.Parent, d.Slot, d.Function, d.ACS = fmt.Sprintf("nic%d", 3+f), "rc0", "cx7", f, tt.acs
				s.Devices = append(s.Devices, d)
			}
			data, err := platform.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "mf.yaml")
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errs := dmalab(t, "platform", "show", file)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, l := range tt.want {
				if !strings.Contains(out, "\n"+l+"\n") {
					t.Errorf("no line %q in:\n%s", l, out)
				}
			}
			back, err := platform.Parse("shown", []byte(out))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, s) {
				t.Error("show's output does not load back to the platform")
			}
		})
	}
}

// TestPlatformNUMA: platform numa prints a preset's nodes as numactl -H,
// through the formatter topo uses for the real machine.
func TestPlatformNUMA(t *testing.T) {
	tests := []struct {
		name string
		want []string
	}{
		{"2s-4gpu-pcie", []string{
			"available: 2 nodes (0-1)\n",
			"\nnode 0 cpus: 0 1 2 ",
			" 54 55\nnode 0 size: 524288 MB\nnode 0 free: 524288 MB\nnode 1 cpus: 56 57 ",
			" 110 111\nnode 1 size: 524288 MB\n",
			"node distances:\nnode   0   1\n  0:  10  21\n  1:  21  10\n",
		}},
		{"jetson-orin", []string{"available: 1 nodes (0)\nnode 0 cpus: 0 1 2 3 4 5 6 7 8 9 10 11\nnode 0 size: 65536 MB\nnode 0 free: 65536 MB\nnode distances:\nnode   0\n  0:  10\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := dmalab(t, "platform", "numa", tt.name)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, s := range tt.want {
				if !strings.Contains(out, s) {
					t.Errorf("no %q in:\n%s", s, out)
				}
			}
		})
	}
	code, out, errs := dmalab(t, "platform", "numa", "nosuch")
	if code != exitUsage || !strings.Contains(errs, "dmalab platform numa:") {
		t.Errorf("unknown platform: exit %d, %q %q", code, out, errs)
	}
	if code, _, _ := dmalab(t, "platform", "numa"); code != exitUsage {
		t.Errorf("no platform: exit %d", code)
	}
}

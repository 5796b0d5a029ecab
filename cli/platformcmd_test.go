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

package cli

import (
	"strings"
	"testing"
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

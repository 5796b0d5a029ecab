package platform

import (
	"strings"
	"testing"
)

// TestIOMMUSection: the iommu section and a switch's acs parse, and a
// bad profile or mode is an error at its file:line.
func TestIOMMUSection(t *testing.T) {
	sw := "switches:\n  - {name: sw0, parent: rc0, link: {gen: 5, width: 16, efficiency: 0.9}, acs: true}\n"
	tests := []struct {
		name, section string
		want          IOMMU
		err           string // empty: valid
	}{
		{"absent", "", IOMMU{}, ""},
		{"strict", "iommu:\n  profile: vtd\n  mode: strict\n", IOMMU{Profile: "vtd", Mode: "strict"}, ""},
		{"lazy", "iommu: {profile: smmuv3, mode: lazy}\n", IOMMU{Profile: "smmuv3", Mode: "lazy"}, ""},
		{"passthrough", "iommu: {profile: amd-vi, mode: passthrough}\n", IOMMU{Profile: "amd-vi", Mode: "passthrough"}, ""},
		{"profile only", "iommu:\n  profile: amd-vi\n", IOMMU{Profile: "amd-vi"}, ""},
		{"bad profile", "iommu:\n  profile: dmar\n  mode: strict\n", IOMMU{}, `t.yaml:23: iommu.profile: unknown profile "dmar"`},
		{"bad mode", "iommu:\n  profile: vtd\n  mode: relaxed\n", IOMMU{}, `t.yaml:24: iommu.mode: unknown mode "relaxed"`},
		{"mode without profile", "iommu:\n  mode: passthrough\n", IOMMU{}, "t.yaml:23: iommu.profile: missing: mode passthrough needs"},
		{"unknown field", "iommu:\n  profile: vtd\n  strict: true\n", IOMMU{}, "t.yaml:24: iommu.strict: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(base+sw+tt.section))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.IOMMU != tt.want || !s.Switches[0].ACS {
				t.Errorf("iommu %+v acs %v, want %+v and true", s.IOMMU, s.Switches[0].ACS, tt.want)
			}
			on := tt.want.Mode != "" && tt.want.Mode != IOMMUOff
			translated := tt.want.Mode == IOMMUStrict || tt.want.Mode == IOMMULazy
			if s.IOMMU.Enabled() != on || s.IOMMU.Translated() != translated {
				t.Errorf("mode %q: Enabled() %v, Translated() %v", tt.want.Mode, s.IOMMU.Enabled(), s.IOMMU.Translated())
			}
		})
	}
}

// TestSetIOMMU: --set platform.iommu.mode and a switch's acs go through
// Set and its validation.
func TestSetIOMMU(t *testing.T) {
	s, err := Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if s.IOMMU.Profile != IOMMUVTd || s.IOMMU.Mode != IOMMUOff || s.IOMMU.Enabled() {
		t.Fatalf("preset iommu %+v, want vtd, off", s.IOMMU)
	}
	lazy, err := Set(s, "iommu.mode", "lazy")
	if err != nil {
		t.Fatal(err)
	}
	if lazy.IOMMU.Mode != IOMMULazy || s.IOMMU.Mode != IOMMUOff {
		t.Errorf("after set: %q, original %q", lazy.IOMMU.Mode, s.IOMMU.Mode)
	}
	out, err := Marshal(lazy)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("shown.yaml", out)
	if err != nil || back.IOMMU != lazy.IOMMU {
		t.Errorf("Marshal then Parse: %+v, %v; want %+v", back, err, lazy.IOMMU)
	}
	acs, err := Set(s, "switches.sw1.acs", "true")
	if err != nil {
		t.Fatal(err)
	}
	if !acs.Switches[1].ACS || acs.Switches[0].ACS {
		t.Errorf("acs %v %v, want false true", acs.Switches[0].ACS, acs.Switches[1].ACS)
	}
	if _, err := Set(s, "iommu.mode", "sometimes"); err == nil || !strings.Contains(err.Error(), `unknown mode "sometimes"`) {
		t.Errorf("bad mode: %v", err)
	}
	if _, err := Set(s, "iommu.profile", "vt-d"); err == nil || !strings.Contains(err.Error(), "unknown profile") {
		t.Errorf("bad profile: %v", err)
	}
}

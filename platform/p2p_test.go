package platform

import (
	"strings"
	"testing"
)

func TestRootComplexP2PEfficiency(t *testing.T) {
	s, err := Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.RootComplexes[0].P2P(); got != DefaultP2PEfficiency {
		t.Errorf("unset p2p efficiency = %v, want the default %v", got, DefaultP2PEfficiency)
	}
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "p2p_efficiency") {
		t.Error("an unset p2p_efficiency is written")
	}
	s.RootComplexes[0].P2PEfficiency = P(0.25, "measured")
	out, err = Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("x.yaml", out)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.RootComplexes[0].P2P(); got != 0.25 {
		t.Errorf("round trip: %v", got)
	}
	set, err := Set(s, "root_complexes.rc1.p2p_efficiency", "0.3")
	if err != nil {
		t.Fatal(err)
	}
	if got := set.RootComplexes[1].P2P(); got != 0.3 {
		t.Errorf("--set: %v", got)
	}
	s.RootComplexes[0].P2PEfficiency = P(1.5, "wrong")
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "root_complexes[0].p2p_efficiency") {
		t.Errorf("p2p_efficiency 1.5: %v", err)
	}
}

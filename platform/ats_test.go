package platform

import (
	"strings"
	"testing"
)

// TestDeviceATS: a device's ats flag parses, survives Marshal and Parse,
// goes through Set, and is absent (false) unless given.
func TestDeviceATS(t *testing.T) {
	s, err := Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range s.Devices {
		if d.ATS {
			t.Errorf("preset device %s has ats", d.Name)
		}
	}
	name := s.Devices[0].Name
	withATS, err := Set(s, "devices."+name+".ats", "true")
	if err != nil {
		t.Fatal(err)
	}
	if !withATS.Devices[0].ATS {
		t.Fatalf("after --set devices.%s.ats=true: %+v", name, withATS.Devices[0])
	}
	out, err := Marshal(withATS)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "ats: true") {
		t.Errorf("Marshal wrote no ats: true:\n%s", out)
	}
	back, err := Parse("t.yaml", out)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Devices[0].ATS || back.Devices[1].ATS {
		t.Errorf("parsed back: %s ats %v, %s ats %v; want true, false", back.Devices[0].Name, back.Devices[0].ATS, back.Devices[1].Name, back.Devices[1].ATS)
	}
	plain, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "ats:") {
		t.Error("Marshal of the preset writes an ats field")
	}
	if _, err := Set(s, "devices."+name+".ats", "yes"); err == nil {
		t.Error("ats=yes accepted")
	}
}

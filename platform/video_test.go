package platform

import (
	"reflect"
	"testing"
)

// TestVideoDevices: jetson-orin's camera path, ISP and display
// controller and h200-pcie's capture card, with their rates; coherent;
// pixel_rate survives Marshal and Parse and --set.
func TestVideoDevices(t *testing.T) {
	for _, tc := range []struct {
		preset, dev, kind, parent string
		line                      Rate
		pixels                    float64
	}{
		{"jetson-orin", "vi0", DeviceCamera, "soc", 10e9 / 8, 0},
		{"jetson-orin", "isp0", DeviceISP, "soc", 0, 1.85e9},
		{"jetson-orin", "dc0", DeviceDisplay, "soc", 0, 1.99e9},
		{"h200-pcie", "cap0", DeviceCamera, "rc0", 48e9 / 8, 0},
	} {
		t.Run(tc.preset+"/"+tc.dev, func(t *testing.T) {
			s, err := Preset(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			var d *Device
			for i := range s.Devices {
				if s.Devices[i].Name == tc.dev {
					d = &s.Devices[i]
				}
			}
			if d == nil {
				t.Fatalf("no device %s", tc.dev)
			}
			if d.Kind != tc.kind || d.Parent != tc.parent || d.LineRate.V != tc.line || d.PixelRate.V != tc.pixels || d.PixelRate.V != 0 && d.PixelRate.Source == "" {
				t.Errorf("%s = %+v", tc.dev, *d)
			}
			if ok, err := s.DeviceCoherent(tc.dev); !ok || err != nil {
				t.Errorf("%s is not coherent", tc.dev)
			}
			out, err := Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse("m.yaml", out)
			if err != nil || !reflect.DeepEqual(back, s) {
				t.Errorf("Marshal→Parse: %v", err)
			}
			if tc.pixels != 0 {
				set, err := Set(s, "devices."+tc.dev+".pixel_rate", "2.5e9")
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range set.Devices {
					if x.Name == tc.dev && x.PixelRate.V != 2.5e9 {
						t.Errorf("--set pixel_rate: %v", x.PixelRate.V)
					}
				}
			}
		})
	}
}

package scenario

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

// TestIOMMUModes: off and passthrough have no IOTLB miss and, on these
// coherent platforms, no map cost; 2 MiB pages miss less than 4 KiB pages; strict costs more CPU
// per packet than lazy; passthrough delivers what off does; with 4 KiB
// pages the NIC keeps 200 Gb/s in lazy mode but not 400 Gb/s. On the
// default platform and another.
func TestIOMMUModes(t *testing.T) {
	s, _ := Lookup("iommu-modes")
	for _, plat := range []string{"2s-4gpu-pcie", "dgx-h100"} {
		out, err := Run(s, Options{Platform: plat, Sets: []string{"rates=200,400", "packets=2000"}})
		if err != nil {
			t.Fatalf("%s: %v", plat, err)
		}
		rows := map[string]report.Row{}
		for _, r := range out.Result.Results {
			key := r.Path + " " + r.Mode + " " + map[float64]string{200: "200", 400: "400"}[r.LineGbps]
			rows[key] = r
			if r.Ops != 2000 || r.GBps <= 0 || r.CPUSeconds <= 0 {
				t.Errorf("%s %s: %+v", plat, key, r)
			}
		}
		if len(rows) != 12 {
			t.Fatalf("%s: %d rows, want 12", plat, len(rows))
		}
		for _, rate := range []string{"200", "400"} {
			off, pt := rows["off  "+rate], rows["passthrough  "+rate]
			for _, r := range []report.Row{off, pt} {
				if r.IOTLBMisses != 0 || r.MapSeconds != 0 {
					t.Errorf("%s %s %s: %g IOTLB misses, %g s map cost per packet; want none", plat, r.Path, rate, r.IOTLBMisses, r.MapSeconds)
				}
			}
			if off.GBps != pt.GBps {
				t.Errorf("%s %s: off %g GB/s, passthrough %g", plat, rate, off.GBps, pt.GBps)
			}
			for _, mode := range []string{"strict", "lazy"} {
				small, huge := rows[mode+" 4KiB "+rate], rows[mode+" 2MiB "+rate]
				if !(huge.IOTLBMisses < small.IOTLBMisses) {
					t.Errorf("%s %s %s: 2 MiB pages miss %g per packet, 4 KiB %g", plat, mode, rate, huge.IOTLBMisses, small.IOTLBMisses)
				}
				if huge.GBps < small.GBps {
					t.Errorf("%s %s %s: 2 MiB pages %g GB/s below 4 KiB's %g", plat, mode, rate, huge.GBps, small.GBps)
				}
			}
			if strict, lazy := rows["strict 4KiB "+rate], rows["lazy 4KiB "+rate]; !(strict.CPUSeconds > lazy.CPUSeconds && strict.MapSeconds > lazy.MapSeconds) {
				t.Errorf("%s %s: CPU per packet strict %g (map %g), lazy %g (map %g): want strict above", plat, rate,
					strict.CPUSeconds, strict.MapSeconds, lazy.CPUSeconds, lazy.MapSeconds)
			}
		}
		// The walks of 4 KiB pages cost throughput at 400 Gb/s only.
		if l, o := rows["lazy 4KiB 200"], rows["off  200"]; l.GBps < 0.98*o.GBps {
			t.Errorf("%s: lazy 4 KiB at 200 Gb/s: %g GB/s, off %g", plat, l.GBps, o.GBps)
		}
		if l, o := rows["lazy 4KiB 400"], rows["off  400"]; l.GBps > 0.9*o.GBps {
			t.Errorf("%s: lazy 4 KiB at 400 Gb/s: %g GB/s, off %g: want the walks to cost", plat, l.GBps, o.GBps)
		}
	}
}

// TestIOMMUModesDeterministic: two runs give byte-identical JSON.
func TestIOMMUModesDeterministic(t *testing.T) {
	s, _ := Lookup("iommu-modes")
	run := func() []byte {
		out, err := Run(s, Options{Sets: []string{"rates=400", "packets=1000"}})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := report.WriteJSON(&b, out.Result); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if !bytes.Equal(run(), run()) {
		t.Error("two runs differ")
	}
}

// TestIOMMUModesUsage: bad input and platforms without a NIC are usage
// errors; every platform with one runs.
func TestIOMMUModesUsage(t *testing.T) {
	s, _ := Lookup("iommu-modes")
	for _, sets := range [][]string{
		{"size=32B"}, {"size=8KiB"}, {"rates=0"}, {"rates=2000"}, {"pages=1GiB"}, {"packets=0"}, {"device=nosuch"},
	} {
		if _, err := Run(s, Options{Sets: sets}); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: err = %v, want a usage error", sets, err)
		}
	}
	for _, name := range platform.Presets() {
		spec, _ := platform.Preset(name)
		hasNIC := false
		for _, d := range spec.Devices {
			hasNIC = hasNIC || d.Kind == platform.DeviceNIC
		}
		_, err := Run(s, Options{Platform: name, Sets: []string{"packets=200", "rates=100"}})
		if !hasNIC && !errors.Is(err, ErrUsage) {
			t.Errorf("%s has no NIC: err = %v, want a usage error", name, err)
		}
		if hasNIC && err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

package scenario

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

// TestIOMMUAttack: with the IOMMU off the device escapes its mappings,
// changes pages outside them and reads the secret; strict mode blocks
// every escape and leaves every version outside the mappings as it
// was; lazy mode lets through only accesses by stale IOTLB entries,
// which reach no page outside the ring. On the default platform, on
// another x86 one, and on the non-coherent Zynq, whose 1 GiB leaves the
// IOVA window below 4 GiB without memory (and the secret unread at the
// default count).
func TestIOMMUAttack(t *testing.T) {
	s, _ := Lookup("iommu-attack")
	for _, plat := range []string{"2s-4gpu-pcie", "dgx-h100", "zynq-7000"} {
		out, err := Run(s, Options{Platform: plat})
		if err != nil {
			t.Fatalf("%s: %v", plat, err)
		}
		rows := map[string]report.Row{}
		for _, r := range out.Result.Results {
			rows[r.Path] = r
			if r.Ops != 10000 {
				t.Errorf("%s %s: %d DMAs, want 10000", plat, r.Path, r.Ops)
			}
		}
		off, strict, lazy := rows["off"], rows["strict"], rows["lazy"]
		if off.Escapes == 0 || off.Changed == 0 || !off.SecretRead && plat != "zynq-7000" || off.StaleEscapes != 0 {
			t.Errorf("%s off: %+v: want escapes, changed pages and the secret read", plat, off)
		}
		if strict.Escapes != 0 || strict.Changed != 0 || strict.SecretRead || strict.Faults == 0 {
			t.Errorf("%s strict: %+v: want faults and no escape, no changed page", plat, strict)
		}
		if lazy.Escapes == 0 || lazy.Escapes != lazy.StaleEscapes || lazy.Changed != 0 || lazy.SecretRead {
			t.Errorf("%s lazy: %+v: want escapes through stale IOTLB entries only", plat, lazy)
		}
	}
}

// TestIOMMUAttackDeterministic: the same seed gives byte-identical
// JSON; another seed other draws.
func TestIOMMUAttackDeterministic(t *testing.T) {
	s, _ := Lookup("iommu-attack")
	run := func(seed string) []byte {
		out, err := Run(s, Options{Sets: []string{"dmas=3000", "seed=" + seed}})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := report.WriteJSON(&b, out.Result); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b, c := run("7"), run("7"), run("8")
	if !bytes.Equal(a, b) {
		t.Error("two runs with seed 7 differ")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 7 and 8 give the same result")
	}
}

// TestIOMMUAttackUsage: bad input and platforms without a DMA device
// are usage errors.
func TestIOMMUAttackUsage(t *testing.T) {
	s, _ := Lookup("iommu-attack")
	for _, c := range []struct {
		plat string
		sets []string
	}{
		{"", []string{"span=4KiB"}},
		{"", []string{"span=1GiB"}},
		{"", []string{"dmas=0"}},
		{"", []string{"modes=on"}},
		{"", []string{"device=nosuch"}},
	} {
		if _, err := Run(s, Options{Platform: c.plat, Sets: c.sets}); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: err = %v, want a usage error", c.sets, err)
		}
	}
	for _, name := range platform.Presets() {
		spec, _ := platform.Preset(name)
		_, err := Run(s, Options{Platform: name, Sets: []string{"dmas=200"}})
		// Video devices (camera, ISP, display) are not driven here.
		dmaDevs := 0
		for _, d := range spec.Devices {
			if d.Kind != platform.DeviceCamera && d.Kind != platform.DeviceISP && d.Kind != platform.DeviceDisplay {
				dmaDevs++
			}
		}
		if dmaDevs == 0 && !errors.Is(err, ErrUsage) {
			t.Errorf("%s has no DMA device: err = %v, want a usage error", name, err)
		}
		if dmaDevs > 0 && err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestIOMMUAttackATS: trusted with ATS, the device escapes with the
// IOMMU on, strict or lazy: its translated requests reach pages outside
// its mappings and change them. The default modes leave ATS out.
func TestIOMMUAttackATS(t *testing.T) {
	s, _ := Lookup("iommu-attack")
	for _, p := range s.Params {
		if p.Name == "modes" && p.Default != "off,strict,lazy" {
			t.Errorf("default modes %q", p.Default)
		}
	}
	out, err := Run(s, Options{Sets: []string{"modes=strict,strict-ats,lazy-ats", "dmas=5000"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]report.Row{}
	for _, r := range out.Result.Results {
		rows[r.Path] = r
	}
	if r := rows["strict"]; r.Escapes != 0 || r.Changed != 0 {
		t.Errorf("strict without ATS: %+v", r)
	}
	for _, mode := range []string{"strict-ats", "lazy-ats"} {
		r := rows[mode]
		if r.Escapes == 0 || r.Changed == 0 || r.Faults == 0 {
			t.Errorf("%s: %+v: want escapes through translated requests, changed pages, and faults for the rest", mode, r)
		}
	}
	if r := rows["strict-ats"]; r.StaleEscapes != 0 {
		t.Errorf("strict-ats: %d stale escapes, want none", r.StaleEscapes)
	}
}

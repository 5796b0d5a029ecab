package scenario

import (
	"errors"
	"testing"

	"github.com/dmalab/dmalab/platform"
)

// TestDMAStreamingClean: the correct driver draws no diagnostic on any
// preset that has a NIC, coherent or not, in every mode; presets without
// one say so as bad input.
func TestDMAStreamingClean(t *testing.T) {
	s, _ := Lookup("dma-streaming")
	for _, name := range platform.Presets() {
		spec, _ := platform.Preset(name)
		hasNIC := false
		for _, d := range spec.Devices {
			hasNIC = hasNIC || d.Kind == platform.DeviceNIC
		}
		for _, sets := range [][]string{
			{"packets=300"},
			{"packets=300", "mode=polling", "recycle=sync"},
			{"packets=300", "size=9000B", "dir=rx"},
		} {
			out, err := Run(s, Options{Platform: name, Sets: sets, Check: true})
			if !hasNIC {
				if !errors.Is(err, ErrUsage) {
					t.Errorf("%s has no NIC: err = %v, want a usage error", name, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s %v: %v", name, sets, err)
			}
			if n := len(out.Check.Diagnostics); n != 0 {
				t.Errorf("%s %v: %d diagnostics, first %v", name, sets, n, out.Check.Diagnostics[0])
			}
			for _, r := range out.Result.Results {
				if r.Ops != 300 || r.GBps <= 0 || r.CPUSeconds <= 0 || r.P99Seconds < r.P50Seconds {
					t.Errorf("%s %v: row %+v", name, sets, r)
				}
			}
		}
	}
}

// TestDMAVsMemcpy: on coherent x86 PCIe, the DMA engine's CPU cost per
// copy does not grow with size, so it undercuts a CPU memcpy for large
// copies; on the non-coherent Zynq, cache maintenance line by line costs
// the CPU more than copying.
func TestDMAVsMemcpy(t *testing.T) {
	s, _ := Lookup("dma-vs-memcpy")
	cpuCost := func(platform string) map[string]float64 {
		out, err := Run(s, Options{Platform: platform, Sets: []string{"sizes=64B,4MiB"}, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Check.Diagnostics) != 0 {
			t.Fatalf("%s: %v", platform, out.Check.Diagnostics)
		}
		c := map[string]float64{}
		for _, r := range out.Result.Results {
			c[r.Mode+" "+sizeKey(r.Bytes)] = r.CPUSeconds
		}
		return c
	}
	x86 := cpuCost("2s-4gpu-pcie")
	if !(x86["interrupt 4MiB"] < x86["memcpy 4MiB"]/10) {
		t.Errorf("x86 4 MiB: DMA CPU %g s, memcpy %g s: want DMA far cheaper", x86["interrupt 4MiB"], x86["memcpy 4MiB"])
	}
	if !(x86["interrupt 64B"] > x86["memcpy 64B"]) {
		t.Errorf("x86 64 B: DMA CPU %g s, memcpy %g s: want memcpy cheaper", x86["interrupt 64B"], x86["memcpy 64B"])
	}
	if x86["polling 4MiB"] <= x86["interrupt 4MiB"] {
		t.Errorf("polling should burn CPU for the whole wait: %v", x86)
	}
	zynq := cpuCost("zynq-7000")
	if !(zynq["interrupt 4MiB"] > zynq["memcpy 4MiB"]) {
		t.Errorf("zynq 4 MiB: DMA CPU %g s (cache maintenance), memcpy %g s", zynq["interrupt 4MiB"], zynq["memcpy 4MiB"])
	}
}

func sizeKey(n int64) string {
	if n == 64 {
		return "64B"
	}
	return "4MiB"
}

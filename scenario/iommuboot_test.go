package scenario

import (
	"testing"
)

// TestDMAStreamingBehindIOMMU: with --set platform.iommu.mode=strict or
// lazy the NIC runs behind the platform's IOMMU, the correct driver
// still draws no diagnostic, and every unmap pays an invalidation in
// strict mode (1 us on VT-d), so the CPU time per packet grows by most
// of that over the IOMMU off (more than half of it); lazy mode batches
// invalidations and costs less than strict.
func TestDMAStreamingBehindIOMMU(t *testing.T) {
	s, _ := Lookup("dma-streaming")
	cpu := map[string]float64{}
	for _, mode := range []string{"off", "strict", "lazy"} {
		out, err := Run(s, Options{Sets: []string{"packets=500", "dir=rx", "platform.iommu.mode=" + mode}, Check: true})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if n := len(out.Check.Diagnostics); n != 0 {
			t.Errorf("%s: %d diagnostics, first %v", mode, n, out.Check.Diagnostics[0])
		}
		if len(out.Result.Results) != 1 || out.Result.Results[0].Ops != 500 {
			t.Fatalf("%s: rows %+v", mode, out.Result.Results)
		}
		cpu[mode] = out.Result.Results[0].CPUSeconds
	}
	if cpu["strict"] < cpu["off"]+0.5e-6 {
		t.Errorf("CPU per packet: strict %g s, off %g s: want strict more than 0.5 us more", cpu["strict"], cpu["off"])
	}
	if cpu["lazy"] >= cpu["strict"] || cpu["lazy"] <= cpu["off"] {
		t.Errorf("CPU per packet: lazy %g s, want between off %g s and strict %g s", cpu["lazy"], cpu["off"], cpu["strict"])
	}
}

// TestDMAStreamingBehindIOMMUWithATS: a NIC the platform gives ATS
// (devices.nic0.ats) is attached with it at boot: the correct driver
// draws no diagnostic, and every strict unmap now also invalidates the
// NIC's ATC and waits for it, so the CPU per packet grows by about the
// ATS invalidation (2 us on VT-d).
func TestDMAStreamingBehindIOMMUWithATS(t *testing.T) {
	s, _ := Lookup("dma-streaming")
	cpu := map[bool]float64{}
	for _, ats := range []bool{false, true} {
		sets := []string{"packets=500", "dir=rx", "platform.iommu.mode=strict"}
		if ats {
			sets = append(sets, "platform.devices.nic0.ats=true")
		}
		out, err := Run(s, Options{Sets: sets, Check: true})
		if err != nil {
			t.Fatalf("ats %v: %v", ats, err)
		}
		if n := len(out.Check.Diagnostics); n != 0 {
			t.Errorf("ats %v: %d diagnostics, first %v", ats, n, out.Check.Diagnostics[0])
		}
		cpu[ats] = out.Result.Results[0].CPUSeconds
	}
	if d := cpu[true] - cpu[false]; d < 1.5e-6 || d > 2.5e-6 {
		t.Errorf("CPU per packet: %g s with ATS, %g s without: want about 2 us more", cpu[true], cpu[false])
	}
}

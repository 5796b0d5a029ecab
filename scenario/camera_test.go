package scenario

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/report"
)

func cameraRows(out *Outcome) map[string]report.Row {
	rows := map[string]report.Row{}
	for _, r := range out.Result.Results {
		rows[r.Platform+" "+r.Path] = r
	}
	return rows
}

// TestCameraPipeline: the default run, jetson-orin beside h200-pcie.
// Every mode that the platform supports shows every frame at the
// sensor's rate; zero-copy copies nothing with the CPU; DRAM bytes per
// frame are what the platform's path implies (below); a discrete GPU
// cannot import the dma-buf and says so; the summary comes first and
// names both platforms.
func TestCameraPipeline(t *testing.T) {
	s, _ := Lookup("camera-pipeline")
	out, err := Run(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows := cameraRows(out)
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 4 modes on 2 platforms", len(rows))
	}
	for _, m := range []string{"zero-copy", "copy", "pinned", "mapped"} {
		r := rows["jetson-orin "+m]
		if r.Ops != 60 || math.Abs(r.FPS-30) > 0.1 || r.Dropped != 0 || r.P99Seconds < r.P50Seconds || r.Direction != "glass-to-glass" {
			t.Errorf("jetson-orin %s: %+v", m, r)
		}
		if r.PCIeBytes != 0 {
			t.Errorf("jetson-orin %s: %d PCIe bytes per frame on an SoC", m, r.PCIeBytes)
		}
	}
	z, cp, pin := rows["jetson-orin zero-copy"], rows["jetson-orin copy"], rows["jetson-orin pinned"]
	if z.CPUSeconds != 0 || pin.CPUSeconds != 0 || cp.CPUSeconds <= 0 {
		t.Errorf("CPU copying per frame: zero-copy %g, pinned %g, copy %g", z.CPUSeconds, pin.CPUSeconds, cp.CPUSeconds)
	}
	// 1080p RAW10 packed: 2432-byte lines; NV12: 1920 x 1080 x 1.5.
	// Zero-copy: the camera writes RAW, the ISP reads it and writes NV12,
	// the GPU reads NV12 in place, and the 60 Hz display scans it out
	// twice per 30 fps frame.
	const raw, nv12 = 2432 * 1080, 1920 * 1080 * 3 / 2
	want := float64(2*raw + nv12 + nv12 + 2*nv12)
	if d := math.Abs(float64(z.DRAMBytes)-want) / want; d > 0.02 {
		t.Errorf("zero-copy DRAM per frame %d, want %.0f (camera, ISP, GPU, two scanouts) within 2%%", z.DRAMBytes, want)
	}
	// copy adds a CPU memcpy (read and write) and a cudaMemcpy (read and
	// write) of the frame; pinned only the cudaMemcpy.
	if d := float64(cp.DRAMBytes-z.DRAMBytes) - 4*nv12; math.Abs(d) > 0.02*nv12 {
		t.Errorf("copy - zero-copy DRAM per frame: %d, want 4 x %d", cp.DRAMBytes-z.DRAMBytes, nv12)
	}
	if d := float64(pin.DRAMBytes-z.DRAMBytes) - 2*nv12; math.Abs(d) > 0.02*nv12 {
		t.Errorf("pinned - zero-copy DRAM per frame: %d, want 2 x %d", pin.DRAMBytes-z.DRAMBytes, nv12)
	}
	for _, m := range []string{"zero-copy", "pinned"} {
		if r := rows["h200-pcie "+m]; r.Ops != 0 || !strings.Contains(r.Note, "unsupported") {
			t.Errorf("h200-pcie %s: %+v, want unsupported with a note", m, r)
		}
	}
	hc := rows["h200-pcie copy"]
	if hc.Ops != 60 || hc.Direction != "to-inference" || hc.PCIeBytes < 2*raw || hc.CPUSeconds <= 0 {
		t.Errorf("h200-pcie copy: %+v (want the capture card's and the copy engine's PCIe bytes)", hc)
	}
	sum := out.Result.Summary
	if len(sum) != 3 || !strings.HasPrefix(sum[0], "jetson-orin: zero-copy against copy saves") || !strings.HasPrefix(sum[1], "h200-pcie: no zero-copy path") || !strings.HasPrefix(sum[2], "Try:") {
		t.Errorf("summary %q", sum)
	}
}

// TestCameraPipelineBackpressure: inference slower than the sensor
// bounds the frame rate at 1/infer, and the camera drops what it cannot
// queue.
func TestCameraPipelineBackpressure(t *testing.T) {
	s, _ := Lookup("camera-pipeline")
	out, err := Run(s, Options{Sets: []string{"infer=50ms", "platforms=jetson-orin", "modes=zero-copy", "frames=40"}})
	if err != nil {
		t.Fatal(err)
	}
	r := cameraRows(out)["jetson-orin zero-copy"]
	if math.Abs(r.FPS-20) > 0.5 || r.Dropped == 0 {
		t.Errorf("%+v: want ~20 fps and drops", r)
	}
}

// TestCameraPipelineCMA: 4K buffers exhaust the 32 MiB CMA heap that the
// SMMU-less camera path needs, and every mode says so; with the SMMU
// translating, scattered system-heap pages serve and every frame shows.
func TestCameraPipelineCMA(t *testing.T) {
	s, _ := Lookup("camera-pipeline")
	sets := []string{"resolution=4k", "fps=60", "frames=20", "platforms=jetson-orin", "modes=zero-copy,copy"}
	out, err := Run(s, Options{Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Result.Results {
		if r.Ops != 0 || !strings.Contains(r.Note, "cannot allocate memory") {
			t.Errorf("%s without the SMMU: %+v, want the CMA heap's ENOMEM", r.Path, r)
		}
	}
	if !strings.Contains(out.Result.Summary[0], "every mode failed") {
		t.Errorf("summary %q", out.Result.Summary[0])
	}
	out, err = Run(s, Options{Sets: append(sets, "platform.iommu.mode=strict")})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Result.Results {
		if r.Ops != 20 || math.Abs(r.FPS-60) > 0.5 {
			t.Errorf("%s behind the SMMU: %+v", r.Path, r)
		}
	}
}

// TestCameraPipelineCheck: a correct pipeline draws no DMA-BUF, fence or
// IOMMU diagnostic; the one class it gets is DMA-API debug's cacheline
// tracking, which Linux also reports when a writing importer (the ISP)
// and the display (mapped DMA_BIDIRECTIONAL, as drm_gem_prime_import
// does) map one buffer.
func TestCameraPipelineCheck(t *testing.T) {
	s, _ := Lookup("camera-pipeline")
	out, err := Run(s, Options{Check: true, Sets: []string{"frames=10"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range out.Check.Diagnostics {
		if d.Class != "cacheline-overlap" {
			t.Errorf("%s: %s", d.Class, d.Message)
		}
		if !strings.HasPrefix(d.Message, "jetson-orin: ") {
			t.Errorf("diagnostic without its platform: %s", d.Message)
		}
	}
}

// TestCameraPipelineDeterministic: the same inputs, the same bytes.
func TestCameraPipelineDeterministic(t *testing.T) {
	s, _ := Lookup("camera-pipeline")
	run := func() []byte {
		out, err := Run(s, Options{Sets: []string{"frames=20"}})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := report.WriteJSON(&b, out.Result); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Error("two runs differ")
	}
}

// TestCameraPipelineUsage: a platform without a camera, an unknown
// platform, a bad value.
func TestCameraPipelineUsage(t *testing.T) {
	s, _ := Lookup("camera-pipeline")
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{Platform: "2s-4gpu-pcie"}, "no camera"},
		{Options{Sets: []string{"platforms=nosuch"}}, "nosuch"},
		{Options{Sets: []string{"resolution=8k"}}, "resolution"},
		{Options{Sets: []string{"frames=1"}}, "frames"},
	} {
		_, err := Run(s, tc.opt)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error naming %q", tc.opt, err, tc.want)
		}
	}
}

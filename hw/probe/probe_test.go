package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dmalab/dmalab/hw/cuda"
)

// smallOpts keeps fake runs cheap: the fake allocates real byte buffers.
func smallOpts() Options {
	return Options{Sizes: []int64{64 << 10, 1 << 20}, SmallSizes: []int64{8, 4096}}
}

func run(t *testing.T, f *Fake, opts Options) (*Report, error) {
	t.Helper()
	rep, err := Run(context.Background(), f, opts)
	if leaks := f.Leaks(); len(leaks) > 0 {
		t.Errorf("resources left behind: %v", leaks)
	}
	if rep != nil {
		if verr := rep.Validate(); verr != nil {
			t.Errorf("report invalid: %v", verr)
		}
	}
	return rep, err
}

func one(t *testing.T, g *GPUReport, family, path, dir string, size int64) Measurement {
	t.Helper()
	for _, m := range g.Find(family, path, dir) {
		if size == 0 || m.SizeBytes == size {
			return m
		}
	}
	t.Fatalf("no %s %s %s %d measurement", family, path, dir, size)
	return Measurement{}
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol*math.Abs(want) }

func TestRunFakeAllFamilies(t *testing.T) {
	f := NewFake(FakeConfig{})
	var progress bytes.Buffer
	opts := smallOpts()
	opts.Progress = &progress
	rep, err := run(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 1 || rep.Schema != Schema || rep.Machine.GPUCount != 1 {
		t.Fatalf("report: %d GPUs, schema %q, machine %+v", len(rep.GPUs), rep.Schema, rep.Machine)
	}
	g := &rep.GPUs[0]
	if len(g.Errors) > 0 {
		t.Fatalf("errors: %v", g.Errors)
	}
	for _, fam := range Families {
		if fam != FamilyCapabilities && len(g.Find(fam, "", "")) == 0 {
			t.Errorf("family %s measured nothing", fam)
		}
	}
	want := []struct{ family, path, dir string }{
		{FamilyCE, "pinned", H2D}, {FamilyCE, "pinned", D2H}, {FamilyCE, "pinned", Bidir},
		{FamilyCE, "writecombined", H2D}, {FamilyCE, "writecombined", D2H},
		{FamilyCE, "registered", H2D}, {FamilyCE, "registered", D2H}, {FamilyCE, "device", D2D},
		{FamilySM, "mapped", H2D}, {FamilySM, "mapped", D2H}, {FamilySM, "device", D2D},
		{FamilySync, "pageable", H2D}, {FamilySync, "pageable", D2H},
		{FamilyCallTime, "pinned", H2D}, {FamilyCallTime, "pageable", D2H},
	}
	for _, w := range want {
		m := one(t, g, w.family, w.path, w.dir, 0)
		if m.Samples < 3 || len(m.Values) != m.Samples || !m.Verified {
			t.Errorf("%s: samples %d, values %d, verified %v", m.Key(), m.Samples, len(m.Values), m.Verified)
		}
	}
	if c := g.Capabilities; c == nil || !c.DMABufExport || !c.BufferIDChanges {
		t.Errorf("capabilities %+v", c)
	}
	if n := strings.Count(progress.String(), "\n"); n != len(g.Measurements) {
		t.Errorf("%d progress lines for %d measurements", n, len(g.Measurements))
	}
}

// TestFakeNumbersFollowTheFormula checks that each method measures what the
// fake's model says, exactly: the method adds nothing of its own.
func TestFakeNumbersFollowTheFormula(t *testing.T) {
	f := NewFake(FakeConfig{})
	rep, err := run(t, f, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	g := &rep.GPUs[0]
	c := f.Config()
	ce := func(size int64, r Route) float64 {
		return float64(size) / (c.CopyLatency.Seconds() + float64(size)/(f.Bandwidth(r)*1e9)) / 1e9
	}
	for _, size := range []int64{64 << 10, 1 << 20} {
		m := one(t, g, FamilyCE, "pinned", H2D, size)
		if w := ce(size, Route{"ce", MemPinned, MemDevice}); !near(m.Median, w, 1e-4) {
			t.Errorf("pinned h2d %d: %g GB/s, formula %g", size, m.Median, w)
		}
	}
	m := one(t, g, FamilyCE, "device", D2D, 1<<20)
	if w := ce(1<<20, Route{"ce", MemDevice, MemDevice}); !near(m.Median, w, 1e-4) {
		t.Errorf("d2d: %g, formula %g", m.Median, w)
	}
	bi := one(t, g, FamilyCE, "pinned", Bidir, 1<<20)
	if w := ce(1<<20, Route{"ce", MemPinned, MemDevice}); !near(bi.PerDirection[H2D].Median, w, 1e-4) {
		t.Errorf("bidir h2d part %g, formula %g", bi.PerDirection[H2D].Median, w)
	}
	if w := ce(1<<20, Route{"ce", MemDevice, MemPinned}); !near(bi.PerDirection[D2H].Median, w, 1e-4) {
		t.Errorf("bidir d2h part %g, formula %g", bi.PerDirection[D2H].Median, w)
	}
	if sum := bi.PerDirection[H2D].Median + bi.PerDirection[D2H].Median; bi.Median > sum*(1+1e-6) || bi.Median < sum*0.95 {
		t.Errorf("bidir total %g, parts sum %g", bi.Median, sum)
	}
	sm := one(t, g, FamilySM, "mapped", H2D, 1<<20)
	if w := float64(1<<20) / (c.LaunchLatency.Seconds() + float64(1<<20)/(f.Bandwidth(Route{"sm", MemMapped, MemDevice})*1e9)) / 1e9; !near(sm.Median, w, 1e-4) {
		t.Errorf("sm mapped h2d %g, formula %g", sm.Median, w)
	}
	sc := one(t, g, FamilyCallTime, "pinned", H2D, 8)
	if w := (c.SyncOverhead.Seconds() + 8/(f.Bandwidth(Route{"sync", MemPinned, MemDevice})*1e9)) * 1e6; !near(sc.Median, w, 1e-3) {
		t.Errorf("8 B call %g us, formula %g", sc.Median, w)
	}
	pg := one(t, g, FamilySync, "pageable", D2H, 1<<20)
	if w := float64(1<<20) / (c.SyncOverhead.Seconds() + float64(1<<20)/(f.Bandwidth(Route{"sync", MemDevice, MemPageable})*1e9)) / 1e9; !near(pg.Median, w, 1e-3) {
		t.Errorf("pageable d2h %g, formula %g", pg.Median, w)
	}
	no := one(t, g, FamilyCallOverhead, "null_call", "", 0)
	if !near(no.Median, c.CallCost.Seconds()*1e6, 1e-6) {
		t.Errorf("null call %g us, want %g", no.Median, c.CallCost.Seconds()*1e6)
	}
	reg := g.Find(FamilyPin, "pageable", "")
	if len(reg) != 2 || reg[0].Operation != "register" || !near(reg[0].Median, c.PinPerGiB.Seconds()*1e6/1024, 1e-3) {
		t.Errorf("pin measurements %+v", reg)
	}
}

// TestSpinExcludesEnqueueCost: with queueing slower than copying, copies
// queued on a free stream are paced by the host; behind the spin kernel they
// run back to back and the measurement sees the copy rate.
func TestSpinExcludesEnqueueCost(t *testing.T) {
	f := NewFake(FakeConfig{EnqueueCost: 20 * time.Microsecond})
	opts := smallOpts()
	opts.Families = []string{FamilyCE}
	rep, err := run(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := f.Config()
	size := int64(64 << 10)
	want := float64(size) / (c.CopyLatency.Seconds() + float64(size)/55e9) / 1e9
	if m := one(t, &rep.GPUs[0], FamilyCE, "pinned", H2D, size); !near(m.Median, want, 1e-4) {
		t.Errorf("spin method: %g GB/s, copy rate %g", m.Median, want)
	}

	// The same copies without the spin kernel are enqueue-bound.
	err = f.WithDevice(0, func(d Device) error {
		host, _ := d.Alloc(MemPinned, size)
		dev, _ := d.Alloc(MemDevice, size)
		s, _ := d.NewStream()
		e0, _ := d.NewEvent()
		e1, _ := d.NewEvent()
		defer func() { d.Free(host); d.Free(dev); d.DestroyStream(s); d.DestroyEvent(e0); d.DestroyEvent(e1) }()
		d.Record(e0, s)
		for range 64 {
			d.CopyAsync(dev, host, size, s)
		}
		d.Record(e1, s)
		if err := d.Synchronize(s); err != nil {
			return err
		}
		el, err := d.Elapsed(e0, e1)
		if err != nil {
			return err
		}
		naive := gbps(64*size, el.Seconds())
		if bound := float64(size) / c.EnqueueCost.Seconds() / 1e9; !near(naive, bound, 0.02) {
			return fmt.Errorf("without spin: %g GB/s, want the enqueue bound %g", naive, bound)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestVerificationFailureIsAnError(t *testing.T) {
	f := NewFake(FakeConfig{Corrupt: func(op string) bool { return op == "CopyAsync" }})
	opts := smallOpts()
	rep, err := run(t, f, opts)
	if !errors.Is(err, ErrVerify) {
		t.Fatalf("Run = %v, want ErrVerify", err)
	}
	g := &rep.GPUs[0]
	if len(g.Find(FamilyCE, "", "")) != 0 {
		t.Errorf("corrupted copies were reported as measurements: %v", g.Find(FamilyCE, "", ""))
	}
	if len(g.Errors) != 1 || !strings.Contains(g.Errors[0], "ce_copy") || !strings.Contains(g.Errors[0], "data verification failed") {
		t.Errorf("GPU errors: %v", g.Errors)
	}
	// Other families still ran.
	if len(g.Find(FamilySM, "", "")) == 0 || len(g.Find(FamilySync, "", "")) == 0 {
		t.Error("families after the failing one did not run")
	}
}

func TestCorruptSyncCopyIsCaught(t *testing.T) {
	f := NewFake(FakeConfig{Corrupt: func(op string) bool { return op == "Copy" }})
	opts := smallOpts()
	opts.Families = []string{FamilyCallTime}
	_, err := run(t, f, opts)
	if !errors.Is(err, ErrVerify) {
		t.Fatalf("Run = %v, want ErrVerify", err)
	}
}

func TestInjectedErrorsAreReportedAndCleanedUp(t *testing.T) {
	boom := errors.New("boom")
	for _, op := range []string{"CopyKernel", "Alloc", "NewEvent", "Record", "Block", "Release", "Synchronize", "Elapsed", "Settle", "Download", "Pin", "ExportDMABuf"} {
		t.Run(op, func(t *testing.T) {
			f := NewFake(FakeConfig{Fail: func(o string) error {
				if o == op {
					return boom
				}
				return nil
			}})
			rep, err := run(t, f, smallOpts())
			if !errors.Is(err, boom) && op != "ExportDMABuf" {
				t.Fatalf("Run = %v, want the injected error", err)
			}
			if rep == nil || len(rep.GPUs) != 1 {
				t.Fatal("no partial report")
			}
			if op == "ExportDMABuf" {
				c := rep.GPUs[0].Capabilities
				if err != nil || c == nil || c.DMABufExport || !strings.Contains(c.DMABufError, "boom") {
					t.Errorf("dma-buf failure: err %v, capabilities %+v", err, c)
				}
			}
		})
	}
}

func TestSpinTimeoutVoidsSample(t *testing.T) {
	// Queueing one copy takes longer than the spin waits.
	f := NewFake(FakeConfig{EnqueueCost: 20 * time.Millisecond})
	opts := smallOpts()
	opts.Families = []string{FamilyCE}
	opts.SpinTimeout = 10 * time.Millisecond
	_, err := run(t, f, opts)
	if !errors.Is(err, ErrSpinTimeout) {
		t.Fatalf("Run = %v, want ErrSpinTimeout", err)
	}
}

func TestFakeDataLandsAtSynchronize(t *testing.T) {
	f := NewFake(FakeConfig{})
	err := f.WithDevice(0, func(d Device) error {
		host, _ := d.Alloc(MemPinned, 64)
		dev, _ := d.Alloc(MemDevice, 64)
		s, _ := d.NewStream()
		e0, _ := d.NewEvent()
		defer func() { d.Free(host); d.Free(dev); d.DestroyStream(s); d.DestroyEvent(e0) }()
		copy(host.Host, "fresh")
		d.CopyAsync(dev, host, 64, s)
		d.Record(e0, s)
		if _, err := d.Elapsed(e0, e0); !errors.Is(err, cuda.ErrorNotReady) {
			return fmt.Errorf("Elapsed before synchronize = %v, want CUDA_ERROR_NOT_READY", err)
		}
		got := make([]byte, 5)
		d.Download(dev, got)
		if string(got) == "fresh" {
			return errors.New("queued copy landed before synchronize")
		}
		d.Synchronize(s)
		d.Download(dev, got)
		if string(got) != "fresh" {
			return fmt.Errorf("after synchronize: %q", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestFakeRejectsMisuse(t *testing.T) {
	f := NewFake(FakeConfig{TotalMemory: 1 << 20})
	err := f.WithDevice(0, func(d Device) error {
		if _, err := d.Alloc(MemDevice, 2<<20); !errors.Is(err, cuda.ErrorOutOfMemory) {
			return fmt.Errorf("over-allocation: %v", err)
		}
		pg, _ := d.Alloc(MemPageable, 4096)
		dev, _ := d.Alloc(MemDevice, 4096)
		s, _ := d.NewStream()
		defer func() { d.Free(pg); d.Free(dev); d.DestroyStream(s) }()
		if err := d.CopyAsync(dev, pg, 4096, s); !errors.Is(err, cuda.ErrNotSupported) {
			return fmt.Errorf("async pageable copy: %v", err)
		}
		if err := d.CopyKernel(dev, pg, 4096, s); err == nil {
			return errors.New("copy kernel on pageable memory accepted")
		}
		if err := d.Free(&Buffer{}); err == nil {
			return errors.New("free of a foreign buffer accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A pageable buffer freed while pinned is a leak.
	f.WithDevice(0, func(d Device) error {
		b, _ := d.Alloc(MemPageable, 4096)
		d.Pin(b)
		return d.Free(b)
	})
	if len(f.Leaks()) != 1 || !strings.Contains(f.Leaks()[0], "pinned") {
		t.Errorf("leaks %v", f.Leaks())
	}
}

func TestNoDriverFailsFast(t *testing.T) {
	start := time.Now()
	drv, err := OpenCUDA()
	if err == nil {
		drv.Close()
		t.Skip("a CUDA driver is present here")
	}
	if !errors.Is(err, cuda.ErrNoDriver) && !errors.Is(err, cuda.ErrNoDevice) {
		t.Fatalf("OpenCUDA = %v, want ErrNoDriver or ErrNoDevice", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v", d)
	}
}

// noGPU is a driver with no devices.
type noGPU struct{ *Fake }

func (noGPU) DeviceCount() (int, error) { return 0, nil }

func TestNoGPU(t *testing.T) {
	_, err := Run(context.Background(), noGPU{NewFake(FakeConfig{})}, Options{})
	if !errors.Is(err, cuda.ErrNoDevice) {
		t.Fatalf("Run = %v, want ErrNoDevice", err)
	}
	_, err = Run(context.Background(), NewFake(FakeConfig{Fail: func(op string) error {
		if op == "Machine" {
			return cuda.ErrNoDriver
		}
		return nil
	}}), Options{})
	if !errors.Is(err, cuda.ErrNoDriver) {
		t.Fatalf("Run = %v, want ErrNoDriver", err)
	}
}

func TestBadOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"size too small":   {Sizes: []int64{100}},
		"size too large":   {Sizes: []int64{2 << 30}},
		"empty sizes":      {Sizes: []int64{}},
		"small too large":  {SmallSizes: []int64{1 << 20}},
		"two samples":      {Samples: 2},
		"too many samples": {Samples: MaxSamples + 1},
		"too many sizes":   {Sizes: slices.Repeat([]int64{MinSize}, MaxSizes+1)},
		"unknown family":   {Families: []string{"teleport"}},
		"gpu out of range": {GPUs: []int{3}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Run(context.Background(), NewFake(FakeConfig{}), o)
			if !errors.Is(err, ErrBadOptions) {
				t.Errorf("Run = %v, want ErrBadOptions", err)
			}
		})
	}
}

func TestCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := NewFake(FakeConfig{})
	_, err := Run(ctx, f, smallOpts())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

func TestSeveralGPUsAndSelection(t *testing.T) {
	f := NewFake(FakeConfig{GPUs: 3})
	opts := smallOpts()
	opts.Families = []string{FamilyCE}
	opts.GPUs = []int{2, 0}
	rep, err := run(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.GPUs) != 2 || rep.GPUs[0].Device.Ordinal != 2 || rep.GPUs[1].Device.Ordinal != 0 {
		t.Fatalf("GPUs %v", rep.GPUs)
	}
	var nvb bytes.Buffer
	if err := rep.WriteNVBandwidth(&nvb); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		NVBandwidth struct {
			Testcases []struct {
				Name   string     `json:"name"`
				Matrix [][]string `json:"bandwidth_matrix"`
				Sum    float64    `json:"sum"`
			} `json:"testcases"`
		} `json:"nvbandwidth"`
	}
	if err := json.Unmarshal(nvb.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	tc := doc.NVBandwidth.Testcases[0]
	if tc.Name != "host_to_device_memcpy_ce" || len(tc.Matrix) != 1 || len(tc.Matrix[0]) != 3 || tc.Matrix[0][1] != "N/A" || tc.Matrix[0][0] == "N/A" {
		t.Errorf("testcase %+v", tc)
	}
}

func TestNVBandwidthLayout(t *testing.T) {
	f := NewFake(FakeConfig{})
	opts := smallOpts()
	opts.Families = []string{FamilyCE, FamilySM}
	rep, err := run(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteNVBandwidth(&out); err != nil {
		t.Fatal(err)
	}
	var root map[string]map[string]any
	if err := json.Unmarshal(out.Bytes(), &root); err != nil {
		t.Fatal(err)
	}
	doc, ok := root["nvbandwidth"]
	if !ok || len(root) != 1 {
		t.Fatalf("top level %v", root)
	}
	for _, k := range []string{"CUDA Runtime Version", "Driver Version", "GPU Device list", "git_version", "testcases", "version"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("missing %q", k)
		}
	}
	if doc["CUDA Runtime Version"].(float64) != 13000 {
		t.Errorf("CUDA Runtime Version %v", doc["CUDA Runtime Version"])
	}
	g := &rep.GPUs[0]
	var names []string
	for _, tc := range doc["testcases"].([]any) {
		tc := tc.(map[string]any)
		names = append(names, tc["name"].(string))
		if tc["status"] != "Passed" || !strings.HasSuffix(tc["bandwidth_description"].(string), "(GB/s)") {
			t.Errorf("testcase %v", tc)
		}
		cell := tc["bandwidth_matrix"].([]any)[0].([]any)[0].(string)
		var v float64
		fmt.Sscan(cell, &v)
		if !near(v, tc["sum"].(float64), 1e-5) {
			t.Errorf("%s: cell %s, sum %v", tc["name"], cell, tc["sum"])
		}
		if tc["name"] == "host_to_device_memcpy_ce" {
			if m := one(t, g, FamilyCE, "pinned", H2D, 1<<20); !near(v, m.Median, 1e-5) {
				t.Errorf("h2d cell %g, largest-size median %g", v, m.Median)
			}
		}
	}
	wantNames := []string{"host_to_device_memcpy_ce", "device_to_host_memcpy_ce", "host_to_device_bidirectional_memcpy_ce",
		"device_to_host_bidirectional_memcpy_ce", "device_local_copy", "host_to_device_memcpy_sm", "device_to_host_memcpy_sm"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("testcases %v, want %v", names, wantNames)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	rep, err := run(t, NewFake(FakeConfig{}), smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"schema": "dmalab.probe/v1"`, `"size_bytes"`, `"per_direction"`, `"total_memory_bytes"`, `"dma_buf_export": true`, `"method": "spin_events"`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	back, err := ReadJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.GPUs, rep.GPUs) || !reflect.DeepEqual(back.Machine, rep.Machine) || !back.Started.Equal(rep.Started) {
		t.Error("report changed in a JSON round trip")
	}
}

func TestReadJSONRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":      "{",
		"wrong schema":  `{"schema":"other"}`,
		"unknown field": `{"schema":"dmalab.probe/v1","bogus":1}`,
		"bad stats": `{"schema":"dmalab.probe/v1","gpus":[{"measurements":[{"family":"ce_copy","path":"pinned","method":"spin_events",` +
			`"unit":"GB/s","size_bytes":1,"repetitions":1,"samples":1,"values":[1],"median":2,"min":3,"max":1}]}]}`,
		"values count": `{"schema":"dmalab.probe/v1","gpus":[{"measurements":[{"family":"ce_copy","path":"pinned","method":"spin_events",` +
			`"unit":"GB/s","size_bytes":1,"repetitions":1,"samples":3,"values":[1],"median":1,"min":1,"max":1}]}]}`,
		// The writers index and size by these: -1 panicked in
		// WriteNVBandwidth, a huge one allocated a matrix of gigabytes.
		"negative ordinal": `{"schema":"dmalab.probe/v1","gpus":[{"device":{"ordinal":-1}}]}`,
		"huge ordinal":     `{"schema":"dmalab.probe/v1","gpus":[{"device":{"ordinal":40000}}]}`,
		"huge gpu_count":   `{"schema":"dmalab.probe/v1","machine":{"gpu_count":40000}}`,
		"negative count":   `{"schema":"dmalab.probe/v1","machine":{"cpus":-1}}`,
		"bad iommu mode":   `{"schema":"dmalab.probe/v1","machine":{"iommu":{"mode":"relaxed"}}}`,
		"iommu kinds":      `{"schema":"dmalab.probe/v1","machine":{"iommu":{"mode":"lazy","units":["dmar0"],"kinds":[]}}}`,
		"negative peer": `{"schema":"dmalab.probe/v1","gpus":[{"measurements":[{"family":"ce_copy","path":"peer","direction":"d2d","operation":"read",` +
			`"method":"spin_events","unit":"GB/s","size_bytes":1,"repetitions":1,"samples":1,"values":[1],"median":1,"min":1,"max":1,"peer_gpu":-1}]}]}`,
		"too large": `{"schema":"dmalab.probe/v1","machine":{"hostname":"` + strings.Repeat("x", MaxReportSize) + `"}}`,
	} {
		_, err := ReadJSON(strings.NewReader(doc))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if name == "too large" && !strings.Contains(err.Error(), "larger than 64 MiB") {
			t.Errorf("too large: %v", err)
		}
	}
}

func FuzzReadJSON(f *testing.F) {
	rep, err := Run(context.Background(), NewFake(FakeConfig{}), Options{Sizes: []int64{4096}, SmallSizes: []int64{8}, Families: []string{FamilyCE, FamilyCapabilities}})
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	rep.WriteJSON(&buf)
	f.Add(buf.Bytes())
	// Two GPUs with peer copies: ordinals and peer_gpu index the
	// nvbandwidth matrices.
	peers, err := Run(context.Background(), NewFake(FakeConfig{GPUs: 2}), Options{Sizes: []int64{4096}, SmallSizes: []int64{8}, Families: []string{FamilyCE, FamilySM}})
	if err != nil {
		f.Fatal(err)
	}
	buf.Reset()
	peers.WriteJSON(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(`{"schema":"dmalab.probe/v1"}`))
	f.Add([]byte(`{"schema":"dmalab.probe/v1","gpus":[{"device":{"ordinal":-1},"measurements":[{"family":"ce_copy","path":"peer","direction":"d2d",` +
		`"operation":"read","method":"spin_events","unit":"GB/s","size_bytes":1,"repetitions":1,"samples":1,"values":[1],"median":1,"min":1,"max":1,"peer_gpu":0}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ReadJSON(bytes.NewReader(data))
		if err != nil {
			return
		}
		// Every writer takes what ReadJSON accepts (probe --input prints
		// it in each format).
		if err := r.WriteTable(io.Discard); err != nil {
			t.Fatalf("WriteTable: %v", err)
		}
		var nvb bytes.Buffer
		if err := r.WriteNVBandwidth(&nvb); err != nil {
			t.Fatalf("WriteNVBandwidth: %v", err)
		}
		if !json.Valid(nvb.Bytes()) {
			t.Fatal("WriteNVBandwidth wrote invalid JSON")
		}
		// What ReadJSON accepts, WriteJSON writes back to an equal report.
		var out bytes.Buffer
		if err := r.WriteJSON(&out); err != nil {
			t.Fatal(err)
		}
		r2, err := ReadJSON(&out)
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if !reflect.DeepEqual(r.GPUs, r2.GPUs) {
			t.Fatal("round trip changed the GPUs")
		}
	})
}

func TestSummarize(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want Stat
	}{
		{[]float64{3, 1, 2}, Stat{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, Stat{2.5, 1, 4}},
		{[]float64{5}, Stat{5, 5, 5}},
	} {
		if got := summarize(tt.xs); got != tt.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tt.xs, got, tt.want)
		}
	}
	if s := summarize(nil); !math.IsNaN(s.Median) {
		t.Errorf("summarize(nil) = %+v", s)
	}
}

func TestPattern(t *testing.T) {
	p := newPattern(0xBAADF00D)
	q := newPattern(0xCAFEBABE)
	n := int64(3*patternPeriod + 100)
	b := make([]byte, n)
	p.fill(b)
	if err := p.verify(b); err != nil {
		t.Fatal(err)
	}
	if err := q.verify(b); !errors.Is(err, ErrVerify) {
		t.Errorf("other seed verified: %v", err)
	}
	// A copy displaced by one whole period differs.
	if err := p.verify(b[patternPeriod : 2*patternPeriod]); !errors.Is(err, ErrVerify) {
		t.Errorf("period-displaced data verified: %v", err)
	}
	b[n-1] ^= 1
	err := p.verify(b)
	if !errors.Is(err, ErrVerify) || !strings.Contains(err.Error(), fmt.Sprintf("byte %d", n-1)) {
		t.Errorf("flipped last byte: %v", err)
	}
	// Prefixes agree whatever was generated first.
	short := newPattern(7)
	a := append([]byte(nil), short.bytes(10)...)
	short.bytes(patternPeriod * 2)
	if !bytes.Equal(a, short.bytes(10)) {
		t.Error("prefix changed when the fill grew")
	}
}

func TestTableMentionsEverything(t *testing.T) {
	f := NewFake(FakeConfig{DMABufErr: cuda.ErrorNotSupported})
	rep, err := run(t, f, smallOpts())
	if err != nil {
		t.Fatal(err)
	}
	rep.GPUs[0].Errors = append(rep.GPUs[0].Errors, "pin: example")
	var b bytes.Buffer
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, s := range []string{"Fake H200", "PCIe gen 5 x16", "BAR1 256GiB", "dma-buf export: no: CUDA_ERROR_NOT_SUPPORTED",
		"ce_copy:", "sm_copy:", "sync_call:", "pin:", "writecombined", "h2d 50.99", "error: pin: example", "dma_buf_supported=1"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q", s)
		}
	}
}

func ExampleRun() {
	// A fake GPU whose pinned host-to-device path moves 25 GB/s.
	f := NewFake(FakeConfig{Bandwidth: map[Route]float64{{"ce", MemPinned, MemDevice}: 25}, CopyLatency: time.Nanosecond})
	rep, err := Run(context.Background(), f, Options{Sizes: []int64{1 << 20}, Families: []string{FamilyCE}})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := rep.GPUs[0].Find(FamilyCE, "pinned", H2D)[0]
	fmt.Printf("%s: %.1f %s, %d samples of %d copies, verified %v\n", m.Key(), m.Median, m.Unit, m.Samples, m.Repetitions, m.Verified)
	// Output: ce_copy pinned h2d 1MiB: 25.0 GB/s, 3 samples of 16 copies, verified true
}

// TestNVBandwidthLatencyAndBidir: with the latency family, the
// nvbandwidth layout has host_device_latency_sm, the mapped pointer
// chase's median in nanoseconds; a bidirectional copy records
// nvbandwidth's per-direction figures (the other direction doubled) and
// the equal-work ones beside them, and the layout takes nvbandwidth's.
func TestNVBandwidthLatencyAndBidir(t *testing.T) {
	f := NewFake(FakeConfig{})
	opts := smallOpts()
	opts.Families = []string{FamilyLatency, FamilyCE}
	rep, err := run(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	g := &rep.GPUs[0]
	bi := one(t, g, FamilyCE, "pinned", Bidir, 1<<20)
	for _, k := range []string{H2D, D2H, H2D + SameSizeSuffix, D2H + SameSizeSuffix} {
		if s, ok := bi.PerDirection[k]; !ok || s.Median <= 0 {
			t.Errorf("bidir per_direction %q: %+v", k, s)
		}
	}
	doc := nvbDocOf(t, rep)
	chase := g.Find(FamilyLatency, "mapped", H2D)
	if len(chase) != 1 {
		t.Fatalf("%d mapped pointer chases", len(chase))
	}
	got := map[string]nvbTestcase{}
	for _, tc := range doc.NVBandwidth.Testcases {
		got[tc.Name] = tc
	}
	lat, ok := got["host_device_latency_sm"]
	if !ok || !strings.HasSuffix(lat.BandwidthDescription, "(ns)") || !near(lat.Sum, chase[0].Median, 1e-9) {
		t.Errorf("host_device_latency_sm %+v, chase median %g", lat, chase[0].Median)
	}
	if tc := got["host_to_device_bidirectional_memcpy_ce"]; !near(tc.Sum, bi.PerDirection[H2D].Median, 1e-9) {
		t.Errorf("bidir h2d testcase %g, nvbandwidth-method figure %g", tc.Sum, bi.PerDirection[H2D].Median)
	}
}

package scenario

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/report"
)

// umRun runs a unified-memory scenario with measure in place of its Run,
// so that the test sees the samples with the driver's counts, and
// checks that the checker has nothing to say about a correct program.
func umRun[S any](t *testing.T, name string, measure func(*Context) ([]S, error), sets ...string) []S {
	t.Helper()
	s, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	sc := *s
	var got []S
	sc.Run = func(c *Context) error {
		got, err = measure(c)
		return err
	}
	out, err := Run(&sc, Options{Sets: sets, Check: true})
	if err != nil {
		t.Fatalf("%s %v: %v", name, sets, err)
	}
	if d := out.Check.Diagnostics; len(d) != 0 {
		t.Errorf("%s %v: %d diagnostics, first %+v", name, sets, len(d), d[0])
	}
	return got
}

// byKey indexes um-prefetch samples by mode and step.
func byKey(ss []umSample) map[string]map[int]umSample {
	m := map[string]map[int]umSample{}
	for _, s := range ss {
		if m[s.mode] == nil {
			m[s.mode] = map[int]umSample{}
		}
		m[s.mode][s.step] = s
	}
	return m
}

// TestUMPrefetchSpike: without prefetch the first kernel faults its data
// over and is far slower than the second and than the first kernel after
// a prefetch; prefetched kernels never fault and run as fast as on
// device memory; advice removes the faults but leaves the data across
// PCIe.
func TestUMPrefetchSpike(t *testing.T) {
	const size = 64 << 20
	m := byKey(umRun(t, "um-prefetch", measureUMPrefetch, "size=64MiB", "kernels=3"))
	od, pf, adv, dev := m["on-demand"], m["prefetch"], m["advise"], m["device"]
	if len(od) != 3 || len(pf) != 4 || len(adv) != 3 || len(dev) != 4 {
		t.Fatalf("samples per mode: on-demand %d, prefetch %d, advise %d, device %d", len(od), len(pf), len(adv), len(dev))
	}
	if !(od[1].took > 20*od[2].took) {
		t.Errorf("on-demand kernel 1 %v, kernel 2 %v: want a spike", od[1].took, od[2].took)
	}
	if !(od[1].took > 20*pf[1].took) {
		t.Errorf("on-demand kernel 1 %v, prefetched kernel 1 %v", od[1].took, pf[1].took)
	}
	if od[1].faults == 0 || od[1].migrated < size {
		t.Errorf("on-demand kernel 1: %v, want faults migrating all %d B", od[1].umStats, size)
	}
	for k := 2; k <= 3; k++ {
		if od[k].faults != 0 || od[k].migrated != 0 || od[k].took != od[2].took {
			t.Errorf("on-demand kernel %d: %v in %v, want no faults, as kernel 2", k, od[k].umStats, od[k].took)
		}
	}
	if pf[0].faults != 0 || pf[0].migrated < size {
		t.Errorf("prefetch: %v, want %d B moved without faults", pf[0].umStats, size)
	}
	for k := 1; k <= 3; k++ {
		if pf[k].umStats != (umStats{}) {
			t.Errorf("prefetched kernel %d: %v", k, pf[k].umStats)
		}
		if pf[k].took != dev[k].took {
			t.Errorf("kernel %d: prefetched %v, device memory %v: want equal (both from VRAM)", k, pf[k].took, dev[k].took)
		}
		if g := gbpsOf(adv[k]); adv[k].umStats != (umStats{}) || g < 40 || g > 56 {
			t.Errorf("advised kernel %d: %v at %.1f GB/s, want no faults, at PCIe speed", k, adv[k].umStats, g)
		}
	}
	if g := gbpsOf(dev[1]); g < 1000 {
		t.Errorf("device kernel at %.1f GB/s, want VRAM speed", g)
	}
	// The prefetch moves the data faster than the faults do, and the
	// pinned copy faster still.
	if !(dev[0].took < pf[0].took && pf[0].took < od[1].took) {
		t.Errorf("copy %v, prefetch %v, faulting kernel %v", dev[0].took, pf[0].took, od[1].took)
	}
}

func gbpsOf(s umSample) float64 { return float64(s.bytes) / s.took.Seconds() / 1e9 }

// TestUMPrefetchRows: the table's rows and their fields.
func TestUMPrefetchRows(t *testing.T) {
	s, _ := Lookup("um-prefetch")
	out, err := Run(s, Options{Sets: []string{"size=8MiB", "kernels=2", "modes=on-demand,device"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		path, dir, mode string
		ops             int64
	}{
		{"managed-fault", "kernel", "on-demand", 1}, {"managed-fault", "kernel", "on-demand", 2},
		{"device", "h2d", "device", 0}, {"device", "kernel", "device", 1}, {"device", "kernel", "device", 2},
	}
	rows := out.Result.Results
	if len(rows) != len(want) {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.Path != w.path || r.Direction != w.dir || r.Mode != w.mode || int64(r.Step) != w.ops || r.Bytes != 8<<20 || r.Seconds <= 0 || r.GBps <= 0 || r.Name == "" {
			t.Errorf("row %d: %+v, want %+v", i, r, w)
		}
	}
}

// TestUMOversubscribe: below the GPU's memory the managed modes run from
// VRAM after the first pass; above it, on-demand faults and evicts on
// every pass and falls below zero-copy, which does not care; prefetch
// helps the first pass only; GB/s of the second pass do not rise as the
// working set grows.
func TestUMOversubscribe(t *testing.T) {
	got := umRun(t, "um-oversubscribe", measureUMOversubscribe, "vram=256MiB", "chunk=16MiB")
	type key struct {
		ratio float64
		mode  string
		step  int
	}
	m := map[key]umSample{}
	for _, s := range got {
		m[key{s.ratio, s.mode, s.step}] = s.umSample
	}
	if len(m) != len(got) || len(got) != 4*(2+3+2) {
		t.Fatalf("%d samples, %d distinct", len(got), len(m))
	}
	prev := 0.0
	for _, r := range []float64{0.5, 1, 1.5, 2} {
		od1, od2 := m[key{r, "on-demand", 1}], m[key{r, "on-demand", 2}]
		pf1, pf2 := m[key{r, "prefetch", 1}], m[key{r, "prefetch", 2}]
		zc1, zc2 := m[key{r, "zero-copy", 1}], m[key{r, "zero-copy", 2}]
		if want := int64(r * (256 << 20)); od1.bytes != want {
			t.Errorf("%gx: working set %d B, want %d", r, od1.bytes, want)
		}
		if zc1.umStats != (umStats{}) || zc1.took != zc2.took || gbpsOf(zc1) < 50 || gbpsOf(zc1) > 56 {
			t.Errorf("%gx zero-copy: %v, passes %v and %v, %.1f GB/s", r, zc1.umStats, zc1.took, zc2.took, gbpsOf(zc1))
		}
		if od1.faults == 0 || od1.migrated < od1.bytes {
			t.Errorf("%gx on-demand pass 1: %v", r, od1.umStats)
		}
		if !(gbpsOf(pf1) > gbpsOf(od1)) {
			t.Errorf("%gx: prefetched pass 1 %.1f GB/s, on-demand %.1f", r, gbpsOf(pf1), gbpsOf(od1))
		}
		if r <= 1 {
			for _, s := range []umSample{od2, pf1, pf2} {
				if s.umStats != (umStats{}) || gbpsOf(s) < 1000 {
					t.Errorf("%gx %s pass %d: %v at %.1f GB/s, want VRAM speed", r, s.mode, s.step, s.umStats, gbpsOf(s))
				}
			}
		} else {
			if od2.faults == 0 || od2.evictions == 0 || od2.evicted == 0 {
				t.Errorf("%gx on-demand pass 2: %v, want faults and evictions", r, od2.umStats)
			}
			if !(gbpsOf(od2) < gbpsOf(zc2)) {
				t.Errorf("%gx pass 2: on-demand %.1f GB/s, zero-copy %.1f: want on-demand below", r, gbpsOf(od2), gbpsOf(zc2))
			}
			if pf2.evictions == 0 {
				t.Errorf("%gx prefetch pass 2: %v, want evictions (the prefetch fits once)", r, pf2.umStats)
			}
		}
		// A larger set amortises the one launch latency better: a few
		// per cent is not a trend.
		if g := gbpsOf(od2); prev > 0 && g > 1.1*prev {
			t.Errorf("%gx on-demand pass 2 at %.1f GB/s, faster than the smaller set's %.1f", r, g, prev)
		}
		prev = gbpsOf(od2)
	}
}

// TestUMDeterministic: the same run twice gives byte-identical JSON.
func TestUMDeterministic(t *testing.T) {
	for _, c := range []struct {
		name string
		sets []string
	}{
		{"um-prefetch", []string{"size=16MiB"}},
		{"um-oversubscribe", []string{"vram=128MiB", "ratios=0.5,2", "chunk=8MiB"}},
	} {
		s, _ := Lookup(c.name)
		var docs [2]bytes.Buffer
		for i := range docs {
			out, err := Run(s, Options{Sets: c.sets})
			if err != nil {
				t.Fatal(err)
			}
			if err := report.WriteJSON(&docs[i], out.Result); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(docs[0].Bytes(), docs[1].Bytes()) {
			t.Errorf("%s: two runs differ", c.name)
		}
	}
}

func TestUMUsage(t *testing.T) {
	for _, c := range []struct {
		name, platform string
		sets           []string
	}{
		{"um-prefetch", "", []string{"modes=nope"}},
		{"um-prefetch", "", []string{"gpu=3"}},
		{"um-prefetch", "", []string{"size=0B"}},
		{"um-oversubscribe", "", []string{"ratios=0"}},
		{"um-oversubscribe", "", []string{"ratios=a"}},
		{"um-oversubscribe", "", []string{"vram=lots"}},
		{"um-oversubscribe", "", []string{"vram=0B"}},
		{"um-oversubscribe", "", []string{"gpu=1"}},
		{"um-prefetch", "zynq-7000", nil}, // no GPU
	} {
		s, _ := Lookup(c.name)
		if _, err := Run(s, Options{Platform: c.platform, Sets: c.sets}); !errors.Is(err, ErrUsage) {
			t.Errorf("%s %s %v: %v, want a usage error", c.name, c.platform, c.sets, err)
		}
	}
}

// TestUMOneSystem: the unified-memory scenarios run on the one system
// the run booted, with every option of the run. um-oversubscribe used to
// rebuild the machine inside Run, without payload mode and with the DMA
// layer left on the old machine.
func TestUMOneSystem(t *testing.T) {
	for _, c := range []struct {
		name string
		sets []string
		vram uint64 // the GPU memory the run must see; 0: the platform's
	}{
		{"um-oversubscribe", []string{"vram=256MiB", "chunk=16MiB", "ratios=0.5", "passes=1", "modes=on-demand"}, 256 << 20},
		{"um-prefetch", []string{"size=8MiB", "kernels=1", "modes=on-demand"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Lookup(c.name)
			if err != nil {
				t.Fatal(err)
			}
			sc := *s
			sc.Run = func(ctx *Context) error {
				sys, m := ctx.System, ctx.Machine
				if err := s.Run(ctx); err != nil {
					return err
				}
				d, err := ctx.CUDA()
				if err != nil {
					return err
				}
				if ctx.System != sys || ctx.Machine != m || d.Machine() != m {
					t.Error("the scenario changed the system it runs on")
				}
				if !m.Mem.Payload() {
					t.Error("payload mode lost")
				}
				if got := uint64(m.Spec.GPUs[0].VRAM.V); c.vram != 0 && got != c.vram {
					t.Errorf("the system's GPU has %d bytes, want %d", got, c.vram)
				}
				return nil
			}
			out, err := Run(&sc, Options{Sets: c.sets, Payload: true, Check: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Result.Results) == 0 {
				t.Error("no rows")
			}
		})
	}
}

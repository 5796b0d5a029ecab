package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/hw/cuda"
)

// openReal returns the real driver, skipping only when this machine has no
// CUDA driver or GPU.
func openReal(t *testing.T) *CUDADriver {
	t.Helper()
	drv, err := OpenCUDA()
	if err != nil {
		if cuda.IsUnavailable(err) {
			t.Skipf("no CUDA here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

// TestRealProbe runs every family on GPU 0 with small sizes and checks that
// the numbers are physically plausible.
func TestRealProbe(t *testing.T) {
	drv := openReal(t)
	rep, err := Run(context.Background(), drv, Options{
		GPUs: []int{0}, Sizes: []int64{1 << 20, 32 << 20}, SmallSizes: []int64{8, 4096},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Validate(); err != nil {
		t.Fatal(err)
	}
	g := &rep.GPUs[0]
	if g.Device.Multiprocessors < 1 || g.Device.TotalMemory < 1<<30 || g.Capabilities == nil {
		t.Errorf("device %+v, capabilities %+v", g.Device, g.Capabilities)
	}
	check := func(family, path, dir string, lo, hi float64) {
		for _, m := range g.Find(family, path, dir) {
			if m.Median < lo || m.Median > hi || !(m.Min <= m.Median && m.Median <= m.Max) {
				t.Errorf("%s: median %g %s outside [%g, %g]", m.Key(), m.Median, m.Unit, lo, hi)
			}
		}
		if len(g.Find(family, path, dir)) == 0 {
			t.Errorf("no %s %s %s", family, path, dir)
		}
	}
	check(FamilyCE, "pinned", H2D, 1, 1000)
	check(FamilyCE, "pinned", D2H, 1, 1000)
	check(FamilyCE, "device", D2D, 50, 20000)
	check(FamilySM, "mapped", H2D, 0.5, 1000)
	check(FamilyCallTime, "pinned", H2D, 0.5, 1000)
	check(FamilyCallOverhead, "null_call", "", 0.001, 100)
	check(FamilyLatency, "mapped", H2D, 100, 100000)
	check(FamilyLatency, "device", "", 50, 100000)
	check(FamilyUnified, PathManagedPrefetch, H2D, 0.1, 1000)
	check(FamilyUnified, PathManagedFault, H2D, 0.01, 100000)
	check(FamilyUnified, PathManagedCPUFault, D2H, 0.01, 1000)
	check(FamilyUnified, PathManagedRemote, H2D, 0.1, 1000)
	if rep.Machine.GPUCount > 1 {
		t.Logf("GPU 0 can map the memory of GPUs %v", g.Capabilities.PeerAccess)
		for _, p := range g.Capabilities.PeerAccess {
			if len(g.Find(FamilyCE, "peer", D2D)) == 0 || len(g.Find(FamilySM, "peer", D2D)) == 0 {
				t.Errorf("no peer measurements with GPU %d", p)
			}
		}
		if len(g.Capabilities.PeerAccess) > 0 {
			check(FamilyCE, "peer", D2D, 1, 2000)
		}
	}
	var sb strings.Builder
	rep.WriteTable(&sb)
	t.Log("\n" + sb.String())
}

// TestRealProbeFull runs the default probe and writes its three outputs
// into the directory named by DMALAB_PROBE_OUT; without it the test skips.
func TestRealProbeFull(t *testing.T) {
	dir := os.Getenv("DMALAB_PROBE_OUT")
	if dir == "" {
		t.Skip("DMALAB_PROBE_OUT not set")
	}
	drv := openReal(t)
	opts := Options{Progress: os.Stderr}
	if s := os.Getenv("DMALAB_PROBE_SIZES"); s != "" {
		for f := range strings.SplitSeq(s, ",") {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			opts.Sizes = append(opts.Sizes, n)
		}
	}
	rep, runErr := Run(context.Background(), drv, opts)
	if rep == nil {
		t.Fatal(runErr)
	}
	var errs []error
	for name, write := range map[string]func(*os.File) error{
		"probe.json":       func(f *os.File) error { return rep.WriteJSON(f) },
		"probe.txt":        func(f *os.File) error { return rep.WriteTable(f) },
		"nvbandwidth.json": func(f *os.File) error { return rep.WriteNVBandwidth(f) },
	} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		errs = append(errs, write(f), f.Close())
	}
	if err := errors.Join(append(errs, runErr)...); err != nil {
		t.Fatal(err)
	}
}

// TestRealRegcache runs the regcache family on GPU 0: a miss registers with
// cuMemHostRegister and must cost more than a hit, which makes no driver
// call; the Get after munmap and mmap must register again.
func TestRealRegcache(t *testing.T) {
	drv := openReal(t)
	rep, err := Run(context.Background(), drv, Options{
		GPUs: []int{0}, Sizes: []int64{16 << 20}, Families: []string{FamilyRegcache},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Validate(); err != nil {
		t.Fatal(err)
	}
	g := &rep.GPUs[0]
	med := func(op string, size int64) float64 {
		for _, m := range g.Find(FamilyRegcache, MemPageable.String(), "") {
			if m.Operation == op && m.SizeBytes == size {
				return m.Median
			}
		}
		t.Fatalf("no %s at %d B", op, size)
		return 0
	}
	for _, size := range []int64{64 << 10, 1 << 20, 16 << 20} {
		if miss, hit := med(RegcacheMiss, size), med(RegcacheHit, size); miss <= hit {
			t.Errorf("%d B: miss %g us not above hit %g us", size, miss, hit)
		}
		for _, m := range g.Find(FamilyRegcache, MemPageable.String(), "") {
			if m.Operation == RegcacheStaleGet && m.SizeBytes == size && (m.Regcache == nil || !m.Regcache.Reregistered) {
				t.Errorf("%d B: stale check %+v", size, m.Regcache)
			}
		}
	}
}

package scenario

import (
	"errors"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/check/gpumem"
	"github.com/dmalab/dmalab/cuda"
)

// maxwell is the --set that gives the default platform's GPU an
// architecture without concurrent managed access, where
// managed-access-rule applies.
const maxwell = "platform.gpus.gpu0.arch=maxwell"

// TestGPUBugsEachReportsItsClass: each misuse, alone, is reported as its
// class and nothing else, with the device and a message; all but one
// name the allocation they misuse.
func TestGPUBugsEachReportsItsClass(t *testing.T) {
	for _, b := range gpuBugs {
		t.Run(b.class, func(t *testing.T) {
			r := checked(t, "gpu-bugs", "h200-pcie", "bug="+b.class, maxwell)
			if got := classes(r); !slices.Equal(got, []string{b.class}) {
				t.Fatalf("bug %s reported %v: %+v", b.class, got, r.Diagnostics)
			}
			if n := len(r.Diagnostics); n != 1 {
				t.Errorf("%d diagnostics, want 1: %+v", n, r.Diagnostics)
			}
			for _, d := range r.Diagnostics {
				if d.Device != "gpu0" || d.Message == "" || d.Proc != "app" {
					t.Errorf("diagnostic without device, message or thread: %+v", d)
				}
				// Pageable memory was never the driver's: no allocation
				// call to name.
				if (d.Origin == "") != (b.class == gpumem.KernelUnpinnedHostMemory) {
					t.Errorf("origin %q", d.Origin)
				}
			}
		})
	}
}

// TestGPUBugsCoverEveryGPUClass: "dmalab check gpu-bugs" on a GPU
// without concurrent managed access reports every GPU-memory class.
func TestGPUBugsCoverEveryGPUClass(t *testing.T) {
	got := classes(checked(t, "gpu-bugs", "h200-pcie", maxwell))
	for _, c := range gpumem.Classes() {
		if !slices.Contains(got, c.Code) {
			t.Errorf("class %s not reported by gpu-bugs", c.Code)
		}
	}
	if len(got) != len(gpumem.Classes()) {
		t.Errorf("classes %v", got)
	}
}

// TestGPUBugsManagedAccessRuleNeedsNoConcurrentAccess: on the Hopper GPU of
// the default platform the CPU may touch managed memory while a kernel
// runs; the same program is a bug on Maxwell.
func TestGPUBugsManagedAccessRuleNeedsNoConcurrentAccess(t *testing.T) {
	if r := checked(t, "gpu-bugs", "h200-pcie", "bug=managed-access-rule"); len(r.Diagnostics) != 0 {
		t.Errorf("hopper: %v", r.Diagnostics)
	}
	if r := checked(t, "gpu-bugs", "", "bug=managed-access-rule", maxwell); len(r.Diagnostics) != 1 {
		t.Errorf("maxwell: %v", r.Diagnostics)
	}
}

// TestGPUBugsSeeWhatCUDAReturns: the faulty calls fail as the real ones
// do (the program's side of each diagnostic).
func TestGPUBugsSeeWhatCUDAReturns(t *testing.T) {
	for _, arch := range []string{"hopper", "maxwell"} {
		s, _ := Lookup("gpu-bugs")
		sc := *s
		seen := map[string]error{}
		sc.Run = func(c *Context) error {
			return commitGPUBugs(c, func(class string, misuse error) { seen[class] = misuse })
		}
		if _, err := Run(&sc, Options{Sets: []string{"platform.gpus.gpu0.arch=" + arch}}); err != nil {
			t.Fatal(err)
		}
		want := map[string]func(error) bool{
			gpumem.CPUDerefDevicePointer:    segfault,
			gpumem.UseAfterFree:             result(cuda.ErrorInvalidValue),
			gpumem.KernelUnpinnedHostMemory: result(cuda.ErrorIllegalAddress),
			gpumem.ForeignContextPointer:    result(cuda.ErrorIllegalAddress),
			gpumem.ManagedAccessRule:        segfault,
		}
		if arch == "hopper" {
			want[gpumem.ManagedAccessRule] = func(err error) bool { return err == nil }
		}
		if len(seen) != len(want) {
			t.Errorf("%s: %d bugs seen", arch, len(seen))
		}
		for class, ok := range want {
			if !ok(seen[class]) {
				t.Errorf("%s: %s: the faulty call returned %v", arch, class, seen[class])
			}
		}
	}
}

func segfault(err error) bool { return errors.Is(err, cuda.ErrSegmentationFault) }

func result(r cuda.Result) func(error) bool {
	return func(err error) bool { return cuda.ResultOf(err) == r }
}

func TestGPUBugsUsage(t *testing.T) {
	s, _ := Lookup("gpu-bugs")
	for _, c := range []struct {
		platform string
		sets     []string
	}{
		{"", []string{"bug=nope"}},
		{"", []string{"gpu=1"}},
		{"zynq-7000", nil}, // no GPU
	} {
		if _, err := Run(s, Options{Platform: c.platform, Sets: c.sets, Check: true}); !errors.Is(err, ErrUsage) {
			t.Errorf("%s %v: %v, want a usage error", c.platform, c.sets, err)
		}
	}
}

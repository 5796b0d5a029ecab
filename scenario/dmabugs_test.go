package scenario

import (
	"errors"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
)

func checked(t *testing.T, name, platform string, sets ...string) *check.Report {
	t.Helper()
	s, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(s, Options{Platform: platform, Sets: sets, Check: true})
	if err != nil {
		t.Fatalf("%s on %s %v: %v", name, platform, sets, err)
	}
	return out.Check
}

func classes(r *check.Report) []string {
	var cs []string
	for _, d := range r.Diagnostics {
		if !slices.Contains(cs, d.Class) {
			cs = append(cs, d.Class)
		}
	}
	return cs
}

// coReported are classes kernel/dma/debug.c reports together with
// another for one call: a sync in the wrong direction of a one-way
// buffer is also a direction mismatch; the ninth overlapping mapping of a
// line was preceded by eight overlaps.
var coReported = map[string][]string{
	"sync-cpu-to-device-buffer":      {"sync-direction"},
	"sync-device-from-device-buffer": {"sync-direction"},
	"cacheline-overflow":             {"cacheline-overlap"},
}

// TestEveryBugReportsItsClass: each misuse, alone, is reported as its
// class (and only with the classes the kernel reports beside it).
func TestEveryBugReportsItsClass(t *testing.T) {
	for _, b := range bugs {
		t.Run(b.class, func(t *testing.T) {
			r := checked(t, "dma-bugs", "zynq-7000", "bug="+b.class)
			got := classes(r)
			if !slices.Contains(got, b.class) {
				t.Fatalf("bug %s reported %v", b.class, got)
			}
			for _, c := range got {
				if c != b.class && !slices.Contains(coReported[b.class], c) {
					t.Errorf("bug %s also reported %s (%v)", b.class, c, r.Diagnostics)
				}
			}
			for _, d := range r.Diagnostics {
				if d.Device != "gem0" || d.Message == "" {
					t.Errorf("diagnostic without device or message: %+v", d)
				}
			}
		})
	}
}

// TestAllBugsCoverEveryClass: "dmalab check dma-bugs" reports every class
// the checker has.
func TestAllBugsCoverEveryClass(t *testing.T) {
	got := classes(checked(t, "dma-bugs", "zynq-7000"))
	for _, c := range dmadebug.Classes() {
		if !slices.Contains(got, c.Code) {
			t.Errorf("class %s not reported by dma-bugs", c.Code)
		}
	}
}

// TestStaleOnlyWhereNonCoherent: the same wrong direction is harmless on
// coherent x86 PCIe (snooping hides it), and stale on the Zynq's
// non-coherent port.
func TestStaleOnlyWhereNonCoherent(t *testing.T) {
	if r := checked(t, "dma-bugs", "2s-4gpu-pcie", "bug=stale-read"); len(r.Diagnostics) != 0 {
		t.Errorf("coherent platform: %v", r.Diagnostics)
	}
	if r := checked(t, "dma-bugs", "zynq-7000", "bug=stale-read"); len(r.Diagnostics) != 1 {
		t.Errorf("non-coherent platform: %v", r.Diagnostics)
	}
}

func TestDMABugsUsage(t *testing.T) {
	s, _ := Lookup("dma-bugs")
	for _, c := range []struct {
		platform string
		sets     []string
	}{
		{"zynq-7000", []string{"bug=nope"}},
		{"zynq-7000", []string{"device=nope"}},
		{"h200-pcie", nil}, // no DMA device
	} {
		if _, err := Run(s, Options{Platform: c.platform, Sets: c.sets, Check: true}); !errors.Is(err, ErrUsage) {
			t.Errorf("%s %v: %v, want a usage error", c.platform, c.sets, err)
		}
	}
}

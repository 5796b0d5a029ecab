package scenario

import (
	"errors"
	"strings"
	"testing"
)

// TestParamBounds: counts and sizes that decide what a run allocates are
// refused above their bounds as bad input naming the parameter and the
// value, before the system boots.
func TestParamBounds(t *testing.T) {
	cases := []struct {
		scenario, set string
	}{
		{"dma-streaming", "ring=100000000"},
		{"dma-streaming", "packets=1000000000"},
		{"dma-streaming", "size=1GiB"},
		{"dma-vs-memcpy", "sizes=64B,2GiB"},
		{"um-prefetch", "size=2TiB"},
		{"um-prefetch", "kernels=100000"},
		{"um-oversubscribe", "vram=2TiB"},
		{"um-oversubscribe", "ratios=0.5,65"},
		{"um-oversubscribe", "passes=100000"},
		{"transfers", "gpu=-1"},
		{"transfers", "node=far"},
		{"host-memory", "types=pinned,teleport"},
		{"gpu-bugs", "bug=nosuch"},
		{"dma-bugs", "bug=nosuch"},
	}
	for _, c := range cases {
		t.Run(c.scenario+"/"+c.set, func(t *testing.T) {
			s, err := Lookup(c.scenario)
			if err != nil {
				t.Fatal(err)
			}
			sc := *s
			sc.Run = func(*Context) error {
				t.Error("the scenario ran")
				return nil
			}
			_, err = Run(&sc, Options{Sets: []string{c.set}})
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--set "+c.set) {
				t.Errorf("--set %s: %v; want a usage error naming it", c.set, err)
			}
		})
	}
}

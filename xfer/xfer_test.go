package xfer_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/xfer"
)

// TestNamesStable pins the names users and saved reports depend on: the
// scenarios' rows and the probe's JSON carry them.
func TestNamesStable(t *testing.T) {
	cases := []struct {
		name string
		got  []string
		want []string
	}{
		{"copy paths", xfer.Names(xfer.CopyPaths()), []string{"pinned", "pageable", "writecombined", "registered", "mapped",
			"managed-prefetch", "managed-fault", "managed-cpu-fault", "device", "peer"}},
		{"copy directions", xfer.Names(xfer.CopyDirections()), []string{"h2d", "d2h", "bidir", "d2d"}},
		{"host memory", xfer.Names(xfer.HostMemory()), []string{"pageable", "pinned", "writecombined", "registered", "mapped",
			"managed-fault", "managed-prefetch"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("got %q, want %q", c.got, c.want)
			}
		})
	}
}

func ExampleCopyPaths() {
	for _, p := range xfer.CopyPaths()[:3] {
		fmt.Println(p)
	}
	// Output:
	// pinned
	// pageable
	// writecombined
}

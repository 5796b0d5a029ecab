package numa

import (
	"context"
	"os"
	"testing"
)

// TestRunThisMachine runs the probe on this machine with a small buffer
// and checks that its numbers are sane: every node pair has a positive
// latency and bandwidth, the buffers landed on their nodes, and pages
// first touched from a node are local to it.
func TestRunThisMachine(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system"); err != nil {
		t.Skipf("no sysfs here: %v", err)
	}
	rep, err := Run(context.Background(), Options{BufferBytes: 16 << 20, Loads: 1 << 16, Passes: 2, TouchPages: 256})
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		rep.WriteTable(os.Stdout)
	}
	n := len(rep.Nodes)
	if n == 0 {
		t.Fatal("no node")
	}
	for _, note := range rep.Notes {
		t.Logf("note: %s", note)
	}
	if len(rep.Latency) == 0 || len(rep.Latency) != len(rep.Bandwidth) {
		t.Fatalf("%d latencies, %d bandwidths for %d nodes", len(rep.Latency), len(rep.Bandwidth), n)
	}
	for i := range rep.Latency {
		l, b := rep.Latency[i], rep.Bandwidth[i]
		if len(l.Values) != 3 || l.Min <= 0 || l.Max > 1e5 {
			t.Errorf("latency %d->%d: %+v", l.CPUNode, l.MemNode, l.Stat)
		}
		if len(b.Values) != 3 || b.Min <= 0 {
			t.Errorf("bandwidth %d->%d: %+v", b.CPUNode, b.MemNode, b.Stat)
		}
	}
	for _, p := range rep.Placement {
		if p.Error != "" {
			t.Skipf("move_pages refused here: %s", p.Error)
		}
		if p.HugePageBytes < 0 || p.HugePageBytes > rep.Options.BufferBytes {
			t.Errorf("buffer of node %d: %d bytes in huge pages of %d", p.Node, p.HugePageBytes, rep.Options.BufferBytes)
		}
		if p.Fraction != 1 {
			t.Errorf("buffer of node %d: %d of %d pages there (%v)", p.Node, p.OnNode, p.Pages, p.ByNode)
		}
	}
	if len(rep.FirstTouch) == 0 {
		t.Fatal("no first-touch check")
	}
	for _, f := range rep.FirstTouch {
		if f.Error != "" {
			t.Skipf("move_pages refused here: %s", f.Error)
		}
		// On one node every page must be local; on several, free memory
		// on the node could run out, so the test asks only for most.
		if f.Pages != 256 || (n == 1 && f.Fraction != 1) || f.Fraction < 0.9 {
			t.Errorf("first touch on node %d: %d of %d local (%v)", f.Node, f.Local, f.Pages, f.ByNode)
		}
	}
}

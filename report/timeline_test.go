package report

import (
	"math"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestTimeline: spans closer than the resolution merge, farther ones
// stay apart; engines (slices with a source) come first; the bins hold
// the bytes spread over each slice's duration, as GB/s.
func TestTimeline(t *testing.T) {
	us := sim.Microsecond
	tr := NewTrace("test")
	if tr.Timeline(100, 10) != nil {
		t.Error("a timeline without RecordTimeline")
	}
	tr.RecordTimeline()
	// 1000 µs in all, resolution 100: spans closer than 10 µs merge.
	pcie := tr.Machine().Thread("gpu0.pcie A→B")
	b := func(n int64) Arg { return Arg{Key: "bytes", Value: n} }
	pcie.Slice("transfer", "a", 0, 100*us, b(1000))
	pcie.Slice("transfer", "b", 50*us, 200*us, b(1000))  // overlaps a
	pcie.Slice("transfer", "c", 205*us, 300*us, b(1000)) // 5 µs gap: merged
	pcie.Slice("transfer", "d", 900*us, 1000*us, b(1000))
	tr.Process("gpu0").Thread("gpu0.ce0").Slice("transfer", "copy", 0, 300*us, b(3000), Arg{Key: "src", Value: "host"}, Arg{Key: "dst", Value: "gpu0"})
	tl := tr.Timeline(100, 10)
	if tl == nil {
		t.Fatal("no timeline")
	}
	if math.Abs(tl.Seconds-1e-3) > 1e-15 || math.Abs(tl.BinSeconds-1e-4) > 1e-15 {
		t.Errorf("span %g s, bins %g s", tl.Seconds, tl.BinSeconds)
	}
	if len(tl.Tracks) != 2 || tl.Tracks[0].Name != "gpu0.ce0" || tl.Tracks[0].Kind != "engine" || tl.Tracks[1].Kind != "link" {
		t.Fatalf("tracks %+v: want the engine first, then the link", tl.Tracks)
	}
	link := tl.Tracks[1]
	want := [][2]float64{{0, 300e-6}, {900e-6, 1000e-6}}
	if len(link.Busy) != len(want) {
		t.Fatalf("busy %v, want %v", link.Busy, want)
	}
	for i := range want {
		for j := range 2 {
			if math.Abs(link.Busy[i][j]-want[i][j]) > 1e-15 {
				t.Errorf("busy %v, want %v", link.Busy, want)
			}
		}
	}
	if link.Slices != 4 || link.Bytes != 4000 {
		t.Errorf("slices %d bytes %d, want 4 and 4000", link.Slices, link.Bytes)
	}
	// The bins sum to the bytes moved.
	sum := 0.0
	for _, g := range link.GBps {
		sum += g * 1e9 * tl.BinSeconds
	}
	if math.Abs(sum-4000) > 1e-6 {
		t.Errorf("bins hold %g bytes, want 4000", sum)
	}
	// The last bin holds d's 1000 bytes over 100 µs: 10 MB/s.
	if g := link.GBps[9]; math.Abs(g-0.01) > 1e-12 {
		t.Errorf("last bin %g GB/s, want 0.01", g)
	}
	empty := NewTrace("empty")
	empty.RecordTimeline()
	if empty.Timeline(100, 10) != nil {
		t.Error("an empty trace has a timeline")
	}
}

// TestTimelineCounters: a link's load counter (bytes/s from each change
// on) becomes busy spans and bytes: 1 GB/s for 100 µs is 100 kB.
func TestTimelineCounters(t *testing.T) {
	us := sim.Microsecond
	tr := NewTrace("test")
	tr.RecordTimeline()
	c := tr.Machine().Counter("upi A→B", "bytes/s")
	c.Set(0, 1e9)
	c.Set(100*us, 0)
	c.Set(500*us, 2e9)
	c.Set(600*us, 0)
	tl := tr.Timeline(100, 10)
	if tl == nil || len(tl.Tracks) != 1 {
		t.Fatalf("timeline %+v: want one link track", tl)
	}
	l := tl.Tracks[0]
	if l.Kind != "link" || l.Slices != 2 || l.Bytes != 300000 {
		t.Errorf("track %+v: want a link with 2 spans and 300000 bytes", l)
	}
	if len(l.Busy) != 2 || math.Abs(l.Busy[1][0]-500e-6) > 1e-15 {
		t.Errorf("busy %v: want two spans, the second from 500 µs", l.Busy)
	}
}

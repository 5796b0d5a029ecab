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
	// 1000 µs in all, resolution 100: spans closer than 10 µs merge.
	tr.Slice("gpu0.pcie A→B", "a", 0, 100*us, map[string]any{"bytes": int64(1000)})
	tr.Slice("gpu0.pcie A→B", "b", 50*us, 200*us, map[string]any{"bytes": int64(1000)})  // overlaps a
	tr.Slice("gpu0.pcie A→B", "c", 205*us, 300*us, map[string]any{"bytes": int64(1000)}) // 5 µs gap: merged
	tr.Slice("gpu0.pcie A→B", "d", 900*us, 1000*us, map[string]any{"bytes": int64(1000)})
	tr.Slice("gpu0.ce0", "copy", 0, 300*us, map[string]any{"bytes": int64(3000), "src": "host", "dst": "gpu0"})
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
	if NewTrace("empty").Timeline(100, 10) != nil {
		t.Error("an empty trace has a timeline")
	}
}

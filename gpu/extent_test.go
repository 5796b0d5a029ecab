package gpu

import (
	"slices"
	"testing"
)

// TestExtents: first fit with alignment, pieces when nothing contiguous
// is left, merging on release, refusal of double release.
func TestExtents(t *testing.T) {
	x := newExtents(0, 100)
	a, _ := x.alloc(10, 1)  // [0,10)
	b, _ := x.alloc(10, 16) // [16,26)
	if a != 0 || b != 16 || x.size != 80 {
		t.Fatalf("alloc: %d %d, %d free", a, b, x.size)
	}
	c, _ := x.alloc(70, 1) // [26,96)
	if c != 26 || !x.release(0, 10) || x.release(0, 10) {
		t.Fatalf("alloc 70 at %d; release twice should fail once", c)
	}
	// Free now: [0,16) and [96,100): 20 units, none 20 long.
	got, ok := x.takeAny(18)
	if want := []extent{{0, 16}, {96, 98}}; !ok || !slices.Equal(got, want) {
		t.Errorf("takeAny(18) = %v %v, want %v", got, ok, want)
	}
	if _, ok := x.takeAny(3); ok {
		t.Error("took 3 of 2 free")
	}
	for _, e := range append(got, extent{16, 26}, extent{26, 96}) {
		if !x.release(e.start, e.end) {
			t.Errorf("release %v", e)
		}
	}
	if want := []extent{{0, 100}}; !slices.Equal(x.free, want) || x.size != 100 {
		t.Errorf("after releasing everything: %v (%d), want one extent", x.free, x.size)
	}
}

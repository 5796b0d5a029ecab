package nic

import (
	"math/rand/v2"
	"testing"
)

// TestFIFOBounded: under steady traffic (never empty, a few items
// waiting) the storage stays the most items ever waiting, and items
// come out in the order they went in.
func TestFIFOBounded(t *testing.T) {
	tests := []struct {
		name    string
		maxLive int
		want    int // the buffer's largest size
	}{
		{"one or two waiting", 2, 8},
		{"up to 100 waiting", 100, 128},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, uint64(tc.maxLive)))
			var q fifo[int]
			var ref []int
			next := 0
			push := func() { q.push(next); ref = append(ref, next); next++ }
			push()
			for range 200_000 {
				if q.len() < tc.maxLive && (q.len() <= 1 || r.IntN(2) == 0) {
					push()
					continue
				}
				if v := q.pop(); v != ref[0] {
					t.Fatalf("popped %d, want %d", v, ref[0])
				}
				ref = ref[1:]
				if q.len() != len(ref) {
					t.Fatalf("len %d, want %d", q.len(), len(ref))
				}
			}
			if len(q.buf) > tc.want {
				t.Errorf("buffer of %d items after 200,000 operations with at most %d waiting, want ≤ %d", len(q.buf), tc.maxLive, tc.want)
			}
		})
	}
}

// TestWrap: wrap is i mod n, power of two or not.
func TestWrap(t *testing.T) {
	for n := 1; n <= 300; n++ {
		for _, i := range []uint64{0, 1, uint64(n) - 1, uint64(n), 12345, 1<<63 + 7, ^uint64(0)} {
			if got, want := wrap(i, n), i%uint64(n); got != want {
				t.Fatalf("wrap(%d, %d) = %d, want %d", i, n, got, want)
			}
		}
	}
}

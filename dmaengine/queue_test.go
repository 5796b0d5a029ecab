package dmaengine

import (
	"math/rand/v2"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestChunkQueueBounded: under steady traffic (the queue never empty,
// a few chunks waiting) the storage stays the most chunks ever waiting,
// and chunks come out in the order they went in.
func TestChunkQueueBounded(t *testing.T) {
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
			r := rand.New(rand.NewPCG(7, uint64(tc.maxLive)))
			var q queue[chunk]
			var ref []uint64
			next := uint64(0)
			push := func() {
				q.push(chunk{size: next, origin: sim.Time(next)})
				ref = append(ref, next)
				next++
			}
			push()
			for range 200_000 {
				if q.len() < tc.maxLive && (q.len() <= 1 || r.IntN(2) == 0) {
					push()
					continue
				}
				c := q.pop()
				if c.size != ref[0] {
					t.Fatalf("popped %d, want %d", c.size, ref[0])
				}
				ref = ref[1:]
				if q.len() != len(ref) {
					t.Fatalf("len %d, want %d", q.len(), len(ref))
				}
			}
			if len(q.buf) > tc.want {
				t.Errorf("buffer of %d chunks after 200,000 operations with at most %d waiting, want ≤ %d", len(q.buf), tc.maxLive, tc.want)
			}
		})
	}
}

// TestWrap: a channel's ring position is the index mod Entries, power of
// two or not.
func TestWrap(t *testing.T) {
	for n := uint64(1); n <= 300; n++ {
		ch := &Chan{n: n}
		for _, i := range []uint64{0, 1, n - 1, n, 12345, 1<<63 + 7, ^uint64(0)} {
			if got, want := ch.wrap(i), i%n; got != want {
				t.Fatalf("wrap(%d) with %d entries = %d, want %d", i, n, got, want)
			}
		}
	}
}

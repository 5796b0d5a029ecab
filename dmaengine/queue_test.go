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

// TestChunkBytesKeptApart: a channel's chunks and their bytes, kept in
// two queues from the first chunk delivered with bytes on (pushChunk,
// popChunk), come out as one queue of (size, origin, bytes) would give
// them: random runs of deliveries with and without bytes, the first
// with bytes arriving while chunks without wait or not, and takes.
func TestChunkBytesKeptApart(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		ch := &Chan{}
		type ref struct {
			c       chunk
			payload []byte
		}
		var want []ref
		withBytes := r.IntN(4) // deliveries before the first with bytes, in quarters of the run
		for i := range 300 {
			if len(want) > 0 && r.IntN(2) == 0 {
				got := ch.popChunk()
				w := want[0]
				want = want[1:]
				if got.chunk != w.c || len(got.payload) != len(w.payload) || (got.payload == nil) != (w.payload == nil) ||
					len(w.payload) > 0 && &got.payload[0] != &w.payload[0] {
					t.Fatalf("seed %d, step %d: took %+v, want %+v", seed, i, got, w)
				}
				continue
			}
			c := chunk{size: uint64(i), origin: sim.Time(r.IntN(1000))}
			var payload []byte
			if i >= withBytes*75 && r.IntN(3) > 0 {
				payload = make([]byte, 1+r.IntN(4))
			}
			ch.pushChunk(c, payload)
			want = append(want, ref{c, payload})
		}
	}
}

package machine

import (
	"math/rand/v2"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestAccessTimeKept: the sleeps kept for small local accesses
// (accessTime) are sim.TransferTime's, over draws that come back to a
// few pairs and draws of new ones, more than it keeps.
func TestAccessTimeKept(t *testing.T) {
	m := &Machine{}
	rng := rand.New(rand.NewPCG(9, 10))
	rates := []float64{1e9, 12.5e9, 3.3e10, 7e10 / 3, 1}
	sizes := []int64{0, 1, 8, 32, 64, 1500, 4096, 65535}
	hits := 0
	for range 20_000 {
		b, r := sizes[rng.IntN(len(sizes))], rates[rng.IntN(len(rates))]
		if rng.IntN(8) == 0 {
			b, r = rng.Int64N(1<<16), rng.Float64()*1e11+1
		}
		kept := false
		for _, e := range m.times {
			kept = kept || e.bytes == b && e.rate == r
		}
		if kept {
			hits++
		}
		if got, want := m.accessTime(b, r), sim.TransferTime(float64(b), r); got != want {
			t.Fatalf("accessTime(%d, %v) = %v, want %v", b, r, got, want)
		}
	}
	if hits == 0 {
		t.Fatal("no draw found its pair kept")
	}
}

package fabric

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// batchSizesRun drives packetPath with the size of the batch of writes
// drawn anew at random instants, so that batches alone on their
// resources of several sizes, and so rates, follow one another over one
// route, and returns a log of every link's counters, sampled at random
// instants, and the count of recomputes that took shareLone.
func batchSizesRun(seed uint64) (string, uint64) {
	rng := rand.New(rand.NewPCG(seed, 17))
	eng := sim.New(seed)
	p := newPacketPath(eng)
	p.batch = 1 + rng.IntN(9)
	log := fnv.New64a()
	sample := func() {
		fmt.Fprintf(log, "%v fired %d\n", eng.Now(), eng.Fired())
		for _, l := range p.fab.Links() {
			s := l.Stats()
			fmt.Fprintf(log, "%s %x %x %v %v %x %x\n", l.Name(), math.Float64bits(s.Bytes[0]), math.Float64bits(s.Bytes[1]),
				s.Busy[0], s.Busy[1], math.Float64bits(s.PeakUtil[0]), math.Float64bits(s.PeakUtil[1]))
		}
	}
	// 2,000 packets of 1,500 bytes at 50 GB/s take 60 µs.
	for range 100 {
		size := 1 + rng.IntN(9)
		eng.At(sim.Time(rng.IntN(6000))*10*sim.Nanosecond, func() { p.batch = size })
	}
	for range 1000 {
		eng.At(sim.Time(rng.IntN(6000))*10*sim.Nanosecond, sample)
	}
	p.run(2000)
	sample()
	return fmt.Sprintf("%x %d", log.Sum64(), p.fab.Recomputes()), p.fab.lones
}

// TestBatchCountsBySize: the counters that shareAlone sets from the
// route's last batch counted (routeInfo.countRates) are those that
// counting the batch's flows one by one (countBatch, which the filling
// does) gives, over batches of changing sizes on one route, bit for bit:
// the runs with shareLone and without show the same.
func TestBatchCountsBySize(t *testing.T) {
	defer func(v bool) { loneShortcut = v }(loneShortcut)
	var lones uint64
	for seed := range uint64(20) {
		loneShortcut = false
		want, _ := batchSizesRun(seed)
		loneShortcut = true
		got, n := batchSizesRun(seed)
		if got != want {
			t.Fatalf("seed %d: with shareLone %s, without %s", seed, got, want)
		}
		lones += n
	}
	if lones < 10000 {
		t.Errorf("only %d recomputes took shareLone", lones)
	}
	t.Logf("%d recomputes took shareLone", lones)
}

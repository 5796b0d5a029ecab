package nic

import (
	"math/bits"

	"github.com/dmalab/dmalab/sim"
)

// hist is a log-linear histogram of durations (HDR-style): values below
// 2^subBits picoseconds are exact; above, each power-of-two range is cut
// into 2^subBits buckets, so a percentile is exact to within 1/2^subBits
// (0.1%) whatever the number of samples, in fixed memory.
type hist struct {
	counts []uint64
	n      uint64
	sum    float64
	max    sim.Time
}

const subBits = 10

func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(v) - subBits // ≥ 1
	return e<<subBits + int(v>>uint(e-1)) - 1<<subBits
}

// upper is the largest value in bucket b.
func upper(b int) uint64 {
	if b < 1<<subBits {
		return uint64(b)
	}
	e := b >> subBits
	m := uint64(b&(1<<subBits-1)) + 1<<subBits
	return (m+1)<<uint(e-1) - 1
}

func (h *hist) add(t sim.Time) {
	if t < 0 {
		t = 0
	}
	b := bucketOf(uint64(t))
	if b >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, b+1-len(h.counts))...)
	}
	h.counts[b]++
	h.n++
	h.sum += float64(t)
	h.max = max(h.max, t)
}

// quantile is the smallest bucket bound at or above which a share q of
// the samples lie (nearest rank), capped at the maximum seen.
func (h *hist) quantile(q float64) sim.Time {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = max(1, min(rank, h.n))
	var seen uint64
	for b, c := range h.counts {
		if seen += c; seen >= rank {
			return min(sim.Time(upper(b)), h.max)
		}
	}
	return h.max
}

func (h *hist) mean() sim.Time {
	if h.n == 0 {
		return 0
	}
	return sim.Time(h.sum / float64(h.n))
}

package uvm

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestPrefetchPages pins the tree prefetcher's decisions on hand-worked
// cases. Counts are of pages resident on the destination or faulted
// (faults grown to their 64 KiB big page); a subtree is taken when
// count*100 > size*51.
func TestPrefetchPages(t *testing.T) {
	cases := []struct {
		name string
		in   PrefetchInput
		want []int
	}{{
		// Page 0 grows to big page 0..15. Subtree 0..31: 16/32 = 50 %,
		// not more than 51 %: only the big page.
		name: "first touch of a block: its big page",
		in:   PrefetchInput{Faulted: mask([]int{0})},
		want: pagesOf(1, 16),
	}, {
		// 0..15 resident + 16..31 grown: 0..31 is 32/32; 0..63 is 32/64 =
		// 50 %, not taken.
		name: "second big page: 128 KiB region, 64 KiB moves",
		in:   PrefetchInput{Resident: mask(pagesOf(0, 16)), Faulted: mask([]int{16})},
		want: pagesOf(17, 32),
	}, {
		// 0..31 + 32..47 = 48: 0..63 is 48/64 = 75 %; 0..127 is 48/128.
		name: "third: up to 256 KiB",
		in:   PrefetchInput{Resident: mask(pagesOf(0, 32)), Faulted: mask([]int{32})},
		want: pagesOf(33, 64),
	}, {
		// 64 + 16 = 80: 0..127 is 80/128 = 62.5 %; 0..255 is 80/256.
		name: "fourth: up to 512 KiB",
		in:   PrefetchInput{Resident: mask(pagesOf(0, 64)), Faulted: mask([]int{64})},
		want: pagesOf(65, 128),
	}, {
		// 128 + 16 = 144: 0..255 is 144/256 = 56.25 %; the block 144/512.
		name: "fifth: up to 1 MiB",
		in:   PrefetchInput{Resident: mask(pagesOf(0, 128)), Faulted: mask([]int{128})},
		want: pagesOf(129, 256),
	}, {
		// 256 + 16 = 272: the block is 272/512 = 53.1 %.
		name: "sixth: the rest of the block",
		in:   PrefetchInput{Resident: mask(pagesOf(0, 256)), Faulted: mask([]int{256})},
		want: pagesOf(257, 512),
	}, {
		// Page 300 grows to 288..303. From the leaf up: 16 pages full; 32
		// (288..319) 16/32; 64 (256..319) 16/64; 128 and 256 less; the
		// block 272/512 = 53.1 %. The largest wins though the levels
		// between fail.
		name: "largest subtree wins over failing middle levels",
		in:   PrefetchInput{Resident: mask(pagesOf(0, 256)), Faulted: mask([]int{300})},
		want: append(pagesOf(256, 300), pagesOf(301, 512)...),
	}, {
		// Ragged residency 0..16 (17 pages) + 32..47 grown: 32..63 is
		// 16/32; 0..63 is 33/64 = 51.6 % > 51 %.
		name: "just above the threshold",
		in:   PrefetchInput{Resident: mask(pagesOf(0, 17)), Faulted: mask([]int{32})},
		want: append(pagesOf(17, 32), pagesOf(33, 64)...),
	}, {
		// 0..15 + 32..47: 0..63 is 32/64 = 50 %, not taken.
		name: "at 50 %: not taken",
		in:   PrefetchInput{Resident: mask(pagesOf(0, 16)), Faulted: mask([]int{32})},
		want: pagesOf(33, 48),
	}, {
		// Page 7 thrashes: big page 0..15 does not grow, leaf 5 alone
		// (4..5 is 1/2).
		name: "thrashing page stops big-page growth",
		in:   PrefetchInput{Faulted: mask([]int{5}), Thrashing: mask([]int{7})},
		want: nil,
	}, {
		name: "a thrashing faulted page prefetches nothing",
		in:   PrefetchInput{Faulted: mask([]int{5}), Thrashing: mask([]int{5})},
		want: nil,
	}, {
		// Two faults far apart: each its own big page.
		name: "two faults, two big pages",
		in:   PrefetchInput{Faulted: mask([]int{0, 256})},
		want: append(pagesOf(1, 16), pagesOf(257, 272)...),
	}, {
		name: "first touch on the preferred location: the whole block",
		in:   PrefetchInput{Faulted: mask([]int{9}), FirstTouchPreferred: true},
		want: append(pagesOf(0, 9), pagesOf(10, 512)...),
	}, {
		// A 96 KiB block end: 24 pages. Big page 0..15 grows; the
		// subtree 0..31 cut at 24 is 16/24 = 66.7 %.
		name: "partial block: subtrees cut at its end",
		in:   PrefetchInput{Pages: 24, Faulted: mask([]int{0})},
		want: pagesOf(1, 24),
	}, {
		// 20 pages: 16..19 is no whole big page and grows as one piece;
		// 16..23 cut to 16..19 is 4/4; 0..31 cut to 0..19 is 4/20.
		name: "partial block: the trailing piece grows",
		in:   PrefetchInput{Pages: 20, Faulted: mask([]int{18})},
		want: []int{16, 17, 19},
	}, {
		name: "already resident pages are not prefetched",
		in:   PrefetchInput{Resident: mask([]int{3, 4}), Faulted: mask([]int{0})},
		want: append([]int{1, 2}, pagesOf(5, 16)...),
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			if in.Pages == 0 {
				in.Pages = PagesPerBlock
			}
			in.Threshold = DefaultPrefetchThreshold
			got := PrefetchPages(in)
			if p := got.Pages(); !slices.Equal(p, c.want) {
				t.Errorf("prefetch %v, want %v", p, c.want)
			}
		})
	}
}

// touchPattern has one process touch [a.Base, a.Base+size) every stride
// bytes on processor who and returns, per 2 MiB block, the touches that
// faulted.
func touchPattern(t *testing.T, d *Driver, env *testEnv, a *Allocation, size, stride int64, who Processor) map[int][]int {
	t.Helper()
	slow := map[int][]int{}
	run(t, env, func(p *sim.Proc) {
		perBlock := BlockSize / stride
		for k := int64(0); k*stride < size; k++ {
			addr := a.Base + Addr(k*stride)
			var acc Access
			var err error
			if who == CPU {
				acc, err = d.CPUAccess(p, addr, 4, false)
			} else {
				acc, err = d.GPUAccess(p, who.GPUIndex(), addr, 4, false)
			}
			must(t, err)
			if acc.Faults > 0 {
				slow[int(k/perBlock)] = append(slow[int(k/perBlock)], int(k%perBlock))
			}
		}
	})
	return slow
}

// TestSlowTouches reproduces the measured footprint of the prefetcher
// (docs/measurements/2026-11-21-h200-cli-probe.txt): one thread reading
// host-resident managed memory in order faults, in each 2 MiB block, at
// pages 0, 16, 32, 64, 128, 256 at 4 KiB stride, at touches 0, 1, 2, 4,
// 8, 16 at 64 KiB stride, and once at 2 MiB stride. The CPU reading
// GPU-resident memory back faults the same way (64 KiB big pages for the
// CPU too).
func TestSlowTouches(t *testing.T) {
	const size = 3 * BlockSize
	cases := []struct {
		stride int64
		who    Processor
		want   []int
		moved  int64 // bytes migrated by faults and the prefetcher
	}{
		{4 << 10, GPU(0), []int{0, 16, 32, 64, 128, 256}, size},
		{64 << 10, GPU(0), []int{0, 1, 2, 4, 8, 16}, size},
		// One touch per block moves its first big page only.
		{2 << 20, GPU(0), []int{0}, 3 * BigPageSize},
		{4 << 10, CPU, []int{0, 16, 32, 64, 128, 256}, size},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/%dKiB", c.who, c.stride>>10), func(t *testing.T) {
			d, env := newDriver(t, oneGPU(1<<30))
			a := mustAlloc(t, d, size)
			from := CPU
			if c.who == CPU {
				from = GPU(0)
			}
			run(t, env, func(p *sim.Proc) { must(t, d.Prefetch(p, a.Base, size, from)) })
			slow := touchPattern(t, d, env, a, size, c.stride, c.who)
			for blk := range size / BlockSize {
				if !slices.Equal(slow[blk], c.want) {
					t.Errorf("block %d: slow touches %v, want %v", blk, slow[blk], c.want)
				}
			}
			st := d.Stats()
			if got := st.MigratedBytes[CauseFault] + st.MigratedBytes[CausePrefetcher]; got != c.moved {
				t.Errorf("fault-driven migration %d B, want %d", got, c.moved)
			}
		})
	}
}

// TestPrefetchMemo: the memo answers what PrefetchPages answers, over
// 20,000 questions drawn from a pool of 12 (more than it keeps, so that
// it both hits and replaces), each differing from others in one field.
func TestPrefetchMemo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	randMask := func() PageMask {
		var m PageMask
		for range r.IntN(4) {
			lo := r.IntN(PagesPerBlock)
			m.SetRange(lo, lo+1+r.IntN(PagesPerBlock-lo))
		}
		return m
	}
	base := PrefetchInput{Pages: PagesPerBlock, Resident: randMask(), Faulted: randMask(), Threshold: 51}
	pool := []PrefetchInput{base}
	for len(pool) < 12 {
		in := pool[r.IntN(len(pool))]
		switch r.IntN(6) {
		case 0:
			in.Pages = 1 + r.IntN(PagesPerBlock)
		case 1:
			in.Resident = randMask()
		case 2:
			in.Faulted = randMask()
		case 3:
			in.Thrashing = randMask()
		case 4:
			in.Threshold = 1 + r.IntN(99)
		case 5:
			in.FirstTouchPreferred = !in.FirstTouchPreferred
		}
		pool = append(pool, in)
	}
	var m prefetchMemo
	hits := 0
	for range 20000 {
		in := pool[r.IntN(len(pool))]
		for i := range m.n {
			if m.in[i] == in {
				hits++
				break
			}
		}
		if got, want := m.prefetch(in), PrefetchPages(in); got != want {
			t.Fatalf("memo %v, PrefetchPages %v for %+v", got, want, in)
		}
	}
	if hits < 1000 || hits > 19000 {
		t.Fatalf("%d hits of 20000", hits)
	}
}

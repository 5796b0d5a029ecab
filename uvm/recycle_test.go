package uvm

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// recycleRun is a run drawn from seed in two phases: warps of one or two
// GPUs, a CPU thread and prefetches work on a first allocation with
// random advice (faults, eviction, thrashing, pins, duplication and
// remote mappings mix, as in randomRun); at a random time, often while
// they still run, it is freed and a second allocation of another size
// is made, advised and worked on the same way. norecycle turns block
// recycling off. It returns the digest of every event, of what each
// access returned (those of the freed allocation until its Free), of
// the statistics, the footprint and every page's residency and remote
// mappings at the end, with the number of blocks recycled.
func recycleRun(t testing.TB, seed uint64, norecycle bool) (string, int) {
	r := rand.New(rand.NewPCG(seed, 29))
	ngpu := 1 + r.IntN(2)
	cfg := Config{Params: testParams()}
	cfg.Params.FaultPageCost = sim.Time(r.IntN(2)) * 50 * sim.Nanosecond
	for range ngpu {
		cfg.GPUs = append(cfg.GPUs, GPUConfig{Generation: PascalPlus, ManagedMemory: int64(2+r.IntN(3)) * BlockSize})
	}
	if ngpu == 2 {
		l := []Link{LinkNone, LinkPCIe, LinkNVLink}[r.IntN(3)]
		cfg.Peers = [][]Link{{LinkNone, l}, {l, LinkNone}}
	}
	env := &testEnv{e: sim.New(seed), moveT: perMicro64K}
	d, err := New(env, cfg)
	must(t, err)
	d.norecycle = norecycle
	procs := ngpu + 1
	log := sha256.New()
	d.Hooks.Hook(func(e *Event) { fmt.Fprintf(log, "%+v\n", *e) })
	reused := 0
	// phase works on a from now on, until horizon.
	phase := func(e *sim.Engine, a *Allocation, tag uint64, horizon sim.Time) {
		pages := int((a.Size + PageSize - 1) / PageSize)
		span := func(r *rand.Rand, max int) (Addr, int64) {
			first := r.IntN(pages)
			n := 1 + r.IntN(min(max, pages-first))
			return a.Base + Addr(first)*PageSize, int64(n) * PageSize
		}
		access := func(acc Access, err error) bool {
			if a.freed {
				return false
			}
			must(t, err)
			fmt.Fprintf(log, "%+v\n", acc)
			return true
		}
		ar := rand.New(rand.NewPCG(seed, tag))
		advise := func(p *sim.Proc) {
			addr, n := span(ar, 3*PagesPerBlock)
			if err := d.Advise(p, addr, n, Advice(1+ar.IntN(6)), Processor(ar.IntN(procs))); !a.freed {
				must(t, err)
			}
		}
		for range ar.IntN(4) {
			e.Spawn("setup", advise)
		}
		for w := range 2 + ar.IntN(5) {
			wr := rand.New(rand.NewPCG(seed, tag+uint64(w)+1))
			e.Spawn(fmt.Sprintf("warp%d", w), func(p *sim.Proc) {
				for range 10 + wr.IntN(30) {
					addr, n := span(wr, PagesPerBlock)
					n = min(n, int64(BlockSize-addr%BlockSize))
					if !access(d.GPUAccess(p, wr.IntN(ngpu), addr, n, wr.IntN(3) == 0)) || p.Now() > horizon {
						return
					}
					p.Sleep(sim.Time(wr.IntN(30)) * sim.Microsecond)
				}
			})
		}
		cr := rand.New(rand.NewPCG(seed, tag+100))
		e.Spawn("cpu", func(p *sim.Proc) {
			for range 5 + cr.IntN(20) {
				addr, n := span(cr, 8)
				if !access(d.CPUAccess(p, addr, n, cr.IntN(2) == 0)) || p.Now() > horizon {
					return
				}
				p.Sleep(sim.Time(cr.IntN(40)) * sim.Microsecond)
			}
		})
		pr := rand.New(rand.NewPCG(seed, tag+101))
		e.Spawn("prefetch", func(p *sim.Proc) {
			for range pr.IntN(5) {
				p.Sleep(sim.Time(pr.IntN(200)) * sim.Microsecond)
				addr, n := span(pr, PagesPerBlock)
				err := d.Prefetch(p, addr, n, Processor(pr.IntN(procs)))
				if a.freed {
					return
				}
				must(t, err)
				if pr.IntN(2) == 0 {
					advise(p)
				}
			}
		})
	}
	a := mustAlloc(t, d, int64(2+r.IntN(5))*BlockSize-int64(r.IntN(3))*PageSize*7)
	phase(env.e, a, 1000, randomHorizon)
	freeAt := sim.Time(r.IntN(int(randomHorizon/sim.Microsecond))) * sim.Microsecond
	size := int64(1+r.IntN(7))*BlockSize - int64(r.IntN(3))*PageSize*5
	var b *Allocation
	env.e.Spawn("free", func(p *sim.Proc) {
		p.Sleep(freeAt)
		must(t, d.Free(p, a))
		spare := len(d.spareBlocks)
		b = mustAlloc(t, d, size)
		phase(p.Engine(), b, 2000, 2*randomHorizon)
		p.Sleep(2 * randomHorizon)
		reused = spare - len(d.spareBlocks)
	})
	env.e.RunUntil(3 * randomHorizon)
	fmt.Fprintf(log, "%v %+v %d %d %d\n", env.e.Now(), d.Stats(), env.e.Fired(), d.Footprint(), d.BlockCount())
	for pg := range int((b.Size + PageSize - 1) / PageSize) {
		x := b.Base + Addr(pg)*PageSize
		fmt.Fprintf(log, "%v", d.Residency(x))
		for q := range Processor(procs) {
			fmt.Fprintf(log, " %v", d.MapsRemotely(q, x))
		}
		fmt.Fprintln(log)
	}
	checkBlockIndex(t, d, b)
	env.e.Close()
	return fmt.Sprintf("%x", log.Sum(nil)), reused
}

// TestRecycleSameRun: blocks of a freed allocation reused for another's
// (recycle) change nothing a run shows, over 150 random runs in which
// an allocation is freed, often while warps, the CPU and prefetches
// still work on it, and another is made and worked on.
func TestRecycleSameRun(t *testing.T) {
	reused, runs := 0, 0
	for seed := range uint64(150) {
		want, n := recycleRun(t, seed, true)
		if n != 0 {
			t.Fatalf("seed %d: %d blocks recycled with norecycle set", seed, n)
		}
		got, n := recycleRun(t, seed, false)
		if got != want {
			t.Fatalf("seed %d: digest %s, without recycling %s", seed, got, want)
		}
		reused += n
		if n > 0 {
			runs++
		}
	}
	t.Logf("%d blocks reused, in %d of 150 runs", reused, runs)
	if runs < 50 {
		t.Fatalf("only %d runs reused blocks", runs)
	}
}

// sharedRef is vaBlock.shared's general loop, the reference for its
// one-GPU shortcut.
func sharedRef(b *vaBlock) PageMask {
	var once, twice PageMask
	for _, r := range b.resident {
		if r == nil {
			continue
		}
		t := and(once, *r)
		twice.Or(&t)
		once.Or(r)
	}
	return twice
}

// randomPages is nil a quarter of the time, else up to four random runs
// of pages (empty with none).
func randomPages(r *rand.Rand) *PageMask {
	if r.IntN(4) == 0 {
		return nil
	}
	m := new(PageMask)
	for range r.IntN(5) {
		lo := r.IntN(PagesPerBlock)
		m.SetRange(lo, lo+1+r.IntN(PagesPerBlock-lo))
	}
	return m
}

// TestSharedOneGPU: shared on a block of a one-GPU machine is the
// general loop's, for 2,000 random residencies (either mask missing,
// empty, or random).
func TestSharedOneGPU(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	randMask := func() *PageMask { return randomPages(r) }
	overlaps := 0
	for range 2000 {
		var b vaBlock
		b.resident = b.small.resident[:2]
		b.resident[0], b.resident[1] = randMask(), randMask()
		got, want := b.shared(), sharedRef(&b)
		if got != want {
			t.Fatalf("shared %v, want %v", got, want)
		}
		if !want.Empty() {
			overlaps++
		}
	}
	if overlaps < 500 {
		t.Fatalf("only %d of 2000 residencies share pages", overlaps)
	}
}

// TestAccessPair: access gives accessible's two answers, for 2,000
// random blocks of one or two GPUs (masks missing, empty or random,
// remote mappings included).
func TestAccessPair(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	randMask := func() *PageMask { return randomPages(r) }
	for range 2000 {
		n := 2 + r.IntN(2)
		b := vaBlock{resident: make([]*PageMask, n), remote: make([]*PageMask, n)}
		for q := range n {
			b.resident[q], b.remote[q] = randMask(), randMask()
		}
		for q := range Processor(n) {
			rd, wr := b.access(q)
			if rd != b.accessible(q, false) || wr != b.accessible(q, true) {
				t.Fatalf("processor %v: access %v, %v; accessible %v, %v", q, rd, wr, b.accessible(q, false), b.accessible(q, true))
			}
		}
	}
}

// TestTouchedWalk: touched gives the blocks blockAt finds in a range,
// in address order, whether it looks the range's numbers up or walks
// the allocations' indexes (ranges longer than the touched blocks):
// 200 draws of three allocations of up to 2,000 blocks, a few touched,
// one sometimes freed, and ranges across them.
func TestTouchedWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	walked := 0
	for range 200 {
		d, env := newDriver(t, oneGPU(4*BlockSize))
		var as []*Allocation
		for range 3 {
			as = append(as, mustAlloc(t, d, int64(1+r.IntN(2000))*BlockSize-int64(r.IntN(3))*PageSize))
		}
		run(t, env, func(p *sim.Proc) {
			for _, a := range as {
				for range r.IntN(6) {
					x := a.Base + Addr(r.Int64N(a.Size))
					ok(t)(d.CPUAccess(p, x, 1, true))
				}
			}
			if r.IntN(2) == 0 {
				must(t, d.Free(p, as[r.IntN(3)]))
			}
		})
		lo, hi := uint64(as[0].Base)/BlockSize-1, uint64(as[2].End())/BlockSize+2
		for range 20 {
			first := lo + r.Uint64N(hi-lo)
			last := first + r.Uint64N(hi-first)
			var want []*vaBlock
			for n := first; n <= last; n++ {
				if b := d.blockAt(n); b != nil {
					want = append(want, b)
				}
			}
			got := d.touched(Addr(first*BlockSize)+Addr(r.IntN(PageSize)), Addr((last+1)*BlockSize)-Addr(r.IntN(PageSize)))
			if !slices.Equal(got, want) {
				t.Fatalf("blocks %d-%d: touched %d blocks, blockAt %d", first, last, len(got), len(want))
			}
			if last-first >= uint64(d.BlockCount()) {
				walked++
			}
		}
	}
	if walked < 1000 {
		t.Fatalf("only %d ranges walked the indexes", walked)
	}
}

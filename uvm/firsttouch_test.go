package uvm

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// firstTouchRun is a run drawn from seed with nobody watching the
// driver's events, so that CPU first touches may be serviced at once
// (firstTouch): a CPU thread writing or reading spans of up to three
// blocks of an allocation of up to eight, its last block sometimes
// partial, with random advice on some spans, a GPU warp or two
// sometimes faulting the same memory meanwhile (evicting, with a small
// GPU), a prefetch now and then, and random CPU fault costs. stepwise
// turns firstTouch off. It returns the digest of what every access
// returned and when, the statistics, and every page's residency and
// remote mappings at the end, with the number of first touches
// serviced at once.
func firstTouchRun(t testing.TB, seed uint64, stepwise bool) (string, int) {
	r := rand.New(rand.NewPCG(seed, 23))
	cfg := Config{Params: testParams()}
	cfg.Params.CPUZeroPageCost = sim.Time(r.IntN(3)) * 100 * sim.Nanosecond
	cfg.Params.CPUMapPageCost = sim.Time(r.IntN(3)) * 70 * sim.Nanosecond
	cfg.Params.CPUFaultCost = sim.Time(1+r.IntN(5)) * sim.Microsecond
	cfg.Params.DisablePrefetch = r.IntN(8) == 0
	cfg.GPUs = []GPUConfig{{Generation: PascalPlus, ManagedMemory: int64(2+r.IntN(3)) * BlockSize}}
	env := &testEnv{e: sim.New(seed), moveT: perMicro64K}
	d, err := New(env, cfg)
	must(t, err)
	d.stepwise = stepwise
	size := int64(2+r.IntN(7))*BlockSize - int64(r.IntN(3))*PageSize*13
	a := mustAlloc(t, d, size)
	pages := int((size + PageSize - 1) / PageSize)
	log := sha256.New()
	access := func(p *sim.Proc, who string, acc Access, err error) {
		if a.freed {
			// Accesses still running at the Free below fail.
			return
		}
		must(t, err)
		fmt.Fprintf(log, "%v %s %+v\n", p.Now(), who, acc)
	}
	span := func(r *rand.Rand, max int) (Addr, int64) {
		first := r.IntN(pages)
		n := 1 + r.IntN(min(max, pages-first))
		return a.Base + Addr(first)*PageSize, int64(n) * PageSize
	}
	env.e.Spawn("setup", func(p *sim.Proc) {
		for range r.IntN(3) {
			addr, n := span(r, 2*PagesPerBlock)
			must(t, d.Advise(p, addr, n, Advice(1+r.IntN(6)), Processor(r.IntN(2))))
		}
	})
	cr := rand.New(rand.NewPCG(seed, 100))
	env.e.Spawn("cpu", func(p *sim.Proc) {
		for range 3 + cr.IntN(10) {
			addr, n := span(cr, 3*PagesPerBlock)
			addr += Addr(cr.IntN(PageSize))
			n -= int64(cr.IntN(PageSize))
			n = max(n, 1)
			if addr+Addr(n) > a.End() {
				n = int64(a.End() - addr)
			}
			acc, err := d.CPUAccess(p, addr, n, cr.IntN(3) != 0)
			access(p, "cpu", acc, err)
			p.Sleep(sim.Time(cr.IntN(3)) * sim.Time(cr.IntN(200)) * sim.Microsecond)
		}
	})
	for w := range r.IntN(3) {
		wr := rand.New(rand.NewPCG(seed, uint64(w)))
		env.e.Spawn(fmt.Sprintf("warp%d", w), func(p *sim.Proc) {
			p.Sleep(sim.Time(wr.IntN(300)) * sim.Microsecond)
			for range 3 + wr.IntN(10) {
				addr, n := span(wr, PagesPerBlock)
				n = min(n, int64(BlockSize-addr%BlockSize))
				acc, err := d.GPUAccess(p, 0, addr, n, wr.IntN(3) == 0)
				access(p, "gpu", acc, err)
				p.Sleep(sim.Time(wr.IntN(100)) * sim.Microsecond)
			}
		})
	}
	if r.IntN(3) == 0 {
		pr := rand.New(rand.NewPCG(seed, 101))
		env.e.Spawn("prefetch", func(p *sim.Proc) {
			p.Sleep(sim.Time(pr.IntN(400)) * sim.Microsecond)
			addr, n := span(pr, PagesPerBlock)
			if err := d.Prefetch(p, addr, n, Processor(pr.IntN(2))); !a.freed {
				must(t, err)
			}
		})
	}
	env.e.RunUntil(randomHorizon)
	fmt.Fprintf(log, "%v %+v %d\n", env.e.Now(), d.Stats(), env.e.Fired())
	for pg := range pages {
		x := a.Base + Addr(pg)*PageSize
		fmt.Fprintf(log, "%v %v %v\n", d.Residency(x), d.MapsRemotely(CPU, x), d.MapsRemotely(GPU(0), x))
	}
	checkBlockIndex(t, d, a)
	env.e.Spawn("free", func(p *sim.Proc) { must(t, d.Free(p, a)) })
	env.e.RunUntil(2 * randomHorizon)
	checkBlockIndex(t, d, a)
	env.e.Close()
	return fmt.Sprintf("%x", log.Sum(nil)), d.firstTouched
}

// TestFirstTouchSameRun: servicing an untouched block's CPU faults at
// once (firstTouch) changes nothing a run shows: every access's result
// and return time, the statistics, the count of fired events, and each
// page's residency and mappings at the end are those of servicing the
// faults one by one, over 400 random runs, of which many take the
// shortcut and others cannot (advice, GPU faults meanwhile).
func TestFirstTouchSameRun(t *testing.T) {
	touched, runs := 0, 0
	for seed := range uint64(400) {
		want, n := firstTouchRun(t, seed, true)
		if n != 0 {
			t.Fatalf("seed %d: %d first touches at once with stepwise set", seed, n)
		}
		got, n := firstTouchRun(t, seed, false)
		if got != want {
			t.Fatalf("seed %d: digest %s, one fault at a time %s", seed, got, want)
		}
		touched += n
		if n > 0 {
			runs++
		}
	}
	t.Logf("%d blocks first touched at once, in %d of 400 runs", touched, runs)
	if runs < 100 {
		t.Fatalf("only %d runs took the shortcut", runs)
	}
}

// checkBlockIndex: blockAt gives, for every block of a and the blocks
// around it, nil or the block of that number, of a live allocation
// holding it; and the driver counts as many blocks as the allocations
// index.
func checkBlockIndex(t testing.TB, d *Driver, a *Allocation) {
	t.Helper()
	first := uint64(a.Base) / BlockSize
	for num := first - 2; num < first+uint64(a.blockCount())+2; num++ {
		b := d.blockAt(num)
		if b == nil {
			continue
		}
		if b.num != num || b.dead || b.alloc.freed || uint64(b.alloc.Base)/BlockSize > num || num >= uint64(b.alloc.Base)/BlockSize+uint64(b.alloc.blockCount()) {
			t.Fatalf("block %d: blockAt gives block %d of %v (dead %v)", num, b.num, b.alloc, b.dead)
		}
	}
	if a.freed && d.blockAt(first) != nil {
		t.Fatalf("block %d of a freed allocation still indexed", first)
	}
	n := 0
	for _, x := range d.allocs {
		x.eachBlock(func(*vaBlock) { n++ })
	}
	if n != d.BlockCount() {
		t.Fatalf("%d blocks indexed, BlockCount %d", n, d.BlockCount())
	}
}

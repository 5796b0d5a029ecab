package uvm

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

var updateRandom = flag.Bool("update-random", false, "rewrite testdata/random-runs.txt from this code")

const (
	// randomRuns are the runs of TestRandomRuns.
	randomRuns = 250
	// randomHorizon is how long each runs.
	randomHorizon = 20 * sim.Millisecond
)

// randomRun is a busy run drawn from seed: one or two GPUs (peers over
// PCIe or NVLink) with two to four root chunks each, an allocation of
// two to six blocks with random advice, warps making random plain and
// strided accesses, a CPU thread, and prefetches to random processors,
// all concurrent: faults, batching, eviction, thrashing, pinning,
// read duplication and remote mappings mix. It runs for randomHorizon
// of virtual time (warps evicting each other's blocks may refault for
// ever) and returns the digest of every event (all fields), of what
// each access returned, and of the statistics then.
func randomRun(t testing.TB, seed uint64) (string, map[Kind]bool) {
	digest, kinds, _ := randomRunWith(t, seed, false, false)
	return digest, kinds
}

// randomRunWith is randomRun, with servicePlain turned off when general
// is set, and nobody watching the driver's events when quiet is (the
// digest then has the accesses and statistics); it also returns the
// number of services servicePlain did.
func randomRunWith(t testing.TB, seed uint64, general, quiet bool) (string, map[Kind]bool, int) {
	r := rand.New(rand.NewPCG(seed, 17))
	ngpu := 1 + r.IntN(2)
	cfg := Config{Params: testParams()}
	cfg.Params.FaultPageCost = sim.Time(r.IntN(2)) * 50 * sim.Nanosecond
	for range ngpu {
		cfg.GPUs = append(cfg.GPUs, GPUConfig{Generation: PascalPlus, ManagedMemory: int64(2+r.IntN(3)) * BlockSize})
	}
	if r.IntN(3) == 0 {
		cfg.GPUs[0].CPULink = LinkNVLink
	}
	if ngpu == 2 {
		l := []Link{LinkNone, LinkPCIe, LinkNVLink}[r.IntN(3)]
		cfg.Peers = [][]Link{{LinkNone, l}, {l, LinkNone}}
	}
	env := &testEnv{e: sim.New(seed), moveT: perMicro64K}
	d, err := New(env, cfg)
	must(t, err)
	d.general = general
	size := int64(2+r.IntN(5))*BlockSize - int64(r.IntN(3))*PageSize*7
	a := mustAlloc(t, d, size)
	pages := int((size + PageSize - 1) / PageSize)
	procs := ngpu + 1
	log := sha256.New()
	kinds := map[Kind]bool{}
	if !quiet {
		d.Hooks.Hook(func(e *Event) {
			fmt.Fprintf(log, "%+v\n", *e)
			kinds[e.Kind] = true
		})
	}
	// access logs what an access returned.
	access := func(acc Access, err error) {
		must(t, err)
		fmt.Fprintf(log, "%+v\n", acc)
	}
	// span is a random page-aligned range of a, up to max pages.
	span := func(r *rand.Rand, max int) (Addr, int64) {
		first := r.IntN(pages)
		n := 1 + r.IntN(min(max, pages-first))
		return a.Base + Addr(first)*PageSize, int64(n) * PageSize
	}
	advise := func(p *sim.Proc) {
		addr, n := span(r, 3*PagesPerBlock)
		advice := Advice(1 + r.IntN(6))
		must(t, d.Advise(p, addr, n, advice, Processor(r.IntN(procs))))
	}
	env.e.Spawn("setup", func(p *sim.Proc) {
		for range r.IntN(4) {
			advise(p)
		}
	})
	for w := range 3 + r.IntN(6) {
		wr := rand.New(rand.NewPCG(seed, uint64(w)))
		env.e.Spawn(fmt.Sprintf("warp%d", w), func(p *sim.Proc) {
			for range 20 + wr.IntN(40) {
				gpu := wr.IntN(ngpu)
				// Within one block: an access over more blocks than the
				// GPU holds, while others evict, may refault forever.
				addr, n := span(wr, PagesPerBlock)
				n = min(n, int64(BlockSize-addr%BlockSize))
				addr += Addr(wr.IntN(PageSize))
				n -= int64(addr % PageSize)
				write := wr.IntN(3) == 0
				if wr.IntN(4) == 0 {
					access(d.GPUAccessStrided(p, gpu, addr, n, int64(1+wr.IntN(8))*PageSize+int64(wr.IntN(64)), int64(4+wr.IntN(64)), write))
				} else {
					access(d.GPUAccess(p, gpu, addr, n, write))
				}
				p.Sleep(sim.Time(wr.IntN(30)) * sim.Microsecond)
			}
		})
	}
	cr := rand.New(rand.NewPCG(seed, 100))
	env.e.Spawn("cpu", func(p *sim.Proc) {
		for range 10 + cr.IntN(30) {
			addr, n := span(cr, 8)
			access(d.CPUAccess(p, addr, n, cr.IntN(2) == 0))
			p.Sleep(sim.Time(cr.IntN(40)) * sim.Microsecond)
		}
	})
	pr := rand.New(rand.NewPCG(seed, 101))
	env.e.Spawn("prefetch", func(p *sim.Proc) {
		for range pr.IntN(6) {
			p.Sleep(sim.Time(pr.IntN(200)) * sim.Microsecond)
			addr, n := span(pr, PagesPerBlock)
			must(t, d.Prefetch(p, addr, n, Processor(pr.IntN(procs))))
			if pr.IntN(2) == 0 {
				advise(p)
			}
		}
	})
	env.e.RunUntil(randomHorizon)
	env.e.Close()
	fmt.Fprintf(log, "%+v\n", d.Stats())
	return fmt.Sprintf("%x", log.Sum(nil)), kinds, d.plainServices
}

// TestRandomRuns: randomRun's events, accesses and statistics, for each of
// randomRuns seeds, have the digests in testdata/random-runs.txt,
// recorded from the driver selecting residency page by page
// (-update-random rewrites them, for a deliberate change of behaviour).
// An optimisation of the fault service must leave every event, its time
// and order, and every counter unchanged.
func TestRandomRuns(t *testing.T) {
	const file = "testdata/random-runs.txt"
	var got []string
	kinds := map[Kind]bool{}
	for seed := range uint64(randomRuns) {
		digest, seen := randomRun(t, seed)
		for k := range seen {
			kinds[k] = true
		}
		got = append(got, fmt.Sprintf("%d %s", seed, digest))
	}
	if *updateRandom {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(file, []byte(strings.Join(got, "\n")+"\n"), 0o644))
	}
	f, err := os.Open(file)
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 0; sc.Scan(); i++ {
		if i >= len(got) || sc.Text() != got[i] {
			t.Fatalf("run %d: digest %q, want %q", i, got[min(i, len(got)-1)], sc.Text())
		}
	}
	for _, k := range []Kind{KindEviction, KindThrottle, KindPin, KindRevoke, KindRemoteMap, KindThrashing} {
		if !kinds[k] {
			t.Errorf("no run has a %v event", k)
		}
	}
}

// TestPlainServiceSameRun: servicing the faults of a block nobody
// advised on a machine of one GPU through servicePlain gives every
// event, access and statistic of the general path (serviceFaults and
// makeResident), over plainRuns random runs drawn as TestRandomRuns's
// (advice given while a service migrates included), half of them with
// nobody watching the driver's events.
func TestPlainServiceSameRun(t *testing.T) {
	const plainRuns = 150
	plain, runs := 0, 0
	for seed := range uint64(plainRuns) {
		// Half the runs with nobody watching: servicePlain counts
		// migrations without events then.
		quiet := seed%2 == 1
		want, _, n := randomRunWith(t, 1000+seed, true, quiet)
		if n != 0 {
			t.Fatalf("seed %d: %d plain services with general set", seed, n)
		}
		got, _, n := randomRunWith(t, 1000+seed, false, quiet)
		if got != want {
			t.Fatalf("seed %d (quiet %v): digest %s, general path %s", seed, quiet, got, want)
		}
		plain += n
		if n > 0 {
			runs++
		}
	}
	t.Logf("%d plain services, in %d of %d runs", plain, runs, plainRuns)
	if runs < plainRuns/3 {
		t.Fatalf("only %d runs took servicePlain", runs)
	}
}

// plainScript is a scripted run on one GPU of what servicePlain must
// get right besides the common case, with every event in the log:
// pages read-duplicated under ReadMostly, the advice dropped, then
// written by the GPU; the GPU faulting a block while another process
// advises AccessedBy on it mid-migration (the CPU then maps the pages
// where they land); blocks evicted and faulted back. general turns
// servicePlain off.
func plainScript(t *testing.T, general bool) (string, *Driver) {
	// The CPU reaches the GPU's memory over NVLink-C2C: it can map it.
	cfg := oneGPU(2 * BlockSize)
	cfg.GPUs[0].CPULink = LinkNVLink
	d, env := newDriver(t, cfg)
	d.general = general
	var log strings.Builder
	d.Hooks.Hook(func(e *Event) { fmt.Fprintf(&log, "%+v\n", *e) })
	a := mustAlloc(t, d, 4*BlockSize)
	at := func(block, page int) Addr { return a.Base + Addr(block)*BlockSize + Addr(page)*PageSize }
	access := func(acc Access, err error) {
		must(t, err)
		fmt.Fprintf(&log, "%+v\n", acc)
	}
	env.e.Spawn("advisor", func(p *sim.Proc) {
		// Block 2's first batch migrates from 515.8 to 531.8 us.
		p.Sleep(520 * sim.Microsecond)
		must(t, d.Advise(p, at(2, 0), BlockSize, AdviseSetAccessedBy, CPU))
	})
	run(t, env, func(p *sim.Proc) {
		must(t, d.Advise(p, at(0, 0), BlockSize, AdviseSetReadMostly, 0))
		access(d.CPUAccess(p, at(0, 0), 64*PageSize, true))
		access(d.GPUAccess(p, 0, at(0, 8), 32*PageSize, false))
		must(t, d.Advise(p, at(0, 0), BlockSize, AdviseUnsetReadMostly, 0))
		access(d.GPUAccess(p, 0, at(0, 0), 40*PageSize, true))
		access(d.CPUAccess(p, at(1, 0), BlockSize, true))
		access(d.CPUAccess(p, at(2, 0), BlockSize, true))
		// The GPU maps pages of block 3 in system memory, and keeps
		// the mappings once the advice goes, until they move.
		must(t, d.Advise(p, at(3, 0), BlockSize, AdviseSetAccessedBy, GPU(0)))
		access(d.CPUAccess(p, at(3, 0), BlockSize, true))
		access(d.GPUAccess(p, 0, at(3, 0), 16*PageSize, false))
		must(t, d.Advise(p, at(3, 0), BlockSize, AdviseUnsetAccessedBy, GPU(0)))
		access(d.GPUAccess(p, 0, at(3, 16), 100*PageSize, false))
		fmt.Fprintln(&log, d.Residency(at(3, 0)), d.MapsRemotely(GPU(0), at(3, 0)))
		p.Sleep(300 * sim.Microsecond)
		access(d.GPUAccess(p, 0, at(2, 0), BlockSize, false))
		access(d.GPUAccess(p, 0, at(1, 100), 200*PageSize, true))
		access(d.GPUAccess(p, 0, at(3, 0), BlockSize, true))
		access(d.GPUAccess(p, 0, at(0, 0), BlockSize, false))
	})
	fmt.Fprintf(&log, "%v %+v\n", env.e.Now(), d.Stats())
	for pg := range 4 * PagesPerBlock {
		x := a.Base + Addr(pg)*PageSize
		fmt.Fprintf(&log, "%v %v %v\n", d.Residency(x), d.MapsRemotely(CPU, x), d.MapsRemotely(GPU(0), x))
	}
	return log.String(), d
}

// TestPlainServiceScript: plainScript logs the same with servicePlain
// as with the general path, and has the remote mappings after advice
// mid-migration and the evictions it is about.
func TestPlainServiceScript(t *testing.T) {
	want, _ := plainScript(t, true)
	got, d := plainScript(t, false)
	if got != want {
		t.Fatalf("servicePlain:\n%s\ngeneral path:\n%s", got, want)
	}
	s := d.Stats()
	if d.plainServices < 4 || s.RemoteMaps == 0 || s.Evictions == 0 {
		t.Fatalf("%d plain services, %d remote maps, %d evictions: the script misses a case",
			d.plainServices, s.RemoteMaps, s.Evictions)
	}
}

package uvm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// testEnv moves data at a fixed rate so that expected times can be worked
// out by hand: by default 64 KiB per microsecond, no latency (4 KiB in
// 62.5 ns, 2 MiB in 32 us). Cache maintenance costs 1 ps per byte.
type testEnv struct {
	e     *sim.Engine
	moveT func(bytes int64) sim.Time
	moves []string
	maint []string
}

func (v *testEnv) Engine() *sim.Engine { return v.e }

func (v *testEnv) Move(p *sim.Proc, from, to Processor, bytes int64) {
	v.moves = append(v.moves, fmt.Sprintf("%v->%v %d", from, to, bytes))
	c := v.e.NewCompletion()
	v.e.After(v.moveT(bytes), c.Complete)
	p.Wait(c)
}

func (v *testEnv) CacheMaintenance(p *sim.Proc, op CacheOp, bytes int64) {
	v.maint = append(v.maint, fmt.Sprintf("%v %d", op, bytes))
	p.Sleep(sim.Time(bytes))
}

// perMicro64K is 64 KiB per microsecond, in integer picoseconds.
func perMicro64K(bytes int64) sim.Time { return sim.Time(bytes * 1_000_000 / 65536) }

// h200Move is the h200-pcie route: 360 ns of latency and 55.5 GB/s.
func h200Move(bytes int64) sim.Time {
	return 360*sim.Nanosecond + sim.TransferTime(float64(bytes), 55.5e9)
}

// testParams are round costs for hand-worked times: a GPU fault's batch
// costs 10 us + 0.1 us per entry + 2 us per block, a CPU fault 5 us,
// a prefetched block 1 us; clearing pages is free.
func testParams() Params {
	p := DefaultParams()
	p.FaultBatchOverhead = 10 * sim.Microsecond
	p.FaultEntryCost = 100 * sim.Nanosecond
	p.BlockServiceCost = 2 * sim.Microsecond
	p.CPUFaultCost = 5 * sim.Microsecond
	p.PrefetchBlockCost = 1 * sim.Microsecond
	p.CPUZeroPageCost = 0
	p.CPUMapPageCost = 0
	return p
}

// oneGPU is one Pascal-plus GPU with vram bytes of managed memory on
// PCIe.
func oneGPU(vram int64) Config {
	return Config{GPUs: []GPUConfig{{Generation: PascalPlus, ManagedMemory: vram}}, Params: testParams()}
}

func newDriver(t testing.TB, cfg Config) (*Driver, *testEnv) {
	t.Helper()
	env := &testEnv{e: sim.New(1), moveT: perMicro64K}
	d, err := New(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, env
}

// run runs body as a process to the end of the simulation.
func run(t testing.TB, env *testEnv, body func(p *sim.Proc)) {
	t.Helper()
	env.e.Spawn("app", body)
	env.e.Run()
	if b := env.e.Blocked(); len(b) > 0 {
		t.Fatalf("deadlocked: %v", b)
	}
}

func mustAlloc(t testing.TB, d *Driver, size int64) *Allocation {
	t.Helper()
	a, err := d.Allocate(size, AllocOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ok wraps an access's results: ok(t)(d.GPUAccess(...)) fails the test
// on an error.
func ok(t testing.TB) func(Access, error) Access {
	return func(acc Access, err error) Access {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return acc
	}
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

// us is microseconds with fractions, for readable expectations.
func us(x float64) sim.Time { return sim.FromSeconds(x * 1e-6) }

// record collects events of the given kinds.
func record(d *Driver, kinds ...Kind) *[]Event {
	var evs []Event
	d.Hooks.Hook(func(e *Event) {
		for _, k := range kinds {
			if e.Kind == k {
				evs = append(evs, *e)
			}
		}
	})
	return &evs
}

func pagesOf(first, end int) []int {
	var out []int
	for i := first; i < end; i++ {
		out = append(out, i)
	}
	return out
}

func mask(pages ...[]int) PageMask {
	var m PageMask
	for _, ps := range pages {
		for _, p := range ps {
			m.Set(p)
		}
	}
	return m
}

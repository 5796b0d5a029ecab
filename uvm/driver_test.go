package uvm

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestFootprint: a 1 TiB allocation of which 3 pages are touched costs
// three blocks' worth of state.
func TestFootprint(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, env := newDriver(t, oneGPU(1<<30))
	a := mustAlloc(t, d, 1<<40)
	run(t, env, func(p *sim.Proc) {
		for _, off := range []int64{0, 300 << 30, 1<<40 - 8} {
			ok(t)(d.GPUAccess(p, 0, a.Base+Addr(off), 8, true))
		}
	})
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := d.BlockCount(); n != 3 {
		t.Errorf("%d blocks, want 3", n)
	}
	if f := d.Footprint(); f > 3*1024 {
		t.Errorf("footprint %d B, want under 3 KiB", f)
	}
	// A per-page array over 1 TiB would be hundreds of MiB.
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 1<<20 {
		t.Errorf("heap grew %d B", grew)
	}
	runtime.KeepAlive(d)
}

// scenario is a busy run: 8 warps and a CPU thread on 3 blocks of which
// the GPU can hold 2, so faults, batches, evictions and thrashing mix.
func scenario(t testing.TB, seed uint64) ([]string, Stats) {
	cfg := oneGPU(2 * BlockSize)
	env := &testEnv{e: sim.New(seed), moveT: perMicro64K}
	d, err := New(env, cfg)
	must(t, err)
	a := mustAlloc(t, d, 3*BlockSize)
	var log []string
	d.Hooks.Hook(func(e *Event) { log = append(log, e.String()) })
	for w := range 8 {
		env.e.Spawn(fmt.Sprintf("warp%d", w), func(p *sim.Proc) {
			for k := range 96 {
				off := Addr((k*8+w)%(3*PagesPerBlock)) * PageSize * 2
				ok(t)(d.GPUAccess(p, 0, a.Base+off%Addr(3*BlockSize), 4, k%3 == 0))
			}
		})
	}
	env.e.Spawn("cpu", func(p *sim.Proc) {
		for k := range 40 {
			ok(t)(d.CPUAccess(p, a.Base+Addr(k%4)*PageSize, 4, true))
			p.Sleep(20 * sim.Microsecond)
		}
	})
	env.e.Run()
	return log, d.Stats()
}

// TestDeterminism: the same run twice gives the same events.
func TestDeterminism(t *testing.T) {
	log1, st1 := scenario(t, 1)
	log2, st2 := scenario(t, 1)
	if !slices.Equal(log1, log2) || st1 != st2 {
		t.Fatal("two identical runs differ")
	}
	if st1.Evictions == 0 || st1.Thrashing == 0 || st1.Batches == 0 || st1.CPUFaults == 0 {
		t.Errorf("scenario does not exercise enough: %+v", st1)
	}
}

// TestErrors: misuse returns the API's error and reports an event.
func TestErrors(t *testing.T) {
	d, env := newDriver(t, oneGPU(1<<30))
	a := mustAlloc(t, d, BlockSize)
	evs := record(d, KindError)
	run(t, env, func(p *sim.Proc) {
		_, err := d.GPUAccess(p, 0, a.End()+BlockSize, 4, false)
		wantErr(t, err, ErrInvalidAddress)
		_, err = d.CPUAccess(p, a.End()-2, 4, false) // runs off the end
		wantErr(t, err, ErrInvalidAddress)
		_, err = d.GPUAccess(p, 1, a.Base, 4, false)
		wantErr(t, err, ErrInvalidValue)
		wantErr(t, d.Prefetch(p, a.Base, 4, GPU(5)), ErrInvalidValue)
		wantErr(t, d.Advise(p, a.Base, 4, Advice(42), CPU), ErrInvalidValue)
		wantErr(t, d.KernelComplete(p, 0), ErrInvalidValue)
		must(t, d.Free(p, a))
		wantErr(t, d.Free(p, a), ErrInvalidValue)
		_, err = d.CPUAccess(p, a.Base, 4, false)
		wantErr(t, err, ErrInvalidAddress)
	})
	_, err := d.Allocate(0, AllocOptions{})
	wantErr(t, err, ErrInvalidValue)
	if len(*evs) != 6 {
		t.Errorf("%d error events, want 6: %v", len(*evs), *evs)
	}
	for _, cfg := range []Config{
		{},
		{GPUs: []GPUConfig{{Generation: PascalPlus}, {Generation: PrePascal}}},
		{GPUs: []GPUConfig{{Generation: Tegra}, {Generation: Tegra}}},
		{GPUs: []GPUConfig{{Generation: PascalPlus}}, Peers: [][]Link{{LinkNone}, {LinkNone}}},
		{GPUs: []GPUConfig{{Generation: PascalPlus}}, Params: Params{FaultBatchCount: 256}},
	} {
		if _, err := New(&testEnv{e: sim.New(1)}, cfg); !errors.Is(err, ErrInvalidValue) {
			t.Errorf("New(%+v) = %v, want ErrInvalidValue", cfg, err)
		}
	}
}

func TestPolicySpans(t *testing.T) {
	d, _ := newDriver(t, oneGPU(1<<30))
	a := mustAlloc(t, d, 4*PageSize+100) // 5 pages
	a.updatePolicy(a.Base+PageSize, a.Base+3*PageSize, func(p *policy) { p.readMostly = true })
	a.updatePolicy(a.Base+2*PageSize, a.Base+5*PageSize, func(p *policy) { p.preferred = CPU })
	want := []string{"0-1 false none", "1-2 true none", "2-3 true cpu", "3-5 false cpu"}
	var got []string
	for _, s := range a.policies {
		got = append(got, fmt.Sprintf("%d-%d %v %v", (s.start-a.Base)/PageSize, (s.end-a.Base)/PageSize, s.readMostly, s.preferred))
	}
	if !slices.Equal(got, want) {
		t.Errorf("spans %v, want %v", got, want)
	}
	a.updatePolicy(a.Base, a.Base+5*PageSize, func(p *policy) { *p = defaultPolicy })
	if len(a.policies) != 1 {
		t.Errorf("spans not merged: %v", a.policies)
	}
}

package uvm

import (
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestFaultPageCost: the fault service charges FaultPageCost per page
// it makes resident on the GPU, prefetched pages included: the first
// fault of a host-resident block moves its 64 KiB big page (16 pages),
// the fault at page 32 after pages 0 and 16 moves 32 pages.
func TestFaultPageCost(t *testing.T) {
	stalls := func(cost sim.Time) []sim.Time {
		cfg := oneGPU(1 << 30)
		cfg.Params = DefaultParams()
		cfg.Params.FaultPageCost = cost
		env := &testEnv{e: sim.New(1), moveT: h200Move}
		d, err := New(env, cfg)
		must(t, err)
		a := mustAlloc(t, d, BlockSize)
		onHost(t, d, env, a, BlockSize)
		var out []sim.Time
		run(t, env, func(p *sim.Proc) {
			for _, pg := range []int{0, 16, 32} {
				acc := ok(t)(d.GPUAccess(p, 0, a.Base+Addr(pg*PageSize), 4, false))
				out = append(out, acc.Stall)
			}
		})
		return out
	}
	base := stalls(0)
	for _, tc := range []struct {
		cost  sim.Time
		pages []int64
	}{
		{100 * sim.Nanosecond, []int64{16, 16, 32}},
		{sim.Microsecond, []int64{16, 16, 32}},
	} {
		got := stalls(tc.cost)
		for i, n := range tc.pages {
			if want := base[i] + sim.Time(n)*tc.cost; got[i] != want {
				t.Errorf("cost %v: fault %d stalled %v, want %v (%d pages more than %v)", tc.cost, i, got[i], want, n, base[i])
			}
		}
	}
}

// TestGPUAccessStrided: a strided walk faults only the pages its
// elements touch; a stride of a page or less touches them all.
func TestGPUAccessStrided(t *testing.T) {
	for _, tc := range []struct {
		name         string
		stride, elem int64
		size         int64
		faults       int
	}{
		{"4 B every 64 KiB", 64 << 10, 4, BlockSize, 32},
		{"4 B every 2 MiB over 4 blocks", BlockSize, 4, 4 * BlockSize, 4},
		{"8 KiB every 64 KiB: two pages each", 64 << 10, 8 << 10, BlockSize, 64},
		{"4 B every page: every page", PageSize, 4, BlockSize, 512},
		{"stride below the element: the region", 4, 8, BlockSize, 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := oneGPU(1 << 30)
			cfg.Params = DefaultParams()
			cfg.Params.DisablePrefetch = true
			env := &testEnv{e: sim.New(1), moveT: h200Move}
			d, err := New(env, cfg)
			must(t, err)
			a := mustAlloc(t, d, tc.size)
			onHost(t, d, env, a, tc.size)
			var acc Access
			run(t, env, func(p *sim.Proc) {
				acc = ok(t)(d.GPUAccessStrided(p, 0, a.Base, tc.size, tc.stride, tc.elem, false))
			})
			if acc.Faults != tc.faults {
				t.Errorf("%d faults, want %d", acc.Faults, tc.faults)
			}
		})
	}
}

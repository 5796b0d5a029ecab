package cuda

import (
	"slices"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// program is a mix of the façade's calls: copies of every kind, a
// kernel on managed memory, a prefetch, misuse.
func program(t testing.TB, r *rig) func(p *sim.Proc) {
	return func(p *sim.Proc) {
		h, err := r.ctx.MemAllocHost(p, 4<<20)
		must(t, err)
		pg, err := r.pr.Malloc(4 << 20)
		must(t, err)
		dv, err := r.ctx.MemAlloc(p, 4<<20)
		must(t, err)
		mg, err := r.ctx.MemAllocManaged(p, 4<<20, MemAttachGlobal)
		must(t, err)
		must(t, r.ctx.Memcpy(p, dv, mem.GPUAddr(h), 4<<20))
		must(t, r.ctx.Memcpy(p, mem.GPUAddr(pg), dv, 4<<20))
		must(t, r.ctx.CPUAccess(p, mg, 4<<20, true))
		must(t, r.ctx.LaunchKernel(p, kernel("k", mg, 4<<20, false), nil))
		must(t, r.ctx.MemPrefetchAsync(p, mg, 4<<20, DeviceCPU, nil))
		must(t, r.ctx.Synchronize(p))
		must(t, r.ctx.MemFree(p, dv))
		r.ctx.CPUAccess(p, dv, 8, false)
	}
}

// TestDeterministic: the same program gives the same observations at the
// same times.
func TestDeterministic(t *testing.T) {
	var runs [2][]string
	var ends [2]sim.Time
	for i := range runs {
		r := h200(t)
		r.run(program(t, r))
		for _, o := range r.obs {
			runs[i] = append(runs[i], o.String())
		}
		ends[i] = r.m.Engine.Now()
	}
	if !slices.Equal(runs[0], runs[1]) || ends[0] != ends[1] || len(runs[0]) == 0 {
		t.Errorf("runs differ:\n%v\n%v", runs[0], runs[1])
	}
}

// BenchmarkMemcpyPinned is the cost of the façade around a small
// synchronous copy: resolving both ends, the copy, the content.
func BenchmarkMemcpyPinned(b *testing.B) {
	r := h200(b)
	var h mem.VirtAddr
	var dv mem.GPUAddr
	r.run(func(p *sim.Proc) {
		var err error
		h, err = r.ctx.MemAllocHost(p, 4096)
		must(b, err)
		dv, err = r.ctx.MemAlloc(p, 4096)
		must(b, err)
	})
	b.ReportAllocs()
	r.m.Engine.Spawn("bench", func(p *sim.Proc) {
		for b.Loop() {
			if err := r.ctx.Memcpy(p, dv, mem.GPUAddr(h), 4096); err != nil {
				b.Error(err)
				return
			}
		}
	})
	r.m.Engine.Run()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "copies/s")
}

package uvm

import (
	"errors"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

func legacyConfig(gen Generation, n int, vram int64, peer Link) Config {
	cfg := Config{Params: testParams()}
	for range n {
		cfg.GPUs = append(cfg.GPUs, GPUConfig{Generation: gen, ManagedMemory: vram})
	}
	if n > 1 {
		cfg.Peers = make([][]Link, n)
		for i := range n {
			cfg.Peers[i] = make([]Link, n)
			for j := range n {
				if i != j {
					cfg.Peers[i][j] = peer
				}
			}
		}
	}
	return cfg
}

// TestPrePascal: no GPU faults; what the CPU dirtied migrates at kernel
// launch; the CPU faults pages back after the kernel; touching managed
// memory while a kernel runs is an error.
func TestPrePascal(t *testing.T) {
	d, env := newDriver(t, legacyConfig(PrePascal, 1, 8<<20, LinkNone))
	_, err := d.Allocate(16<<20, AllocOptions{})
	wantErr(t, err, ErrOutOfMemory)
	a := mustAlloc(t, d, 4<<20)
	b := mustAlloc(t, d, 4<<20)
	_, err = d.Allocate(1, AllocOptions{})
	wantErr(t, err, ErrOutOfMemory)

	errs := record(d, KindError)
	var gpuAcc, cpuBack Access
	var during, noKernel, prefetch error
	var afterLaunch ProcSet
	run(t, env, func(p *sim.Proc) {
		// Three CPU writes, three faults populating pages in system memory.
		for _, off := range []int64{0, PageSize, BlockSize + 88*PageSize} {
			if acc := ok(t)(d.CPUAccess(p, a.Base+Addr(off), 8, true)); acc.Faults != 1 {
				t.Errorf("CPU write at %#x: %d faults", off, acc.Faults)
			}
		}
		must(t, d.KernelLaunch(p, 0))
		afterLaunch = d.Residency(a.Base)
		gpuAcc = ok(t)(d.GPUAccess(p, 0, a.Base, 4<<20, true))
		_, during = d.CPUAccess(p, b.Base, 4, false)
		must(t, d.KernelComplete(p, 0))
		cpuBack = ok(t)(d.CPUAccess(p, a.Base, 4, false))
		must(t, d.KernelLaunch(p, 0)) // the CPU only read: nothing moves
		must(t, d.KernelComplete(p, 0))
		_, noKernel = d.GPUAccess(p, 0, a.Base, 4, false)
		prefetch = d.Prefetch(p, a.Base, 4, GPU(0))
	})
	want := []string{"cpu->gpu0 8192", "cpu->gpu0 4096", "gpu0->cpu 4096"}
	if !slices.Equal(env.moves, want) {
		t.Errorf("moves %v, want %v", env.moves, want)
	}
	if afterLaunch != procs(GPU(0)) {
		t.Errorf("after launch page 0 on %v, want gpu0 only", afterLaunch)
	}
	if gpuAcc.Faults != 0 || gpuAcc.Where != GPU(0) || gpuAcc.RemoteBytes != 0 {
		t.Errorf("GPU access %+v, want local without faults", gpuAcc)
	}
	wantErr(t, during, ErrConcurrentAccess)
	if cpuBack.Faults != 1 {
		t.Errorf("CPU read after the kernel: %d faults, want 1", cpuBack.Faults)
	}
	wantErr(t, noKernel, ErrNoKernel)
	wantErr(t, prefetch, ErrNotSupported)
	if len(*errs) != 3 || !errors.Is((*errs)[0].Err, ErrConcurrentAccess) || (*errs)[0].Processor != CPU {
		t.Errorf("error events %v", *errs)
	}
	if st := d.Stats(); st.MigratedBytes[CauseLaunch] != 3*PageSize || st.Migrations[CauseLaunch] != 2 {
		t.Errorf("launch migrations %d, %d B", st.Migrations[CauseLaunch], st.MigratedBytes[CauseLaunch])
	}
	run(t, env, func(p *sim.Proc) { must(t, d.Free(p, b)) })
	if _, err := d.Allocate(4<<20, AllocOptions{}); err != nil {
		t.Errorf("allocation after free: %v", err)
	}
}

// TestPrePascalMultiGPU: with peer access among all GPUs managed memory
// lives on the current device and the others map it; without, CUDA puts
// it in system memory, which every GPU maps and nothing migrates.
func TestPrePascalMultiGPU(t *testing.T) {
	cases := []struct {
		name  string
		peer  Link
		where Processor
		moves int
	}{
		{"peers: on the device", LinkPCIe, GPU(1), 1},
		{"no peers: system memory", LinkNone, CPU, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, env := newDriver(t, legacyConfig(PrePascal, 2, 8<<20, c.peer))
			a, err := d.Allocate(BlockSize, AllocOptions{Device: 1})
			must(t, err)
			var acc Access
			var during error
			run(t, env, func(p *sim.Proc) {
				ok(t)(d.CPUAccess(p, a.Base, 4, true))
				must(t, d.KernelLaunch(p, 0))
				acc = ok(t)(d.GPUAccess(p, 0, a.Base, 64, false))
				_, during = d.CPUAccess(p, a.Base, 4, false)
				must(t, d.KernelComplete(p, 0))
			})
			if acc.Where != c.where || acc.RemoteBytes != 64 || acc.Faults != 0 {
				t.Errorf("GPU 0 access %+v, want remote from %v", acc, c.where)
			}
			if len(env.moves) != c.moves {
				t.Errorf("moves %v, want %d", env.moves, c.moves)
			}
			wantErr(t, during, ErrConcurrentAccess)
		})
	}
}

// TestTegra: one copy in shared DRAM, never migrated; the CPU caches are
// cleaned at launch and invalidated at completion; no concurrent access.
func TestTegra(t *testing.T) {
	d, env := newDriver(t, legacyConfig(Tegra, 1, 0, LinkNone))
	a := mustAlloc(t, d, BlockSize)
	var gpuAcc, cpuAcc Access
	var during, prefetch error
	run(t, env, func(p *sim.Proc) {
		cpuAcc = ok(t)(d.CPUAccess(p, a.Base, 2*PageSize, true))
		must(t, d.KernelLaunch(p, 0))
		gpuAcc = ok(t)(d.GPUAccess(p, 0, a.Base+4*PageSize, PageSize, true))
		_, during = d.CPUAccess(p, a.Base, 4, false)
		must(t, d.KernelComplete(p, 0))
		ok(t)(d.CPUAccess(p, a.Base+4*PageSize, 4, false))
		prefetch = d.Prefetch(p, a.Base, PageSize, GPU(0))
	})
	if cpuAcc.Faults != 0 || gpuAcc.Faults != 0 || gpuAcc.Where != CPU || gpuAcc.RemoteBytes != 0 {
		t.Errorf("accesses %+v %+v, want no faults, shared DRAM", cpuAcc, gpuAcc)
	}
	if len(env.moves) != 0 {
		t.Errorf("Tegra moved data: %v", env.moves)
	}
	if want := []string{"clean 8192", "invalidate 4096"}; !slices.Equal(env.maint, want) {
		t.Errorf("cache maintenance %v, want %v", env.maint, want)
	}
	wantErr(t, during, ErrConcurrentAccess)
	wantErr(t, prefetch, ErrNotSupported)
}

func TestPinnedCacheability(t *testing.T) {
	cases := []struct {
		gen              Generation
		ioCoherent       bool
		cpuCached, gpuOn bool
	}{
		{Tegra, false, false, false}, // TX1, TX2: no I/O coherence, uncached on both
		{Tegra, true, true, false},   // Xavier, Orin: cacheable on the CPU
		{PascalPlus, false, true, false},
		{PrePascal, false, true, false},
	}
	for _, c := range cases {
		cpu, gpu := PinnedCacheability(c.gen, c.ioCoherent)
		if cpu != c.cpuCached || gpu != c.gpuOn {
			t.Errorf("%v coherent=%v: cpu %v gpu %v", c.gen, c.ioCoherent, cpu, gpu)
		}
	}
}

func TestGenerationOf(t *testing.T) {
	cases := []struct {
		arch       string
		integrated bool
		want       Generation
	}{
		{"kepler", false, PrePascal}, {"maxwell", false, PrePascal},
		{"pascal", false, PascalPlus}, {"volta", false, PascalPlus}, {"turing", false, PascalPlus},
		{"ampere", false, PascalPlus}, {"ada", false, PascalPlus}, {"hopper", false, PascalPlus},
		{"blackwell", false, PascalPlus}, {"ampere", true, Tegra}, {"volta", true, Tegra},
	}
	for _, c := range cases {
		got, err := GenerationOf(c.arch, c.integrated)
		if err != nil || got != c.want {
			t.Errorf("GenerationOf(%q, %v) = %v, %v; want %v", c.arch, c.integrated, got, err, c.want)
		}
	}
	_, err := GenerationOf("fermi", false)
	wantErr(t, err, ErrInvalidValue)
	if !PascalPlus.ConcurrentAccess() || PrePascal.ConcurrentAccess() || Tegra.ConcurrentAccess() {
		t.Error("ConcurrentAccess")
	}
}

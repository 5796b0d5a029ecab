package uvm

import (
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

func procs(ps ...Processor) ProcSet {
	var s ProcSet
	for _, p := range ps {
		s = s.With(p)
	}
	return s
}

func twoGPUs(peer Link) Config {
	return Config{
		GPUs:   []GPUConfig{{Generation: PascalPlus, ManagedMemory: 1 << 30}, {Generation: PascalPlus, ManagedMemory: 1 << 30}},
		Peers:  [][]Link{{LinkNone, peer}, {peer, LinkNone}},
		Params: testParams(),
	}
}

// TestReadMostly: a read fault copies instead of moving; a write
// invalidates the other copies; a read after it copies again.
func TestReadMostly(t *testing.T) {
	d, env := newDriver(t, oneGPU(1<<30))
	a := mustAlloc(t, d, BlockSize)
	var steps []ProcSet
	var cpuRead Access
	run(t, env, func(p *sim.Proc) {
		ok(t)(d.CPUAccess(p, a.Base, 4, true)) // big page 0 on the CPU
		must(t, d.Advise(p, a.Base, BlockSize, AdviseSetReadMostly, NoProcessor))
		ok(t)(d.GPUAccess(p, 0, a.Base, 4, false))
		steps = append(steps, d.Residency(a.Base), d.Residency(a.Base+PageSize))
		cpuRead = ok(t)(d.CPUAccess(p, a.Base+PageSize, 4, false))
		ok(t)(d.GPUAccess(p, 0, a.Base, 4, true))
		steps = append(steps, d.Residency(a.Base), d.Residency(a.Base+PageSize))
		ok(t)(d.CPUAccess(p, a.Base, 4, false))
		steps = append(steps, d.Residency(a.Base))
	})
	both, gpu := procs(CPU, GPU(0)), procs(GPU(0))
	want := []ProcSet{both, both, gpu, both, both}
	if !slices.Equal(steps, want) {
		t.Errorf("residency %v, want %v", steps, want)
	}
	if cpuRead.Faults != 0 {
		t.Error("the CPU faulted on its own copy of a duplicated page")
	}
	// The read duplicated the big page (64 KiB), the write moved
	// nothing (the GPU has a copy) and invalidated the CPU's copy of
	// page 0, the CPU's read copied page 0 back (4 KiB).
	st := d.Stats()
	if st.DuplicatedBytes != BigPageSize+PageSize || st.Revocations != 1 {
		t.Errorf("duplicated %d B, %d revocations", st.DuplicatedBytes, st.Revocations)
	}
	if want := []string{"cpu->gpu0 65536", "gpu0->cpu 4096"}; !slices.Equal(env.moves, want) {
		t.Errorf("moves %v, want %v", env.moves, want)
	}

	t.Run("unset collapses", func(t *testing.T) {
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseUnsetReadMostly, NoProcessor))
		})
		// No preferred location: the CPU's copy stays.
		if r := d.Residency(a.Base + PageSize); r != procs(CPU) {
			t.Errorf("after UnsetReadMostly on %v, want cpu", r)
		}
	})
}

// TestPreferredLocation: pages stay on the preferred location and others
// map them remotely where they can.
func TestPreferredLocation(t *testing.T) {
	t.Run("CPU preferred: the GPU maps system memory", func(t *testing.T) {
		d, env := newDriver(t, oneGPU(1<<30))
		a := mustAlloc(t, d, BlockSize)
		var acc Access
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseSetPreferredLocation, CPU))
			ok(t)(d.CPUAccess(p, a.Base, 4, true))
			acc = ok(t)(d.GPUAccess(p, 0, a.Base, 64, false))
		})
		if acc.Faults != 1 || acc.Where != CPU || acc.RemoteBytes != 64 || len(env.moves) != 0 {
			t.Errorf("access %+v, moves %v; want one fault, then remote, nothing moved", acc, env.moves)
		}
		if !d.MapsRemotely(GPU(0), a.Base) || d.Residency(a.Base) != procs(CPU) {
			t.Error("GPU does not map the CPU's page")
		}
	})
	t.Run("GPU preferred on PCIe: the CPU cannot map it and migrates", func(t *testing.T) {
		d, env := newDriver(t, oneGPU(1<<30))
		a := mustAlloc(t, d, BlockSize)
		var on ProcSet
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseSetPreferredLocation, GPU(0)))
			ok(t)(d.GPUAccess(p, 0, a.Base, 4, true))
			on = d.Residency(a.Base)
			ok(t)(d.CPUAccess(p, a.Base, 4, false))
		})
		// First touch on the preferred location populates the whole
		// block there.
		if on != procs(GPU(0)) || d.Stats().PopulatedBytes != BlockSize {
			t.Errorf("first touch on %v, %d B populated; want the whole block on gpu0", on, d.Stats().PopulatedBytes)
		}
		if d.Residency(a.Base) != procs(CPU) || env.moves[0] != "gpu0->cpu 65536" {
			t.Errorf("CPU read left the page on %v, moves %v", d.Residency(a.Base), env.moves)
		}
	})
	t.Run("GPU preferred over NVLink-C2C: the CPU maps it", func(t *testing.T) {
		cfg := oneGPU(1 << 30)
		cfg.GPUs[0].CPULink = LinkNVLink
		d, env := newDriver(t, cfg)
		a := mustAlloc(t, d, BlockSize)
		var acc Access
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseSetPreferredLocation, GPU(0)))
			ok(t)(d.GPUAccess(p, 0, a.Base, 4, true))
			acc = ok(t)(d.CPUAccess(p, a.Base, 4, false))
		})
		if acc.Where != GPU(0) || acc.RemoteBytes != 4 || len(env.moves) != 0 || !d.MapsRemotely(CPU, a.Base) {
			t.Errorf("CPU access %+v, moves %v; want remote on gpu0", acc, env.moves)
		}
	})
	t.Run("peer: data moves to the preferred GPU, the faulting one maps it", func(t *testing.T) {
		d, env := newDriver(t, twoGPUs(LinkPCIe))
		a := mustAlloc(t, d, BlockSize)
		onHost(t, d, env, a, BlockSize)
		evs := record(d, KindMigration, KindRemoteMap)
		var acc Access
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseSetPreferredLocation, GPU(0)))
			acc = ok(t)(d.GPUAccess(p, 1, a.Base, 4, false))
		})
		if acc.Where != GPU(0) || acc.RemoteBytes != 4 || d.Residency(a.Base) != procs(GPU(0)) {
			t.Errorf("access %+v on %v", acc, d.Residency(a.Base))
		}
		if e := (*evs)[0]; e.Kind != KindMigration || e.From != CPU || e.To != GPU(0) || e.Cause != CauseAdvice {
			t.Errorf("first event %+v, want the advised migration cpu->gpu0", e)
		}
	})
}

// TestAccessedBy: the processor keeps a mapping wherever the pages live,
// so its accesses do not fault or migrate.
func TestAccessedBy(t *testing.T) {
	t.Run("mapped at advice time", func(t *testing.T) {
		d, env := newDriver(t, oneGPU(1<<30))
		a := mustAlloc(t, d, BlockSize)
		onHost(t, d, env, a, BlockSize)
		var acc Access
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseSetAccessedBy, GPU(0)))
			acc = ok(t)(d.GPUAccess(p, 0, a.Base, BlockSize, false))
		})
		if acc.Faults != 0 || acc.RemoteBytes != BlockSize || acc.Where != CPU {
			t.Errorf("access %+v, want all remote, no fault", acc)
		}
	})
	t.Run("remapped after a migration", func(t *testing.T) {
		d, env := newDriver(t, oneGPU(1<<30))
		a := mustAlloc(t, d, BlockSize)
		var acc Access
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseSetAccessedBy, GPU(0)))
			must(t, d.Prefetch(p, a.Base, BlockSize, GPU(0)))
			ok(t)(d.CPUAccess(p, a.Base, 4, false)) // the CPU cannot map VRAM: big page 0 comes back
			acc = ok(t)(d.GPUAccess(p, 0, a.Base, 4, false))
		})
		if acc.Faults != 0 || acc.Where != CPU {
			t.Errorf("GPU access %+v, want remote to the CPU without a fault", acc)
		}
	})
	t.Run("CPU AccessedBy on PCIe cannot map VRAM", func(t *testing.T) {
		d, env := newDriver(t, oneGPU(1<<30))
		a := mustAlloc(t, d, BlockSize)
		var acc Access
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseSetAccessedBy, CPU))
			must(t, d.Prefetch(p, a.Base, BlockSize, GPU(0)))
			acc = ok(t)(d.CPUAccess(p, a.Base, 4, false))
		})
		if acc.Faults != 1 || acc.Where != CPU || acc.RemoteBytes != 0 {
			t.Errorf("CPU access %+v, want a fault and a migration", acc)
		}
	})
	t.Run("unset drops the mapping", func(t *testing.T) {
		d, env := newDriver(t, oneGPU(1<<30))
		a := mustAlloc(t, d, BlockSize)
		onHost(t, d, env, a, BlockSize)
		var acc Access
		run(t, env, func(p *sim.Proc) {
			must(t, d.Advise(p, a.Base, BlockSize, AdviseSetAccessedBy, GPU(0)))
			must(t, d.Advise(p, a.Base, BlockSize, AdviseUnsetAccessedBy, GPU(0)))
			acc = ok(t)(d.GPUAccess(p, 0, a.Base, 4, false))
		})
		if acc.Faults != 1 || acc.Where != GPU(0) {
			t.Errorf("access %+v, want a fault and a migration", acc)
		}
	})
}

// TestPeerAccess: GPUs with peer access reach each other's managed
// memory without migration when the driver maps remotely. The driver
// does so for AccessedBy (and a preferred location, a pin); a plain
// fault migrates, as uvm_va_block_select_residency picks the faulting
// GPU when nothing else applies.
func TestPeerAccess(t *testing.T) {
	cases := []struct {
		name       string
		peer       Link
		accessedBy bool
		where      Processor
		remote     int64
		moves      []string
	}{
		{"no advice: migrates", LinkNVLink, false, GPU(1), 0, []string{"gpu0->gpu1 65536"}},
		{"AccessedBy over NVLink: peer mapping", LinkNVLink, true, GPU(0), 256, nil},
		{"AccessedBy over PCIe: peer mapping", LinkPCIe, true, GPU(0), 256, nil},
		{"AccessedBy without peer access: migrates", LinkNone, true, GPU(1), 0, []string{"gpu0->gpu1 65536"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, env := newDriver(t, twoGPUs(c.peer))
			a := mustAlloc(t, d, BlockSize)
			var acc Access
			run(t, env, func(p *sim.Proc) {
				must(t, d.Prefetch(p, a.Base, BlockSize, GPU(0)))
				if c.accessedBy {
					must(t, d.Advise(p, a.Base, BlockSize, AdviseSetAccessedBy, GPU(1)))
				}
				acc = ok(t)(d.GPUAccess(p, 1, a.Base, 256, true))
			})
			if acc.Where != c.where || acc.RemoteBytes != c.remote || !slices.Equal(env.moves, c.moves) {
				t.Errorf("access %+v, moves %v; want served by %v, %d B remote, moves %v",
					acc, env.moves, c.where, c.remote, c.moves)
			}
		})
	}
}

// TestPrefetch: cuMemPrefetchAsync moves whole blocks at the link's rate:
// 4 MiB from the host is 2 x (1 us + 32 us); the GPU then never faults.
func TestPrefetch(t *testing.T) {
	d, env := newDriver(t, oneGPU(1<<30))
	a := mustAlloc(t, d, 2*BlockSize)
	t0 := onHost(t, d, env, a, 2*BlockSize)
	var took sim.Time
	var acc Access
	run(t, env, func(p *sim.Proc) {
		must(t, d.Prefetch(p, a.Base, 2*BlockSize, GPU(0)))
		took = p.Now() - t0
		acc = ok(t)(d.GPUAccess(p, 0, a.Base, 2*BlockSize, true))
	})
	if took != 66*sim.Microsecond {
		t.Errorf("prefetch took %v, want 66us", took)
	}
	if acc.Faults != 0 || acc.Where != GPU(0) {
		t.Errorf("access after prefetch %+v", acc)
	}
	st := d.Stats()
	if st.MigratedBytes[CausePrefetch] != 2*BlockSize || st.Migrations[CausePrefetch] != 2 {
		t.Errorf("prefetch moved %d B in %d migrations", st.MigratedBytes[CausePrefetch], st.Migrations[CausePrefetch])
	}
	if want := []string{"cpu->gpu0 2097152", "cpu->gpu0 2097152"}; !slices.Equal(env.moves, want) {
		t.Errorf("moves %v, want %v", env.moves, want)
	}
}

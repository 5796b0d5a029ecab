package cuda

import (
	"errors"
	"math"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// jetsons are the integrated presets: Orin is I/O coherent (Xavier and
// later), the TX2 is not.
var jetsons = []string{"jetson-orin", "jetson-tx2"}

func forJetsons(t *testing.T, body func(t *testing.T, r *rig, coherent bool)) {
	for _, name := range jetsons {
		t.Run(name, func(t *testing.T) { body(t, newRig(t, name, rigOpt{}), name == "jetson-orin") })
	}
}

// linkRate is a lone flow's rate over route when a link appears on it
// more than once (a DRAM-to-DRAM copy): each link's capacity over the
// sum of its weights.
func linkRate(route fabric.Route) float64 {
	w := map[*fabric.Link]float64{}
	for _, h := range route.Hops {
		w[h.Link] += max(h.Weight, 1)
	}
	best := 0.0
	for l, x := range w {
		if c := l.Effective() / x; best == 0 || c < best {
			best = c
		}
	}
	return best
}

// TestTegraDeviceMemory: cuMemAlloc and cuMemFree work on an integrated
// GPU, from the node's DRAM, which cuMemGetInfo reports; the CPU cannot
// dereference device memory there either (Table 1 of CUDA for Tegra:
// "not directly accessible").
func TestTegraDeviceMemory(t *testing.T) {
	forJetsons(t, func(t *testing.T, r *rig, _ bool) {
		_, dram := r.m.Mem.NodeRange(0)
		r.run(func(p *sim.Proc) {
			free0, total := r.ctx.MemGetInfo()
			if total != dram {
				t.Errorf("total %d, want node 0's DRAM %d", total, dram)
			}
			dv, err := r.ctx.MemAlloc(p, 64<<20)
			must(t, err)
			if free, _ := r.ctx.MemGetInfo(); free0-free != 64<<20 {
				t.Errorf("64 MiB allocated, free down by %d", free0-free)
			}
			if v, err := r.ctx.PointerGetAttribute(PointerAttributeMemoryType, dv); err != nil || v != MemoryTypeDevice {
				t.Errorf("MEMORY_TYPE %d, %v", v, err)
			}
			if err := r.ctx.CPUAccess(p, dv, 8, false); !errors.Is(err, ErrSegmentationFault) {
				t.Errorf("CPU load of device memory: %v, want a segmentation fault", err)
			}
			must(t, r.ctx.MemFree(p, dv))
			if free, _ := r.ctx.MemGetInfo(); free != free0 {
				t.Errorf("free %d after cuMemFree, want %d", free, free0)
			}
		})
	})
}

// TestTegraCopies: cuMemcpy between pinned and device memory on an
// integrated GPU is a DRAM-to-DRAM copy by the copy engine: the bytes
// are read from and written to the node's DRAM, at half its bandwidth.
func TestTegraCopies(t *testing.T) {
	forJetsons(t, func(t *testing.T, r *rig, _ bool) {
		const n = 64 << 20
		dram := r.m.Nodes[0].DRAM
		g := r.m.GPUs[0]
		r.run(func(p *sim.Proc) {
			host, err := r.ctx.MemAllocHost(p, n)
			must(t, err)
			dv, err := r.ctx.MemAlloc(p, n)
			must(t, err)
			for _, c := range []struct {
				name     string
				dst, src mem.GPUAddr
			}{{"h2d", dv, mem.GPUAddr(host)}, {"d2h", mem.GPUAddr(host), dv}} {
				from, to := r.host(), g.Memory()
				if c.name == "d2h" {
					from, to = to, from
				}
				// Each byte read and written over the one DRAM bus, at
				// the bus's copy efficiency (platform.Node.CopyEfficiency).
				route, err := r.m.DMARoute(from, to, g.CE())
				must(t, err)
				rate := dram.Effective() * r.m.Spec.Nodes[g.Node].CopyShare() / 2
				got := linkRate(route)
				if cr := r.m.CopyRate(route, g.CE()); cr > 0 {
					got = min(got, cr)
				}
				if math.Abs(got/rate-1) > 1e-12 {
					t.Errorf("%s at %.2f GB/s, want half of the DRAM's %.2f at its copy efficiency", c.name, got/1e9, dram.Effective()/1e9)
				}
				took := timed(p, func() { must(t, r.ctx.Memcpy(p, c.dst, c.src, n)) })
				want := g.Spec.CopyOverhead.V + route.Latency() + sim.TransferTime(n, rate)
				if took != want {
					t.Errorf("%s of 64 MiB: %v (%.1f GB/s), want %v", c.name, took, gbps(n, took), want)
				}
			}
		})
	})
}

// TestTegraPinnedCacheability: cuMemAllocHost memory is uncached on the
// CPU before Xavier (TX2: loads at the node's uncached rate, stores
// gathered at the memcpy rate) and cached from Xavier on (Orin: the
// memcpy rate both ways); cuMemHostRegister exists only with I/O
// coherence.
func TestTegraPinnedCacheability(t *testing.T) {
	forJetsons(t, func(t *testing.T, r *rig, coherent bool) {
		const n = 1 << 20
		node := r.m.Spec.Nodes[0]
		memcpy, uncached := float64(node.MemcpyRate.V), float64(node.Cache.UncachedRate.V)
		r.run(func(p *sim.Proc) {
			host, err := r.ctx.MemAllocHost(p, n)
			must(t, err)
			_, _, attr := r.m.Mem.Classify(host)
			load := timed(p, func() { must(t, r.ctx.CPUAccess(p, mem.GPUAddr(host), n, false)) })
			store := timed(p, func() { must(t, r.ctx.CPUAccess(p, mem.GPUAddr(host), n, true)) })
			wantLoad, wantAttr := sim.TransferTime(n, memcpy), mem.Cached
			if !coherent {
				wantLoad, wantAttr = sim.TransferTime(n, uncached), mem.Uncached
			}
			if attr != wantAttr || load != wantLoad || store != sim.TransferTime(n, memcpy) {
				t.Errorf("pinned memory %v, 1 MiB load %v, store %v; want %v, %v, %v",
					attr, load, store, wantAttr, wantLoad, sim.TransferTime(n, memcpy))
			}
			buf, err := r.pr.Malloc(n)
			must(t, err)
			err = r.ctx.MemHostRegister(p, buf, n, HostRegisterDeviceMap)
			if coherent {
				must(t, err)
				must(t, r.ctx.MemHostUnregister(p, buf))
			} else {
				wantResult(t, err, ErrorNotSupported)
			}
			must(t, r.ctx.MemFreeHost(p, host))
		})
	})
}

// TestTegraManagedNoMigration: managed memory on an integrated GPU is
// one allocation in DRAM: a kernel reads what the CPU wrote without a
// fault or a migration, at the DRAM's bandwidth, and the CPU reads what
// the kernel wrote without faults either.
func TestTegraManagedNoMigration(t *testing.T) {
	forJetsons(t, func(t *testing.T, r *rig, _ bool) {
		const n = 16 << 20
		um := r.d.UVM()
		if um.Generation() != uvm.Tegra || r.d.ConcurrentManagedAccess() {
			t.Fatalf("generation %v, concurrent managed access %v", um.Generation(), r.d.ConcurrentManagedAccess())
		}
		r.run(func(p *sim.Proc) {
			free0, _ := r.ctx.MemGetInfo()
			a := r.managedOnCPU(p, n)
			if free, _ := r.ctx.MemGetInfo(); free0-free != n {
				t.Errorf("16 MiB of managed memory took %d of the node's DRAM", free0-free)
			}
			must(t, r.ctx.LaunchKernel(p, kernel("read", a, n, false), nil))
			must(t, r.ctx.Synchronize(p))
			// The second kernel has no cache maintenance before it: its
			// time is the launch and the bytes over DRAM.
			took := timed(p, func() {
				must(t, r.ctx.LaunchKernel(p, kernel("read", a, n, false), nil))
				must(t, r.ctx.Synchronize(p))
			})
			route, err := r.ctx.GPU().LocalRoute(false)
			must(t, err)
			want := gpu.EnqueueCost + gpu.KernelLaunchLatency + route.Latency() + sim.TransferTime(n, r.m.Nodes[0].DRAM.Effective())
			if took != want {
				t.Errorf("kernel over 16 MiB of managed memory: %v, want %v (DRAM bandwidth)", took, want)
			}
			must(t, r.ctx.LaunchKernel(p, kernel("write", a, n, true), nil))
			must(t, r.ctx.Synchronize(p))
			must(t, r.ctx.CPUAccess(p, a, n, false))
			s := um.Stats()
			var moved int64
			for _, b := range s.MigratedBytes {
				moved += b
			}
			if s.GPUFaults != 0 || s.CPUFaults != 0 || moved != 0 {
				t.Errorf("faults %d GPU, %d CPU, %d B migrated; want none", s.GPUFaults, s.CPUFaults, moved)
			}
			must(t, r.ctx.MemFree(p, a))
		})
	})
}

// TestTegraCacheMaintenanceCost: before Xavier a kernel launch first
// cleans the CPU caches of the managed pages the CPU wrote (DC CVAC per
// line at the node's writeback cost) and its completion invalidates the
// pages the GPU wrote (DC IVAC, the invalidate cost), in virtual time on
// the kernel's way; with I/O coherence (Orin) neither is needed and
// neither costs anything.
func TestTegraCacheMaintenanceCost(t *testing.T) {
	forJetsons(t, func(t *testing.T, r *rig, coherent bool) {
		const n = 16 << 20
		c := r.m.Spec.Nodes[0].Cache
		lines := sim.Time(n / c.Line())
		var maint int
		r.d.UVM().Hooks.Hook(func(e *uvm.Event) {
			if e.Kind == uvm.KindCacheMaintenance {
				maint++
			}
		})
		r.run(func(p *sim.Proc) {
			a := r.managedOnCPU(p, n)
			run := func(write bool) sim.Time {
				return timed(p, func() {
					must(t, r.ctx.LaunchKernel(p, kernel("k", a, n, write), nil))
					must(t, r.ctx.Synchronize(p))
				})
			}
			afterCPU := run(false) // cleans what the CPU wrote
			plain := run(false)    // nothing to maintain
			writes := run(true)    // invalidates what the GPU wrote
			clean, inval := afterCPU-plain, writes-plain
			wantClean, wantInval := lines*c.WritebackCost.V, lines*c.InvalidateCost.V
			if coherent {
				wantClean, wantInval = 0, 0
			}
			if clean != wantClean || inval != wantInval {
				t.Errorf("clean at launch %v, invalidate at completion %v; want %v and %v", clean, inval, wantClean, wantInval)
			}
			t.Logf("16 MiB: clean %v, invalidate %v (uvm maintenance events: %d)", clean, inval, maint)
		})
	})
}

// TestTegraManagedCoherence: the maintenance is real. On the TX2 the
// GPU does not snoop: what the CPU wrote to managed memory sits dirty in
// its cache, and a device read of DRAM then would be stale; the clean at
// launch makes the kernel's read current, and the invalidate at
// completion leaves no stale line for the CPU's read after the kernel's
// write. On Orin the GPU snoops and nothing is stale either.
func TestTegraManagedCoherence(t *testing.T) {
	forJetsons(t, func(t *testing.T, r *rig, coherent bool) {
		const n = 1 << 20
		var stale []mem.Access
		r.run(func(p *sim.Proc) {
			a := r.managedOnCPU(p, n)
			_, phys, err := r.d.System().Resolve(a, n)
			must(t, err)
			pa := phys[0].Start
			if !coherent {
				// Without the driver's clean, the GPU would miss the CPU's
				// bytes (a probe: reads change nothing).
				if acc := r.m.Mem.DeviceRead("gpu0", false, pa, n); !acc.Stale {
					t.Fatal("the CPU's write is not in its cache: the test shows nothing")
				}
			}
			r.m.Mem.Hooks.Hook(func(acc *mem.Access) {
				if acc.Stale {
					stale = append(stale, *acc)
				}
			})
			must(t, r.ctx.LaunchKernel(p, kernel("read", a, n, false), nil))
			must(t, r.ctx.Synchronize(p))
			must(t, r.ctx.LaunchKernel(p, kernel("write", a, n, true), nil))
			must(t, r.ctx.Synchronize(p))
			if _, present, _ := r.m.Mem.CacheLine(0, pa); present {
				t.Error("a line the GPU wrote is still in the CPU cache after the kernel")
			}
			must(t, r.ctx.CPUAccess(p, a, n, false))
			if got, want := r.m.Mem.DRAMVersion(pa), r.m.Mem.Latest(pa); got != want {
				t.Errorf("DRAM holds version %d of managed memory, the latest is %d", got, want)
			}
		})
		for _, acc := range stale {
			t.Errorf("stale %v by %s at %v: got version %d, want %d", acc.Kind, acc.Proc, acc.StaleAt, acc.Got, acc.Want)
		}
	})
}

// TestTegraManagedAccessRule: the CPU may not touch managed memory
// while a kernel may be running (concurrentManagedAccess is 0): the
// access is a SIGSEGV and the observation says why (managed memory, the
// GPU active, no concurrent access), which the checker reports as
// managed-access-rule; after cuCtxSynchronize the same access is fine.
func TestTegraManagedAccessRule(t *testing.T) {
	forJetsons(t, func(t *testing.T, r *rig, _ bool) {
		r.run(func(p *sim.Proc) {
			a := r.managedOnCPU(p, 1<<20)
			k := kernel("long", a, 1<<20, false)
			k.Compute = sim.Millisecond
			must(t, r.ctx.LaunchKernel(p, k, nil))
			err := r.ctx.CPUAccess(p, a, 8, true)
			if !errors.Is(err, ErrSegmentationFault) {
				t.Fatalf("CPU store during a kernel: %v, want a segmentation fault", err)
			}
			cpu := r.ops(OpCPUAccess)
			o := cpu[len(cpu)-1]
			if o.Err == nil || o.Target.Kind != MemManaged || !o.Target.GPUActive || o.Target.ConcurrentManaged {
				t.Errorf("observation %v: want managed memory, GPU active, no concurrent access", o)
			}
			must(t, r.ctx.Synchronize(p))
			must(t, r.ctx.CPUAccess(p, a, 8, true))
			if o := r.ops(OpCPUAccess); o[len(o)-1].Err != nil || o[len(o)-1].Target.GPUActive {
				t.Errorf("after synchronize: %v", o[len(o)-1])
			}
		})
	})
}

// TestTegraPrefetchUnsupported: cuMemPrefetchAsync needs concurrent
// managed access of the stream's device, which an integrated GPU lacks
// (CUDA for Tegra: "not supported"): CUDA_ERROR_INVALID_DEVICE, to the
// GPU and to the CPU alike; nothing is enqueued.
func TestTegraPrefetchUnsupported(t *testing.T) {
	forJetsons(t, func(t *testing.T, r *rig, _ bool) {
		r.run(func(p *sim.Proc) {
			a, err := r.ctx.MemAllocManaged(p, 1<<20, MemAttachGlobal)
			must(t, err)
			wantResult(t, r.ctx.MemPrefetchAsync(p, a, 1<<20, 0, nil), ErrorInvalidDevice)
			wantResult(t, r.ctx.MemPrefetchAsync(p, a, 1<<20, DeviceCPU, nil), ErrorInvalidDevice)
			must(t, r.ctx.Synchronize(p))
			must(t, r.ctx.MemFree(p, a))
		})
	})
}

// TestTegraFreeForgetsMaintenance: managed memory freed with CPU writes
// not yet cleaned leaves nothing for a later maintenance to do on memory
// that is no longer its own.
func TestTegraFreeForgetsMaintenance(t *testing.T) {
	r := newRig(t, "jetson-tx2", rigOpt{})
	r.run(func(p *sim.Proc) {
		a := r.managedOnCPU(p, 4<<20)
		b := r.managedOnCPU(p, 2<<20)
		must(t, r.ctx.MemFree(p, a))
		_, keep, err := r.d.System().Resolve(b, 2<<20)
		must(t, err)
		if got := r.d.tegra.cpuDirty; len(got) != 1 || got[0] != keep[0] {
			t.Errorf("pending clean %v after freeing the other buffer, want %v", got, keep)
		}
		must(t, r.ctx.MemFree(p, b))
		if len(r.d.tegra.cpuDirty) != 0 {
			t.Errorf("pending clean %v after freeing everything", r.d.tegra.cpuDirty)
		}
	})
}

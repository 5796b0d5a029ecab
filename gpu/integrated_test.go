package gpu

import (
	"math"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// jetsons are the integrated presets: after (I/O coherent) and before
// Xavier.
var jetsons = []string{"jetson-orin", "jetson-tx2"}

func nodeFree(r *rig) uint64 {
	lo, hi := r.m.Mem.NodeFree(0)
	return lo + hi
}

// TestIntegratedDeviceMemory: on a Tegra, cuMemAlloc takes pages of
// node 0's DRAM (no VRAM exists), in the same 2 MiB chunks as VRAM;
// MemGetInfo's total is the node's DRAM and its free what the node has
// free, which the CPU's allocations reduce as well; freeing gives the
// pages back.
func TestIntegratedDeviceMemory(t *testing.T) {
	for _, name := range jetsons {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, preset(t, name), false)
			if !r.d.Integrated() || r.d.Coherent() != (name == "jetson-orin") {
				t.Fatalf("integrated %v, coherent %v", r.d.Integrated(), r.d.Coherent())
			}
			_, dram := r.m.Mem.NodeRange(0)
			free0, total := r.d.MemGetInfo()
			if total != dram || free0 != nodeFree(r) {
				t.Fatalf("MemGetInfo = %d free, %d total; want node 0's %d free, %d total", free0, total, nodeFree(r), dram)
			}
			r.run(func(p *sim.Proc) {
				small := r.alloc(p, r.d, 4096)
				big := r.alloc(p, r.d, 3<<20)
				if free, _ := r.d.MemGetInfo(); free0-free != LargePageSize+4<<20 {
					t.Errorf("free went down by %d, want one 2 MiB chunk + 4 MiB", free0-free)
				}
				for _, x := range []mem.GPUAddr{small, big} {
					a, phys, err := r.sys.Resolve(x, 1)
					if err != nil || len(phys) != 1 || a.Type != MemoryDevice || a.Device != 0 {
						t.Fatalf("Resolve(%v) = %+v %v %v", x, a, phys, err)
					}
					if n, ok := r.m.Mem.NodeOf(phys[0].Start); !ok || n != 0 {
						t.Errorf("%v is backed by %v, not node 0's DRAM", x, phys[0].Start)
					}
					if uint64(x) < r.d.vaBase || uint64(x) >= r.d.vaEnd {
						t.Errorf("%v outside the GPU's window", x)
					}
				}
				// The CPU's pages are gone from the GPU's free memory too.
				pa, err := r.m.Mem.AllocPages(0, 64<<20, mem.ZoneNormal)
				must(t, err)
				before, _ := r.d.MemGetInfo()
				must(t, r.m.Mem.FreePages(pa, 64<<20))
				if after, _ := r.d.MemGetInfo(); after-before != 64<<20 {
					t.Errorf("the CPU's 64 MiB moved free by %d", after-before)
				}
				must(t, r.sys.Free(p, small))
				must(t, r.sys.Free(p, big))
				if free, _ := r.d.MemGetInfo(); free != free0 {
					t.Errorf("free after freeing everything %d, want %d", free, free0)
				}
				// More than the node has is out of memory.
				_, err = r.d.Alloc(p, dram)
				mustErr(t, err, ErrOutOfMemory)
			})
		})
	}
}

// TestIntegratedNoBAR1: an integrated GPU has no BAR1: mapping and
// unmapping are ErrNotSupported, the accounting is empty; peer access
// is not supported either.
func TestIntegratedNoBAR1(t *testing.T) {
	r := newRig(t, preset(t, "jetson-orin"), false)
	r.run(func(p *sim.Proc) {
		buf := r.alloc(p, r.d, 1<<20)
		ap := r.d.BAR1()
		_, err := ap.Map(buf, 1<<20)
		mustErr(t, err, ErrNotSupported)
		mustErr(t, ap.Unmap(&BARMapping{ap: ap, live: true}), ErrNotSupported)
		if info := ap.Info(); info != (BAR1MemoryInfo{}) || ap.Size() != 0 || ap.CoversVRAM() {
			t.Errorf("BAR1 info %+v, size %d, covers %v; want none", info, ap.Size(), ap.CoversVRAM())
		}
		if _, ok := ap.Translate(ap.Base()); ok {
			t.Error("an address translates through a BAR1 that does not exist")
		}
	})
	other := &Device{Name: "dgpu", Index: 1}
	mustErr(t, r.d.EnablePeerAccess(other), ErrInvalidValue) // another system
	other.sys, other.integrated = r.sys, false
	r.d.peers = append(r.d.peers, false)
	mustErr(t, r.d.EnablePeerAccess(other), ErrNotSupported)
}

// TestIntegratedKernelOnDRAM: a kernel streaming over an integrated
// GPU's device memory crosses the GPU's port into the memory controller
// and the node's DRAM bus, at the DRAM's bandwidth when alone, and at
// what the CPU leaves of it when a CPU memcpy runs at the same time
// (max-min: the memcpy's 2 × memcpy_rate, read and write, then the rest).
func TestIntegratedKernelOnDRAM(t *testing.T) {
	for _, name := range jetsons {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, preset(t, name), false)
			dram := r.m.Nodes[0].DRAM
			route, err := r.d.LocalRoute(false)
			must(t, err)
			var links []*fabric.Link
			for _, h := range route.Hops {
				links = append(links, h.Link)
			}
			if len(links) != 2 || links[0] != dram || links[1].Name() != "gpu0.mc" {
				t.Fatalf("kernel read route %v, want node0.dram then gpu0.mc", links)
			}
			memcpy := float64(r.m.Spec.Nodes[0].MemcpyRate.V)
			r.run(func(p *sim.Proc) {
				buf := r.alloc(p, r.d, kernelBytes)
				s := r.d.NewStream(0)
				k := Kernel{Name: "read", Accesses: []Access{{Addr: buf, Size: kernelBytes}}}
				alone := r.timeKernel(p, s, k)
				want := KernelLaunchLatency + route.Latency() + sim.TransferTime(kernelBytes, dram.Effective())
				if alone != want {
					t.Errorf("streaming read of 1 GiB alone: %v (%.1f GB/s), want %v", alone, gbps(kernelBytes, alone), want)
				}
				cpu := p.Spawn("memcpy", func(q *sim.Proc) { must(t, r.m.CPUCopy(q, "memcpy", 0, 4<<30)) })
				shared := r.timeKernel(p, s, k)
				share := dram.Effective() - 2*memcpy
				got := float64(kernelBytes) / (shared - KernelLaunchLatency - route.Latency()).Seconds()
				if math.Abs(got-share) > 1e-3*share {
					t.Errorf("beside a CPU memcpy the kernel got %.2f GB/s, want the DRAM's %.2f less 2 x %.2f = %.2f",
						got/1e9, dram.Effective()/1e9, memcpy/1e9, share/1e9)
				}
				p.Join(cpu)
			})
		})
	}
}

// TestIntegratedCopiesDRAMToDRAM: copies between pinned host memory and
// an integrated GPU's device memory (and within device memory) run on
// the copy engine as DRAM-to-DRAM copies: every byte is read from and
// written to the node's DRAM, so they move at half its bandwidth.
func TestIntegratedCopiesDRAMToDRAM(t *testing.T) {
	for _, name := range jetsons {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, preset(t, name), false)
			const n = 256 << 20
			host := r.hostBuf(n, HostDeviceMap)
			h, _ := r.m.HostMemory(0)
			dram := r.m.Nodes[0].DRAM
			r.run(func(p *sim.Proc) {
				dev := r.alloc(p, r.d, 2*n)
				s := r.d.NewStream(0)
				for _, c := range []struct {
					name     string
					dst, src mem.GPUAddr
				}{{"h2d", dev, host}, {"d2h", host, dev}, {"d2d", dev + n, dev}} {
					from, to := h, r.d.GPU.Memory()
					switch c.name {
					case "d2h":
						from, to = to, from
					case "d2d":
						from = to
					}
					route, err := r.m.Route(from, to)
					must(t, err)
					if got := linkRate(route); math.Abs(got-dram.Effective()/2) > 1 {
						t.Errorf("%s: route rate %.2f GB/s, want half the DRAM's %.2f", c.name, got/1e9, dram.Effective()/1e9)
					}
					t0 := p.Now()
					must(t, s.Memcpy(p, c.dst, c.src, n))
					s.Synchronize(p)
					// Each byte read and written over the one DRAM bus, at
					// its copy efficiency (machine.CopyRate) where it has one.
					rate := linkRate(route)
					if cr, _ := r.m.DMARoute(from, to, r.d.GPU.CE()); r.m.CopyRate(cr, r.d.GPU.CE()) > 0 {
						rate = r.m.CopyRate(cr, r.d.GPU.CE())
					}
					want := EnqueueCost + CopyStreamOverhead + route.Latency() + sim.TransferTime(n, rate)
					if got := p.Now() - t0; got != want {
						t.Errorf("%s of 256 MiB: %v (%.1f GB/s), want %v", c.name, got, gbps(n, got), want)
					}
				}
			})
		})
	}
}

// TestIntegratedManagedBacking: on a Tegra, managed memory is one
// allocation in the node's DRAM from cuMemAllocManaged on (Resolve gives
// it, the node's free memory goes down) until it is freed; on a discrete
// GPU it has no fixed backing.
func TestIntegratedManagedBacking(t *testing.T) {
	r := newRig(t, preset(t, "jetson-tx2"), false)
	r.sys.SetManagedHandler(nopHandler{})
	r.run(func(p *sim.Proc) {
		free0 := nodeFree(r)
		a, err := r.sys.AllocManaged(p, 3<<20)
		must(t, err)
		_, phys, err := r.sys.Resolve(a.Addr+4096, 4096)
		must(t, err)
		if len(phys) != 1 || phys[0].Size != 4096 {
			t.Fatalf("managed memory resolves to %v", phys)
		}
		if n, ok := r.m.Mem.NodeOf(phys[0].Start); !ok || n != 0 || free0-nodeFree(r) != 4<<20 {
			t.Errorf("backed by %v (node %d, %v), free down by %d; want 4 MiB of node 0", phys[0].Start, n, ok, free0-nodeFree(r))
		}
		// A kernel writing it makes versions there.
		v0 := r.m.Mem.Latest(phys[0].Start)
		must(t, r.d.DefaultStream().Launch(p, Kernel{Name: "w", Accesses: []Access{{Addr: a.Addr, Size: 3 << 20, Write: true}}}))
		r.d.Synchronize(p)
		if r.m.Mem.Latest(phys[0].Start) == v0 {
			t.Error("a kernel's write of managed memory made no version")
		}
		must(t, r.sys.Free(p, a.Addr))
		if nodeFree(r) != free0 {
			t.Errorf("free after cuMemFree %d, want %d", nodeFree(r), free0)
		}
		_, err = r.sys.AllocManaged(p, 16<<30)
		mustErr(t, err, ErrOutOfMemory)
	})
	d := h200(t)
	d.run(func(p *sim.Proc) {
		a, err := d.sys.AllocManaged(p, 1<<20)
		must(t, err)
		if _, phys, _ := d.sys.Resolve(a.Addr, 1); phys != nil {
			t.Errorf("managed memory of a discrete GPU resolves to %v", phys)
		}
	})
}

// linkRate is what a lone flow over route gets when a link may appear
// on it more than once (an integrated GPU's copy reads and writes the
// same DRAM): each link's capacity over the sum of its weights.
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

// nopHandler is a ManagedHandler that moves nothing.
type nopHandler struct{}

func (nopHandler) GPUAccess(*sim.Proc, int, mem.GPUAddr, uint64, bool) {}

package gpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// timeKernel runs k in a stream held by a spin kernel, between two
// events, and returns the events' elapsed time.
func (r *rig) timeKernel(p *sim.Proc, s *Stream, k Kernel) sim.Time {
	r.t.Helper()
	start, end := r.sys.NewEvent(0), r.sys.NewEvent(0)
	must(r.t, s.Launch(p, spin("spin", 20*sim.Microsecond)))
	must(r.t, start.Record(p, s))
	must(r.t, s.Launch(p, k))
	must(r.t, end.Record(p, s))
	end.Synchronize(p)
	d, err := ElapsedTime(start, end)
	must(r.t, err)
	return d
}

func gbps(bytes uint64, d sim.Time) float64 { return float64(bytes) / d.Seconds() / 1e9 }

const kernelBytes = 1 << 30

// TestStreamingKernelVRAM: a kernel streaming N bytes of its VRAM takes
// the launch latency plus N at the VRAM bus's rate (4384 GB/s on the
// H200, the measured streaming read).
func TestStreamingKernelVRAM(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		buf := r.alloc(p, r.d, kernelBytes)
		got := r.timeKernel(p, r.d.NewStream(0), Kernel{Name: "read", Accesses: []Access{{Addr: buf, Size: kernelBytes}}})
		local, _ := r.d.LocalRoute(false)
		want := KernelLaunchLatency + smLead(r.d, local) + sim.TransferTime(kernelBytes, r.d.GPU.VRAM.Effective())
		if got != want {
			t.Errorf("streaming read of 1 GiB: %v, want %v", got, want)
		}
	})
}

// TestCopyKernelPredictions: an SM copy kernel (read N, write N) in
// VRAM, from mapped host memory into VRAM, and from VRAM into mapped
// host memory. These are predictions, not calibrations; the measured
// H200 (docs/measurements/2026-11-21-h200-cli-probe.txt, sm_copy, 1 GiB):
//
//	device d2d  1970 GB/s   model 2192: both directions share the HBM
//	            bus at 4384 GB/s (+11 %: the bus does not reach its read
//	            rate on a mix of reads and writes)
//	mapped h2d  51.40 GB/s  model 55.5: the zero-copy read is held by the
//	            PCIe link, as the copy engine is (+8 %: the SMs' read
//	            requests are smaller than a copy engine's)
//	mapped d2h  52.71 GB/s  model 55.5 (+5 %)
//
// The test checks the mechanism (which link binds, that the two
// accesses overlap) and logs the numbers beside the measurements.
func TestCopyKernelPredictions(t *testing.T) {
	r := h200(t)
	host := r.hostBuf(kernelBytes, 0)
	h, _ := r.m.HostMemory(0)
	pcie, err := r.m.Route(h, r.d.GPU.Memory())
	must(t, err)
	hbm := r.d.GPU.VRAM.Effective()
	// The SMs' 128-byte requests carry the same TLP overhead as the copy
	// engines' 256-byte ones, the link's rate is at 256 B: per byte of
	// data they cost (128+24)/128 × 256/(256+24) of it.
	l, spec := r.d.GPU.Spec.Link, r.d.GPU.Spec
	p, o, sm := float64(l.Payload()), float64(l.Overhead()), float64(spec.SMRequestSize())
	smRate := rate(pcie) / ((sm + o) / sm * p / (p + o))
	// The loads of host memory wait for their requests' way out.
	hostRead, err := r.d.routeFrom(h, false)
	must(t, err)
	r.run(func(p *sim.Proc) {
		dev := r.alloc(p, r.d, 2*kernelBytes)
		s := r.d.NewStream(0)
		copyKernel := func(dst, src mem.GPUAddr) Kernel {
			return Kernel{Name: "copy", Accesses: []Access{
				{Addr: src, Size: kernelBytes},
				{Addr: dst, Size: kernelBytes, Write: true},
			}}
		}
		for _, c := range []struct {
			name     string
			dst, src mem.GPUAddr
			want     sim.Time
			measured float64
		}{
			{"device d2d", dev + kernelBytes, dev, sim.TransferTime(2*kernelBytes, hbm), 1970},
			{"mapped h2d", dev, host, pcie.Latency() - r.d.GPU.VRAM.Latency() + smLead(r.d, hostRead) + sim.TransferTime(kernelBytes, smRate), 51.40},
			{"mapped d2h", host, dev, pcie.Latency() + sim.TransferTime(kernelBytes, smRate), 52.71},
		} {
			got := r.timeKernel(p, s, copyKernel(c.dst, c.src)) - KernelLaunchLatency
			if got != c.want {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
			t.Logf("%s: model %.1f GB/s, measured %.2f GB/s (%+.0f %%)", c.name, gbps(kernelBytes, got), c.measured,
				100*(gbps(kernelBytes, got)/c.measured-1))
		}
	})
}

// TestComputeBoundKernel: with more compute than memory time the kernel
// takes launch + compute; with less, launch + memory (the roofline).
func TestComputeBoundKernel(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		buf := r.alloc(p, r.d, 64<<20)
		s := r.d.NewStream(0)
		mem := sim.TransferTime(64<<20, r.d.GPU.VRAM.Effective()) // ~15.3 us
		acc := []Access{{Addr: buf, Size: 64 << 20}}
		compute := 100 * sim.Microsecond
		if got := r.timeKernel(p, s, Kernel{Name: "gemm", Accesses: acc, Compute: compute}); got != KernelLaunchLatency+sim.TransferTime(float64(compute), smUnits) {
			t.Errorf("compute-bound: %v, want launch + 100us", got)
		}
		local, _ := r.d.LocalRoute(false)
		mem += smLead(r.d, local)
		if got := r.timeKernel(p, s, Kernel{Name: "axpy", Accesses: acc, Compute: 2 * sim.Microsecond}); got != KernelLaunchLatency+mem {
			t.Errorf("memory-bound: %v, want launch + %v", got, mem)
		}
		if got := r.timeKernel(p, s, Kernel{Name: "empty"}); got != KernelLaunchLatency {
			t.Errorf("empty kernel: %v, want %v", got, KernelLaunchLatency)
		}
	})
}

// TestEmptyKernelLaunchAndSync: launching an empty kernel and
// synchronising costs the host the 3.2 µs measured on the H200 machine
// (2026-11-21).
func TestEmptyKernelLaunchAndSync(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		s := r.d.DefaultStream()
		must(t, s.Launch(p, Kernel{Name: "empty"}))
		s.Synchronize(p)
		if p.Now() != 3200*sim.Nanosecond {
			t.Errorf("launch + synchronize: %v, want 3.2us", p.Now())
		}
	})
}

// TestPatterns: strided and random walks move whole sectors.
func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		p    Pattern
		use  uint64
		want uint64
	}{
		{nil, 1000, 1000},
		{Streaming{}, 4096, 4096},
		{Strided{Stride: 8, Elem: 4}, 4096, 8192},         // two per sector
		{Strided{Stride: 128}, 4096, 32768},               // a sector per 4 B
		{Strided{Stride: 4, Elem: 4}, 4096, 4096},         // dense: streaming
		{Strided{Stride: 4096, Elem: 48}, 4800, 6400},     // 48 B spans 2 sectors
		{Random{}, 4096, 32768},                           // a 4 B read costs 32 B
		{Random{Elem: 128}, 4096, 4096},                   // whole sectors: no loss
		{Random{Elem: 4}, math.MaxUint64, math.MaxUint64}, // saturates
	} {
		p := c.p
		if p == nil {
			p = Streaming{}
		}
		if got := p.Traffic(c.use); got != c.want {
			t.Errorf("%v: %d bytes used move %d, want %d", p, c.use, got, c.want)
		}
	}
	r := h200(t)
	r.run(func(p *sim.Proc) {
		buf := r.alloc(p, r.d, 256<<20)
		s := r.d.NewStream(0)
		seq := r.timeKernel(p, s, Kernel{Name: "seq", Accesses: []Access{{Addr: buf, Size: 256 << 20, Bytes: 32 << 20}}})
		rnd := r.timeKernel(p, s, Kernel{Name: "rnd", Accesses: []Access{{Addr: buf, Size: 256 << 20, Bytes: 32 << 20, Pattern: Random{}}}})
		local, _ := r.d.LocalRoute(false)
		lead := smLead(r.d, local)
		if want := KernelLaunchLatency + lead + 8*(seq-KernelLaunchLatency-lead); rnd < want-8 || rnd > want+8 {
			t.Errorf("random 4 B reads %v, want 8× streaming's memory time (%v)", rnd, want)
		}
	})
}

// TestKernelAndCopyOverlap: a kernel on one stream and a copy on another
// run at once: the copy engine and the SMs are separate, and the copy
// takes only 55.5 GB/s of the VRAM bus's 4384, so neither slows the
// other much.
func TestKernelAndCopyOverlap(t *testing.T) {
	r := h200(t)
	host := r.hostBuf(copySize, 0)
	h, _ := r.m.HostMemory(0)
	copyAlone := copyTime(t, r.m, h, r.d.GPU.Memory(), copySize)
	kernelAlone := KernelLaunchLatency + sim.TransferTime(16*kernelBytes, r.d.GPU.VRAM.Effective())
	r.run(func(p *sim.Proc) {
		buf := r.alloc(p, r.d, kernelBytes)
		dst := r.alloc(p, r.d, copySize)
		a, b := r.d.NewStream(0), r.d.NewStream(0)
		must(t, a.Launch(p, Kernel{Name: "k", Accesses: []Access{{Addr: buf, Size: kernelBytes, Bytes: 16 * kernelBytes}}}))
		must(t, b.Memcpy(p, dst, host, copySize))
		r.d.Synchronize(p)
	})
	k, c := r.find("k"), r.find(fmt.Sprintf("memcpy h2d %d", copySize))
	if c.Start >= k.End || k.Start >= c.End {
		t.Errorf("copy %v..%v did not overlap kernel %v..%v", c.Start, c.End, k.Start, k.End)
	}
	// The copy is held by PCIe, not by the VRAM bus it shares: its time
	// is unchanged. The kernel loses the copy's 55.5 GB/s of the bus
	// while both run: 1.3 % at most.
	if d := c.End - c.Start; d != copyAlone {
		t.Errorf("copy beside the kernel took %v, alone %v", d, copyAlone)
	}
	if d := k.End - k.Start; d < kernelAlone || float64(d) > 1.013*float64(kernelAlone) {
		t.Errorf("kernel beside the copy took %v, alone %v", d, kernelAlone)
	}
}

// TestKernelsShareSMs: two compute-bound kernels on two streams share
// the SMs, each at half speed; two memory-bound ones share the VRAM bus.
func TestKernelsShareSMs(t *testing.T) {
	r := h200(t)
	us := sim.Microsecond
	r.run(func(p *sim.Proc) {
		a, b := r.d.NewStream(0), r.d.NewStream(0)
		must(t, a.Launch(p, Kernel{Name: "x", Launch: 1, Compute: 100 * us}))
		must(t, b.Launch(p, Kernel{Name: "y", Launch: 1, Compute: 100 * us}))
		r.d.Synchronize(p)
	})
	x, y := r.find("x"), r.find("y")
	// x runs alone from 1 us until y starts at 2 us, then both at half
	// speed: x ends at 2 + 2×99 = 200 us, y alone for its last 1 us, at
	// 201 us (give or take the picosecond launches).
	if x.End < 200*us || x.End > 200*us+10 || y.End < 201*us || y.End > 201*us+10 {
		t.Errorf("x %v..%v, y %v..%v: want both ending near 200us", x.Start, x.End, y.Start, y.End)
	}
}

// TestKernelAccessErrors: a launch whose access lies outside what the
// GPU may reach is refused, naming the access, and enqueues nothing.
func TestKernelAccessErrors(t *testing.T) {
	r := h200(t)
	reg := r.hostBuf(1<<20, HostRegistered)
	mapped := r.hostBuf(1<<20, HostRegistered|HostDeviceMap)
	r.run(func(p *sim.Proc) {
		s := r.d.NewStream(0)
		dev := r.alloc(p, r.d, 1<<20)
		man, err := r.sys.AllocManaged(p, 1<<20)
		must(t, err)
		for _, c := range []struct {
			name string
			acc  Access
			want error
		}{
			{"nowhere", Access{Addr: 0x1000, Size: 4}, ErrIllegalAddress},
			{"past the end", Access{Addr: dev, Size: 2 << 20}, ErrIllegalAddress},
			{"registered, not mapped", Access{Addr: reg, Size: 4}, ErrIllegalAddress},
			{"managed, no handler", Access{Addr: man.Addr, Size: 4}, ErrNotSupported},
		} {
			err := s.Launch(p, Kernel{Name: c.name, Accesses: []Access{{Addr: dev, Size: 4}, c.acc}})
			mustErr(t, err, c.want)
			if err != nil && !strings.Contains(err.Error(), "access 1") {
				t.Errorf("%s: error does not name the access: %v", c.name, err)
			}
		}
		must(t, s.Launch(p, Kernel{Name: "ok", Accesses: []Access{{Addr: mapped, Size: 4}}}))
		s.Synchronize(p)
		must(t, r.sys.Free(p, man.Addr))
	})
	for _, a := range r.log {
		if a.Kind == ActivityKernel && a.Name != "ok" {
			t.Errorf("refused kernel ran: %v", a)
		}
	}
}

// TestPeerKernel: on the DGX a kernel reads a peer's VRAM over NVLink
// once peer access is enabled, and is refused before.
func TestPeerKernel(t *testing.T) {
	r := newRig(t, preset(t, "dgx-h100"), false)
	d0, d1 := r.sys.Devices[0], r.sys.Devices[1]
	r.run(func(p *sim.Proc) {
		far := r.alloc(p, d1, 64<<20)
		k := Kernel{Name: "peer", Accesses: []Access{{Addr: far, Size: 64 << 20}}}
		mustErr(t, d0.DefaultStream().Launch(p, k), ErrPeerAccessNotEnabled)
		must(t, d0.EnablePeerAccess(d1))
		mustErr(t, d0.EnablePeerAccess(d1), ErrPeerAccessAlreadyEnabled)
		mustErr(t, d0.EnablePeerAccess(d0), ErrInvalidValue)
		route, err := d0.accessRoute(r.sys.lookup(far), false)
		must(t, err)
		if s := route.String(); !strings.Contains(s, "nvlink") || strings.Contains(s, d0.GPU.VRAM.Name()) {
			t.Errorf("peer read route %s: want NVLink and the peer's VRAM only", s)
		}
		got := r.timeKernel(p, d0.NewStream(0), k)
		if want := KernelLaunchLatency + route.Latency() + smLead(d0, route) + sim.TransferTime(64<<20, rate(route)); got != want {
			t.Errorf("peer read: %v, want %v", got, want)
		}
	})
}

// fakeUVM stands in for package uvm: each access costs a fixed fault
// service time, and it records what it was asked.
type fakeUVM struct {
	cost   sim.Time
	calls  []string
	bounds []string
}

func (f *fakeUVM) GPUAccess(p *sim.Proc, gpu int, addr mem.GPUAddr, size uint64, write bool) {
	f.calls = append(f.calls, fmt.Sprintf("gpu%d %v +%#x write=%v at %v", gpu, addr, size, write, p.Now()))
	p.Sleep(f.cost)
}

func (f *fakeUVM) BeforeKernel(p *sim.Proc, gpu int) {
	f.bounds = append(f.bounds, fmt.Sprintf("before gpu%d at %v", gpu, p.Now()))
}

func (f *fakeUVM) AfterKernel(p *sim.Proc, gpu int) {
	f.bounds = append(f.bounds, fmt.Sprintf("after gpu%d at %v", gpu, p.Now()))
}

// TestManagedAccessThroughHandler: a kernel's managed access goes to the
// ManagedHandler, concurrently with its other work, and the kernel waits
// for it; the launch hooks bracket the kernel.
func TestManagedAccessThroughHandler(t *testing.T) {
	r := h200(t)
	uvm := &fakeUVM{cost: 40 * sim.Microsecond}
	r.sys.SetManagedHandler(uvm)
	var man Allocation
	r.run(func(p *sim.Proc) {
		var err error
		man, err = r.sys.AllocManaged(p, 4<<20)
		must(t, err)
		dev := r.alloc(p, r.d, 1<<20)
		k := Kernel{Name: "um", Accesses: []Access{
			{Addr: man.Addr + 4096, Size: 1 << 20, Write: true},
			{Addr: dev, Size: 1 << 20},
		}, Compute: 10 * sim.Microsecond}
		got := r.timeKernel(p, r.d.NewStream(0), k)
		if want := KernelLaunchLatency + 40*sim.Microsecond; got != want {
			t.Errorf("kernel with a 40us managed access: %v, want %v", got, want)
		}
		must(t, r.sys.Free(p, man.Addr))
	})
	start := r.find("um").Start + KernelLaunchLatency
	if want := fmt.Sprintf("gpu0 %v +0x100000 write=true at %v", man.Addr+4096, start); len(uvm.calls) != 1 || uvm.calls[0] != want {
		t.Errorf("handler calls %v, want [%s]", uvm.calls, want)
	}
	// Spin kernels are kernels too: the hooks see every kernel.
	last := uvm.bounds[len(uvm.bounds)-2:]
	if last[0] != "before gpu0 at "+start.String() || last[1] != "after gpu0 at "+(start+40*sim.Microsecond).String() {
		t.Errorf("launch hooks %v", last)
	}
}

// TestContentThroughCopiesAndKernels: in payload mode bytes written on
// the host survive a round trip through VRAM; a kernel's write makes a
// new version, so the copy back reads the kernel's (byteless) data.
func TestContentThroughCopiesAndKernels(t *testing.T) {
	r := newRig(t, preset(t, "h200-pcie"), true)
	const n = 4096
	src, dst := r.hostBuf(n, 0), r.hostBuf(n, 0)
	msg := []byte("through the copy engines and back")
	r.run(func(p *sim.Proc) {
		r.m.Mem.WriteBytes(p, 0, mem.VirtAddr(src), msg)
		dev := r.alloc(p, r.d, n)
		s := r.d.NewStream(0)
		must(t, s.Memcpy(p, dev, src, n))
		must(t, s.Memcpy(p, dst, dev, n))
		s.Synchronize(p)
		got := make([]byte, len(msg))
		r.m.Mem.ReadBytes(p, 0, mem.VirtAddr(dst), got)
		if string(got) != string(msg) {
			t.Errorf("round trip read %q", got)
		}
		before := r.m.Mem.Latest(r.physOf(dev))
		must(t, s.Launch(p, Kernel{Name: "w", Accesses: []Access{{Addr: dev, Size: n, Write: true}}}))
		must(t, s.Memcpy(p, dst, dev, n))
		s.Synchronize(p)
		if after := r.m.Mem.Latest(r.physOf(dev)); after == before {
			t.Error("the kernel's write made no new version")
		}
		r.m.Mem.ReadBytes(p, 0, mem.VirtAddr(dst), got)
		if string(got) == string(msg) {
			t.Error("the copy after the kernel's write still carried the old bytes")
		}
	})
}

func (r *rig) physOf(a mem.GPUAddr) mem.PhysAddr {
	_, phys, err := r.sys.Resolve(a, 1)
	must(r.t, err)
	return phys[0].Start
}

// TestDeterminism: the same program twice gives the same activities at
// the same times.
func TestDeterminism(t *testing.T) {
	trace := func() string {
		r := h200(t)
		host := r.hostBuf(64<<20, 0)
		r.run(func(p *sim.Proc) {
			dev := r.alloc(p, r.d, 128<<20)
			streams := []*Stream{r.d.DefaultStream(), r.d.NewStream(0), r.d.NewStream(StreamNonBlocking)}
			for i := range 12 {
				s := streams[i%3]
				switch i % 4 {
				case 0:
					must(t, s.Memcpy(p, dev, host, 64<<20))
				case 1:
					must(t, s.Memcpy(p, host, dev+64<<20, 32<<20))
				case 2:
					must(t, s.Launch(p, Kernel{Name: fmt.Sprint("k", i), Accesses: []Access{{Addr: dev, Size: 128 << 20, Pattern: Strided{Stride: 64}}}, Compute: 30 * sim.Microsecond}))
				case 3:
					e := r.sys.NewEvent(0)
					must(t, e.Record(p, s))
					must(t, streams[(i+1)%3].WaitEvent(p, e))
				}
			}
			r.sys.Synchronize(p)
		})
		var b strings.Builder
		for _, a := range r.log {
			fmt.Fprintln(&b, a, a.Queued, a.Engine)
		}
		return b.String()
	}
	first, second := trace(), trace()
	if first != second {
		t.Errorf("two runs differ:\n%s\n---\n%s", first, second)
	}
	if n := strings.Count(first, "\n"); n < 14 {
		t.Errorf("only %d activities:\n%s", n, first)
	}
}

// TestPointerChase: a chase of h dependent loads costs h read round
// trips whatever the bandwidth: 141.9 ns each through the H200's VRAM,
// 1175 ns through mapped host memory (hub 565 ns, link and root complex
// both ways, DRAM), the probe's two latency rows.
func TestPointerChase(t *testing.T) {
	r := h200(t)
	host := r.hostBuf(64<<20, HostDeviceMap)
	r.run(func(p *sim.Proc) {
		dev := r.alloc(p, r.d, 256<<20)
		s := r.d.NewStream(0)
		for _, c := range []struct {
			name string
			addr mem.GPUAddr
			size uint64
			rtt  sim.Time
		}{
			{"device", dev, 256 << 20, 141900 * sim.Picosecond},
			{"mapped host", host, 64 << 20, 1175 * sim.Nanosecond},
		} {
			for _, hops := range []uint64{1, 1000} {
				k := Kernel{Name: "chase", Accesses: []Access{{Addr: c.addr, Size: c.size, Pattern: PointerChase{Hops: hops}}}}
				if got, want := r.timeKernel(p, s, k), KernelLaunchLatency+sim.Time(hops)*c.rtt; got != want {
					t.Errorf("%s chase of %d hops: %v, want launch + %d × %v", c.name, hops, got, hops, c.rtt)
				}
			}
		}
	})
	if got := (PointerChase{Hops: 10}).Traffic(1 << 30); got != 10*SectorSize {
		t.Errorf("chase traffic %d B, want one sector a hop", got)
	}
}

package cuda

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestSyncCopy8B: a synchronous pinned 8 B cuMemcpy costs exactly what
// machine.Copy gives (the GPU's CopyOverhead, the route's latency, the
// bytes): 6.6 µs on h200-pcie, as measured on the H200 machine
// 2026-11-21, not the
// stream path's EnqueueCost + CopyStreamOverhead.
func TestSyncCopy8B(t *testing.T) {
	r := h200(t)
	g := r.m.GPUs[0]
	r.run(func(p *sim.Proc) {
		h, err := r.ctx.MemAllocHost(p, 4096)
		must(t, err)
		dv, err := r.ctx.MemAlloc(p, 4096)
		must(t, err)
		h2d := timed(p, func() { must(t, r.ctx.Memcpy(p, dv, mem.GPUAddr(h), 8)) })
		d2h := timed(p, func() { must(t, r.ctx.Memcpy(p, mem.GPUAddr(h), dv, 8)) })
		if want := r.copyTime(r.host(), g.Memory(), 8); h2d != want {
			t.Errorf("8 B h2d: %v, want machine.Copy's %v", h2d, want)
		}
		if want := r.copyTime(g.Memory(), r.host(), 8); d2h != want {
			t.Errorf("8 B d2h: %v, want machine.Copy's %v", d2h, want)
		}
		// The d2h call is the calibration's (posted writes); h2d adds its
		// read's round trip.
		if us := d2h.Seconds() * 1e6; !near(us, 6.6, 0.001) {
			t.Errorf("8 B d2h: %.4f µs, want 6.6 (measured on the H200 machine)", us)
		}
	})
}

// TestPinned256MiB: large pinned copies run at the PCIe link's measured
// rate (55.4 / 55.3 GB/s through Go + purego, measured on the H200
// machine 2026-11-21).
func TestPinned256MiB(t *testing.T) {
	r := h200(t)
	const size = 256 << 20
	r.run(func(p *sim.Proc) {
		h, err := r.ctx.MemAllocHost(p, size)
		must(t, err)
		dv, err := r.ctx.MemAlloc(p, size)
		must(t, err)
		h2d := timed(p, func() { must(t, r.ctx.Memcpy(p, dv, mem.GPUAddr(h), size)) })
		d2h := timed(p, func() { must(t, r.ctx.Memcpy(p, mem.GPUAddr(h), dv, size)) })
		for _, c := range []struct {
			dir string
			d   sim.Time
		}{{"h2d", h2d}, {"d2h", d2h}} {
			if g := gbps(size, c.d); !near(g, 55.4, 0.003) {
				t.Errorf("pinned %s 256 MiB: %.2f GB/s, want ~55.4", c.dir, g)
			}
		}
	})
}

// TestPageableStaged: a pageable copy is staged through pinned buffers,
// the CPU memcpy and the DMA pipelined, so it runs at about the
// one-thread rate of its CPU stage: memcpy into the staging buffers to the
// device (10.93 GB/s on h200-pcie), the streaming copy-out from them to
// the host (19.67 GB/s), and the thread pays the copy-in as CPU time.
func TestPageableStaged(t *testing.T) {
	r := h200(t)
	memcpy := float64(r.m.Spec.Nodes[0].MemcpyRate.V) / 1e9
	stream := float64(r.m.Spec.Nodes[0].StreamCopyRate()) / 1e9
	const size = 256 << 20
	r.run(func(p *sim.Proc) {
		src, err := r.pr.Malloc(size)
		must(t, err)
		dv, err := r.ctx.MemAlloc(p, size)
		must(t, err)
		cpu0 := p.CPUTime()
		h2d := timed(p, func() { must(t, r.ctx.Memcpy(p, dv, mem.GPUAddr(src), size)) })
		cpu := p.CPUTime() - cpu0
		d2h := timed(p, func() { must(t, r.ctx.Memcpy(p, mem.GPUAddr(src), dv, size)) })
		for _, c := range []struct {
			dir  string
			d    sim.Time
			rate float64
		}{{"h2d", h2d, memcpy}, {"d2h", d2h, stream}} {
			if g := gbps(size, c.d); g > c.rate || g < 0.97*c.rate {
				t.Errorf("pageable %s 256 MiB: %.3f GB/s, want just under the CPU stage's rate %.3f", c.dir, g, c.rate)
			}
		}
		if want := sim.TransferTime(size, memcpy*1e9); cpu < want {
			t.Errorf("CPU time %v, want at least the memcpy's %v", cpu, want)
		}
	})
	staged := 0
	for _, tr := range r.tr {
		if strings.Contains(tr.Name, "pageable h2d") {
			staged++
		}
	}
	if want := 256 / 2; staged != want {
		t.Errorf("%d staged DMA chunks, want %d of 2 MiB", staged, want)
	}
}

// TestUVADirection: cuMemcpy infers the direction from the addresses and
// takes the path the driver would.
func TestUVADirection(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", rigOpt{})
	const size = 1 << 20
	var pinned, pageable, pinned2 mem.VirtAddr
	var dev, dev2, peer mem.GPUAddr
	r.run(func(p *sim.Proc) {
		var err error
		pinned, err = r.ctx.MemAllocHost(p, size)
		must(t, err)
		pinned2, err = r.ctx.MemAllocHost(p, size)
		must(t, err)
		pageable, err = r.pr.Malloc(size)
		must(t, err)
		dev, err = r.ctx.MemAlloc(p, size)
		must(t, err)
		dev2, err = r.ctx.MemAlloc(p, size)
		must(t, err)
		c1, err := r.pr.PrimaryContext(1)
		must(t, err)
		peer, err = c1.MemAlloc(p, size)
		must(t, err)
	})
	for _, c := range []struct {
		name     string
		dst, src mem.GPUAddr
		// want is the name of the machine transfer the copy makes, and
		// its engine ("" for a CPU memcpy).
		want, engine string
	}{
		{"pinned→device", dev, mem.GPUAddr(pinned), "cuMemcpy h2d", "gpu0.ce0"},
		{"device→pinned", mem.GPUAddr(pinned), dev, "cuMemcpy d2h", "gpu0.ce1"},
		{"device→device", dev2, dev, "cuMemcpy d2d", "gpu0.ce2"},
		{"device→peer", peer, dev, "cuMemcpy p2p", "gpu0.ce2"},
		{"pageable→device", dev, mem.GPUAddr(pageable), "cuMemcpy pageable h2d", "gpu0.ce0"},
		{"device→pageable", mem.GPUAddr(pageable), dev, "cuMemcpy pageable d2h", "gpu0.ce1"},
		{"pinned→pinned", mem.GPUAddr(pinned2), mem.GPUAddr(pinned), "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r.tr = nil
			r.run(func(p *sim.Proc) { must(t, r.ctx.Memcpy(p, c.dst, c.src, size)) })
			if c.want == "" {
				if len(r.tr) != 0 {
					t.Errorf("host-to-host copy used a copy engine: %v", r.tr[0].Name)
				}
				return
			}
			if len(r.tr) == 0 || !strings.HasPrefix(r.tr[0].Name, c.want) || r.tr[0].Engine != c.engine {
				t.Fatalf("transfers %+v, want %q on %s", r.tr, c.want, c.engine)
			}
		})
	}
}

// TestCopyContent: in payload mode the bytes arrive, through every path.
func TestCopyContent(t *testing.T) {
	r := newRig(t, "h200-pcie", rigOpt{payload: true})
	const size = 3<<20 + 100 // more than one staging chunk
	r.run(func(p *sim.Proc) {
		src, err := r.pr.Malloc(size)
		must(t, err)
		dst, err := r.pr.Malloc(size)
		must(t, err)
		pin, err := r.ctx.MemAllocHost(p, size)
		must(t, err)
		dv, err := r.ctx.MemAlloc(p, size)
		must(t, err)
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i * 7)
		}
		r.m.Mem.WriteBytes(nil, 0, src, want)
		must(t, r.ctx.Memcpy(p, dv, mem.GPUAddr(src), size))               // pageable → device
		must(t, r.ctx.Memcpy(p, mem.GPUAddr(pin), dv, size))               // device → pinned
		must(t, r.ctx.Memcpy(p, mem.GPUAddr(dst), mem.GPUAddr(pin), size)) // pinned → pageable
		got := make([]byte, size)
		r.m.Mem.ReadBytes(nil, 0, dst, got)
		if !bytes.Equal(got, want) {
			t.Error("bytes differ after pageable → device → pinned → pageable")
		}
	})
}

// TestMemcpyAsync: pinned copies run in stream order behind a kernel;
// pageable ones wait for the stream and are done on return.
func TestMemcpyAsync(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		h, err := r.ctx.MemAllocHost(p, 1<<20)
		must(t, err)
		src, err := r.pr.Malloc(1 << 20)
		must(t, err)
		dv, err := r.ctx.MemAlloc(p, 1<<20)
		must(t, err)
		s, err := r.ctx.StreamCreate(0)
		must(t, err)
		must(t, r.ctx.LaunchKernel(p, gpu.Kernel{Name: "spin", Launch: 100 * sim.Microsecond}, s))
		t0 := p.Now()
		must(t, r.ctx.MemcpyAsync(p, dv, mem.GPUAddr(h), 1<<20, s))
		if d := p.Now() - t0; d != gpu.EnqueueCost {
			t.Errorf("cuMemcpyAsync of pinned memory took the host %v, want %v", d, gpu.EnqueueCost)
		}
		wantResult(t, s.Query(), ErrorNotReady)
		must(t, r.ctx.MemcpyAsync(p, dv, mem.GPUAddr(src), 1<<20, s))
		if p.Now()-t0 < 100*sim.Microsecond {
			t.Error("a pageable cuMemcpyAsync returned before the stream's work was done")
		}
		must(t, s.Query())
		wantResult(t, r.ctx.MemcpyAsync(p, dv, 0x1000, 8, s), ErrorInvalidValue)
	})
}

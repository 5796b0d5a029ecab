package gdr

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Bytes stored through the mapping land in the VRAM behind it, as new
// versions, one path latency after the call returns; loads through the
// mapping and a cuMemcpy D2H return them.
func TestStoresLandInVRAM(t *testing.T) {
	r := newRig(t, "h200-pcie", true, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 1<<20)
		h, _, mp := r.mapped(p, a, 1<<20)
		_, phys, err := r.cu.System().Resolve(a+70_000, 300)
		if err != nil {
			t.Fatal(err)
		}
		before := r.m.Mem.LatestIn(phys[0].Start, 300)
		data := make([]byte, 300)
		for i := range data {
			data[i] = byte(i*7 + 1)
		}
		// Across the first page boundary of the pin.
		if err := h.CopyToMapping(p, mp, 70_000, data); err != nil {
			t.Fatal(err)
		}
		if v := r.m.Mem.LatestIn(phys[0].Start, 300); v != before {
			t.Errorf("VRAM version %v at return: posted writes must not have landed yet", v)
		}
		got := make([]byte, 300)
		if err := h.CopyFromMapping(p, mp, 70_000, got); err != nil {
			t.Fatal(err)
		}
		if v := r.m.Mem.LatestIn(phys[0].Start, 300); v == before {
			t.Error("no new VRAM version after the stores landed")
		}
		if !bytes.Equal(got, data) {
			t.Errorf("load through the mapping: %v..., want %v...", got[:8], data[:8])
		}
		host, err := r.ctx.MemAllocHost(p, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ctx.Memcpy(p, mem.GPUAddr(host), a+70_000, 300); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, 300)
		r.m.Mem.ReadBytes(p, 0, host, back)
		if !bytes.Equal(back, data) {
			t.Errorf("cuMemcpy D2H: %v..., want %v...", back[:8], data[:8])
		}
	})
}

// A long write runs at WCStoreRate after StoreOverhead; a 1-byte one
// costs StoreOverhead and a little. When WC stores could go faster than
// the GPU's PCIe link, the link caps them.
func TestStoreRate(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 16<<20)
		h, _, mp := r.mapped(p, a, 16<<20)
		big := make([]byte, 16<<20)
		d, err := timed(p, func() error { return h.CopyToMapping(p, mp, 0, big) })
		if err != nil {
			t.Fatal(err)
		}
		want := StoreOverhead + sim.TransferTime(float64(len(big)), WCStoreRate)
		if !near(d, want, 0.001) {
			t.Errorf("16 MiB store: %v, want %v (WCStoreRate)", d, want)
		}
		d, err = timed(p, func() error { return h.CopyToMapping(p, mp, 0, []byte{1}) })
		if err != nil {
			t.Fatal(err)
		}
		if d < StoreOverhead || d > StoreOverhead+sim.Nanosecond {
			t.Errorf("1-byte store: %v, want %v", d, StoreOverhead)
		}
		link := r.m.Fabric.Link(r.m.GPUs[0].Name + ".pcie")
		if link == nil {
			t.Fatal("no PCIe link for gpu0")
		}
		old := WCStoreRate
		WCStoreRate = 10 * link.Effective()
		defer func() { WCStoreRate = old }()
		d, err = timed(p, func() error { return h.CopyToMapping(p, mp, 0, big) })
		if err != nil {
			t.Fatal(err)
		}
		cap := StoreOverhead + sim.TransferTime(float64(len(big)), link.Effective())
		if !near(d, cap, 0.01) {
			t.Errorf("16 MiB store with fast WC: %v, want the link's %v", d, cap)
		}
	})
}

// A load costs a round trip; a long read runs at LoadRate behind the
// first load's round trip.
func TestLoadRate(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 4<<20)
		h, _, mp := r.mapped(p, a, 4<<20)
		rtt, err := h.RoundTrip(mp)
		if err != nil {
			t.Fatal(err)
		}
		if rtt <= 0 {
			t.Fatalf("round trip %v", rtt)
		}
		for _, n := range []int{1, 8, 64} {
			d, err := timed(p, func() error { return h.CopyFromMapping(p, mp, 0, make([]byte, n)) })
			if err != nil {
				t.Fatal(err)
			}
			if d != rtt {
				t.Errorf("%d-byte load: %v, want one round trip %v", n, d, rtt)
			}
		}
		size := uint64(4 << 20)
		d, err := timed(p, func() error { return h.CopyFromMapping(p, mp, 0, make([]byte, size)) })
		if err != nil {
			t.Fatal(err)
		}
		want := rtt + sim.TransferTime(float64(size-LoadBytes), LoadRate(rtt))
		if !near(d, want, 0.001) {
			t.Errorf("4 MiB load: %v, want %v", d, want)
		}
		if got, want := LoadRate(rtt), float64(LoadBytes*LoadsInFlight)/rtt.Seconds(); got != want {
			t.Errorf("LoadRate %v, want %v", got, want)
		}
	})
}

// The forum's question: a 64-byte write through the mapping costs well
// under a microsecond, a cuMemcpy of the same bytes several; a 4 MiB
// read through the mapping is far slower than cuMemcpy D2H.
func TestAgainstMemcpy(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 4<<20)
		h, _, mp := r.mapped(p, a, 4<<20)
		host, err := r.ctx.MemAllocHost(p, 4<<20)
		if err != nil {
			t.Fatal(err)
		}
		bar, err := timed(p, func() error { return h.CopyToMapping(p, mp, 0, make([]byte, 64)) })
		if err != nil {
			t.Fatal(err)
		}
		dmaT, err := timed(p, func() error { return r.ctx.Memcpy(p, a, mem.GPUAddr(host), 64) })
		if err != nil {
			t.Fatal(err)
		}
		if bar >= sim.Microsecond || dmaT < 5*sim.Microsecond || dmaT < 10*bar {
			t.Errorf("64 B H2D: mapping %v, cuMemcpy %v; want under 1 µs against several µs", bar, dmaT)
		}
		barR, err := timed(p, func() error { return h.CopyFromMapping(p, mp, 0, make([]byte, 4<<20)) })
		if err != nil {
			t.Fatal(err)
		}
		dmaR, err := timed(p, func() error { return r.ctx.Memcpy(p, mem.GPUAddr(host), a, 4<<20) })
		if err != nil {
			t.Fatal(err)
		}
		if barR < 20*dmaR {
			t.Errorf("4 MiB D2H: mapping %v, cuMemcpy %v; want the mapping far slower", barR, dmaR)
		}
		t.Logf("64 B H2D: mapping %v, cuMemcpy %v; 4 MiB D2H: mapping %v, cuMemcpy %v", bar, dmaT, barR, dmaR)
	})
}

// Each call's refusals.
func TestErrors(t *testing.T) {
	type env struct {
		r  *rig
		p  *sim.Proc
		a  mem.GPUAddr
		h  *Handle
		mh *MemHandle
		mp *Mapping
	}
	cases := []struct {
		name string
		do   func(e *env) error
		want error
	}{
		{"pin size 0", func(e *env) error { _, err := e.h.PinBuffer(e.p, e.a, 0, 0, 0); return err }, syscall.EINVAL},
		{"pin host address", func(e *env) error { _, err := e.h.PinBuffer(e.p, 0x1000, 4096, 0, 0); return err }, syscall.EINVAL},
		{"pin another process's memory", func(e *env) error {
			h, err := e.r.gdr.Open(e.p, e.r.other.KernelProcess())
			if err != nil {
				return err
			}
			_, err = h.PinBuffer(e.p, e.a, 1<<16, 0, 0)
			return err
		}, syscall.EINVAL},
		{"map larger than the pin", func(e *env) error {
			mh, err := e.h.PinBuffer(e.p, e.a+1<<20, 1<<16, 0, 0)
			if err != nil {
				return err
			}
			_, err = e.h.Map(e.p, mh, 2<<16)
			return err
		}, syscall.EINVAL},
		{"map twice", func(e *env) error { _, err := e.h.Map(e.p, e.mh, 1<<16); return err }, syscall.EAGAIN},
		{"copy past the mapping", func(e *env) error { return e.h.CopyToMapping(e.p, e.mp, 1<<20-8, make([]byte, 16)) }, syscall.EINVAL},
		{"copy of 0 bytes", func(e *env) error { return e.h.CopyFromMapping(e.p, e.mp, 0, nil) }, syscall.EINVAL},
		{"copy after unmap", func(e *env) error {
			if err := e.h.Unmap(e.p, e.mh, e.mp); err != nil {
				return err
			}
			return e.h.CopyToMapping(e.p, e.mp, 0, []byte{1})
		}, ErrInvalidated},
		{"unmap twice", func(e *env) error {
			if err := e.h.Unmap(e.p, e.mh, e.mp); err != nil {
				return err
			}
			return e.h.Unmap(e.p, e.mh, e.mp)
		}, syscall.EINVAL},
		{"unpin twice", func(e *env) error {
			if err := e.h.UnpinBuffer(e.p, e.mh); err != nil {
				return err
			}
			return e.h.UnpinBuffer(e.p, e.mh)
		}, syscall.EINVAL},
		{"load after unpin", func(e *env) error {
			if err := e.h.UnpinBuffer(e.p, e.mh); err != nil {
				return err
			}
			return e.h.CopyFromMapping(e.p, e.mp, 0, make([]byte, 8))
		}, ErrInvalidated},
		{"pin after close", func(e *env) error {
			if err := e.h.Close(e.p); err != nil {
				return err
			}
			_, err := e.h.PinBuffer(e.p, e.a, 1<<16, 0, 0)
			return err
		}, syscall.EBADF},
		{"close twice", func(e *env) error {
			if err := e.h.Close(e.p); err != nil {
				return err
			}
			return e.h.Close(e.p)
		}, syscall.EBADF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, "h200-pcie", false, nil)
			r.run(func(p *sim.Proc) {
				a := r.alloc(p, 2<<20)
				h, mh, mp := r.mapped(p, a, 1<<20)
				err := c.do(&env{r: r, p: p, a: a, h: h, mh: mh, mp: mp})
				if !errors.Is(err, c.want) {
					t.Errorf("got %v, want %v", err, c.want)
				}
				last := r.ev[len(r.ev)-1]
				if last.Err == nil || !errors.Is(last.Err, c.want) {
					t.Errorf("last event %v: Err %v, want %v", last.Op, last.Err, c.want)
				}
			})
		})
	}
}

// BAR1 is the limit: a pin past its free space is nvp2p's ENOMEM, and
// unpinning gives the space back.
func TestBAR1Window(t *testing.T) {
	r := newRig(t, "h200-pcie", false, func(s *platform.Spec) {
		s.GPUs[0].BAR1 = platform.P(platform.Bytes(16<<20), "test")
	})
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 8<<20)
		b := r.alloc(p, 8<<20)
		h, err := r.gdr.Open(p, r.app.KernelProcess())
		if err != nil {
			t.Fatal(err)
		}
		mh, err := h.PinBuffer(p, a, 8<<20, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.PinBuffer(p, b, 8<<20, 0, 0); !errors.Is(err, syscall.ENOMEM) {
			t.Fatalf("pin past BAR1: %v, want ENOMEM", err)
		}
		if err := h.UnpinBuffer(p, mh); err != nil {
			t.Fatal(err)
		}
		if _, err := h.PinBuffer(p, b, 8<<20, 0, 0); err != nil {
			t.Fatalf("pin after unpin: %v", err)
		}
	})
}

// An unaligned pin is rounded out to whole 64 KiB pages, as gdrdrv does.
func TestPinRoundsToGPUPages(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 2<<20)
		h, err := r.gdr.Open(p, r.app.KernelProcess())
		if err != nil {
			t.Fatal(err)
		}
		mh, err := h.PinBuffer(p, a+100, 1<<16, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		info := mh.Info()
		if info.VA != a || info.MappedSize != 2<<16 || info.PageSize != GPUPageSize || info.Mapped {
			t.Errorf("info %+v, want va %v, 128 KiB, unmapped", info, a)
		}
		mp, err := h.Map(p, mh, info.MappedSize)
		if err != nil {
			t.Fatal(err)
		}
		vma, ok := r.app.KernelProcess().MM.Find(mp.VA)
		if !ok || vma.Size != 2<<16 || vma.Name != "/dev/gdrdrv" {
			t.Errorf("VMA %+v, %v", vma, ok)
		}
		if !mh.Info().Mapped || !mh.Info().WCMapping {
			t.Error("not mapped write-combined after gdr_map")
		}
		if err := h.Unmap(p, mh, mp); err != nil {
			t.Fatal(err)
		}
		if _, ok := r.app.KernelProcess().MM.Find(mp.VA); ok {
			t.Error("VMA left after gdr_unmap")
		}
	})
}

// cuMemFree of pinned, mapped memory runs gdrdrv's free callback: the
// mapping is zapped, the table freed, later accesses fail, and unpin is
// still 0.
func TestFreeRevokes(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 1<<20)
		h, mh, mp := r.mapped(p, a, 1<<20)
		if err := r.ctx.MemFree(p, a); err != nil {
			t.Fatal(err)
		}
		if !mh.Revoked() || mp.Live() {
			t.Fatalf("after cuMemFree: revoked %v, live %v", mh.Revoked(), mp.Live())
		}
		if len(r.p2p.Tables()) != 0 {
			t.Errorf("%d page tables live after the free callback", len(r.p2p.Tables()))
		}
		if err := h.CopyToMapping(p, mp, 0, []byte{1}); !errors.Is(err, ErrInvalidated) {
			t.Errorf("store after free: %v, want ErrInvalidated", err)
		}
		if err := h.UnpinBuffer(p, mh); err != nil {
			t.Errorf("unpin of a revoked pin: %v", err)
		}
		var inv int
		for _, e := range r.ev {
			if e.Op == OpInvalidate && e.Err == nil && e.Cause == sim.CauseLifecycle {
				inv++
			}
		}
		if inv != 1 {
			t.Errorf("%d invalidate events, want 1", inv)
		}
	})
}

// Closing the handle (or exiting) releases every pin left.
func TestCloseReleasesPins(t *testing.T) {
	r := newRig(t, "h200-pcie", false, nil)
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, 2<<20)
		h, _, mp := r.mapped(p, a, 1<<20)
		free := r.cu.System().Devices[0].BAR1().Info().Free
		if err := h.Close(p); err != nil {
			t.Fatal(err)
		}
		if got := r.cu.System().Devices[0].BAR1().Info().Free; got != free+1<<20 {
			t.Errorf("BAR1 free %d after close, want %d", got, free+1<<20)
		}
		if mp.Live() || len(r.p2p.Tables()) != 0 {
			t.Error("mapping or page table left after gdr_close")
		}
		if _, ok := r.app.KernelProcess().MM.Find(mp.VA); ok {
			t.Error("VMA left after gdr_close")
		}
	})
}

// The same program gives the same events at the same times.
func TestDeterministic(t *testing.T) {
	trace := func() []Event {
		r := newRig(t, "2s-4gpu-pcie", true, nil)
		r.run(func(p *sim.Proc) {
			a := r.alloc(p, 1<<20)
			h, mh, mp := r.mapped(p, a, 1<<20)
			for i := range 5 {
				_ = h.CopyToMapping(p, mp, uint64(i)*1000, make([]byte, 100*(i+1)))
				_ = h.CopyFromMapping(p, mp, uint64(i)*1000, make([]byte, 100*(i+1)))
			}
			_ = h.UnpinBuffer(p, mh)
			_ = h.Close(p)
		})
		return r.ev
	}
	a, b := trace(), trace()
	if len(a) != len(b) || len(a) < 14 {
		t.Fatalf("%d and %d events", len(a), len(b))
	}
	for i := range a {
		if a[i].Time != b[i].Time || a[i].Op != b[i].Op || a[i].Duration != b[i].Duration {
			t.Fatalf("event %d: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// TestCopyCPUTimeIsWallTime: a copy through the mapping keeps the core
// busy for exactly its duration (the stores issue, the loads stall it),
// counted once.
func TestCopyCPUTimeIsWallTime(t *testing.T) {
	for _, n := range []int{1, 64 << 10} {
		r := newRig(t, "h200-pcie", false, nil)
		r.run(func(p *sim.Proc) {
			h, _, mp := r.mapped(p, r.alloc(p, 1<<20), 1<<20)
			for _, to := range []bool{true, false} {
				t0, cpu0 := p.Now(), p.CPUTime()
				var err error
				if to {
					err = h.CopyToMapping(p, mp, 0, make([]byte, n))
				} else {
					err = h.CopyFromMapping(p, mp, 0, make([]byte, n))
				}
				if err != nil {
					t.Fatal(err)
				}
				if wall, cpu := p.Now()-t0, p.CPUTime()-cpu0; cpu != wall {
					t.Errorf("%d B, to mapping %v: CPU time %v, wall %v: want equal", n, to, cpu, wall)
				}
			}
		})
	}
}

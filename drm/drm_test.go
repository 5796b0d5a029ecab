package drm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

func TestCVTRB(t *testing.T) {
	// The published CVT-RB timings (VESA DMT 1.0 r13 lists the first
	// two; the 4K one is CVT 1.2's own example).
	for _, c := range []struct {
		w, h, hz       int
		htotal, vtotal int
		khz            int
	}{
		{1920, 1080, 60, 2080, 1111, 138500},
		{1920, 1200, 60, 2080, 1235, 154000},
		{3840, 2160, 60, 4000, 2222, 533250},
	} {
		t.Run(fmt.Sprintf("%dx%d@%d", c.w, c.h, c.hz), func(t *testing.T) {
			m := mode(t, c.w, c.h, c.hz)
			if m.HTotal != c.htotal || m.VTotal != c.vtotal || m.ClockKHz != c.khz {
				t.Fatalf("got %dx%d at %d kHz, want %dx%d at %d kHz", m.HTotal, m.VTotal, m.ClockKHz, c.htotal, c.vtotal, c.khz)
			}
			if math.Abs(m.Refresh()-float64(c.hz)) > 0.1 {
				t.Fatalf("refresh %v", m.Refresh())
			}
			if got, want := m.FrameStart(1000), sim.Time(float64(1000*m.HTotal*m.VTotal)/float64(m.ClockKHz*1000)*1e12); got < want-1 || got > want+1 {
				t.Fatalf("FrameStart(1000) = %v, want %v", got, want)
			}
			if !(m.Active() < m.Period()) {
				t.Fatalf("active %v not within period %v", m.Active(), m.Period())
			}
		})
	}
	if _, err := CVTRB(1001, 700, 60); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("width not a multiple of 8: %v", err)
	}
}

func TestPrimeImport(t *testing.T) {
	r := newRig(t, mode(t, 640, 480, 60), Config{}, false)
	r.run(func(p *sim.Proc) {
		if _, err := r.f.PrimeFDToHandle(p, 42); !errors.Is(err, syscall.EBADF) {
			t.Errorf("bad fd: %v", err)
		}
		s := r.l.NewSyncFile("f", r.l.Stub())
		sfd, _ := s.FD(r.proc)
		if _, err := r.f.PrimeFDToHandle(p, sfd); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("a sync file: %v", err)
		}
		// 64 scattered system-heap pages: not one DMA range without an
		// IOMMU, refused, and nothing left attached.
		sys, err := r.system.Allocate(p, r.proc, 256<<10, 0)
		must(t, err)
		if _, err := r.f.PrimeFDToHandle(p, sys); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("scattered buffer: %v", err)
		}
		fd, h := r.frame(p, r.cma, 640, 480)
		if h2, err := r.f.PrimeFDToHandle(p, fd); err != nil || h2 != h {
			t.Errorf("second import: %d, %v, want handle %d", h2, err, h)
		}
		o := r.f.handles[h]
		if pa := dmabuf.Pages(o.buf)[0].Start; mem.PhysAddr(o.sgt.SGL[0].DMAAddress) != pa {
			t.Errorf("dma-direct address %#x, want the physical %#x", o.sgt.SGL[0].DMAAddress, pa)
		}
		if refs := o.buf.Refs(); refs != 2 {
			t.Errorf("refs %d, want 2 (the descriptor and the import's one)", refs)
		}
		must(t, r.f.GEMClose(p, h))
		if err := r.f.GEMClose(p, h); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("second close: %v", err)
		}
		if len(o.buf.Attachments()) != 0 || o.buf.Refs() != 1 {
			t.Errorf("after close: %d attachments, %d refs", len(o.buf.Attachments()), o.buf.Refs())
		}
		r.proc.Close(p, fd)
		if !o.buf.Released() {
			t.Error("buffer not released after its last descriptor")
		}
		if n := len(r.f.prime); n != 0 {
			t.Errorf("%d prime entries left", n)
		}
	})
}

func TestAddFB2Errors(t *testing.T) {
	r := newRig(t, mode(t, 640, 480, 60), Config{}, false)
	r.run(func(p *sim.Proc) {
		_, h := r.frame(p, r.cma, 640, 480) // 1,228,800 bytes
		nv12 := func(w, ht int, pitch uint32, off uint32) FBCmd {
			return FBCmd{Width: w, Height: ht, Format: FormatNV12, Handles: [4]uint32{h, h}, Pitches: [4]uint32{pitch, pitch}, Offsets: [4]uint32{0, off}}
		}
		for _, c := range []struct {
			name string
			cmd  FBCmd
			want error
		}{
			{"xrgb", xrgb(640, 480, h), nil},
			{"nv12", nv12(640, 480, 640, 640*480), nil},
			{"format", FBCmd{Width: 640, Height: 480, Format: fourcc('Y', 'U', 'Y', 'V'), Handles: [4]uint32{h}, Pitches: [4]uint32{1280}}, syscall.EINVAL},
			{"zero width", xrgb(0, 480, h), syscall.EINVAL},
			{"too wide", xrgb(MaxFBSize+8, 1, h), syscall.EINVAL},
			{"pitch", FBCmd{Width: 640, Height: 480, Format: FormatXRGB8888, Handles: [4]uint32{h}, Pitches: [4]uint32{640 * 3}}, syscall.EINVAL},
			{"too small", xrgb(640, 481, h), syscall.EINVAL},
			{"offset past the end", FBCmd{Width: 640, Height: 480, Format: FormatXRGB8888, Handles: [4]uint32{h}, Pitches: [4]uint32{2560}, Offsets: [4]uint32{4096}}, syscall.EINVAL},
			{"no handle", xrgb(640, 480, 0), syscall.EINVAL},
			{"unknown handle", xrgb(640, 480, 99), syscall.ENOENT},
			{"unused plane", FBCmd{Width: 640, Height: 480, Format: FormatXRGB8888, Handles: [4]uint32{h, h}, Pitches: [4]uint32{2560}}, syscall.EINVAL},
			{"nv12 odd width", nv12(639, 480, 640, 640*480), syscall.EINVAL},
			{"nv12 no chroma handle", FBCmd{Width: 640, Height: 480, Format: FormatNV12, Handles: [4]uint32{h}, Pitches: [4]uint32{640, 640}}, syscall.EINVAL},
			{"overflow", FBCmd{Width: 640, Height: 480, Format: FormatXRGB8888, Handles: [4]uint32{h}, Pitches: [4]uint32{1 << 24}}, syscall.ERANGE},
		} {
			t.Run(c.name, func(t *testing.T) {
				id, err := r.f.AddFB2(p, c.cmd)
				if c.want == nil {
					if err != nil || id == 0 {
						t.Fatalf("got %d, %v", id, err)
					}
					must(t, r.f.RmFB(p, id))
					return
				}
				if !errors.Is(err, c.want) {
					t.Fatalf("got %d, %v, want %v", id, err, c.want)
				}
			})
		}
		if err := r.f.RmFB(p, 77); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("rmfb of an unknown id: %v", err)
		}
	})
}

// One flip, no fence: committed in the middle of refresh 0, latched at
// vblank 1 (the end of refresh 0's active period), on glass at the
// start of refresh 1; the out-fence signals at the latch and the event
// carries sequence 1 and that timestamp.
func TestFlipLatchedAtNextVBlank(t *testing.T) {
	m := mode(t, 640, 480, 60)
	r := newRig(t, m, Config{}, false)
	var ev FlipEvent
	r.run(func(p *sim.Proc) {
		fb := r.fb(p)
		must(t, r.d.Enable(p))
		p.Sleep(m.Active() / 2)
		out, err := r.f.AtomicCommit(p, Commit{FB: fb, InFenceFD: -1, OutFence: true, Event: true, UserData: 7})
		must(t, err)
		s, err := r.l.SyncFileGet(r.proc, out)
		must(t, err)
		if s.Status() != 0 {
			t.Error("out-fence signalled before the flip")
		}
		ev = r.f.ReadEvent(p)
		vbl := r.d.RefreshStart(0) + m.Active()
		if s.Status() != 1 || s.Fence().SignaledAt() != vbl {
			t.Errorf("out-fence status %d at %v, want 1 at %v", s.Status(), s.Fence().SignaledAt(), vbl)
		}
		if p.Now() != vbl {
			t.Errorf("event read at %v, want the vblank at %v", p.Now(), vbl)
		}
		p.Sleep(m.Period() * 5 / 2) // into refresh 3
		must(t, r.d.Disable(p))
		r.f.Close(p)
	})
	if ev.UserData != 7 || ev.Sequence != 1 || ev.Time != r.d.RefreshStart(1) || ev.FB == 0 {
		t.Fatalf("event %+v, want user data 7, sequence 1 at %v", ev, r.d.RefreshStart(1))
	}
	fl := r.d.Flips()
	if len(fl) != 1 || fl[0].Missed != 0 || fl[0].OnGlass != r.d.RefreshStart(1) || fl[0].VBlank != r.d.RefreshStart(0)+m.Active() {
		t.Fatalf("flips %+v", fl)
	}
	// Refresh 0 is black (nothing latched): scanouts are of refreshes
	// 1, 2 and 3, the last before the disable.
	if st := r.d.Stats(); st.Scans != 3 || st.VBlanks != 3 || st.Underruns != 0 || st.Missed != 0 || st.Bytes != 3*640*480*4 {
		t.Fatalf("stats %+v", st)
	}
}

// A flip whose in-fence (the ISP's) signals 40 ms after the commit
// waits for it in the commit worker and latches at the first vblank
// after, so it misses vblanks 1 and 2 (the previous frame shows
// twice more); its Ready time is the fence's signal.
func TestInFenceWaits(t *testing.T) {
	m := mode(t, 640, 480, 60)
	r := newRig(t, m, Config{}, false)
	r.run(func(p *sim.Proc) {
		a, b := r.fb(p), r.fb(p)
		must(t, r.d.Enable(p))
		_, err := r.f.AtomicCommit(p, Commit{FB: a, InFenceFD: -1, Event: true})
		must(t, err)
		r.f.ReadEvent(p)
		isp := r.l.NewFence("isp", "out", r.l.ContextAlloc(1), 1)
		fd, err := r.l.NewSyncFile("isp", isp).FD(r.proc)
		must(t, err)
		at := p.Now() + 40*sim.Millisecond
		r.m.Engine.At(at, func() { isp.Signal(nil) })
		_, err = r.f.AtomicCommit(p, Commit{FB: b, InFenceFD: fd, Event: true})
		must(t, err)
		ev := r.f.ReadEvent(p)
		if ev.Sequence != 4 || p.Now() < at {
			t.Errorf("latched at vblank %d at %v, want vblank 4 after %v", ev.Sequence, p.Now(), at)
		}
		must(t, r.d.Disable(p))
		r.f.Close(p)
	})
	fl := r.d.Flips()
	if len(fl) != 2 {
		t.Fatalf("flips %+v", fl)
	}
	if f := fl[1]; f.Target != 2 || f.Seq != 4 || f.Missed != 2 || f.Ready != fl[0].VBlank+40*sim.Millisecond {
		t.Fatalf("second flip %+v", f)
	}
	// Refresh 1 shows A as flipped; refreshes 2 and 3, which B missed,
	// show A again.
	scansOfA := 0
	for _, e := range r.events {
		if e.Op == OpScanout && e.FB == fl[0].FB {
			scansOfA++
		}
	}
	if scansOfA != 3 {
		t.Errorf("A scanned out %d times, want 3", scansOfA)
	}
	if r.d.Stats().Missed != 2 || r.count(OpFenceWait) != 1 {
		t.Fatalf("stats %+v, %d fence waits", r.d.Stats(), r.count(OpFenceWait))
	}
	for _, e := range r.events {
		if e.Op == OpFenceWait && (e.Waited != 40*sim.Millisecond || !strings.Contains(e.Fence, "isp")) {
			t.Fatalf("fence wait %+v", e)
		}
	}
}

// Without an IN_FENCE_FD the flip waits for the writers in the
// buffer's reservation object (implicit sync).
func TestImplicitFence(t *testing.T) {
	m := mode(t, 640, 480, 60)
	r := newRig(t, m, Config{}, false)
	r.run(func(p *sim.Proc) {
		fb := r.fb(p)
		gpu := r.l.NewFence("gpu", "render", r.l.ContextAlloc(1), 1)
		r.d.fbs[fb].objs[0].buf.Resv().AddFence(p, gpu, dmabuf.UsageWrite)
		must(t, r.d.Enable(p))
		r.m.Engine.After(20*sim.Millisecond, func() { gpu.Signal(nil) })
		_, err := r.f.AtomicCommit(p, Commit{FB: fb, InFenceFD: -1, Event: true})
		must(t, err)
		if ev := r.f.ReadEvent(p); ev.Sequence != 2 {
			t.Errorf("latched at vblank %d, want 2 (the first after 20 ms)", ev.Sequence)
		}
		must(t, r.d.Disable(p))
	})
}

func TestCommitErrors(t *testing.T) {
	m := mode(t, 640, 480, 60)
	r := newRig(t, m, Config{}, false)
	r.run(func(p *sim.Proc) {
		a, b := r.fb(p), r.fb(p)
		if _, err := r.f.AtomicCommit(p, Commit{FB: a, InFenceFD: -1}); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("CRTC off: %v", err)
		}
		must(t, r.d.Enable(p))
		if err := r.d.Enable(p); !errors.Is(err, syscall.EBUSY) {
			t.Errorf("second enable: %v", err)
		}
		if _, err := r.f.AtomicCommit(p, Commit{FB: 99, InFenceFD: -1}); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("unknown fb: %v", err)
		}
		if _, err := r.f.AtomicCommit(p, Commit{FB: a, InFenceFD: 55}); !errors.Is(err, syscall.EBADF) {
			t.Errorf("bad in-fence fd: %v", err)
		}
		_, small := r.frame(p, r.cma, 320, 240)
		sfb, err := r.f.AddFB2(p, xrgb(320, 240, small))
		must(t, err)
		if _, err := r.f.AtomicCommit(p, Commit{FB: sfb, InFenceFD: -1}); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("fb smaller than the mode: %v", err)
		}
		_, err = r.f.AtomicCommit(p, Commit{FB: a, InFenceFD: -1, Event: true})
		must(t, err)
		if _, err := r.f.AtomicCommit(p, Commit{FB: b, InFenceFD: -1}); !errors.Is(err, syscall.EBUSY) {
			t.Errorf("second pending commit: %v", err)
		}
		r.f.ReadEvent(p)
		if _, err := r.f.AtomicCommit(p, Commit{FB: b, InFenceFD: -1}); err != nil {
			t.Errorf("commit after the flip: %v", err)
		}
		must(t, r.d.Disable(p))
		r.f.Close(p)
	})
	if n := r.d.Stats().Flips; n != 2 {
		t.Fatalf("%d flips, want 2", n)
	}
}

// The framebuffer a flip replaces keeps its reference until the new
// one has latched, and its memory is the exporter's again once the ID,
// the handle and the descriptor are gone.
func TestOldFramebufferReleasedAfterLatch(t *testing.T) {
	m := mode(t, 640, 480, 60)
	r := newRig(t, m, Config{}, false)
	r.run(func(p *sim.Proc) {
		fdA, hA := r.frame(p, r.cma, 640, 480)
		a, err := r.f.AddFB2(p, xrgb(640, 480, hA))
		must(t, err)
		b := r.fb(p)
		fbA := r.d.fbs[a]
		bufA := fbA.objs[0].buf
		must(t, r.d.Enable(p))
		_, err = r.f.AtomicCommit(p, Commit{FB: a, InFenceFD: -1, Event: true})
		must(t, err)
		r.f.ReadEvent(p)
		must(t, r.f.GEMClose(p, hA))
		must(t, r.proc.Close(p, fdA))
		out, err := r.f.AtomicCommit(p, Commit{FB: b, InFenceFD: -1, OutFence: true})
		must(t, err)
		if fbA.refs != 2 {
			t.Errorf("A has %d references before the flip, want 2 (its ID and the plane)", fbA.refs)
		}
		s, _ := r.l.SyncFileGet(r.proc, out)
		must(t, s.Wait(p, dmabuf.MaxScheduleTimeout))
		p.Sleep(sim.Microsecond) // the commit worker's cleanup
		if fbA.refs != 1 || bufA.Released() {
			t.Errorf("after the flip: A has %d references, released %v; want 1, false", fbA.refs, bufA.Released())
		}
		must(t, r.f.RmFB(p, a))
		if !bufA.Released() {
			t.Error("A's dma-buf not released once its ID went")
		}
		must(t, r.d.Disable(p))
		r.f.Close(p)
	})
}

// Scanout reads each plane's visible pixels once per refresh over the
// DRAM bus and the controller's port: the fabric's accounting over
// whole refreshes gives width × height × bytes per pixel × refresh
// per second (4 bytes a pixel for XRGB8888, 1.5 for NV12).
func TestScanoutBandwidth(t *testing.T) {
	const w, h = 1280, 720
	for _, c := range []struct {
		format Format
		bpp    float64
		cmd    func(handle uint32) FBCmd
	}{
		{FormatXRGB8888, 4, func(hd uint32) FBCmd { return xrgb(w, h, hd) }},
		{FormatNV12, 1.5, func(hd uint32) FBCmd {
			return FBCmd{Width: w, Height: h, Format: FormatNV12, Handles: [4]uint32{hd, hd}, Pitches: [4]uint32{w, w}, Offsets: [4]uint32{0, w * h}}
		}},
	} {
		t.Run(c.format.String(), func(t *testing.T) {
			m := mode(t, w, h, 60)
			r := newRig(t, m, Config{}, false)
			dram := r.m.Nodes[0].DRAM
			bytes := func() float64 { s := dram.Stats(); return s.Bytes[0] + s.Bytes[1] }
			const from, to = 3, 13
			var b0, b1 float64
			r.run(func(p *sim.Proc) {
				_, hd := r.frame(p, r.cma, w, h)
				fb, err := r.f.AddFB2(p, c.cmd(hd))
				must(t, err)
				must(t, r.d.Enable(p))
				_, err = r.f.AtomicCommit(p, Commit{FB: fb, InFenceFD: -1})
				must(t, err)
				p.Sleep(r.d.RefreshStart(from) - sim.Microsecond - p.Now())
				b0 = bytes()
				p.Sleep(r.d.RefreshStart(to) - sim.Microsecond - p.Now())
				b1 = bytes()
				must(t, r.d.Disable(p))
				r.f.Close(p)
			})
			frame := w * h * c.bpp
			if got := b1 - b0; math.Abs(got-frame*(to-from)) > 1 {
				t.Fatalf("DRAM carried %v bytes in %d refreshes, want %v", got, to-from, frame*(to-from))
			}
			rate := (b1 - b0) / (r.d.RefreshStart(to) - r.d.RefreshStart(from)).Seconds()
			if want := frame * m.Refresh(); math.Abs(rate-want)/want > 1e-9 {
				t.Fatalf("scanout %v B/s, want %v", rate, want)
			}
			if st := r.d.Stats(); st.Underruns != 0 || st.Bytes != int64(frame)*int64(st.Scans) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// 3840x2160@60 XRGB8888 is 2 GB/s; the Zynq's AXI HP port carries
// 1.2 GB/s: every refresh underruns.
func TestScanoutUnderrun(t *testing.T) {
	m := mode(t, 3840, 2160, 60)
	r := newRig(t, m, Config{}, false)
	r.run(func(p *sim.Proc) {
		fb := r.fb(p)
		must(t, r.d.Enable(p))
		_, err := r.f.AtomicCommit(p, Commit{FB: fb, InFenceFD: -1})
		must(t, err)
		p.Sleep(5 * m.Period())
		must(t, r.d.Disable(p))
		r.f.Close(p)
	})
	if st := r.d.Stats(); st.Scans == 0 || st.Underruns != st.Scans {
		t.Fatalf("stats %+v: every scan should underrun", st)
	}
}

// Behind an IOMMU domain, a scattered system-heap buffer imports as
// one IOVA range, and the scanout reads the IOVAs.
func TestBehindIOMMU(t *testing.T) {
	m := mode(t, 640, 480, 60)
	r := newRig(t, m, Config{}, true)
	var iova mem.DMAAddr
	r.run(func(p *sim.Proc) {
		_, h := r.frame(p, r.system, 640, 480)
		o := r.f.handles[h]
		iova = o.sgt.SGL[0].DMAAddress
		if n := dmabuf.ContiguousSize(o.sgt); n != o.buf.Size() || o.sgt.Nents != 1 || len(dmabuf.Pages(o.buf)) < 2 {
			t.Errorf("%d segments, %d contiguous bytes of %d in %d pages, want one IOVA range over scattered pages", o.sgt.Nents, n, o.buf.Size(), len(dmabuf.Pages(o.buf)))
		}
		tr, ok := r.d.DMADevice().Translator().(*iommu.Translator)
		if !ok {
			t.Fatalf("translator %s", r.d.DMADevice().Translator().Name())
		}
		pages := dmabuf.Pages(o.buf)
		if pa, ok := tr.Domain().IOVAToPhys(iova); !ok || pa != pages[0].Start || mem.PhysAddr(iova) == pa {
			t.Errorf("IOVA %#x → %#x %v, want the first page %#x", iova, pa, ok, pages[0].Start)
		}
		fb, err := r.f.AddFB2(p, xrgb(640, 480, h))
		must(t, err)
		must(t, r.d.Enable(p))
		_, err = r.f.AtomicCommit(p, Commit{FB: fb, InFenceFD: -1, Event: true})
		must(t, err)
		r.f.ReadEvent(p)
		p.Sleep(m.Period())
		must(t, r.d.Disable(p))
		r.f.Close(p)
	})
	var reads int
	for _, e := range r.dmaEvs {
		if e.Op == dma.OpDeviceAccess && !e.Write && e.Addr == iova {
			reads++
		}
	}
	if reads == 0 {
		t.Fatalf("no scanout read of IOVA %#x", iova)
	}
}

// The same program gives the same events.
func TestDeterministic(t *testing.T) {
	trace := func() string {
		m := mode(t, 1280, 720, 60)
		r := newRig(t, m, Config{}, false)
		r.run(func(p *sim.Proc) {
			fbs := []uint32{r.fb(p), r.fb(p)}
			must(t, r.d.Enable(p))
			for i := 0; i < 6; i++ {
				f := r.l.NewFence("isp", "out", r.l.ContextAlloc(1), 1)
				r.m.Engine.After(sim.Time(i%3)*7*sim.Millisecond, func() { f.Signal(nil) })
				fd, _ := r.l.NewSyncFile("isp", f).FD(r.proc)
				_, err := r.f.AtomicCommit(p, Commit{FB: fbs[i%2], InFenceFD: fd, Event: true})
				must(t, err)
				r.f.ReadEvent(p)
			}
			must(t, r.d.Disable(p))
			r.f.Close(p)
		})
		var b strings.Builder
		for _, e := range r.events {
			fmt.Fprintf(&b, "%v %s %v fb%d seq%d %v %d\n", e.Time, e.Proc, e.Op, e.FB, e.Seq, e.OnGlass, e.Missed)
		}
		for _, e := range r.dmaEvs {
			fmt.Fprintf(&b, "%v %v %#x %d\n", e.Time, e.Op, e.Addr, e.Size)
		}
		return b.String()
	}
	a, b := trace(), trace()
	if a != b || !strings.Contains(a, "flip") {
		t.Fatalf("runs differ or have no flip:\n%s\n---\n%s", a, b)
	}
}

// RMFB of the framebuffer on the plane turns the plane off: the next
// refreshes read nothing, and the buffer goes back to its exporter.
func TestRmFBOfScannedBuffer(t *testing.T) {
	m := mode(t, 640, 480, 60)
	r := newRig(t, m, Config{}, false)
	r.run(func(p *sim.Proc) {
		fd, h := r.frame(p, r.cma, 640, 480)
		fb, err := r.f.AddFB2(p, xrgb(640, 480, h))
		must(t, err)
		buf := r.f.handles[h].buf
		must(t, r.d.Enable(p))
		_, err = r.f.AtomicCommit(p, Commit{FB: fb, InFenceFD: -1, Event: true})
		must(t, err)
		r.f.ReadEvent(p)
		p.Sleep(m.Period())
		scans := r.d.Stats().Scans
		must(t, r.f.RmFB(p, fb))
		must(t, r.f.GEMClose(p, h))
		must(t, r.proc.Close(p, fd))
		if !buf.Released() {
			t.Error("buffer not released after RMFB, GEM_CLOSE and close")
		}
		p.Sleep(3 * m.Period())
		if got := r.d.Stats().Scans; got != scans {
			t.Errorf("%d scanouts after the plane went off", got-scans)
		}
		must(t, r.d.Disable(p))
	})
}

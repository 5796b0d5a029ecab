package cuda

import (
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// kernelStart is when the named kernel's bytes began to move.
func (r *extRig) kernelStart(name string) (sim.Time, bool) {
	for _, x := range r.tr {
		if x.Name == name {
			return x.Start, true
		}
	}
	return 0, false
}

// TestWaitExternalSemaphore: on Jetson Orin a stream made to wait on an
// NvSciSync fence (a camera's, say) runs the kernel after it only when
// the fence signals, 2 ms later; the host returns at once.
func TestWaitExternalSemaphore(t *testing.T) {
	r := newExtRig(t, "jetson-orin", false)
	const at = 2 * sim.Millisecond
	r.run(func(p *sim.Proc) {
		obj := NewNvSciSyncObj(r.l, "csi")
		sem, err := r.ctx.ImportExternalSemaphore(p, ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeNvSciSync, NvSciSyncObj: obj})
		must(t, err)
		f := obj.Next()
		p.Spawn("camera", func(q *sim.Proc) {
			q.Sleep(at)
			must(t, f.Fence.Signal(q))
		})
		dv, err := r.ctx.MemAlloc(p, 1<<20)
		must(t, err)
		s, err := r.ctx.StreamCreate(StreamNonBlocking)
		must(t, err)
		t0 := p.Now()
		must(t, r.ctx.WaitExternalSemaphoresAsync(p, []*ExternalSemaphore{sem}, []ExternalSemaphoreWaitParams{{Fence: f}}, s))
		must(t, r.ctx.LaunchKernel(p, kernel("infer", dv, 1<<20, false), s))
		if d := p.Now() - t0; d > 10*sim.Microsecond {
			t.Errorf("the host waited %v enqueuing", d)
		}
		must(t, s.Synchronize(p))
		start, ok := r.kernelStart("gpu0 infer")
		if !ok || start < at {
			t.Errorf("kernel started at %v (found %v), before the fence signalled at %v", start, ok, at)
		}
		must(t, r.ctx.DestroyExternalSemaphore(sem))
		wantResult(t, r.ctx.DestroyExternalSemaphore(sem), ErrorInvalidHandle)
		err = r.ctx.WaitExternalSemaphoresAsync(p, []*ExternalSemaphore{sem}, []ExternalSemaphoreWaitParams{{Fence: obj.Next()}}, s)
		wantResult(t, err, ErrorInvalidHandle)
	})
}

// TestSignalExternalSemaphore: a fence the stream signals after a kernel
// is not signalled while the kernel runs and signals once it is done,
// so a display waiting on it (another thread) wakes after the GPU's
// work.
func TestSignalExternalSemaphore(t *testing.T) {
	r := newExtRig(t, "jetson-orin", false)
	r.run(func(p *sim.Proc) {
		obj := NewNvSciSyncObj(r.l, "gpu-done")
		sem, err := r.ctx.ImportExternalSemaphore(p, ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeNvSciSync, NvSciSyncObj: obj})
		must(t, err)
		dv, err := r.ctx.MemAlloc(p, 64<<20)
		must(t, err)
		must(t, r.ctx.LaunchKernel(p, kernel("infer", dv, 64<<20, true), nil))
		var done NvSciSyncFence
		must(t, r.ctx.SignalExternalSemaphoresAsync(p, []*ExternalSemaphore{sem}, []ExternalSemaphoreSignalParams{{Fence: &done}}, nil))
		if done.Fence == nil || done.Fence.Signaled() {
			t.Fatalf("fence %v: want one, not yet signalled", done.Fence)
		}
		var woke sim.Time
		display := p.Spawn("display", func(q *sim.Proc) {
			must(t, done.Fence.Wait(q))
			woke = q.Now()
		})
		must(t, r.ctx.Synchronize(p))
		p.Wait(display.Exited())
		var end sim.Time
		for _, x := range r.tr {
			if x.Name == "gpu0 infer" {
				end = x.End
			}
		}
		if end == 0 || woke < end || done.Fence.SignaledAt() < end {
			t.Errorf("display woke at %v, fence at %v, kernel ended at %v", woke, done.Fence.SignaledAt(), end)
		}
		err = r.ctx.SignalExternalSemaphoresAsync(p, []*ExternalSemaphore{sem}, []ExternalSemaphoreSignalParams{{}}, nil)
		wantResult(t, err, ErrorInvalidValue)
		err = r.ctx.SignalExternalSemaphoresAsync(p, []*ExternalSemaphore{sem, sem}, []ExternalSemaphoreSignalParams{{Fence: &done}}, nil)
		wantResult(t, err, ErrorInvalidValue)
	})
}

// TestImportExternalSemaphoreErrors: NvSciSync is Tegra's; a sync_file
// is no CUDA semaphore on either platform (no sync_fd handle type);
// Windows types are not supported on Linux; unknown types and flags
// are invalid.
func TestImportExternalSemaphoreErrors(t *testing.T) {
	tests := []struct {
		name       string
		desc       func(r *extRig, syncFD int) ExternalSemaphoreHandleDesc
		orin, h200 Result
	}{
		{"nvscisync", func(r *extRig, _ int) ExternalSemaphoreHandleDesc {
			return ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeNvSciSync, NvSciSyncObj: NewNvSciSyncObj(r.l, "x")}
		}, Success, ErrorNotSupported},
		{"nvscisync without object", func(*extRig, int) ExternalSemaphoreHandleDesc {
			return ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeNvSciSync}
		}, ErrorInvalidValue, ErrorNotSupported},
		{"sync_file as opaque fd", func(_ *extRig, fd int) ExternalSemaphoreHandleDesc {
			return ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeOpaqueFD, FD: fd}
		}, ErrorInvalidValue, ErrorInvalidValue},
		{"sync_file as timeline fd", func(_ *extRig, fd int) ExternalSemaphoreHandleDesc {
			return ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeTimelineSemaphoreFD, FD: fd}
		}, ErrorInvalidValue, ErrorInvalidValue},
		{"closed fd", func(_ *extRig, fd int) ExternalSemaphoreHandleDesc {
			return ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeOpaqueFD, FD: fd + 5}
		}, ErrorInvalidValue, ErrorInvalidValue},
		{"d3d12 fence", func(*extRig, int) ExternalSemaphoreHandleDesc {
			return ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeD3D12Fence}
		}, ErrorNotSupported, ErrorNotSupported},
		{"unknown type", func(*extRig, int) ExternalSemaphoreHandleDesc {
			return ExternalSemaphoreHandleDesc{Type: 42}
		}, ErrorInvalidValue, ErrorInvalidValue},
		{"flags", func(r *extRig, _ int) ExternalSemaphoreHandleDesc {
			return ExternalSemaphoreHandleDesc{Type: ExternalSemaphoreHandleTypeNvSciSync, NvSciSyncObj: NewNvSciSyncObj(r.l, "x"), Flags: 1}
		}, ErrorInvalidValue, ErrorInvalidValue},
	}
	for _, preset := range []string{"jetson-orin", "h200-pcie"} {
		for _, tt := range tests {
			t.Run(preset+"/"+tt.name, func(t *testing.T) {
				r := newExtRig(t, preset, false)
				want := tt.h200
				if preset == "jetson-orin" {
					want = tt.orin
				}
				r.run(func(p *sim.Proc) {
					sf := r.l.NewSyncFile("isp", r.l.NewFence("isp", "frame", r.l.ContextAlloc(1), 1))
					fd, err := sf.FD(r.pr.KernelProcess())
					must(t, err)
					_, err = r.ctx.ImportExternalSemaphore(p, tt.desc(r, fd))
					wantResult(t, err, want)
				})
			})
		}
	}
}

// TestSyncFileWorkaround: where CUDA cannot import a sync_file (every
// platform), the real workaround is the CPU's: a thread waits for the
// fence, then launches. The kernel starts after the fence signalled, on
// a discrete GPU. Towards a display, a host function in the stream
// signals the display's fence once the kernel is done.
func TestSyncFileWorkaround(t *testing.T) {
	r := newExtRig(t, "h200-pcie", false)
	const at = 1 * sim.Millisecond
	r.run(func(p *sim.Proc) {
		f := r.l.NewFence("v4l2", "capture", r.l.ContextAlloc(1), 1)
		sf := r.l.NewSyncFile("frame", f)
		p.Spawn("isp", func(q *sim.Proc) {
			q.Sleep(at)
			must(t, f.Signal(q))
		})
		dv, err := r.ctx.MemAlloc(p, 1<<20)
		must(t, err)
		must(t, sf.Wait(p, sim.Second))
		must(t, r.ctx.LaunchKernel(p, kernel("infer", dv, 1<<20, false), nil))
		must(t, r.ctx.Synchronize(p))
		start, ok := r.kernelStart("gpu0 infer")
		if !ok || start < at {
			t.Errorf("kernel started at %v, before the fence at %v", start, at)
		}

		// The other way: a host function after the kernel signals the
		// fence a display waits on.
		done := r.l.NewFence("app", "gpu-done", r.l.ContextAlloc(1), 1)
		must(t, r.ctx.LaunchKernel(p, kernel("post", dv, 1<<20, true), nil))
		must(t, r.ctx.DefaultStream().LaunchHostFunc(p, "signal", func(w *sim.Proc) { must(t, done.Signal(w)) }))
		if done.Signaled() {
			t.Fatal("signalled before the stream reached it")
		}
		must(t, done.Wait(p))
		var end sim.Time
		for _, x := range r.tr {
			if x.Name == "gpu0 post" {
				end = x.End
			}
		}
		if end == 0 || done.SignaledAt() < end {
			t.Errorf("fence signalled at %v, kernel ended at %v", done.SignaledAt(), end)
		}
	})
}

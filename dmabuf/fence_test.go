package dmabuf

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/sim"
)

const us = sim.Microsecond

// signalAt signals f at time at, from hardware (no thread).
func (r *rig) signalAt(f *Fence, at sim.Time) {
	r.m.Engine.At(at, func() {
		if err := f.Signal(nil); err != nil {
			r.t.Error(err)
		}
	})
}

// TestFenceSignalOnce: a fence signals once (a second signal is EINVAL
// and changes nothing), its status goes from pending to done or to the
// error set before the signal, and an error cannot be set after.
func TestFenceSignalOnce(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	ctx := r.l.ContextAlloc(2)
	if ctx == 0 || r.l.ContextAlloc(1) != ctx+2 {
		t.Fatalf("contexts from %d: not consecutive, or 0 (the stub's)", ctx)
	}
	ok, bad := r.l.NewFence("isp", "out", ctx, 1), r.l.NewFence("isp", "out", ctx, 2)
	r.run(func(p *sim.Proc) {
		p.Sleep(3 * us)
		if ok.Status() != 0 || ok.Signaled() {
			t.Error("a new fence is not pending")
		}
		must(t, bad.SetError(syscall.EIO))
		must(t, ok.Signal(p))
		must(t, bad.Signal(p))
		if err := ok.Signal(p); !errors.Is(err, ErrAlreadySignaled) || !errors.Is(err, syscall.EINVAL) {
			t.Errorf("second signal: %v, want EINVAL", err)
		}
		if ok.Status() != 1 || ok.SignaledAt() != 3*us {
			t.Errorf("status %d at %v, want 1 at 3µs", ok.Status(), ok.SignaledAt())
		}
		if bad.Status() != -int(syscall.EIO) || !errors.Is(bad.Err(), syscall.EIO) {
			t.Errorf("status %d, want -EIO", bad.Status())
		}
		if err := ok.SetError(syscall.EIO); err == nil {
			t.Error("error set after the signal")
		}
		if !bad.IsLater(ok) || ok.IsLater(bad) {
			t.Error("seqno order")
		}
	})
	if n := r.count(OpFenceSignal); n != 3 {
		t.Errorf("%d signal events (two and a failed one), want 3", n)
	}
}

// TestFenceCallbacks: callbacks run at the signal, in the order they
// were added; a removed one does not; none can be added after.
func TestFenceCallbacks(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	f := r.l.NewFence("cam", "frames", r.l.ContextAlloc(1), 1)
	var order []string
	var at []sim.Time
	for _, name := range []string{"a", "b", "c"} {
		cb, err := f.AddCallback(func(*Fence) { order = append(order, name); at = append(at, r.m.Engine.Now()) })
		must(t, err)
		if name == "b" && !f.RemoveCallback(cb) {
			t.Fatal("remove failed")
		}
	}
	r.signalAt(f, 7*us)
	r.m.Engine.Run()
	if !slices.Equal(order, []string{"a", "c"}) || at[0] != 7*us {
		t.Errorf("callbacks %v at %v, want a, c at 7µs", order, at)
	}
	if _, err := f.AddCallback(func(*Fence) {}); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("callback on a signalled fence: %v, want ENOENT", err)
	}
}

// TestFenceWaitTimeout: a process waits in virtual time; a timeout
// before the signal is ETIME at the timeout, a longer one returns at the
// signal with the time left; a timeout of 0 only tests.
func TestFenceWaitTimeout(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	f := r.l.NewFence("gpu", "compute", r.l.ContextAlloc(1), 1)
	r.signalAt(f, 5*us)
	r.m.Engine.Spawn("short", func(p *sim.Proc) {
		if _, err := f.WaitTimeout(p, 0); !errors.Is(err, syscall.ETIME) || p.Now() != 0 {
			t.Errorf("test of a pending fence: %v at %v, want ETIME at once", err, p.Now())
		}
		left, err := f.WaitTimeout(p, 1*us)
		if !errors.Is(err, ErrTimedOut) || !errors.Is(err, syscall.ETIME) || left != 0 || p.Now() != 1*us {
			t.Errorf("short wait: %v, left %v at %v; want ETIME at 1µs", err, left, p.Now())
		}
	})
	r.m.Engine.Spawn("long", func(p *sim.Proc) {
		left, err := f.WaitTimeout(p, 10*us)
		if err != nil || left != 5*us || p.Now() != 5*us {
			t.Errorf("long wait: %v, left %v at %v; want 5µs left at 5µs", err, left, p.Now())
		}
		if err := f.Wait(p); err != nil || p.Now() != 5*us {
			t.Errorf("wait on a signalled fence: %v at %v", err, p.Now())
		}
	})
	r.m.Engine.Spawn("forever", func(p *sim.Proc) {
		if err := f.Wait(p); err != nil || p.Now() != 5*us {
			t.Errorf("wait: %v at %v, want 5µs", err, p.Now())
		}
	})
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		t.Fatalf("blocked: %v", b)
	}
	var waited []sim.Time
	for _, e := range r.events {
		if e.Op == OpFenceWait && e.Waited > 0 {
			waited = append(waited, e.Waited)
		}
	}
	slices.Sort(waited)
	if !slices.Equal(waited, []sim.Time{1 * us, 5 * us, 5 * us}) {
		t.Errorf("wait events %v, want 1µs, 5µs, 5µs", waited)
	}
}

// TestResvUsage: a reader waits for the kernel's and the writers'
// fences, a writer for the readers' too, neither for bookkeeping ones.
func TestResvUsage(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	var b *Buffer
	times := map[Usage]sim.Time{UsageKernel: 1 * us, UsageWrite: 2 * us, UsageRead: 4 * us, UsageBookkeep: 8 * us}
	r.run(func(p *sim.Proc) {
		var err error
		b, err = r.system.Alloc(p, 0, 4096)
		must(t, err)
		for _, u := range []Usage{UsageKernel, UsageWrite, UsageRead, UsageBookkeep} {
			f := r.l.NewFence("x", u.String(), r.l.ContextAlloc(1), 1)
			b.Resv().AddFence(p, f, u)
			r.signalAt(f, p.Now()+times[u])
		}
		start := p.Now()
		if b.Resv().TestSignaled(UsageKernel) {
			t.Error("kernel fences signalled at once")
		}
		reader := p.Spawn("reader", func(q *sim.Proc) {
			_, err := b.Resv().WaitTimeout(q, UsageRW(false), MaxScheduleTimeout)
			must(t, err)
			if q.Now()-start != 2*us {
				t.Errorf("reader went at %v, want after the writer's fence (2µs)", q.Now()-start)
			}
		})
		writer := p.Spawn("writer", func(q *sim.Proc) {
			_, err := b.Resv().WaitTimeout(q, UsageRW(true), MaxScheduleTimeout)
			must(t, err)
			if q.Now()-start != 4*us {
				t.Errorf("writer went at %v, want after the reader's fence (4µs)", q.Now()-start)
			}
			if !b.Resv().TestSignaled(UsageRead) || b.Resv().TestSignaled(UsageBookkeep) {
				t.Error("test_signaled disagrees with the wait")
			}
		})
		p.Join(reader)
		p.Join(writer)
		if _, err := b.Resv().WaitTimeout(p, UsageBookkeep, 1*us); !errors.Is(err, syscall.ETIME) {
			t.Errorf("bookkeep wait within 1µs: %v, want ETIME", err)
		}
	})
}

// TestResvReplace: dma_resv_add_fence replaces a pending fence of the
// same context by a later one of a usage no stronger, and keeps it
// when the new one's usage is weaker (a reader after a writer).
func TestResvReplace(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	x, y := r.l.ContextAlloc(1), r.l.ContextAlloc(1)
	w1, o := r.l.NewFence("x", "x", x, 1), r.l.NewFence("y", "y", y, 1)
	w2, r3 := r.l.NewFence("x", "x", x, 2), r.l.NewFence("x", "x", x, 3)
	rv := &Resv{l: r.l, name: "t"}
	r.run(func(p *sim.Proc) {
		rv.AddFence(p, w1, UsageWrite)
		rv.AddFence(p, o, UsageRead)
		rv.AddFence(p, w2, UsageWrite)
		if got := rv.Fences(UsageBookkeep); !slices.Equal(got, []*Fence{w2, o}) {
			t.Errorf("after a later writer: %v, want %v, %v", got, w2, o)
		}
		rv.AddFence(p, r3, UsageRead)
		if got := rv.Fences(UsageBookkeep); !slices.Equal(got, []*Fence{w2, o, r3}) {
			t.Errorf("after a later reader: %v", got)
		}
		if got := rv.Fences(UsageWrite); !slices.Equal(got, []*Fence{w2}) {
			t.Errorf("writers %v, want %v", got, w2)
		}
	})
}

// TestBufferWaits: mapping waits for the kernel's fences (memory
// management), begin_cpu_access for a reader's the writers' fences.
func TestBufferWaits(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	r.run(func(p *sim.Proc) {
		b, err := r.system.Alloc(p, 0, 4096)
		must(t, err)
		start := p.Now()
		move := r.l.NewFence("ttm", "move", r.l.ContextAlloc(1), 1)
		write := r.l.NewFence("isp", "out", r.l.ContextAlloc(1), 1)
		b.Resv().AddFence(p, move, UsageKernel)
		b.Resv().AddFence(p, write, UsageWrite)
		r.signalAt(move, start+3*us)
		r.signalAt(write, start+9*us)
		a, err := b.Attach(p, r.dev("nic0"), AttachOptions{})
		must(t, err)
		if _, err := a.Map(p, dma.ToDevice); err != nil || p.Now()-start < 3*us || write.Signaled() {
			t.Errorf("map: %v at +%v, want after the move (3µs), before the write (9µs)", err, p.Now()-start)
		}
		must(t, b.BeginCPUAccess(p, dma.FromDevice))
		if p.Now()-start < 9*us {
			t.Errorf("begin_cpu_access returned at +%v, before the writer's fence", p.Now()-start)
		}
		must(t, b.EndCPUAccess(p, dma.FromDevice))
	})
}

// TestSyncFileRoundTrip: a writer's fence exported from one buffer as a
// sync file (DMA_BUF_IOCTL_EXPORT_SYNC_FILE), passed to another process
// by SCM_RIGHTS, imported into another buffer as a write
// (DMA_BUF_IOCTL_IMPORT_SYNC_FILE), makes that buffer's readers wait
// for it. The sync file's number sent as plain data is EBADF there.
func TestSyncFileRoundTrip(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	cam, gpu := r.proc("camera"), r.proc("gpu")
	r.run(func(p *sim.Proc) {
		src, err := r.system.Alloc(p, 0, 4096)
		must(t, err)
		dst, err := r.system.Alloc(p, 0, 4096)
		must(t, err)
		w := r.l.NewFence("csi", "frames", r.l.ContextAlloc(1), 7)
		rd := r.l.NewFence("gpu", "compute", r.l.ContextAlloc(1), 1)
		src.Resv().AddFence(p, w, UsageWrite)
		src.Resv().AddFence(p, rd, UsageRead)
		if _, err := src.ExportSyncFile(p, cam, 0); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("export with no flags: %v, want EINVAL", err)
		}
		fd, err := src.ExportSyncFile(p, cam, SyncRead)
		must(t, err)
		s, err := r.l.SyncFileGet(cam, fd)
		must(t, err)
		if s.Fence() != w {
			t.Errorf("a reader's sync file holds %v, want the writer's fence %v", s.Fence(), w)
		}
		wfd, err := src.ExportSyncFile(p, cam, SyncWrite)
		must(t, err)
		ws, err := r.l.SyncFileGet(cam, wfd)
		must(t, err)
		if got := ws.Fence().Parts(); len(got) != 2 {
			t.Errorf("a writer's sync file holds %v, want the writer's and the reader's", got)
		}
		must(t, cam.Close(p, wfd))
		if _, err := r.l.SyncFileGet(gpu, fd); !errors.Is(err, syscall.EBADF) {
			t.Errorf("sync file number sent as data: %v, want EBADF", err)
		}
		gfd, err := cam.SendFD(gpu, fd)
		must(t, err)
		must(t, cam.Close(p, fd))
		must(t, dst.ImportSyncFile(p, gpu, SyncWrite, gfd))
		if got := dst.Resv().Fences(UsageWrite); len(got) != 1 || got[0] != w {
			t.Errorf("imported fences %v, want the writer's as a writer", got)
		}
		r.signalAt(w, p.Now()+4*us)
		start := p.Now()
		gs, err := r.l.SyncFileGet(gpu, gfd)
		must(t, err)
		if gs.Status() != 0 {
			t.Error("sync file done before its fence")
		}
		must(t, dst.BeginCPUAccess(p, dma.FromDevice))
		if p.Now()-start != 4*us || gs.Status() != 1 {
			t.Errorf("reader of the importing buffer went at +%v (status %d), want +4µs, 1", p.Now()-start, gs.Status())
		}
		must(t, gpu.Close(p, gfd))
		if !gs.File().Released() {
			t.Error("sync file not released at its last close")
		}
	})
}

// TestSyncFileMerge: SYNC_IOC_MERGE keeps the later fence of each
// context and signals when all of them have; merging signalled files
// gives a signalled one.
func TestSyncFileMerge(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	pr := r.proc("app")
	c1, c2 := r.l.ContextAlloc(1), r.l.ContextAlloc(1)
	a1, a2, b1 := r.l.NewFence("x", "a", c1, 1), r.l.NewFence("x", "a", c1, 2), r.l.NewFence("x", "b", c2, 1)
	r.signalAt(a2, 2*us)
	r.signalAt(b1, 6*us)
	r.signalAt(a1, 1*us)
	r.run(func(p *sim.Proc) {
		fds := make([]int, 3)
		for i, f := range []*Fence{a1, a2, b1} {
			var err error
			fds[i], err = r.l.NewSyncFile("in", f).FD(pr)
			must(t, err)
		}
		m1, err := r.l.Merge(p, pr, "m1", fds[0], fds[1])
		must(t, err)
		m, err := r.l.Merge(p, pr, "frame", m1, fds[2])
		must(t, err)
		s, err := r.l.SyncFileGet(pr, m)
		must(t, err)
		if got := s.Fence().Parts(); len(got) != 2 || got[0] != a2 || got[1] != b1 {
			t.Errorf("merged fences %v, want %v and %v", got, a2, b1)
		}
		if s.Name() != "frame" {
			t.Errorf("name %q", s.Name())
		}
		if err := s.Wait(p, 3*us); !errors.Is(err, syscall.ETIME) {
			t.Errorf("wait of 3µs: %v, want ETIME", err)
		}
		must(t, s.Wait(p, MaxScheduleTimeout))
		if p.Now() != 6*us || s.Status() != 1 {
			t.Errorf("merged file done at %v (status %d), want 6µs", p.Now(), s.Status())
		}
		done, err := r.l.Merge(p, pr, "done", m, fds[0])
		must(t, err)
		ds, err := r.l.SyncFileGet(pr, done)
		must(t, err)
		if !ds.Fence().Signaled() {
			t.Error("a merge of signalled files is pending")
		}
		if _, err := r.l.Merge(p, pr, "bad", m, 99); !errors.Is(err, syscall.EBADF) {
			t.Errorf("merge with a bad fd: %v, want EBADF", err)
		}
	})
}

// TestFenceArrayError: an array signals with its parts' first error.
func TestFenceArrayError(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", false)
	a, b := r.l.NewFence("x", "a", r.l.ContextAlloc(1), 1), r.l.NewFence("x", "b", r.l.ContextAlloc(1), 1)
	arr := r.l.NewArray([]*Fence{a, b})
	must(t, b.SetError(syscall.ECANCELED))
	must(t, a.Signal(nil))
	if arr.Signaled() {
		t.Fatal("array signalled before all its parts")
	}
	must(t, b.Signal(nil))
	if arr.Status() != -int(syscall.ECANCELED) {
		t.Errorf("array status %d, want -ECANCELED", arr.Status())
	}
}

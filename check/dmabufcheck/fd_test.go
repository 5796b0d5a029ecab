package dmabufcheck

import (
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/sim"
)

// TestFDNotOwned: a producer exports a buffer and the consumer imports
// it. Passed by SCM_RIGHTS, nothing is reported, even where the same
// number is another buffer in the other process. Passed as a plain
// number, dma_buf_get in the consumer fails EBADF, or finds another
// file there: an eventfd (EINVAL) or, silently, a dma-buf of the
// consumer's own (a warning: the pack cannot know the intent).
func TestFDNotOwned(t *testing.T) {
	for _, tc := range []struct {
		name string
		// own is what the consumer has at descriptor 3 before it
		// imports: "", "eventfd" or "dmabuf".
		own   string
		scm   bool
		code  string
		words []string
	}{
		{"SCM_RIGHTS", "", true, "", nil},
		{"SCM_RIGHTS, the number another buffer in the consumer", "dmabuf", true, "", nil},
		{"number as data, nothing there", "", false, FDNotOwned,
			[]string{"dma_buf_get(3) in consumer failed (bad file descriptor): no descriptor 3 in consumer", "3 is dmabuf:1 in producer", "SCM_RIGHTS", "made by fd_install(3, dmabuf:1) in producer"}},
		{"number as data, an eventfd there", "eventfd", false, FDNotOwned,
			[]string{"descriptor 3 in consumer is anon_inode:[eventfd]", "not a dma-buf", "3 is dmabuf:1 in producer"}},
		{"number as data, another dma-buf there", "dmabuf", false, FDAliased,
			[]string{"dma_buf_get(3) in consumer resolved to dmabuf:1, but 3 is dmabuf:2 in producer, a buffer consumer never had, and producer passed consumer no descriptor", "wrong buffer", "made by fd_install(3, dmabuf:2) in producer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			prod, cons := r.proc("producer"), r.proc("consumer")
			sent := r.m.Engine.NewNamedCompletion("sent")
			var fd int
			r.run(map[string]func(*sim.Proc){
				"producer": func(p *sim.Proc) {
					var err error
					fd, err = r.system.Allocate(p, prod, 4096, 0)
					must(t, err)
					p.Sleep(sim.Microsecond) // the consumer sets up first
					if tc.scm {
						fd, err = prod.SendFD(cons, fd)
						must(t, err)
					}
					sent.Complete()
				},
				"consumer": func(p *sim.Proc) {
					switch tc.own {
					case "eventfd":
						_, _, err := cons.Eventfd(0)
						must(t, err)
					case "dmabuf":
						_, err := r.system.Allocate(p, cons, 4096, 0)
						must(t, err)
					}
					p.Wait(sent)
					b, err := r.l.Get(p, cons, fd)
					if tc.code == FDNotOwned {
						if err == nil {
							t.Fatal("dma_buf_get succeeded")
						}
						return
					}
					must(t, err)
					must(t, b.Put(p))
				},
			})
			if tc.code == "" {
				r.clean()
				return
			}
			r.expect(tc.code, 1, tc.words...)
		})
	}
}

// TestTwoProcessPipeline: a producer process exports a buffer, sends it
// by SCM_RIGHTS, and its device writes it under a write fence that it
// signals when done; the consumer process imports it and its device
// reads it. Waiting for the buffer's writers first (implicit sync, or
// the fence's sync_file, explicit sync) is clean; reading at once is a
// race between the two devices, and a producer that never signals
// leaves the consumer blocked: the fence is reported at the end, the
// consumer named.
func TestTwoProcessPipeline(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wait  string // "resv", "sync_file" or "" (none)
		never bool   // the producer forgets to signal
		code  string
		words []string
	}{
		{"implicit sync", "resv", false, "", nil},
		{"explicit sync", "sync_file", false, "", nil},
		{"no wait", "", false, FenceRace, []string{"device nic1 reads dmabuf:1", "nic:nic0", "racing with the work of nic0", "made by dma_fence_init(nic:nic0"}},
		{"never signalled", "resv", true, FenceNeverSignal, []string{"nic:nic0 1:1 never signalled", "waited on by consumer from", "through dmabuf:1's reservation", "still blocked", "in the reservation object of dmabuf:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			prod, cons := r.proc("producer"), r.proc("consumer")
			nic0, nic1 := r.dev("nic0"), r.dev("nic1")
			ready := r.m.Engine.NewNamedCompletion("ready")
			var bufFD, syncFD int
			r.run(map[string]func(*sim.Proc){
				"producer": func(p *sim.Proc) {
					fd, b := r.alloc(p, prod)
					_, at := r.attachMap(p, b, nic0)
					f := r.l.NewFence("nic", "nic0", r.l.ContextAlloc(1), 1)
					b.Resv().AddFence(p, f, dmabuf.UsageWrite)
					var err error
					bufFD, err = prod.SendFD(cons, fd)
					must(t, err)
					sf, err := b.ExportSyncFile(p, prod, dmabuf.SyncRead)
					must(t, err)
					syncFD, err = prod.SendFD(cons, sf)
					must(t, err)
					ready.Complete()
					p.Sleep(10 * sim.Microsecond) // the frame arrives
					_, err = nic0.Write(at, 4096)
					must(t, err)
					if !tc.never {
						must(t, f.Signal(nil)) // the completion interrupt
					}
				},
				"consumer": func(p *sim.Proc) {
					p.Wait(ready)
					b, err := r.l.Get(p, cons, bufFD)
					must(t, err)
					a, at := r.attachMap(p, b, nic1)
					switch tc.wait {
					case "resv":
						_, err = b.Resv().WaitTimeout(p, dmabuf.UsageRW(false), dmabuf.MaxScheduleTimeout)
					case "sync_file":
						var sf *dmabuf.SyncFile
						if sf, err = r.l.SyncFileGet(cons, syncFD); err == nil {
							err = sf.Wait(p, sim.Second)
						}
					}
					must(t, err)
					_, err = nic1.Read(at, 4096)
					must(t, err)
					sgt, _ := a.Mapped()
					must(t, a.Unmap(p, sgt, dma.Bidirectional))
					must(t, a.Detach(p))
					must(t, b.Put(p))
				},
			})
			if tc.code == "" {
				r.clean()
				return
			}
			r.expect(tc.code, 1, tc.words...)
		})
	}
}

package dmabufcheck

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/sim"
)

// TestUseAfterDetach: a map, unmap or detach of a detached attachment,
// and a device's access after its attachment was unmapped or detached
// (dma-direct lets it through), are reported with the attach as
// origin; the full sequence in order is not.
func TestUseAfterDetach(t *testing.T) {
	for _, tc := range []struct {
		name  string
		words []string // empty: correct use
	}{
		{"correct", nil},
		{"map after detach", []string{"dma_buf_map_attachment of nic0's attachment 1 to dmabuf:1 after its dma_buf_detach", "a map without an attach", "refused: invalid argument"}},
		{"unmap after detach", []string{"dma_buf_unmap_attachment of nic0's attachment 1", "refused"}},
		{"detach twice", []string{"dma_buf_detach of nic0's attachment 1 to dmabuf:1 after its dma_buf_detach"}},
		{"device write after unmap", []string{"device nic0 writes dmabuf:1", "after its attachment 1 was unmapped (dma_buf_unmap_attachment(dmabuf:1, nic0)"}},
		{"device read after detach", []string{"device nic0 reads dmabuf:1", "was detached"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			app := r.proc("app")
			nic := r.dev("nic0")
			r.run1(func(p *sim.Proc) {
				_, b := r.alloc(p, app)
				a, err := b.Attach(p, nic, dmabuf.AttachOptions{})
				must(t, err)
				sgt, err := a.Map(p, dma.Bidirectional)
				must(t, err)
				at := sgt.SGL[0].DMAAddress
				_, err = nic.Write(at, 4096)
				must(t, err)
				switch tc.name {
				case "correct":
					must(t, a.Unmap(p, sgt, dma.Bidirectional))
					must(t, a.Detach(p))
				case "map after detach":
					must(t, a.Unmap(p, sgt, dma.Bidirectional))
					must(t, a.Detach(p))
					if _, err := a.Map(p, dma.Bidirectional); err == nil {
						t.Error("map after detach succeeded")
					}
				case "unmap after detach":
					must(t, a.Detach(p))
					if err := a.Unmap(p, sgt, dma.Bidirectional); err == nil {
						t.Error("unmap after detach succeeded")
					}
				case "detach twice":
					must(t, a.Detach(p))
					if err := a.Detach(p); err == nil {
						t.Error("second detach succeeded")
					}
				case "device write after unmap":
					must(t, a.Unmap(p, sgt, dma.Bidirectional))
					_, err = nic.Write(at, 4096)
					must(t, err)
					_, err = nic.Write(at, 4096) // the same again: one finding
					must(t, err)
				case "device read after detach":
					must(t, a.Detach(p))
					_, err = nic.Read(at, 4096)
					must(t, err)
				}
			})
			if tc.words == nil {
				r.clean()
				return
			}
			r.expect(UseAfterDetach, 1, append(tc.words, "made by dma_buf_attach(dmabuf:1, nic0)")...)
		})
	}
}

// TestReleaseMapped: the last reference dropped while an importer's
// attachment is mapped is reported, with the map as origin; after the
// unmap (detached or not) it is not.
func TestReleaseMapped(t *testing.T) {
	for _, tc := range []struct {
		name          string
		unmap, detach bool
		want          int
	}{
		{"mapped", false, false, 1},
		{"unmapped, still attached", true, false, 0},
		{"unmapped and detached", true, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			app := r.proc("app")
			nic := r.dev("nic1")
			r.run1(func(p *sim.Proc) {
				fd, b := r.alloc(p, app)
				a, err := b.Attach(p, nic, dmabuf.AttachOptions{})
				must(t, err)
				sgt, err := a.Map(p, dma.FromDevice)
				must(t, err)
				if tc.unmap {
					must(t, a.Unmap(p, sgt, dma.FromDevice))
				}
				if tc.detach {
					must(t, a.Detach(p))
				}
				must(t, b.Put(p))
				must(t, app.Close(p, fd))
				if !b.Released() {
					t.Fatal("not released")
				}
			})
			if tc.want == 0 {
				r.clean()
				return
			}
			r.expect(ReleaseMapped, 1, "dmabuf:1 (exporter system) released", "1 attachment is still mapped: nic1's attachment 1",
				"made by dma_buf_map_attachment(dmabuf:1, nic1, DMA_FROM_DEVICE)")
		})
	}
}

// TestFenceSignals: a fence signalled twice; a fence waited on, or left
// in a reservation object, that never signals (reported at the end of
// the run, naming the waiters); none of it when the fences signal once.
func TestFenceSignals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  string
		words []string
	}{
		{"signalled once", "", nil},
		{"signalled twice", FenceDoubleSignal, []string{"dma_fence_signal of isp:isp0 1:7, already signalled at 1us by drv", "made by dma_fence_init(isp:isp0 1:7)"}},
		{"waiter times out", FenceNeverSignal, []string{"isp:isp0 1:7 never signalled", "waited on by drv from", "gave up at", "(ETIME)"}},
		{"waiter blocked for good", FenceNeverSignal, []string{"waited on by waiter from", "still blocked", "made by dma_fence_init(isp:isp0 1:7)"}},
		{"left in a reservation object", FenceNeverSignal, []string{"in the reservation object of dmabuf:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			app := r.proc("app")
			f := r.l.NewFence("isp", "isp0", r.l.ContextAlloc(1), 7)
			bodies := map[string]func(*sim.Proc){"drv": func(p *sim.Proc) {
				_, b := r.alloc(p, app)
				p.Sleep(sim.Microsecond - p.Now())
				switch tc.name {
				case "signalled once":
					b.Resv().AddFence(p, f, dmabuf.UsageWrite)
					must(t, f.Signal(p))
				case "signalled twice":
					must(t, f.Signal(p))
					p.Sleep(sim.Microsecond)
					if err := f.Signal(p); err == nil {
						t.Error("second signal succeeded")
					}
				case "waiter times out":
					if _, err := f.WaitTimeout(p, sim.Millisecond); err == nil {
						t.Error("wait did not time out")
					}
				case "left in a reservation object":
					b.Resv().AddFence(p, f, dmabuf.UsageWrite)
				}
			}}
			if tc.name == "waiter blocked for good" {
				bodies["waiter"] = func(p *sim.Proc) { _ = f.Wait(p) }
			}
			r.run(bodies)
			if tc.code == "" {
				r.clean()
				return
			}
			r.expect(tc.code, 1, tc.words...)
			// The end of a second run reports nothing again.
			r.chk.Finish(r.m.Engine.Now())
			r.expect(tc.code, 1)
		})
	}
}

// TestCPUAccessUnsynced is the payload proof on the non-coherent Zynq:
// without DMA_BUF_IOCTL_SYNC the CPU reads the old frame (or the device
// the old bytes the CPU wrote over) and the pack reports it; with the
// bracket the bytes are the new ones and it reports nothing.
func TestCPUAccessUnsynced(t *testing.T) {
	const size = 256
	oldF, newF := bytes.Repeat([]byte("old frame "), 26)[:size], bytes.Repeat([]byte("NEW FRAME "), 26)[:size]
	for _, tc := range []struct {
		name      string
		deviceOut bool // the device writes and the CPU reads; else the reverse
		sync      bool
		wantWords []string
	}{
		{"device writes, CPU reads, with sync", true, true, nil},
		{"device writes, CPU reads, without sync", true, false, []string{"CPU (drv) read dmabuf:1", "non-coherent gem0", "DMA_BUF_SYNC_START"}},
		{"device writes inside the CPU's bracket", true, false, []string{"CPU (drv) read dmabuf:1", "inside a begin_cpu_access made at", "before the device's write"}},
		{"CPU writes, device reads, with sync", false, true, nil},
		{"CPU writes, device reads, without sync", false, false, []string{"non-coherent device gem0 read dmabuf:1", "DMA_BUF_SYNC_END", "the last end_cpu_access was at"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "zynq-7000", true)
			app := r.proc("app")
			gem := r.dev("gem0")
			r.run1(func(p *sim.Proc) {
				_, b := r.alloc(p, app)
				va, err := b.Mmap(p, app)
				must(t, err)
				_, at := r.attachMap(p, b, gem)
				got := make([]byte, size)
				if tc.deviceOut {
					_, err := gem.WriteBytes(at, oldF)
					must(t, err)
					must(t, b.Sync(p, dmabuf.SyncStart|dmabuf.SyncRead))
					r.mem.ReadBytes(p, 0, va, got)
					must(t, b.Sync(p, dmabuf.SyncEnd|dmabuf.SyncRead))
					r.mem.Read(p, 0, va, size) // a prefetch while the device owns it
					if tc.name == "device writes inside the CPU's bracket" {
						// Too early: the CPU reads the old frame into its
						// cache inside the bracket, then the device writes.
						must(t, b.Sync(p, dmabuf.SyncStart|dmabuf.SyncRead))
						r.mem.Read(p, 0, va, size)
					}
					_, err = gem.WriteBytes(at, newF)
					must(t, err)
					if tc.sync {
						must(t, b.Sync(p, dmabuf.SyncStart|dmabuf.SyncRead))
					}
					r.mem.ReadBytes(p, 0, va, got)
				} else {
					must(t, b.Sync(p, dmabuf.SyncStart|dmabuf.SyncWrite))
					r.mem.WriteBytes(p, 0, va, oldF)
					must(t, b.Sync(p, dmabuf.SyncEnd|dmabuf.SyncWrite))
					if tc.sync {
						must(t, b.Sync(p, dmabuf.SyncStart|dmabuf.SyncWrite))
					}
					r.mem.WriteBytes(p, 0, va, newF)
					if tc.sync {
						must(t, b.Sync(p, dmabuf.SyncEnd|dmabuf.SyncWrite))
					}
					_, err := gem.ReadBytes(at, got)
					must(t, err)
				}
				want := newF
				if !tc.sync {
					want = oldF
				}
				if !bytes.Equal(got, want) {
					t.Errorf("read %q..., want %q...", got[:16], want[:16])
				}
			})
			if tc.wantWords == nil {
				r.clean()
				return
			}
			r.expect(CPUAccessUnsynced, 1, append(tc.wantWords, "made by dma_buf_map_attachment(dmabuf:1, gem0, DMA_BIDIRECTIONAL)")...)
		})
	}
}

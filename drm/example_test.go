package drm_test

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/drm"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A compositor shows an ISP's 1280x720 frame on a 60 Hz display. The
// frame comes from the CMA heap as a dma-buf descriptor; the display
// driver imports it and makes a framebuffer. The flip waits for the
// ISP's fence, which signals 20 ms after the commit: it misses the
// first vblank, latches at the second and is on glass at the start of
// the third refresh; its out-fence signals at the latch. Each refresh
// then reads 1280 × 720 × 4 bytes.
func ExampleFile_AtomicCommit() {
	spec, _ := platform.Preset("zynq-7000")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{})
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	k := kernel.New(m.Engine, m.Mem.Nodes())
	bufs := dmabuf.New(m.Engine)
	heap, _ := bufs.AddCMAHeap(m.Mem, "reserved", 0, 0)
	mode, _ := drm.CVTRB(1280, 720, 60)
	disp, _ := drm.New(m, x, bufs, "axidma0", drm.Config{Mode: mode})
	comp, _ := k.NewProcess("compositor", 0)

	m.Engine.Spawn("compositor", func(p *sim.Proc) {
		f := disp.Open(comp)
		fd, _ := heap.Allocate(p, comp, 1280*720*4, 0)
		h, _ := f.PrimeFDToHandle(p, fd)
		fb, _ := f.AddFB2(p, drm.FBCmd{Width: 1280, Height: 720, Format: drm.FormatXRGB8888,
			Handles: [4]uint32{h}, Pitches: [4]uint32{1280 * 4}})
		disp.Enable(p)

		isp := bufs.NewFence("isp", "out", bufs.ContextAlloc(1), 1)
		in, _ := bufs.NewSyncFile("isp", isp).FD(comp)
		m.Engine.After(20*sim.Millisecond, func() { isp.Signal(nil) })
		out, _ := f.AtomicCommit(p, drm.Commit{FB: fb, InFenceFD: in, OutFence: true, Event: true})
		ev := f.ReadEvent(p)
		t0 := disp.RefreshStart(0)
		fmt.Printf("%s: %.3f Hz, refresh %v\n", mode.Name, mode.Refresh(), mode.Period())
		fmt.Printf("flip complete: vblank %d at %v, on glass at %v\n", ev.Sequence, p.Now()-t0, ev.Time-t0)
		fl := disp.Flips()[0]
		fmt.Println("missed vblanks:", fl.Missed)
		s, _ := bufs.SyncFileGet(comp, out)
		fmt.Println("out-fence signalled:", s.Status() == 1)

		p.Sleep(10 * mode.Period())
		disp.Disable(p)
		f.Close(p)
		st := disp.Stats()
		fmt.Printf("%d refreshes read %d bytes each, %d underruns\n", st.Scans, st.Bytes/int64(st.Scans), st.Underruns)
	})
	m.Engine.Run()
	// Output:
	// 1280x720@60: 59.979 Hz, refresh 16.6725ms
	// flip complete: vblank 2 at 32.8725ms, on glass at 33.345ms
	// missed vblanks: 1
	// out-fence signalled: true
	// 10 refreshes read 3686400 bytes each, 0 underruns
}

package v4l2_test

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/v4l2"
)

// TestExpBufISPFences: a camera frame in an MMAP buffer, exported with
// EXPBUF, goes to the ISP as a dma-buf with an in-fence the application
// signals late; the ISP waits for it, writes NV12 (Process of the RAW
// frame) into an exported MMAP buffer of its capture queue, and its
// out-fence signals when the write has landed. On jetson-orin with the
// SMMU in strict mode, every buffer's DMA address is an IOVA.
func TestExpBufISPFences(t *testing.T) {
	sys := boot(t, "jetson-orin", true, "iommu.mode", "strict")
	c := camera(t, sys, "vi0")
	isp, err := sys.V4L2().NewISP(v4l2.ISPConfig{Device: "isp0", Format: small})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []v4l2.Event
	var addrs []mem.DMAAddr
	sys.V4L2().Hooks.Hook(func(e *v4l2.Event) {
		if e.Op == v4l2.OpJob {
			jobs = append(jobs, *e)
		}
		if e.Op == v4l2.OpFrame || e.Op == v4l2.OpJob {
			addrs = append(addrs, e.Addr)
		}
	})
	const late = sim.Time(5_000_000_000) // 5 ms
	var outSignalled, jobDone sim.Time
	err = sys.Run("app", func(p *dmalab.Process) error {
		tp, pr := p.Thread, p.Process
		l := sys.DMABuf()
		cfd, _ := c.Open(tp, pr)
		if _, err := c.ReqBufs(tp, pr, cfd, v4l2.RequestBuffers{Count: 1, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
			return err
		}
		exp, err := c.ExpBuf(tp, pr, cfd, v4l2.ExportBuffer{Type: v4l2.BufTypeVideoCapture, Index: 0})
		if err != nil {
			return err
		}
		if _, err := c.QBuf(tp, pr, cfd, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
			return err
		}
		if err := c.StreamOn(tp, pr, cfd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		frame, err := c.DQBuf(tp, pr, cfd, v4l2.BufTypeVideoCapture)
		if err != nil {
			return err
		}
		if err := c.StreamOff(tp, pr, cfd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		raw, _ := c.GFmt(pr, cfd, v4l2.BufTypeVideoCapture)
		// EXPBUF round trip: the export's mapping shows the frame.
		db, err := l.Get(tp, pr, exp.FD)
		if err != nil {
			return err
		}
		va, err := db.Mmap(tp, pr)
		if err != nil {
			return err
		}
		if db.ExpName() != "videobuf2" || !bytes.Equal(read(p, va, raw.SizeImage), v4l2.Pattern(raw, frame.Sequence)) {
			t.Errorf("EXPBUF: exporter %q, bytes not the frame's", db.ExpName())
		}
		_ = db.Put(tp)

		ifd, _ := isp.Open(tp, pr)
		if _, err := isp.ReqBufs(tp, pr, ifd, v4l2.RequestBuffers{Count: 1, Type: v4l2.BufTypeVideoOutput, Memory: v4l2.MemoryDMABUF}); err != nil {
			return err
		}
		if _, err := isp.ReqBufs(tp, pr, ifd, v4l2.RequestBuffers{Count: 1, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
			return err
		}
		nvExp, err := isp.ExpBuf(tp, pr, ifd, v4l2.ExportBuffer{Type: v4l2.BufTypeVideoCapture, Index: 0})
		if err != nil {
			return err
		}
		in := l.NewFence("app", "gpu", l.ContextAlloc(1), 1)
		sfd, err := l.NewSyncFile("in", in).FD(pr)
		if err != nil {
			return err
		}
		if _, err := isp.QBuf(tp, pr, ifd, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoOutput, Memory: v4l2.MemoryDMABUF, FD: exp.FD,
			Flags: v4l2.BufFlagInFence, FenceFD: sfd, Timestamp: frame.Timestamp, Times: frame.Times, Sequence: frame.Sequence}); err != nil {
			return err
		}
		qb, err := isp.QBuf(tp, pr, ifd, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP, Flags: v4l2.BufFlagOutFence})
		if err != nil {
			return err
		}
		out, err := l.SyncFileGet(pr, qb.FenceFD)
		if err != nil {
			return err
		}
		for _, bt := range []v4l2.BufType{v4l2.BufTypeVideoOutput, v4l2.BufTypeVideoCapture} {
			if err := isp.StreamOn(tp, pr, ifd, bt); err != nil {
				return err
			}
		}
		start := tp.Now()
		tp.Sleep(late)
		if len(jobs) != 0 || out.Fence().Signaled() {
			t.Errorf("the ISP ran before its in-fence signalled")
		}
		_ = in.Signal(tp)
		if err := out.Fence().Wait(tp); err != nil {
			return err
		}
		outSignalled = tp.Now()
		nv, err := isp.DQBuf(tp, pr, ifd, v4l2.BufTypeVideoCapture)
		if err != nil {
			return err
		}
		jobDone = nv.Times.ISPDone
		if nv.Sequence != frame.Sequence || nv.Timestamp != frame.Timestamp || nv.Times.ReadoutStart != frame.Times.ReadoutStart ||
			nv.Times.ISPStart != start+late || nv.Times.ISPRead <= nv.Times.ISPStart || nv.Times.ISPDone < nv.Times.ISPRead+isp.ProcessTime(raw) {
			t.Errorf("ISP buffer %+v", nv)
		}
		nvf, _ := isp.GFmt(pr, ifd, v4l2.BufTypeVideoCapture)
		want, err := v4l2.Process(raw, v4l2.Pattern(raw, frame.Sequence), nvf)
		if err != nil {
			return err
		}
		nb, _ := l.Get(tp, pr, nvExp.FD)
		if err := nb.Sync(tp, dmabuf.SyncStart|dmabuf.SyncRead); err != nil {
			return err
		}
		nva, _ := nb.Mmap(tp, pr)
		if !bytes.Equal(read(p, nva, nvf.SizeImage), want) {
			t.Errorf("NV12 output is not Process of the RAW frame")
		}
		_ = nb.Put(tp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || outSignalled != jobDone {
		t.Errorf("%d jobs; out-fence at %v, job done at %v", len(jobs), outSignalled, jobDone)
	}
	// Through the SMMU, IOVAs: far from the physical addresses, which
	// start at 0 on this platform's DRAM, and below 4 GiB first (PCI-style
	// allocation of the devices' ports).
	for _, a := range addrs {
		if a == 0 || a >= 1<<32 {
			t.Errorf("DMA address %#x is not an IOVA below 4 GiB", a)
		}
	}
	if len(sys.IOMMUs()) != 1 {
		t.Fatalf("%d IOMMU units", len(sys.IOMMUs()))
	}
	d, _ := sys.Device("vi0")
	if _, ok := d.Translator().(dma.Mapper); !ok {
		t.Errorf("vi0 is not behind an IOMMU domain")
	}
}

// TestImplicitSync: zero copy from camera to ISP through one dma-buf.
// The application queues the buffer to the ISP while the camera is
// still writing it; the ISP waits for the camera's write fence in the
// buffer's reservation object, so its job starts when the frame has
// landed, and its output is Process of that frame.
func TestImplicitSync(t *testing.T) {
	sys := boot(t, "jetson-orin", true)
	c := camera(t, sys, "vi0")
	isp, err := sys.V4L2().NewISP(v4l2.ISPConfig{Device: "isp0", Format: small})
	if err != nil {
		t.Fatal(err)
	}
	err = sys.Run("app", func(p *dmalab.Process) error {
		tp, pr := p.Thread, p.Process
		cfd, _ := c.Open(tp, pr)
		ifd, _ := isp.Open(tp, pr)
		raw, _ := c.GFmt(pr, cfd, v4l2.BufTypeVideoCapture)
		heap, _ := sys.DMABuf().Heap("system")
		fd, err := heap.Allocate(tp, pr, uint64(raw.SizeImage), 0)
		if err != nil {
			return err
		}
		for _, r := range []struct {
			d  *v4l2.Device
			fd int
			rb v4l2.RequestBuffers
		}{
			{c.Device, cfd, v4l2.RequestBuffers{Count: 1, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF}},
			{isp.Device, ifd, v4l2.RequestBuffers{Count: 1, Type: v4l2.BufTypeVideoOutput, Memory: v4l2.MemoryDMABUF}},
			{isp.Device, ifd, v4l2.RequestBuffers{Count: 1, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}},
		} {
			if _, err := r.d.ReqBufs(tp, pr, r.fd, r.rb); err != nil {
				return err
			}
		}
		if _, err := c.QBuf(tp, pr, cfd, v4l2.Buffer{Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: fd}); err != nil {
			return err
		}
		if err := c.StreamOn(tp, pr, cfd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		tp.Sleep(sim.FromSeconds(0.1e-3)) // the camera's first chunk is on its way
		if _, err := isp.QBuf(tp, pr, ifd, v4l2.Buffer{Type: v4l2.BufTypeVideoOutput, Memory: v4l2.MemoryDMABUF, FD: fd}); err != nil {
			return err
		}
		if _, err := isp.QBuf(tp, pr, ifd, v4l2.Buffer{Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
			return err
		}
		for _, bt := range []v4l2.BufType{v4l2.BufTypeVideoOutput, v4l2.BufTypeVideoCapture} {
			if err := isp.StreamOn(tp, pr, ifd, bt); err != nil {
				return err
			}
		}
		frame, err := c.DQBuf(tp, pr, cfd, v4l2.BufTypeVideoCapture)
		if err != nil {
			return err
		}
		nv, err := isp.DQBuf(tp, pr, ifd, v4l2.BufTypeVideoCapture)
		if err != nil {
			return err
		}
		if nv.Times.ISPStart != frame.Times.Written {
			t.Errorf("ISP started at %v, the frame landed at %v", nv.Times.ISPStart, frame.Times.Written)
		}
		nvf, _ := isp.GFmt(pr, ifd, v4l2.BufTypeVideoCapture)
		qb, _ := isp.QueryBuf(pr, ifd, v4l2.BufTypeVideoCapture, 0)
		va, err := isp.Mmap(tp, pr, ifd, v4l2.BufTypeVideoCapture, qb.Offset)
		if err != nil {
			return err
		}
		want, _ := v4l2.Process(raw, v4l2.Pattern(raw, frame.Sequence), nvf)
		if !bytes.Equal(read(p, va, nvf.SizeImage), want) {
			t.Errorf("NV12 is not Process of frame %d", frame.Sequence)
		}
		return c.StreamOff(tp, pr, cfd, v4l2.BufTypeVideoCapture)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestISPStreamOffMidJob: STREAMOFF during a job abandons it and gives
// the buffers back; a new stream runs a fresh job to completion.
func TestISPStreamOffMidJob(t *testing.T) {
	sys := boot(t, "jetson-orin", false)
	isp, err := sys.V4L2().NewISP(v4l2.ISPConfig{Device: "isp0", Format: small})
	if err != nil {
		t.Fatal(err)
	}
	err = sys.Run("app", func(p *dmalab.Process) error {
		tp, pr := p.Thread, p.Process
		fd, _ := isp.Open(tp, pr)
		types := []v4l2.BufType{v4l2.BufTypeVideoOutput, v4l2.BufTypeVideoCapture}
		for _, bt := range types {
			if _, err := isp.ReqBufs(tp, pr, fd, v4l2.RequestBuffers{Count: 1, Type: bt, Memory: v4l2.MemoryMMAP}); err != nil {
				return err
			}
		}
		start := func() error {
			for _, bt := range types {
				if _, err := isp.QBuf(tp, pr, fd, v4l2.Buffer{Type: bt, Memory: v4l2.MemoryMMAP}); err != nil {
					return err
				}
			}
			for _, bt := range types {
				if err := isp.StreamOn(tp, pr, fd, bt); err != nil {
					return err
				}
			}
			return nil
		}
		if err := start(); err != nil {
			return err
		}
		if err := isp.StreamOff(tp, pr, fd, v4l2.BufTypeVideoOutput); err != nil {
			return err
		}
		if err := isp.StreamOff(tp, pr, fd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		b, err := isp.QueryBuf(pr, fd, v4l2.BufTypeVideoCapture, 0)
		if err != nil || b.Flags&(v4l2.BufFlagQueued|v4l2.BufFlagDone) != 0 {
			t.Errorf("after STREAMOFF: %+v, %v", b, err)
		}
		if err := start(); err != nil {
			return err
		}
		nv, err := isp.DQBuf(tp, pr, fd, v4l2.BufTypeVideoCapture)
		if err != nil {
			return err
		}
		if nv.Times.ISPDone-nv.Times.ISPStart < isp.ProcessTime(small) {
			t.Errorf("job took %v, less than its processing", nv.Times.ISPDone-nv.Times.ISPStart)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if isp.Jobs() != 1 {
		t.Errorf("%d jobs finished, want 1 (the first abandoned)", isp.Jobs())
	}
}

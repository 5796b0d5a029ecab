package v4l2_test

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/v4l2"
)

// small is a frame small enough for fast tests.
var small = v4l2.Format{Width: 64, Height: 32, PixelFormat: v4l2.PixFmtSRGGB10P}

// allowed are the checker classes a test commits on purpose, by system.
var allowed = map[*dmalab.System]map[string]bool{}

func boot(t *testing.T, preset string, payload bool, sets ...string) *dmalab.System {
	t.Helper()
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(sets); i += 2 {
		if spec, err = platform.Set(spec, sets[i], sets[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	sys, err := dmalab.BootSpec(spec, dmalab.Options{Payload: payload, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Every test uses the API correctly: the checker finds nothing.
		for _, d := range sys.Diagnostics() {
			if !allowed[sys][d.Class] {
				t.Errorf("diagnostic: %v", d)
			}
		}
		delete(allowed, sys)
		sys.Close()
	})
	return sys
}

func camera(t *testing.T, sys *dmalab.System, dev string) *v4l2.Capture {
	t.Helper()
	c, err := sys.V4L2().NewCapture(v4l2.CaptureConfig{Device: dev, Format: small, FrameRate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func read(p *dmalab.Process, va mem.VirtAddr, n uint32) []byte {
	buf := make([]byte, n)
	p.System.Mem.ReadBytes(p.Thread, 0, va, buf)
	return buf
}

// TestErrnos: the ioctls' errors as V4L2 gives them.
func TestErrnos(t *testing.T) {
	sys := boot(t, "jetson-orin", false)
	// The QBUF with fd 99 below is reported: a descriptor the process
	// does not have.
	allowed[sys] = map[string]bool{"dmabuf-fd-not-owned": true}
	c := camera(t, sys, "vi0")
	err := sys.Run("app", func(p *dmalab.Process) error {
		tp, pr := p.Thread, p.Process
		fd, err := c.Open(tp, pr)
		if err != nil {
			return err
		}
		check := func(what string, err, want error) {
			t.Helper()
			if !errors.Is(err, want) {
				t.Errorf("%s: %v, want %v", what, err, want)
			}
		}
		_, err = c.ReqBufs(tp, pr, fd, v4l2.RequestBuffers{Count: 2, Type: v4l2.BufTypeVideoOutput, Memory: v4l2.MemoryMMAP})
		check("REQBUFS of the output type on a camera", err, syscall.EINVAL)
		_, err = c.ReqBufs(tp, pr, fd, v4l2.RequestBuffers{Count: 2, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryUserptr})
		check("REQBUFS USERPTR", err, syscall.EINVAL)
		_, err = c.DQBuf(tp, pr, fd, v4l2.BufTypeVideoCapture)
		check("DQBUF before STREAMON", err, syscall.EINVAL)
		// 128 RAW10 pixels are 160 bytes, 192 at VI's 64-byte stride.
		if f, err := c.SFmt(tp, pr, fd, v4l2.BufTypeVideoCapture, v4l2.Format{Width: 128, Height: 64, PixelFormat: v4l2.PixFmtSRGGB10P}); err != nil || f.SizeImage != 192*64 {
			t.Errorf("S_FMT = %v, %v; want sizeimage %d", f, err, 192*64)
		}
		check("STREAMON without buffers", c.StreamOn(tp, pr, fd, v4l2.BufTypeVideoCapture), syscall.EINVAL)
		if _, err := c.ReqBufs(tp, pr, fd, v4l2.RequestBuffers{Count: 2, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF}); err != nil {
			return err
		}
		_, err = c.QBuf(tp, pr, fd, v4l2.Buffer{Index: 2, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF})
		check("QBUF index 2 of 2", err, syscall.EINVAL)
		_, err = c.QBuf(tp, pr, fd, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP})
		check("QBUF MMAP on a DMABUF queue", err, syscall.EINVAL)
		_, err = c.QBuf(tp, pr, fd, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: 99})
		check("QBUF with a bad dma-buf fd", err, syscall.EBADF)
		_, err = c.QBuf(tp, pr, 77, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF})
		check("QBUF on a bad fd", err, syscall.EBADF)
		heap, _ := sys.DMABuf().Heap("system")
		tiny, err := heap.Allocate(tp, pr, 4096, 0)
		if err != nil {
			return err
		}
		_, err = c.QBuf(tp, pr, fd, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: tiny})
		check("QBUF of a dma-buf smaller than sizeimage", err, syscall.EINVAL)
		big, err := heap.Allocate(tp, pr, 16384, 0)
		if err != nil {
			return err
		}
		if _, err := c.QBuf(tp, pr, fd, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: big}); err != nil {
			return err
		}
		_, err = c.QBuf(tp, pr, fd, v4l2.Buffer{Index: 0, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: big})
		check("QBUF twice", err, syscall.EINVAL)
		fd2, _ := c.Open(tp, pr)
		_, err = c.ReqBufs(tp, pr, fd2, v4l2.RequestBuffers{Count: 2, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP})
		check("REQBUFS from a second file", err, syscall.EBUSY)
		if err := c.StreamOn(tp, pr, fd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		_, err = c.ReqBufs(tp, pr, fd, v4l2.RequestBuffers{Count: 4, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF})
		check("REQBUFS while streaming", err, syscall.EBUSY)
		_, err = c.SFmt(tp, pr, fd, v4l2.BufTypeVideoCapture, small)
		check("S_FMT with buffers", err, syscall.EBUSY)
		b, err := c.DQBuf(tp, pr, fd, v4l2.BufTypeVideoCapture)
		if err != nil || b.Index != 0 || b.Sequence != 0 || b.BytesUsed != 192*64 {
			t.Errorf("DQBUF = %+v, %v; want index 0, sequence 0, %d bytes", b, err, 192*64)
		}
		return c.StreamOff(tp, pr, fd, v4l2.BufTypeVideoCapture)
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := sys.Diagnostics(); len(d) != 1 || d[0].Class != "dmabuf-fd-not-owned" {
		t.Errorf("diagnostics %v, want the bad fd's dmabuf-fd-not-owned only", d)
	}
}

// TestCaptureMMAP: in payload mode frames land in MMAP buffers, read
// through the process's mapping, with the sensor pattern of their
// sequence number, one period apart, written by the end of readout.
func TestCaptureMMAP(t *testing.T) {
	sys := boot(t, "jetson-orin", true)
	c := camera(t, sys, "vi0")
	const n = 4
	var frames []v4l2.Buffer
	ops := map[v4l2.Op]int{}
	sys.HookAll(func(e sim.Event) {
		if v, ok := e.(*v4l2.Event); ok && v.Component == "v4l2" {
			ops[v.Op]++
		}
	})
	err := sys.Run("app", func(p *dmalab.Process) error {
		tp, pr := p.Thread, p.Process
		fd, _ := c.Open(tp, pr)
		if _, err := c.ReqBufs(tp, pr, fd, v4l2.RequestBuffers{Count: n, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
			return err
		}
		vas := make([]mem.VirtAddr, n)
		for i := range n {
			qb, err := c.QueryBuf(pr, fd, v4l2.BufTypeVideoCapture, uint32(i))
			if err != nil {
				return err
			}
			if vas[i], err = c.Mmap(tp, pr, fd, v4l2.BufTypeVideoCapture, qb.Offset); err != nil {
				return err
			}
			if _, err := c.QBuf(tp, pr, fd, v4l2.Buffer{Index: uint32(i), Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
				return err
			}
		}
		if err := c.StreamOn(tp, pr, fd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		f, _ := c.GFmt(pr, fd, v4l2.BufTypeVideoCapture)
		for range 6 {
			b, err := c.DQBuf(tp, pr, fd, v4l2.BufTypeVideoCapture)
			if err != nil {
				return err
			}
			if got := read(p, vas[b.Index], f.SizeImage); !bytes.Equal(got, v4l2.Pattern(f, b.Sequence)) {
				t.Errorf("frame %d in buffer %d: not the sensor's pattern", b.Sequence, b.Index)
			}
			frames = append(frames, b)
			if _, err := c.QBuf(tp, pr, fd, v4l2.Buffer{Index: b.Index, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryMMAP}); err != nil {
				return err
			}
		}
		return c.StreamOff(tp, pr, fd, v4l2.BufTypeVideoCapture)
	})
	if err != nil {
		t.Fatal(err)
	}
	period := sim.FromSeconds(1.0 / 1000)
	for i, b := range frames {
		tm := b.Times
		if b.Sequence != uint32(i) || b.Timestamp != tm.ReadoutStart || tm.ReadoutStart != sim.Time(i)*period ||
			tm.ReadoutEnd != tm.ReadoutStart+period || tm.Written <= tm.ReadoutEnd-period/2 || tm.Written > tm.ReadoutEnd+period/10 {
			t.Errorf("frame %d: sequence %d, times %+v (period %v)", i, b.Sequence, tm, period)
		}
	}
	if c.Dropped() != 0 {
		t.Errorf("%d frames dropped", c.Dropped())
	}
	if ops[v4l2.OpFrame] < 6 || ops[v4l2.OpDQBuf] != 6 || ops[v4l2.OpQBuf] != 10 || ops[v4l2.OpStreamOn] != 1 {
		t.Errorf("HookAll heard %v", ops)
	}
}

// TestCaptureDMABUFAndDrops: frames land in dma-bufs from the system
// heap; an application that holds its two buffers for ten periods
// makes the camera drop frames, seen as a gap in the sequence.
func TestCaptureDMABUFAndDrops(t *testing.T) {
	sys := boot(t, "h200-pcie", true)
	c := camera(t, sys, "cap0")
	var seqs []uint32
	err := sys.Run("app", func(p *dmalab.Process) error {
		tp, pr := p.Thread, p.Process
		fd, _ := c.Open(tp, pr)
		if _, err := c.ReqBufs(tp, pr, fd, v4l2.RequestBuffers{Count: 2, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF}); err != nil {
			return err
		}
		f, _ := c.GFmt(pr, fd, v4l2.BufTypeVideoCapture)
		heap, _ := sys.DMABuf().Heap("system")
		fds := make([]int, 2)
		vas := make([]mem.VirtAddr, 2)
		for i := range fds {
			var err error
			if fds[i], err = heap.Allocate(tp, pr, uint64(f.SizeImage), 0); err != nil {
				return err
			}
			b, _ := sys.DMABuf().Get(tp, pr, fds[i])
			if vas[i], err = b.Mmap(tp, pr); err != nil {
				return err
			}
			_ = b.Put(tp)
			if _, err := c.QBuf(tp, pr, fd, v4l2.Buffer{Index: uint32(i), Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: fds[i]}); err != nil {
				return err
			}
		}
		if err := c.StreamOn(tp, pr, fd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		for i := range 4 {
			b, err := c.DQBuf(tp, pr, fd, v4l2.BufTypeVideoCapture)
			if err != nil {
				return err
			}
			// The CPU's access to an imported buffer is bracketed by
			// DMA_BUF_IOCTL_SYNC, as the dma-buf rules ask (the checker
			// reports a read without it).
			db, err := sys.DMABuf().Get(tp, pr, b.FD)
			if err != nil {
				return err
			}
			if err := db.Sync(tp, dmabuf.SyncStart|dmabuf.SyncRead); err != nil {
				return err
			}
			if b.FD != fds[b.Index] || !bytes.Equal(read(p, vas[b.Index], f.SizeImage), v4l2.Pattern(f, b.Sequence)) {
				t.Errorf("frame %d: fd %d, bytes not the pattern", b.Sequence, b.FD)
			}
			if err := db.Sync(tp, dmabuf.SyncEnd|dmabuf.SyncRead); err != nil {
				return err
			}
			_ = db.Put(tp)
			seqs = append(seqs, b.Sequence)
			if i == 1 {
				tp.Sleep(sim.FromSeconds(10.0 / 1000)) // slow application
			}
			if _, err := c.QBuf(tp, pr, fd, v4l2.Buffer{Index: b.Index, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: fds[b.Index]}); err != nil {
				return err
			}
		}
		return c.StreamOff(tp, pr, fd, v4l2.BufTypeVideoCapture)
	})
	if err != nil {
		t.Fatal(err)
	}
	// Frame 2 waited in the second buffer during the sleep; the frames
	// of the ten periods after it found no buffer.
	if len(seqs) != 4 || seqs[0] != 0 || seqs[1] != 1 || seqs[2] != 2 || seqs[3] < 11 || c.Dropped() != int(seqs[3])-3 {
		t.Errorf("sequences %v, %d dropped; want a gap of about 10 after the second frame", seqs, c.Dropped())
	}
}

// TestCheckerSeesCameraDMA: a program that reads a captured dma-buf
// without DMA_BUF_IOCTL_SYNC is reported, since the camera's writes go
// through the DMA layer like any device's.
func TestCheckerSeesCameraDMA(t *testing.T) {
	sys, err := dmalab.Boot("h200-pcie", dmalab.Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	c := camera(t, sys, "cap0")
	err = sys.Run("app", func(p *dmalab.Process) error {
		tp, pr := p.Thread, p.Process
		fd, _ := c.Open(tp, pr)
		if _, err := c.ReqBufs(tp, pr, fd, v4l2.RequestBuffers{Count: 1, Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF}); err != nil {
			return err
		}
		heap, _ := sys.DMABuf().Heap("system")
		bfd, err := heap.Allocate(tp, pr, 8192, 0)
		if err != nil {
			return err
		}
		db, _ := sys.DMABuf().Get(tp, pr, bfd)
		va, err := db.Mmap(tp, pr)
		if err != nil {
			return err
		}
		_ = db.Put(tp)
		if _, err := c.QBuf(tp, pr, fd, v4l2.Buffer{Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: bfd}); err != nil {
			return err
		}
		if err := c.StreamOn(tp, pr, fd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		if _, err := c.DQBuf(tp, pr, fd, v4l2.BufTypeVideoCapture); err != nil {
			return err
		}
		read(p, va, 64) // no DMA_BUF_IOCTL_SYNC first
		return c.StreamOff(tp, pr, fd, v4l2.BufTypeVideoCapture)
	})
	if err != nil {
		t.Fatal(err)
	}
	d := sys.Diagnostics()
	if len(d) == 0 || d[0].Class != "cpu-access-device-owned" {
		t.Errorf("diagnostics %v, want cpu-access-device-owned", d)
	}
}

// TestTiming: a frame's period is the frame rate's unless the input link
// cannot carry a frame in it; then the link sets the pace.
func TestTiming(t *testing.T) {
	sys := boot(t, "h200-pcie", false)
	c, err := sys.V4L2().NewCapture(v4l2.CaptureConfig{Device: "cap0", FrameRate: 60})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    v4l2.Format
		want sim.Time
	}{
		// 1080p RAW10 packed: 2.6 MB at 48 Gb/s is 0.44 ms, under 1/60 s.
		{v4l2.Format{Width: 1920, Height: 1080, PixelFormat: v4l2.PixFmtSRGGB10P}, sim.FromSeconds(1.0 / 60)},
		// 8K RAW12 in 16 bits: 134 MB at 6 GB/s is 22.4 ms.
		{v4l2.Format{Width: 8192, Height: 8192, PixelFormat: v4l2.PixFmtSRGGB12}, sim.FromSeconds(8192 * 16384 / 6e9)},
	} {
		f, _ := c.TryFmt(v4l2.BufTypeVideoCapture, tc.f)
		if period, readout := c.Timing(f); period != tc.want || readout != period {
			t.Errorf("%v: period %v, readout %v; want %v", f, period, readout, tc.want)
		}
	}
	if _, err := sys.V4L2().NewCapture(v4l2.CaptureConfig{Device: "gpu0"}); !errors.Is(err, v4l2.ErrNoDevice) {
		t.Errorf("a GPU as a camera: %v", err)
	}
	if _, err := sys.V4L2().NewISP(v4l2.ISPConfig{Device: "cap0"}); !errors.Is(err, v4l2.ErrNoDevice) {
		t.Errorf("a camera as an ISP: %v", err)
	}
}

package v4l2

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// ISPConfig describes an ISP: the platform device (kind isp).
type ISPConfig struct {
	Device string
	// Format is the initial OUTPUT (RAW input) format; zero fields take
	// 1920x1080 RAW10 packed. The CAPTURE side is NV12 of its size.
	Format Format
	// Limits as for a capture device; zero is Tegra VI's.
	Limits Limits
}

// ISP is a memory-to-memory image signal processor (a v4l2-mem2mem
// driver): the application queues RAW frames on its OUTPUT queue and
// empty buffers on its CAPTURE queue; each job takes one of each, waits
// for the input's fences (the in-fence given at QBUF, and, for a
// dma-buf, the writers in its reservation object) and for the output's
// readers and writers, reads the RAW frame by DMA, processes it for
// pixels / pixel_rate, and writes NV12 by DMA (Process's function of
// the input, in payload mode). Read, processing and write run one after
// the other: a real ISP streams lines through and overlaps them, so the
// model's job time is an upper bound. The output's fence (an out-fence
// QBUF handed out, or the driver's own) is in its dma-buf's reservation
// object as a write fence from the job's start (once its waits are
// over) and signals when the last byte has landed; the input's as a
// read fence.
type ISP struct {
	*Device
	cfg       ISPConfig
	pixelRate float64
	busy      bool
	jobs      uint32
	// gen counts STREAMOFFs: a job of an earlier stream neither
	// finishes buffers nor frees the ISP for the next.
	gen int
}

// NewISP registers the ISP cfg.Device as a video node.
func (l *Layer) NewISP(cfg ISPConfig) (*ISP, error) {
	if cfg.Limits == (Limits{}) {
		cfg.Limits = Limits{MinWidth: 32, MinHeight: 32, MaxWidth: 8192, MaxHeight: 8192, StrideAlign: 64}
	}
	d, err := l.newDevice(cfg.Device, platform.DeviceISP, cfg.Limits)
	if err != nil {
		return nil, err
	}
	f := cfg.Format
	if f.Width == 0 || f.Height == 0 {
		f.Width, f.Height = 1920, 1080
	}
	if f.PixelFormat == 0 {
		f.PixelFormat = PixFmtSRGGB10P
	}
	s := &ISP{Device: d, cfg: cfg, pixelRate: d.hw.Spec.PixelRate.V}
	d.addQueue(BufTypeVideoOutput, f, []PixFmt{PixFmtSRGGB10P, PixFmtSRGGB12P, PixFmtSRGGB10, PixFmtSRGGB12})
	out := d.queues[BufTypeVideoOutput].format
	d.addQueue(BufTypeVideoCapture, Format{Width: out.Width, Height: out.Height, PixelFormat: PixFmtNV12}, []PixFmt{PixFmtNV12})
	d.onFormat = func(q *queue) {
		in, cap := d.queues[BufTypeVideoOutput], d.queues[BufTypeVideoCapture]
		cap.format = Adjust(Format{Width: in.format.Width, Height: in.format.Height, PixelFormat: PixFmtNV12, BytesPerLine: cap.format.BytesPerLine}, d.allowed[BufTypeVideoCapture], d.lim)
	}
	d.onStart = func(*queue) { s.run() }
	d.onStop = func(*queue) { s.gen, s.busy = s.gen+1, false }
	d.onQueued = func(*queue) { s.run() }
	return s, nil
}

// ProcessTime is how long the ISP computes on a frame of f.
func (s *ISP) ProcessTime(f Format) sim.Time {
	return sim.FromSeconds(float64(f.Pixels()) / s.pixelRate)
}

// Jobs is the number of jobs finished.
func (s *ISP) Jobs() uint32 { return s.jobs }

// run starts a job when the ISP is idle, both queues stream and each
// has a buffer queued (v4l2_m2m_try_schedule).
func (s *ISP) run() {
	in, out := s.queues[BufTypeVideoOutput], s.queues[BufTypeVideoCapture]
	if s.busy || !in.streaming || !out.streaming || len(in.ready) == 0 || len(out.ready) == 0 {
		return
	}
	src, dst := in.ready[0], out.ready[0]
	in.ready, out.ready = in.ready[1:], out.ready[1:]
	s.busy = true
	// What the job waits for: the input's in-fence and its writers; the
	// output's readers and writers (implicit sync).
	var waits []*dmabuf.Fence
	if src.inFence != nil {
		waits = append(waits, src.inFence)
	}
	if src.dbuf != nil {
		waits = append(waits, src.dbuf.Resv().Fences(dmabuf.UsageWrite)...)
	}
	if dst.inFence != nil {
		waits = append(waits, dst.inFence)
	}
	if dst.dbuf != nil {
		waits = append(waits, dst.dbuf.Resv().Fences(dmabuf.UsageRead)...)
	}
	s.begin(src)
	s.begin(dst)
	pending, gen := 1, s.gen
	ready := func(*dmabuf.Fence) {
		if pending--; pending == 0 && gen == s.gen {
			s.job(src, dst)
		}
	}
	for _, f := range waits {
		pending++
		if _, err := f.AddCallback(ready); err != nil {
			pending-- // already signalled
		}
	}
	ready(nil)
}

// job runs one frame through: read, process, write.
func (s *ISP) job(src, dst *vbuf) {
	eng := s.l.env.Machine.Engine
	in, out := src.q.format, dst.q.format
	seq, gen := s.jobs, s.gen
	times := src.times // the camera's timeline, when the input came from one
	times.ISPStart = eng.Now()
	s.publish(src)
	s.publish(dst)
	rd := &dma.Transfer{Name: fmt.Sprintf("%s.read%d", s.name, seq), Route: &s.toDev, Bytes: int64(in.SizeImage),
		Read: src.spans(0, uint64(in.SizeImage)), Opts: []fabric.Option{fabric.Tag(s)}}
	_, err := s.dev.StartTransfer(rd, func(ri *dma.TransferInfo) {
		if gen != s.gen {
			return // stopped: the job is abandoned
		}
		times.ISPRead = eng.Now()
		var nv []byte
		if s.l.env.Mem.Payload() && ri.Data != nil {
			nv, _ = Process(in, ri.Data, out)
		}
		eng.After(s.ProcessTime(in), func() {
			wr := &dma.Transfer{Name: fmt.Sprintf("%s.write%d", s.name, seq), Route: &s.fromDev, Bytes: int64(out.SizeImage),
				Write: dst.spans(0, uint64(out.SizeImage)), Data: nv, Opts: []fabric.Option{fabric.Tag(s)}}
			if gen != s.gen {
				return
			}
			if _, err := s.dev.StartTransfer(wr, func(*dma.TransferInfo) {
				if gen != s.gen {
					return
				}
				times.ISPDone = eng.Now()
				s.jobs++
				s.busy = false
				s.l.emit(nil, Event{Header: sim.Header{Cause: sim.CauseTransfer}, Op: OpJob, Device: s.name, Node: s.node, Type: BufTypeVideoCapture,
					Index: dst.index, Sequence: src.seq, Times: times, Bytes: uint64(out.SizeImage), Addr: dst.addr()})
				s.finish(src, src.seq, in.SizeImage, src.ts, times)
				s.finish(dst, src.seq, out.SizeImage, src.ts, times)
				s.run()
			}); err != nil {
				panic(fmt.Sprintf("v4l2: %s: %v", s.name, err))
			}
		})
	})
	if err != nil {
		panic(fmt.Sprintf("v4l2: %s: %v", s.name, err))
	}
}

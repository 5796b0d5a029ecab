package v4l2

import (
	"fmt"
	"math"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// CaptureConfig describes a camera: the platform device (kind camera)
// and the sensor behind it.
type CaptureConfig struct {
	// Device names the platform's camera device (vi0, cap0).
	Device string
	// Format is the initial format (S_FMT may change it before
	// REQBUFS); zero fields take 1920x1080 RAW10 packed.
	Format Format
	// FrameRate is the sensor's frames per second; 0 is 30.
	FrameRate float64
	// ChunkLines is how many lines the device writes in one DMA burst;
	// 0 is 16 (a VI's line buffer is a few lines; the model writes in
	// chunks rather than lines to keep the event count down).
	ChunkLines int
	// Limits are the hardware's size limits and stride alignment; zero
	// is 32x32 to 8192x8192 with 64-byte strides (Tegra VI's).
	Limits Limits
}

// Capture is a capture device (a CSI receiver and VI, a PCIe capture
// card) with one V4L2 CAPTURE queue: while streaming, the sensor reads a
// frame out every period, and the device writes it into the oldest
// queued buffer by DMA, ChunkLines lines at a time, each chunk as soon
// as its lines have arrived; with no buffer queued the frame is dropped
// (counted, and a gap in the sequence numbers).
type Capture struct {
	*Device
	cfg CaptureConfig
	// period is the time between frame starts; readout a frame's
	// readout time.
	period, readout sim.Time
	seq             uint32
	dropped, frames int
	// gen counts STREAMON/STREAMOFF: a frame of an old stream stops.
	gen int
}

// NewCapture registers the camera cfg.Device as a video node.
func (l *Layer) NewCapture(cfg CaptureConfig) (*Capture, error) {
	if cfg.Limits == (Limits{}) {
		cfg.Limits = Limits{MinWidth: 32, MinHeight: 32, MaxWidth: 8192, MaxHeight: 8192, StrideAlign: 64}
	}
	d, err := l.newDevice(cfg.Device, platform.DeviceCamera, cfg.Limits)
	if err != nil {
		return nil, err
	}
	if cfg.FrameRate == 0 {
		cfg.FrameRate = 30
	}
	if cfg.FrameRate < 0 || math.IsNaN(cfg.FrameRate) || math.IsInf(cfg.FrameRate, 0) {
		return nil, fmt.Errorf("v4l2 %s: frame rate %v", cfg.Device, cfg.FrameRate)
	}
	if cfg.ChunkLines <= 0 {
		cfg.ChunkLines = 16
	}
	f := cfg.Format
	if f.Width == 0 || f.Height == 0 {
		f.Width, f.Height = 1920, 1080
	}
	if f.PixelFormat == 0 {
		f.PixelFormat = PixFmtSRGGB10P
	}
	c := &Capture{Device: d, cfg: cfg}
	d.addQueue(BufTypeVideoCapture, f, []PixFmt{PixFmtSRGGB10P, PixFmtSRGGB12P, PixFmtSRGGB10, PixFmtSRGGB12, PixFmtNV12})
	d.onStart = c.start
	d.onStop = func(*queue) { c.gen++ }
	return c, nil
}

// Dropped is the number of frames that found no buffer; Frames the
// number written.
func (c *Capture) Dropped() int { return c.dropped }
func (c *Capture) Frames() int  { return c.frames }

// Timing is the frame period and readout time of format f: the period
// is 1/FrameRate, the readout the whole period (a rolling readout,
// vertical blanking not modelled), unless the input link (line_rate)
// cannot carry a frame in a period: then both are sizeimage/line_rate
// and the frame rate falls to what the link allows.
func (c *Capture) Timing(f Format) (period, readout sim.Time) {
	period = sim.FromSeconds(1 / c.cfg.FrameRate)
	if r := float64(c.hw.Spec.LineRate.V); r > 0 {
		if link := sim.FromSeconds(float64(f.SizeImage) / r); link > period {
			period = link
		}
	}
	return period, period
}

// start is start_streaming: sequence numbers begin again at 0.
func (c *Capture) start(q *queue) {
	c.gen++
	c.seq = 0
	c.period, c.readout = c.Timing(q.format)
	gen := c.gen
	eng := c.l.env.Machine.Engine
	eng.After(0, func() { c.frame(gen, q) })
}

// frame is one frame's readout beginning now.
func (c *Capture) frame(gen int, q *queue) {
	if gen != c.gen || !q.streaming {
		return
	}
	eng := c.l.env.Machine.Engine
	start := eng.Now()
	seq := c.seq
	c.seq++
	eng.After(c.period, func() { c.frame(gen, q) })
	if len(q.ready) == 0 {
		c.dropped++
		c.l.emit(nil, Event{Header: sim.Header{Cause: sim.CauseLifecycle}, Op: OpDrop, Device: c.name, Node: c.node, Type: q.typ, Sequence: seq})
		return
	}
	b := q.ready[0]
	q.ready = q.ready[1:]
	c.begin(b)
	c.publish(b)
	f := q.format
	var data []byte
	if c.l.env.Mem.Payload() {
		data = Pattern(f, seq)
	}
	times := FrameTimes{ReadoutStart: start, ReadoutEnd: start + c.readout}
	lines := uint32(c.cfg.ChunkLines)
	chunks := (f.Height + lines - 1) / lines
	left := chunks
	// NV12's chroma plane goes with the last chunk.
	for i := range chunks {
		first, last := i*lines, min((i+1)*lines, f.Height)
		off := uint64(first) * uint64(f.BytesPerLine)
		end := uint64(last) * uint64(f.BytesPerLine)
		if last == f.Height {
			end = uint64(f.SizeImage)
		}
		ready := start + sim.Time(float64(c.readout)*float64(last)/float64(f.Height))
		eng.At(ready, func() {
			if gen != c.gen || b.state != stateActive {
				return
			}
			t := &dma.Transfer{Name: fmt.Sprintf("%s.frame%d", c.name, seq), Route: &c.fromDev, Bytes: int64(end - off),
				Write: b.spans(off, end-off), Opts: []fabric.Option{fabric.Tag(c)}}
			if data != nil {
				t.Data = data[off:end]
			}
			if _, err := c.dev.StartTransfer(t, func(*dma.TransferInfo) {
				if left--; left > 0 || gen != c.gen {
					return
				}
				times.Written = eng.Now()
				c.frames++
				c.l.emit(nil, Event{Header: sim.Header{Cause: sim.CauseTransfer}, Op: OpFrame, Device: c.name, Node: c.node, Type: q.typ,
					Index: b.index, Sequence: seq, Times: times, Bytes: uint64(f.SizeImage), Addr: b.addr()})
				c.finish(b, seq, f.SizeImage, start, times)
			}); err != nil {
				panic(fmt.Sprintf("v4l2: %s: %v", c.name, err)) // a malformed transfer is a bug of this package
			}
		})
	}
}

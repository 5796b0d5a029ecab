package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/drm"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/v4l2"
)

func init() {
	register(&Scenario{
		Name:     "camera-pipeline",
		Summary:  "camera → ISP → GPU inference → display, zero-copy (DMA-BUF and fences) against copies, on Jetson and on a discrete GPU side by side",
		Platform: "jetson-orin",
		Doc: `Frames from a camera go through an image signal processor to a GPU kernel
(inference reading the frame) and to the display, as a production vision
pipeline does. What changes between modes is how the GPU gets the frame:

  zero-copy  the ISP's output is a DMA-BUF; CUDA imports it and the kernel
             reads it in place; fences end to end (the ISP's out-fence,
             then a fence the GPU's stream signals, which the display's
             flip waits on): no copy, no CPU wait on the frame's path;
  copy       the application maps the ISP's buffer (DMA_BUF_IOCTL_SYNC
             around the access), memcpy's the frame into pinned memory
             and cudaMemcpy's it into device memory, then synchronizes;
  pinned     no CPU copy: the GPU's copy engine copies the frame from the
             imported buffer into device memory;
  mapped     the CPU copies the frame into pinned, mapped host memory and
             the kernel reads it there (zero-copy memory).

Camera → ISP → display is hardware to hardware through DMA-BUFs in every
mode (V4L2 DMABUF queues, a DRM framebuffer of the ISP's buffer). On a
discrete-GPU platform (h200-pcie: a PCIe capture card, no ISP, no display
controller) the GPU debayers (a kernel), latency ends when inference is
done, and zero-copy and pinned are reported unsupported: CUDA imports no
dma-buf on a discrete GPU (cuImportExternalMemory refuses it), and pinned
capture needs V4L2 USERPTR into CUDA-pinned memory, not modelled yet.

Per platform and mode (one row): frames shown, sustained fps, frames
dropped (for want of a queued buffer), glass-to-glass latency p50/p99
(sensor readout start to on glass: the start of the refresh the frame was
latched for; to inference done where there is no display), DRAM and PCIe
bytes per frame (the fabric's counters over the run), CPU time per frame
spent copying, and the mean time per stage (capture, isp, copy,
inference, display). The first lines of the output say what zero-copy
saves on each platform and what to try next.

By default the scenario runs its own platform (jetson-orin) and h200-pcie
side by side; "platforms" names others (presets or files). Inference is a
kernel that reads the frame and computes for "infer" on the whole GPU
(assumed, the same on every GPU: a small detector).`,
		Params: []Param{
			{Name: "resolution", Kind: dmalab.ParamEnum, Values: []string{"720p", "1080p", "4k"}, Default: "1080p", Help: "frame size"},
			{Name: "format", Kind: dmalab.ParamEnum, Values: []string{"raw10", "raw12"}, Default: "raw10", Help: "the sensor's Bayer format (packed)"},
			{Name: "fps", Kind: dmalab.ParamInt, Min: 1, Max: 240, Default: "30", Help: "the sensor's frame rate"},
			{Name: "frames", Kind: dmalab.ParamInt, Min: 2, Max: maxCameraFrames, Default: "60", Help: "frames to capture per platform and mode"},
			{Name: "modes", Kind: dmalab.ParamList, Values: []string{"zero-copy", "copy", "pinned", "mapped"}, Item: "mode", Default: "zero-copy,copy,pinned,mapped", Help: "how the GPU gets the frame, in order"},
			{Name: "platforms", Default: "", Help: "comma-separated platforms to run side by side (default: the run's platform, and h200-pcie beside jetson-orin)"},
			{Name: "buffers", Kind: dmalab.ParamInt, Min: 2, Max: 32, Default: "4", Help: "buffers per V4L2 queue"},
			{Name: "infer", Kind: dmalab.ParamDuration, Default: "2ms", Help: "the inference kernel's compute time per frame (assumed)"},
			{Name: "refresh", Kind: dmalab.ParamInt, Min: 24, Max: 240, Default: "60", Help: "the display's refresh rate, Hz"},
		},
		Run: runCamera,
	})
}

// maxCameraFrames bounds a run (a few hundred events per frame).
const maxCameraFrames = 100_000

// cameraEventsPerFrame bounds a pipeline's events per frame: ten times
// what a 4K frame takes on jetson-orin.
const cameraEventsPerFrame = 50_000

// cameraDiscrete is the platform run beside jetson-orin by default.
const cameraDiscrete = "h200-pcie"

// cameraCfg is a run's shape.
type cameraCfg struct {
	w, h          uint32
	pix           v4l2.PixFmt
	fps, refresh  int
	frames, nbuf  int
	infer         sim.Time
	opt           dmalab.Options
	traceInto     *report.Trace
	spec          *platform.Spec
	camera, isp   string
	display, mode string
}

func runCamera(c *Context) error {
	cfg := cameraCfg{fps: c.Int("fps"), frames: c.Int("frames"), nbuf: c.Int("buffers"), infer: c.Duration("infer"), refresh: c.Int("refresh")}
	switch c.Value("resolution") {
	case "720p":
		cfg.w, cfg.h = 1280, 720
	case "4k":
		cfg.w, cfg.h = 3840, 2160
	default:
		cfg.w, cfg.h = 1920, 1080
	}
	cfg.pix = v4l2.PixFmtSRGGB10P
	if c.Value("format") == "raw12" {
		cfg.pix = v4l2.PixFmtSRGGB12P
	}
	cfg.opt = c.Options()
	cfg.opt.Progress, cfg.opt.Trace = nil, false
	cfg.traceInto = c.Trace

	specs := []*platform.Spec{c.Machine.Spec}
	if names := c.Value("platforms"); names != "" {
		specs = specs[:0]
		for _, n := range strings.Split(names, ",") {
			n = strings.TrimSpace(n)
			if n == c.Machine.Spec.Name {
				// The run's own platform, with its --set changes.
				specs = append(specs, c.Machine.Spec)
				continue
			}
			s, err := platform.Resolve(n)
			if err != nil {
				return usagef("--set platforms=%s: %v", names, err)
			}
			specs = append(specs, s)
		}
	} else if c.Machine.Spec.Name == c.Scenario.Platform {
		s, err := platform.Resolve(cameraDiscrete)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	modes := c.List("modes")
	type result struct {
		plat string
		rows []report.Row
	}
	var results []result
	for _, spec := range specs {
		cfg.spec = spec
		cfg.camera, cfg.isp, cfg.display = "", "", ""
		for _, d := range spec.Devices {
			switch {
			case d.Kind == platform.DeviceCamera && cfg.camera == "":
				cfg.camera = d.Name
			case d.Kind == platform.DeviceISP && cfg.isp == "":
				cfg.isp = d.Name
			case d.Kind == platform.DeviceDisplay && cfg.display == "":
				cfg.display = d.Name
			}
		}
		if cfg.camera == "" {
			return usagef("platform %s has no camera (a device of kind camera): camera-pipeline needs one", spec.Name)
		}
		if len(spec.GPUs) == 0 {
			return usagef("platform %s has no GPU: camera-pipeline runs inference on one", spec.Name)
		}
		res := result{plat: spec.Name}
		for _, mode := range modes {
			cfg.mode = mode
			row, err := runCameraMode(c, cfg)
			if err != nil {
				return err
			}
			res.rows = append(res.rows, row)
		}
		results = append(results, res)
	}
	for _, r := range results {
		c.Result.Results = append(c.Result.Results, r.rows...)
	}
	for _, r := range results {
		c.Result.Summary = append(c.Result.Summary, cameraLine(r.plat, r.rows))
	}
	c.Result.Summary = append(c.Result.Summary, cameraTry)
	return nil
}

// cameraTry is the summary's last line: what to try next.
const cameraTry = "Try: --set resolution=4k --set fps=60 (more bytes per second: copies cost more, the CMA heap runs out without the SMMU); --set platform.iommu.mode=strict (the SMMU/IOMMU in the path); dmalab check camera-pipeline (fences, syncs, fds)."

// pipeLatency is a row's mean time from readout start to the frame
// being ready for the display (or inference done): the stages before
// the display's vblank quantization.
func pipeLatency(r report.Row) float64 {
	var t float64
	for _, st := range r.Stages {
		if st.Name != "display" {
			t += st.Seconds
		}
	}
	return t
}

func cameraLine(plat string, rows []report.Row) string {
	by := map[string]report.Row{}
	var failed []string
	for _, r := range rows {
		by[r.Path] = r
		if r.Ops == 0 && strings.HasPrefix(r.Note, "failed: ") {
			failed = append(failed, r.Path)
		}
	}
	if len(failed) == len(rows) && len(rows) > 0 {
		return fmt.Sprintf("%s: every mode failed (%s)", plat, strings.TrimPrefix(rows[0].Note, "failed: "))
	}
	cp, hasCopy := by["copy"]
	best, bestName := report.Row{}, ""
	if z, ok := by["zero-copy"]; ok && z.Ops > 0 {
		best, bestName = z, "zero-copy"
	} else {
		for _, m := range []string{"pinned", "mapped"} {
			if r, ok := by[m]; ok && r.Ops > 0 && (bestName == "" || pipeLatency(r) < pipeLatency(best)) {
				best, bestName = r, m
			}
		}
	}
	if !hasCopy || cp.Ops == 0 || bestName == "" {
		var shown []string
		for _, r := range rows {
			if r.Ops > 0 {
				shown = append(shown, fmt.Sprintf("%s ready %s after readout starts", r.Path, report.FormatSeconds(pipeLatency(r))))
			}
		}
		return fmt.Sprintf("%s: %s", plat, strings.Join(shown, "; "))
	}
	if z, ok := by["zero-copy"]; ok && z.Ops == 0 && best.CPUSeconds >= cp.CPUSeconds {
		return fmt.Sprintf("%s: no zero-copy path (CUDA imports no dma-buf on a discrete GPU): every mode here copies the frame with the CPU (%s, %s of DRAM traffic per frame); %s, which skips cudaMemcpy, has a frame ready %s after its readout starts against copy's %s",
			plat, report.FormatSeconds(cp.CPUSeconds), report.FormatSize(cp.DRAMBytes), bestName, report.FormatSeconds(pipeLatency(best)), report.FormatSeconds(pipeLatency(cp)))
	}
	line := fmt.Sprintf("%s: %s against copy saves %s of CPU copying and %s of DRAM traffic per frame; a frame is ready %s after its readout starts against %s",
		plat, bestName, report.FormatSeconds(cp.CPUSeconds-best.CPUSeconds), report.FormatSize(cp.DRAMBytes-best.DRAMBytes),
		report.FormatSeconds(pipeLatency(best)), report.FormatSeconds(pipeLatency(cp)))
	if best.Direction == "glass-to-glass" {
		line += fmt.Sprintf(" (on glass p50 %s against %s: the display's vblank quantizes both)", report.FormatSeconds(best.P50Seconds), report.FormatSeconds(cp.P50Seconds))
	}
	if cp.Dropped != best.Dropped {
		line += fmt.Sprintf("; dropped frames %d against %d", best.Dropped, cp.Dropped)
	}
	if z, ok := by["zero-copy"]; ok && z.Ops == 0 && bestName != "zero-copy" {
		line += "; zero-copy is unsupported here"
	}
	return line
}

// camFrame is one frame on its way through the pipeline.
type camFrame struct {
	seq    uint32
	raw    int // the camera buffer
	out    int // the ISP's (or, without an ISP, the camera's) buffer the GPU reads
	times  v4l2.FrameTimes
	copyT  sim.Time // copy stage
	gpuT   sim.Time // inference stage
	ready  sim.Time // when the display could take it
	fence  *dmabuf.Fence
	copied sim.Time // CPU copy time
}

// fifo is a queue between two threads of the pipeline.
type fifo struct {
	items []*camFrame
	cond  *sim.Cond
	done  bool
}

func newFIFO(name string) *fifo { return &fifo{cond: sim.NewCond(name)} }

func (q *fifo) put(f *camFrame) { q.items = append(q.items, f); q.cond.Broadcast() }

func (q *fifo) close() { q.done = true; q.cond.Broadcast() }

// get waits for a frame; nil when the queue is closed and empty.
func (q *fifo) get(t *sim.Proc) *camFrame {
	t.WaitUntil(q.cond, func() bool { return len(q.items) > 0 || q.done })
	if len(q.items) == 0 {
		return nil
	}
	f := q.items[0]
	q.items = q.items[1:]
	return f
}

// camPipe is one platform and mode's pipeline.
type camPipe struct {
	cfg   cameraCfg
	sys   *dmalab.System
	p     *dmalab.Process
	proc  *kernel.Process
	node  int
	cam   *v4l2.Capture
	isp   *v4l2.ISP
	disp  *drm.Device
	dfile *drm.File
	ctx   *cuda.Context
	heap  *dmabuf.Heap

	camFD, ispFD int
	rawFD        []int
	rawBuf       []*dmabuf.Buffer
	outFD        []int
	outBuf       []*dmabuf.Buffer
	fbs          []uint32
	outFmt       v4l2.Format
	rawFmt       v4l2.Format
	// per-mode GPU-side memory
	imported []mem.GPUAddr // imported ISP/camera buffers (zero-copy, pinned)
	dev      mem.GPUAddr   // device copy of the frame
	dev2     mem.GPUAddr   // the debayered frame (discrete)
	pinned   mem.VirtAddr  // pinned host staging (copy, mapped)
	mappedGA mem.GPUAddr   // its device pointer (mapped)
	sem      *cuda.ExternalSemaphore
	cpuVA    []mem.VirtAddr // the ISP output mapped for the CPU (copy, mapped)

	lat     []sim.Time
	shown   int
	first   sim.Time
	last    sim.Time
	stages  [5]sim.Time
	cpuTime sim.Time
	err     error
}

func (cp *camPipe) fail(err error) {
	if cp.err == nil && err != nil {
		cp.err = err
	}
}

// runCameraMode boots the platform and runs one mode's pipeline.
func runCameraMode(c *Context, cfg cameraCfg) (report.Row, error) {
	spec := cfg.spec
	row := report.Row{Name: spec.Name + " " + cfg.mode, Platform: spec.Name, Path: cfg.mode, Direction: "frame"}
	hasISP := cfg.isp != ""
	if hasISP {
		row.Direction = "glass-to-glass"
	} else {
		row.Direction = "to-inference"
	}
	opt := cfg.opt
	// Each platform and mode is a system of its own, drawn into the
	// run's trace beside the others.
	opt.TraceInto, opt.TraceName = cfg.traceInto, spec.Name+" "+cfg.mode
	if opt.EventBudget == 0 {
		// A frame costs a few thousand events (16-line chunks, scanouts,
		// queue calls); a pipeline that needs far more is starved, not
		// busy, and is stopped in well under a second, not after the
		// default budget of every run.
		opt.EventBudget = uint64(cfg.frames)*cameraEventsPerFrame + 1<<20
	}
	sys, err := dmalab.BootSpec(spec, opt)
	if err != nil {
		return row, err
	}
	defer sys.Close()
	if _, err := sys.CUDA(); err != nil {
		return row, usagef("platform %s: %v", spec.Name, err)
	}
	integrated := spec.GPUs[0].Integrated
	if !integrated && (cfg.mode == "zero-copy" || cfg.mode == "pinned") {
		if cfg.mode == "zero-copy" {
			row.Note = "unsupported: CUDA imports no dma-buf on a discrete GPU (cuImportExternalMemory: CUDA_ERROR_INVALID_VALUE); the zero-copy route is the capture card writing into GPU memory (GPUDirect), not modelled yet"
		} else {
			row.Note = "unsupported here: the frame reaches the GPU without a CPU copy only if the capture card writes into CUDA-pinned memory (V4L2 USERPTR), not modelled yet"
		}
		return row, nil
	}
	cp := &camPipe{cfg: cfg, sys: sys}
	vcfg := v4l2.CaptureConfig{Device: cfg.camera, FrameRate: float64(cfg.fps), Format: v4l2.Format{Width: cfg.w, Height: cfg.h, PixelFormat: cfg.pix}}
	if cp.cam, err = sys.V4L2().NewCapture(vcfg); err != nil {
		return row, fmt.Errorf("camera-pipeline: %s: %w", spec.Name, err)
	}
	if hasISP {
		if cp.isp, err = sys.V4L2().NewISP(v4l2.ISPConfig{Device: cfg.isp, Format: vcfg.Format}); err != nil {
			return row, fmt.Errorf("camera-pipeline: %s: %w", spec.Name, err)
		}
	}
	if cfg.display != "" {
		mode, err := drm.CVTRB(int(cfg.w), int(cfg.h), cfg.refresh)
		if err != nil {
			return row, usagef("--set refresh=%d: %v", cfg.refresh, err)
		}
		if cp.disp, err = sys.Display(cfg.display, drm.Config{Mode: mode}); err != nil {
			return row, fmt.Errorf("camera-pipeline: %s: %w", spec.Name, err)
		}
	}
	dram, pcie := cameraLinks(sys, spec)
	dram0, pcie0 := linkBytes(dram), linkBytes(pcie)
	runErr := sys.Run("camera-app", func(p *dmalab.Process) error {
		cp.p, cp.proc, cp.node = p, p.Process, p.Process.Node()
		if err := cp.setup(); err != nil {
			return err
		}
		// Per frame is the stream's traffic: the buffers' allocation
		// (the heap clearing its pages, CPU stores on the DRAM bus) is
		// not a frame's.
		dram0, pcie0 = linkBytes(dram), linkBytes(pcie)
		return cp.stream()
	})
	if err := errors.Join(runErr, cp.err); err != nil {
		if errors.Is(err, ErrUsage) {
			return row, err
		}
		row.Note = "failed: " + err.Error()
		forward(c, sys, spec.Name)
		return row, nil
	}
	forward(c, sys, spec.Name)
	n := len(cp.lat)
	row.Ops = int64(n)
	row.Bytes = int64(cp.outFmt.SizeImage)
	if !hasISP {
		row.Bytes = int64(cp.rawFmt.SizeImage)
	}
	row.Dropped = int64(cp.cam.Dropped())
	if n > 0 {
		lat := slices.Clone(cp.lat)
		slices.Sort(lat)
		row.P50Seconds = lat[n/2].Seconds()
		row.P99Seconds = lat[min(n-1, n*99/100)].Seconds()
		row.Seconds = (cp.last - cp.first).Seconds()
		if n > 1 && row.Seconds > 0 {
			row.FPS = float64(n-1) / row.Seconds
		}
		row.DRAMBytes = int64((linkBytes(dram) - dram0) / float64(n))
		row.PCIeBytes = int64((linkBytes(pcie) - pcie0) / float64(n))
		row.CPUSeconds = cp.cpuTime.Seconds() / float64(n)
		names := []string{"capture", "isp", "copy", "inference", "display"}
		if !hasISP {
			names[3] = "debayer+inference"
		}
		for i, s := range cp.stages {
			if i == 1 && !hasISP || i == 4 && cp.disp == nil {
				continue
			}
			row.Stages = append(row.Stages, report.Stage{Name: names[i], Seconds: (s / sim.Time(n)).Seconds()})
		}
	}
	return row, nil
}

// forward copies the diagnostics of a pipeline's own system into the
// run's checker, so that "dmalab check camera-pipeline" sees every
// platform and mode.
func forward(c *Context, sys *dmalab.System, plat string) {
	if c.Checker == nil {
		return
	}
	for _, d := range sys.Diagnostics() {
		k := check.Find(d.Class)
		if k == nil {
			continue
		}
		d.Message = plat + ": " + d.Message
		c.Checker.Record(k, d)
	}
}

// cameraLinks are the links whose bytes the rows count: every node's
// DRAM, and the PCIe link of every GPU and device that has one (an
// SoC's devices reach memory over its interconnect, not PCIe). A
// transfer crosses one endpoint link, so nothing is counted twice.
func cameraLinks(sys *dmalab.System, spec *platform.Spec) (dram, pcie []fabricLink) {
	endpoints := map[string]bool{}
	for _, g := range spec.GPUs {
		endpoints[g.Name+".pcie"] = g.Link.Gen > 0
	}
	for _, d := range spec.Devices {
		endpoints[d.Name+".pcie"] = d.Link.Gen > 0
	}
	for _, l := range sys.Machine.Fabric.Links() {
		switch n := l.Name(); {
		case strings.HasSuffix(n, ".dram"):
			dram = append(dram, l)
		case endpoints[n]:
			pcie = append(pcie, l)
		}
	}
	return dram, pcie
}

// fabricLink is a link of the machine's fabric.
type fabricLink = *fabric.Link

func linkBytes(ls []fabricLink) float64 {
	var n float64
	for _, l := range ls {
		s := l.Stats()
		n += s.Bytes[0] + s.Bytes[1]
	}
	return n
}

// setup opens and configures every device, allocates and queues the
// buffers, and prepares the GPU side of the mode.
func (cp *camPipe) setup() error {
	t, proc, cfg := cp.p.Thread, cp.proc, cp.cfg
	pr, err := cp.p.CUDA()
	if err != nil {
		return err
	}
	if cp.ctx, err = pr.PrimaryContext(0); err != nil {
		return err
	}
	bufs := cp.sys.DMABuf()
	// An SoC's camera path behind no IOMMU domain takes physically
	// contiguous buffers (vb2-dma-contig): the CMA heap. Behind the
	// SMMU, or on a capture card with scatter-gather DMA, the system
	// heap's scattered pages do.
	heapName := "system"
	if cfg.spec.GPUs[0].Integrated {
		if _, ok := cp.cam.DMADevice().Translator().(dma.Mapper); !ok {
			heapName = "reserved"
		}
	}
	if cp.heap, err = bufs.Heap(heapName); err != nil {
		return err
	}
	capT, outT := v4l2.BufTypeVideoCapture, v4l2.BufTypeVideoOutput
	if cp.camFD, err = cp.cam.Open(t, proc); err != nil {
		return err
	}
	if cp.rawFmt, err = cp.cam.SFmt(t, proc, cp.camFD, capT, v4l2.Format{Width: cfg.w, Height: cfg.h, PixelFormat: cfg.pix}); err != nil {
		return err
	}
	alloc := func(n uint32) (int, *dmabuf.Buffer, error) {
		fd, err := cp.heap.Allocate(t, proc, (uint64(n)+mem.PageSize-1)&^(mem.PageSize-1), 0)
		if err != nil {
			return -1, nil, fmt.Errorf("%s heap: %w", heapName, err)
		}
		b, err := bufs.Get(t, proc, fd)
		return fd, b, err
	}
	nbuf := uint32(cfg.nbuf)
	if _, err := cp.cam.ReqBufs(t, proc, cp.camFD, v4l2.RequestBuffers{Count: nbuf, Type: capT, Memory: v4l2.MemoryDMABUF}); err != nil {
		return err
	}
	for range nbuf {
		fd, b, err := alloc(cp.rawFmt.SizeImage)
		if err != nil {
			return err
		}
		cp.rawFD, cp.rawBuf = append(cp.rawFD, fd), append(cp.rawBuf, b)
	}
	for i := range nbuf {
		if _, err := cp.cam.QBuf(t, proc, cp.camFD, v4l2.Buffer{Index: i, Type: capT, Memory: v4l2.MemoryDMABUF, FD: cp.rawFD[i]}); err != nil {
			return err
		}
	}
	cp.outFmt, cp.outFD, cp.outBuf = cp.rawFmt, cp.rawFD, cp.rawBuf
	if cp.isp != nil {
		if cp.ispFD, err = cp.isp.Open(t, proc); err != nil {
			return err
		}
		if _, err := cp.isp.SFmt(t, proc, cp.ispFD, outT, cp.rawFmt); err != nil {
			return err
		}
		if cp.outFmt, err = cp.isp.GFmt(proc, cp.ispFD, capT); err != nil {
			return err
		}
		for _, bt := range []v4l2.BufType{outT, capT} {
			if _, err := cp.isp.ReqBufs(t, proc, cp.ispFD, v4l2.RequestBuffers{Count: nbuf, Type: bt, Memory: v4l2.MemoryDMABUF}); err != nil {
				return err
			}
		}
		cp.outFD, cp.outBuf = nil, nil
		for i := range nbuf {
			fd, b, err := alloc(cp.outFmt.SizeImage)
			if err != nil {
				return err
			}
			cp.outFD, cp.outBuf = append(cp.outFD, fd), append(cp.outBuf, b)
			if _, err := cp.isp.QBuf(t, proc, cp.ispFD, v4l2.Buffer{Index: i, Type: capT, Memory: v4l2.MemoryDMABUF, FD: fd}); err != nil {
				return err
			}
		}
	}
	if cp.disp != nil {
		cp.dfile = cp.disp.Open(proc)
		bpl := cp.outFmt.BytesPerLine
		for _, fd := range cp.outFD {
			h, err := cp.dfile.PrimeFDToHandle(t, fd)
			if err != nil {
				return err
			}
			fb, err := cp.dfile.AddFB2(t, drm.FBCmd{Width: int(cfg.w), Height: int(cfg.h), Format: drm.FormatNV12,
				Handles: [4]uint32{h, h}, Pitches: [4]uint32{bpl, bpl}, Offsets: [4]uint32{0, bpl * cfg.h}})
			if err != nil {
				return err
			}
			cp.fbs = append(cp.fbs, fb)
		}
		cp.disp.Enable(t)
	}
	if err := cp.setupGPU(); err != nil {
		return err
	}
	if err := cp.cam.StreamOn(t, proc, cp.camFD, capT); err != nil {
		return err
	}
	if cp.isp != nil {
		for _, bt := range []v4l2.BufType{outT, capT} {
			if err := cp.isp.StreamOn(t, proc, cp.ispFD, bt); err != nil {
				return err
			}
		}
	}
	return nil
}

// frameBytes is what the GPU reads of a frame: the ISP's NV12, or the
// camera's RAW without an ISP.
func (cp *camPipe) frameBytes() uint64 { return uint64(cp.outFmt.SizeImage) }

// setupGPU imports, allocates or maps what the mode's GPU side uses.
func (cp *camPipe) setupGPU() error {
	t, proc, ctx := cp.p.Thread, cp.proc, cp.ctx
	n := cp.frameBytes()
	var err error
	switch cp.cfg.mode {
	case "zero-copy", "pinned":
		for i, fd := range cp.outFD {
			dup, err := proc.Dup(fd)
			if err != nil {
				return err
			}
			em, err := ctx.ImportExternalMemory(t, cuda.ExternalMemoryHandleDesc{Type: cuda.ExternalMemoryHandleTypeOpaqueFD, FD: dup, Size: cp.outBuf[i].Size()})
			if err != nil {
				return err
			}
			ga, err := ctx.ExternalMemoryGetMappedBuffer(t, em, cuda.ExternalMemoryBufferDesc{Size: n})
			if err != nil {
				return err
			}
			cp.imported = append(cp.imported, ga)
		}
		if cp.cfg.mode == "zero-copy" {
			obj := cuda.NewNvSciSyncObj(cp.sys.DMABuf(), "gpu0")
			if cp.sem, err = ctx.ImportExternalSemaphore(t, cuda.ExternalSemaphoreHandleDesc{Type: cuda.ExternalSemaphoreHandleTypeNvSciSync, NvSciSyncObj: obj}); err != nil {
				return err
			}
		} else if cp.dev, err = ctx.MemAlloc(t, n); err != nil {
			return err
		}
	case "copy":
		if cp.pinned, err = ctx.MemAllocHost(t, n); err != nil {
			return err
		}
		if cp.dev, err = ctx.MemAlloc(t, n); err != nil {
			return err
		}
	case "mapped":
		if cp.pinned, err = ctx.MemHostAlloc(t, n, cuda.HostAllocDeviceMap); err != nil {
			return err
		}
		if cp.mappedGA, err = ctx.MemHostGetDevicePointer(cp.pinned, 0); err != nil {
			return err
		}
	}
	if cp.cfg.mode == "copy" || cp.cfg.mode == "mapped" {
		for _, b := range cp.outBuf {
			va, err := b.Mmap(t, proc)
			if err != nil {
				return err
			}
			cp.cpuVA = append(cp.cpuVA, va)
		}
	}
	if cp.isp == nil {
		// The GPU debayers into NV12 in its own memory.
		if cp.dev2, err = ctx.MemAlloc(t, uint64(cp.cfg.w)*uint64(cp.cfg.h)*3/2); err != nil {
			return err
		}
	}
	return nil
}

// cpuCopy is the application's memcpy of n bytes from src to dst: the
// memory effect (versions) at once, then the copy's CPU time and DRAM
// traffic.
func (cp *camPipe) cpuCopy(w *sim.Proc, dst, src mem.VirtAddr, n uint64) error {
	start := w.Now()
	cp.sys.Mem.Read(nil, cp.node, src, n)
	cp.sys.Mem.Write(nil, cp.node, dst, n)
	err := cp.sys.Machine.CPUCopy(w, "memcpy frame", cp.node, int64(n))
	cp.cpuTime += w.Now() - start
	return err
}

// gpuFrame moves frame f to the GPU as the mode does and runs inference
// on it; f.copyT is when the frame was on the GPU's side, f.ready when
// inference was done (zero-copy: f.fence signals then).
func (cp *camPipe) gpuFrame(w *sim.Proc, f *camFrame) error {
	ctx, n := cp.ctx, cp.frameBytes()
	var src mem.GPUAddr
	buf := cp.outBuf[f.out]
	switch cp.cfg.mode {
	case "zero-copy":
		src = cp.imported[f.out]
	case "pinned":
		if err := ctx.Memcpy(w, cp.dev, cp.imported[f.out], n); err != nil {
			return err
		}
		src = cp.dev
	case "copy", "mapped":
		if err := buf.BeginCPUAccess(w, dma.FromDevice); err != nil {
			return err
		}
		if err := cp.cpuCopy(w, cp.pinned, cp.cpuVA[f.out], n); err != nil {
			return err
		}
		if err := buf.EndCPUAccess(w, dma.FromDevice); err != nil {
			return err
		}
		src = cp.mappedGA
		if cp.cfg.mode == "copy" {
			if err := ctx.Memcpy(w, cp.dev, mem.GPUAddr(cp.pinned), n); err != nil {
				return err
			}
			src = cp.dev
		}
	}
	if cp.isp == nil && cp.cfg.mode != "zero-copy" {
		// The camera's buffer is free once its bytes are out of it.
		if _, err := cp.cam.QBuf(w, cp.proc, cp.camFD, v4l2.Buffer{Index: uint32(f.raw), Type: v4l2.BufTypeVideoCapture, Memory: v4l2.MemoryDMABUF, FD: cp.rawFD[f.raw]}); err != nil {
			return err
		}
	}
	f.copyT = w.Now()
	if cp.isp == nil {
		nv12 := uint64(cp.cfg.w) * uint64(cp.cfg.h) * 3 / 2
		k := gpu.Kernel{Name: "debayer", Accesses: []gpu.Access{{Addr: src, Size: n}, {Addr: cp.dev2, Size: nv12, Write: true}}}
		if err := ctx.LaunchKernel(w, k, nil); err != nil {
			return err
		}
		src, n = cp.dev2, nv12
	}
	if err := ctx.LaunchKernel(w, gpu.Kernel{Name: "infer", Accesses: []gpu.Access{{Addr: src, Size: n}}, Compute: cp.cfg.infer}, nil); err != nil {
		return err
	}
	if cp.sem != nil {
		var fence cuda.NvSciSyncFence
		if err := ctx.SignalExternalSemaphoresAsync(w, []*cuda.ExternalSemaphore{cp.sem}, []cuda.ExternalSemaphoreSignalParams{{Fence: &fence}}, nil); err != nil {
			return err
		}
		f.fence = fence.Fence
		return nil
	}
	if err := ctx.Synchronize(w); err != nil {
		return err
	}
	f.ready = w.Now()
	return nil
}

// stream runs the pipeline's threads until cfg.frames frames have been
// shown (or have reached inference, without a display), then stops the
// devices.
func (cp *camPipe) stream() error {
	t, proc, cfg := cp.p.Thread, cp.proc, cp.cfg
	capT, outT := v4l2.BufTypeVideoCapture, v4l2.BufTypeVideoOutput
	ispQ, gpuQ, dispQ := newFIFO("isp"), newFIFO("gpu"), newFIFO("display")
	finished := sim.NewCond("pipeline done")
	running := 0
	spawn := func(name string, fn func(w *sim.Proc) error) {
		running++
		proc.Spawn(name, func(w *sim.Proc) {
			cp.fail(fn(w))
			running--
			finished.Broadcast()
		})
	}
	if cp.isp != nil {
		spawn("isp-out", func(w *sim.Proc) error {
			for range cfg.frames {
				b, err := cp.isp.DQBuf(w, proc, cp.ispFD, outT)
				if err != nil {
					return err
				}
				if _, err := cp.cam.QBuf(w, proc, cp.camFD, v4l2.Buffer{Index: b.Index, Type: capT, Memory: v4l2.MemoryDMABUF, FD: cp.rawFD[b.Index]}); err != nil {
					return err
				}
			}
			return nil
		})
		spawn("isp-cap", func(w *sim.Proc) error {
			defer gpuQ.close()
			for range cfg.frames {
				b, err := cp.isp.DQBuf(w, proc, cp.ispFD, capT)
				if err != nil {
					return err
				}
				f := ispQ.get(w)
				f.out = int(b.Index)
				f.times.ISPStart, f.times.ISPRead, f.times.ISPDone = b.Times.ISPStart, b.Times.ISPRead, b.Times.ISPDone
				gpuQ.put(f)
			}
			return nil
		})
	}
	spawn("gpu", func(w *sim.Proc) error {
		defer dispQ.close()
		for f := gpuQ.get(w); f != nil; f = gpuQ.get(w) {
			if err := cp.gpuFrame(w, f); err != nil {
				return err
			}
			if cp.disp != nil {
				dispQ.put(f)
				continue
			}
			cp.account(f, f.ready)
		}
		return nil
	})
	if cp.disp != nil {
		spawn("display", func(w *sim.Proc) error {
			prev := -1
			for f := dispQ.get(w); f != nil; f = dispQ.get(w) {
				c := drm.Commit{FB: cp.fbs[f.out], InFenceFD: -1, Event: true}
				if f.fence != nil {
					fd, err := cp.sys.DMABuf().NewSyncFile("gpu0", f.fence).FD(proc)
					if err != nil {
						return err
					}
					c.InFenceFD = fd
				}
				_, err := cp.dfile.AtomicCommit(w, c)
				if c.InFenceFD >= 0 {
					err = errors.Join(err, proc.Close(w, c.InFenceFD))
				}
				if err != nil {
					return err
				}
				ev := cp.dfile.ReadEvent(w)
				if f.fence != nil {
					f.ready = f.fence.SignaledAt()
				}
				cp.account(f, ev.Time)
				if prev >= 0 {
					if _, err := cp.isp.QBuf(w, proc, cp.ispFD, v4l2.Buffer{Index: uint32(prev), Type: capT, Memory: v4l2.MemoryDMABUF, FD: cp.outFD[prev]}); err != nil {
						return err
					}
				}
				prev = f.out
			}
			return nil
		})
	}
	for range cfg.frames {
		b, err := cp.cam.DQBuf(t, proc, cp.camFD, capT)
		if err != nil {
			cp.fail(err)
			break
		}
		f := &camFrame{seq: b.Sequence, raw: int(b.Index), out: int(b.Index), times: b.Times}
		if cp.isp == nil {
			gpuQ.put(f)
			continue
		}
		ispQ.put(f)
		if _, err := cp.isp.QBuf(t, proc, cp.ispFD, v4l2.Buffer{Index: b.Index, Type: outT, Memory: v4l2.MemoryDMABUF, FD: cp.rawFD[b.Index], BytesUsed: b.BytesUsed}); err != nil {
			cp.fail(err)
			break
		}
	}
	if cp.isp == nil {
		gpuQ.close()
	}
	t.WaitUntil(finished, func() bool { return running == 0 })
	errs := []error{cp.cam.StreamOff(t, proc, cp.camFD, capT)}
	if cp.isp != nil {
		errs = append(errs, cp.isp.StreamOff(t, proc, cp.ispFD, outT), cp.isp.StreamOff(t, proc, cp.ispFD, capT))
	}
	if cp.disp != nil {
		cp.disp.Disable(t)
	}
	return errors.Join(errs...)
}

// account adds frame f, at its end (on glass, or inference done), to
// the latencies and stages.
func (cp *camPipe) account(f *camFrame, end sim.Time) {
	t0, t1 := f.times.ReadoutStart, f.times.Written
	t2 := t1
	if cp.isp != nil {
		t2 = f.times.ISPDone
	}
	cp.lat = append(cp.lat, end-t0)
	for i, d := range []sim.Time{t1 - t0, t2 - t1, f.copyT - t2, f.ready - f.copyT, end - f.ready} {
		cp.stages[i] += d
	}
	if cp.shown == 0 {
		cp.first = end
	}
	cp.shown++
	cp.last = end
}

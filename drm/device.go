package drm

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Config says what display controller New builds.
type Config struct {
	// Mode is the CRTC's mode (CVTRB gives the usual ones).
	Mode Mode
	// ScatterGather says the controller reads a framebuffer made of
	// several DMA ranges (an IOMMU-less controller with its own MMU).
	// Without it, as drm_gem_dma_prime_import_sg_table, an import whose
	// DMA addresses are not one contiguous range is EINVAL: behind an
	// IOMMU every buffer is, without one only CMA memory is.
	ScatterGather bool
	// Locate names the memory a framebuffer's physical address lies in,
	// for the scanout's route; nil, or false from it, means the DRAM of
	// the address's NUMA node (mem.Memory.NodeOf), else the device's.
	Locate func(mem.PhysAddr) (machine.Endpoint, bool)
}

// Device is struct drm_device of a KMS driver: one display controller
// with one CRTC driving one mode and its primary plane, a bus master
// of the DMA layer. Processes open it (Open: a struct drm_file) to
// import dma-bufs, make framebuffers and commit page flips.
type Device struct {
	// Hooks receives every Event.
	Hooks sim.Hooks[Event]

	name string
	m    *machine.Machine
	eng  *sim.Engine
	dev  *dma.Device
	hw   *machine.Device
	bufs *dmabuf.Layer
	cfg  Config

	fbs    map[uint32]*Framebuffer
	nextFB uint32
	files  int // files open

	// The CRTC: on from enabledAt; seq counts its vblanks; cur is the
	// framebuffer latched (nil: plane off, black, nothing read);
	// pending the commit waiting for its fences or its vblank.
	on        bool
	enabledAt sim.Time
	seq       uint64
	next      sim.Handle
	cur       *Framebuffer
	pending   *commit
	fenceCtx  uint64
	fenceSeq  uint64
	flips     []Flip
	stats     Stats
	flipCond  *sim.Cond
	scanLat   sim.Time
	cfgActive sim.Time
}

// Stats are what the CRTC did since it was made.
type Stats struct {
	// VBlanks counts vertical blanking intervals; Scans refreshes that
	// read a framebuffer, Bytes what they read.
	VBlanks, Scans uint64
	Bytes          int64
	// Flips counts commits latched, Missed the vblanks they came late
	// for (each a refresh that showed the previous frame again).
	Flips, Missed uint64
	// Underruns counts scanouts whose bytes arrived after the active
	// period: the fabric could not feed the display.
	Underruns uint64
}

// Flip is one latched commit: when it was made, when its fences let it
// go, the vblank it was for and the one that latched it.
//
// Glass-to-glass, a frame is on glass at OnGlass: the start of the
// scanout of the refresh it was latched for, i.e. the end of the vblank
// interval that latched it. That is the timestamp DRM gives the
// flip-complete event (drm_crtc_vblank_helper_get_vblank_timestamp:
// "the time when the first active pixel is scanned out"); the first
// line is on glass then, the last one Mode.Active later.
type Flip struct {
	FB uint32
	// Committed is the atomic ioctl; Ready when its in-fences had
	// signalled and the flip was armed.
	Committed, Ready sim.Time
	// Target is the vblank it was for (the first after the commit),
	// Seq the one it latched at, Missed = Seq − Target.
	Target, Seq uint64
	Missed      int
	// VBlank is when it latched (the vblank's start, when the event is
	// sent and the out-fence signals); OnGlass when its refresh starts.
	VBlank, OnGlass sim.Time
}

// New returns the display controller of the machine's device named
// device (any kind: its DMA port is the controller's), reading through
// its view in d and importing dma-bufs of layer bufs.
func New(m *machine.Machine, d *dma.DMA, bufs *dmabuf.Layer, device string, cfg Config) (*Device, error) {
	if err := cfg.Mode.validate(); err != nil {
		return nil, fmt.Errorf("drm %s: %w", device, err)
	}
	var hw *machine.Device
	for _, x := range m.Devices {
		if x.Name == device {
			hw = x
		}
	}
	if hw == nil {
		return nil, fmt.Errorf("drm %s: platform %s has no such device: %w", device, m.Spec.Name, syscall.ENODEV)
	}
	dev, err := d.Device(device)
	if err != nil {
		return nil, fmt.Errorf("drm %s: %w", device, err)
	}
	// A scanout buffer is one DMA range of megabytes, longer than the
	// 64 KiB segments Linux allows by default; display drivers raise
	// the limit at probe (dma_set_max_seg_size(dev, UINT_MAX) in
	// drivers/gpu/drm/mediatek/mtk_drm_drv.c and exynos_drm_dma.c), so
	// that the importer's sg table is one segment.
	dev.SetMaxSegmentSize(math.MaxUint32)
	return &Device{name: device, m: m, eng: m.Engine, dev: dev, hw: hw, bufs: bufs, cfg: cfg,
		fbs: map[uint32]*Framebuffer{}, fenceCtx: bufs.ContextAlloc(1), flipCond: sim.NewCond(device + " flip"),
		cfgActive: cfg.Mode.Active()}, nil
}

// Name is the controller's device name.
func (d *Device) Name() string { return d.name }

// DMADevice is the bus master the controller reads through.
func (d *Device) DMADevice() *dma.Device { return d.dev }

// Mode is the CRTC's mode.
func (d *Device) Mode() Mode { return d.cfg.Mode }

// Stats are the CRTC's counters.
func (d *Device) Stats() Stats { return d.stats }

// Flips lists the latched commits in order.
func (d *Device) Flips() []Flip { return slices.Clone(d.flips) }

// RefreshStart is when refresh k of the CRTC's current enable begins
// its first visible line; vblank k+1 begins Mode.Active later.
func (d *Device) RefreshStart(k uint64) sim.Time { return d.enabledAt + d.cfg.Mode.FrameStart(k) }

// Seq is the vblank counter (drm_crtc_vblank_count).
func (d *Device) Seq() uint64 { return d.seq }

// Enable is the mode set that turns the CRTC on (an atomic commit with
// ALLOW_MODESET, ACTIVE=1 and MODE_ID): refresh 0 begins now, its plane
// off (black: nothing read) until the first flip latches. EBUSY if on.
func (d *Device) Enable(p *sim.Proc) error {
	if d.on {
		err := fmt.Errorf("drm %s: enable: CRTC already on: %w", d.name, syscall.EBUSY)
		d.emit(p, Event{Op: OpEnable}.fail(err))
		return err
	}
	d.on, d.enabledAt = true, p.Now()
	d.emit(p, Event{Op: OpEnable}.cause(sim.CauseLifecycle))
	d.refresh(0)
	return nil
}

// Disable turns the CRTC off, after a pending commit has latched (as a
// blocking mode set waits for the commits before it): no more vblanks
// or scanouts, and the plane's framebuffer is let go once its last
// scanout has landed. A program must disable the CRTCs it enabled for
// its run to end, as vblanks go on for ever otherwise.
func (d *Device) Disable(p *sim.Proc) error {
	if !d.on {
		return nil
	}
	if c := d.pending; c != nil {
		p.Wait(c.done)
	}
	d.on = false
	d.eng.Cancel(d.next)
	d.emit(p, Event{Op: OpDisable}.cause(sim.CauseLifecycle))
	if fb := d.cur; fb != nil {
		d.cur = nil
		fb.unref(p)
	}
	return nil
}

// File is struct drm_file: a process's open of the device
// (/dev/dri/card0), with its GEM handles, its framebuffers and its
// queue of events.
type File struct {
	d       *Device
	proc    *kernel.Process
	handles map[uint32]*gemObject
	// prime is drm_prime_file_private: the handle of each dma-buf
	// imported, so that a second import gives the same handle.
	prime      map[*dmabuf.Buffer]uint32
	nextHandle uint32
	events     []FlipEvent
	cond       *sim.Cond
	closed     bool
}

// FlipEvent is struct drm_event_vblank of type DRM_EVENT_FLIP_COMPLETE:
// the commit's user data, the vblank sequence it latched at and the
// vblank timestamp (when its refresh starts to scan out).
type FlipEvent struct {
	UserData uint64
	Sequence uint64
	Time     sim.Time
	FB       uint32
}

// Open is open(2) of the device node by proc: a new DRM file, closed
// when proc exits if not before.
func (d *Device) Open(proc *kernel.Process) *File {
	f := &File{d: d, proc: proc, handles: map[uint32]*gemObject{}, prime: map[*dmabuf.Buffer]uint32{},
		cond: sim.NewCond(d.name + " events")}
	d.files++
	proc.OnExit("drm "+d.name, func(t *sim.Proc) error { f.Close(t); return nil })
	return f
}

// ReadEvent is read(2) on the DRM file: p blocks until a flip-complete
// event is queued, then takes it.
func (f *File) ReadEvent(p *sim.Proc) FlipEvent {
	p.WaitUntil(f.cond, func() bool { return len(f.events) > 0 })
	e := f.events[0]
	f.events = f.events[1:]
	return e
}

// PendingEvents is how many events read(2) would return now.
func (f *File) PendingEvents() int { return len(f.events) }

// Close is the last close of the DRM file (drm_file_free): its
// framebuffers are removed (drm_fb_release; the one on the plane turns
// the plane off) and its handles closed, after a pending commit of it
// latched. The last file of the device to close turns the CRTC off, as
// drm_lastclose hands the display back to a console the model does not
// have, so that a program's run ends when it exits.
func (f *File) Close(p *sim.Proc) {
	if f.closed {
		return
	}
	if c := f.d.pending; c != nil && c.file == f {
		p.Wait(c.done)
	}
	for _, id := range slices.Sorted(maps.Keys(f.d.fbs)) {
		if fb := f.d.fbs[id]; fb.owner == f {
			f.rmfb(p, fb)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(f.handles)) {
		f.GEMClose(p, h)
	}
	f.closed = true
	if f.d.files--; f.d.files == 0 {
		f.d.Disable(p)
	}
}

package drm

import (
	"fmt"
	"math"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/sim"
)

// MaxFBSize is the largest framebuffer width and height the device
// takes (drm_mode_config.max_width/height; 8192 is a common limit of
// SoC display engines, assumed).
const MaxFBSize = 8192

// FBCmd is struct drm_mode_fb_cmd2: the framebuffer's size and format
// and, per plane of the format, the GEM handle, the pitch (bytes from
// one line to the next) and the offset of the plane in the object.
type FBCmd struct {
	Width, Height int
	Format        Format
	Handles       [4]uint32
	Pitches       [4]uint32
	Offsets       [4]uint32
}

// Framebuffer is struct drm_framebuffer: memory the plane can scan
// out, referring to its GEM objects. It lives while its ID (until
// RMFB), the plane or a pending commit refers to it.
type Framebuffer struct {
	ID            uint32
	Width, Height int
	Format        Format

	owner *File
	objs  [4]*gemObject
	cmd   FBCmd
	refs  int
	route fabric.Route
	spans []dma.Span
	bytes int64
	scans int       // scanouts in flight (several when they underrun)
	idle  *sim.Cond // signalled when scans drops to 0
}

// AddFB2 is DRM_IOCTL_MODE_ADDFB2: a framebuffer over the file's GEM
// handles, checked as drm_framebuffer.c's framebuffer_check and
// drm_gem_fb_init_with_funcs do: EINVAL for a format the plane does not
// take, a size of 0, beyond MaxFBSize or not a multiple of the
// format's subsampling, a missing handle or a handle, pitch or offset
// on a plane the format lacks, a pitch shorter than a line, or an
// object too small for the plane (pitch × (height − 1) + a line +
// offset); ERANGE when that overflows 32 bits; ENOENT for a handle the
// file does not have.
func (f *File) AddFB2(p *sim.Proc, c FBCmd) (uint32, error) {
	d := f.d
	ev := Event{Op: OpAddFB, Process: f.proc.Name(), Handle: c.Handles[0]}
	fail := func(err error) (uint32, error) {
		err = fmt.Errorf("drm %s: addfb2 %dx%d %v: %w", d.name, c.Width, c.Height, c.Format, err)
		d.emit(p, ev.fail(err))
		return 0, err
	}
	fi, ok := c.Format.info()
	if !ok {
		return fail(fmt.Errorf("unsupported pixel format: %w", syscall.EINVAL))
	}
	if c.Width <= 0 || c.Height <= 0 || c.Width > MaxFBSize || c.Height > MaxFBSize {
		return fail(fmt.Errorf("bad framebuffer size (1 to %d): %w", MaxFBSize, syscall.EINVAL))
	}
	if c.Width%fi.hsub != 0 || c.Height%fi.vsub != 0 {
		return fail(fmt.Errorf("size not a multiple of the chroma subsampling %dx%d: %w", fi.hsub, fi.vsub, syscall.EINVAL))
	}
	fb := &Framebuffer{Width: c.Width, Height: c.Height, Format: c.Format, owner: f, cmd: c, idle: sim.NewCond(d.name + " scanout")}
	for i := 0; i < 4; i++ {
		if i >= fi.planes {
			if c.Handles[i] != 0 || c.Pitches[i] != 0 || c.Offsets[i] != 0 {
				return fail(fmt.Errorf("plane %d: handle, pitch or offset for a plane %v lacks: %w", i, c.Format, syscall.EINVAL))
			}
			continue
		}
		w, h := fi.planeSize(i, c.Width, c.Height)
		minPitch := uint64(w) * uint64(fi.cpp[i])
		if c.Handles[i] == 0 {
			return fail(fmt.Errorf("plane %d: no buffer object handle: %w", i, syscall.EINVAL))
		}
		if uint64(c.Pitches[i]) < minPitch {
			return fail(fmt.Errorf("plane %d: bad pitch %d (a line is %d bytes): %w", i, c.Pitches[i], minPitch, syscall.EINVAL))
		}
		if uint64(h)*uint64(c.Pitches[i])+uint64(c.Offsets[i]) > math.MaxUint32 {
			return fail(fmt.Errorf("plane %d: pitch × height + offset overflows: %w", i, syscall.ERANGE))
		}
		o, ok := f.handles[c.Handles[i]]
		if !ok {
			return fail(fmt.Errorf("plane %d: no such GEM handle %d: %w", i, c.Handles[i], syscall.ENOENT))
		}
		need := uint64(h-1)*uint64(c.Pitches[i]) + minPitch + uint64(c.Offsets[i])
		if o.buf.Size() < need {
			return fail(fmt.Errorf("plane %d: %s is %d bytes, the plane needs %d: %w", i, o.buf.FileName(), o.buf.Size(), need, syscall.EINVAL))
		}
		fb.objs[i] = o
	}
	route, err := d.scanRoute(fb.objs[0])
	if err != nil {
		return fail(err)
	}
	fb.route = route
	for _, o := range fb.objs {
		if o != nil {
			o.fbRefs++
		}
	}
	d.nextFB++
	fb.ID, fb.refs = d.nextFB, 1
	d.fbs[fb.ID] = fb
	ev.FB, ev.Buffer = fb.ID, fb.objs[0].buf.FileName()
	d.emit(p, ev)
	return fb.ID, nil
}

// RmFB is DRM_IOCTL_MODE_RMFB: the ID goes. A framebuffer on the plane
// turns the plane off (drm_framebuffer_remove: the next refresh is
// black); one a pending commit holds still flips and lives until it is
// replaced. ENOENT for an ID that is not the file's.
func (f *File) RmFB(p *sim.Proc, id uint32) error {
	fb, ok := f.d.fbs[id]
	if !ok || fb.owner != f {
		err := fmt.Errorf("drm %s: rmfb %d: no such framebuffer: %w", f.d.name, id, syscall.ENOENT)
		f.d.emit(p, Event{Op: OpRmFB, Process: f.proc.Name(), FB: id}.fail(err))
		return err
	}
	f.rmfb(p, fb)
	return nil
}

func (f *File) rmfb(p *sim.Proc, fb *Framebuffer) {
	d := f.d
	delete(d.fbs, fb.ID)
	d.emit(p, Event{Op: OpRmFB, Process: f.proc.Name(), FB: fb.ID})
	if d.cur == fb {
		d.cur = nil
		fb.unref(p)
	}
	fb.unref(p)
}

// unref is drm_framebuffer_put from thread p: the last reference waits
// for a scanout in flight to land, then lets the GEM objects go.
func (fb *Framebuffer) unref(p *sim.Proc) {
	if fb.refs--; fb.refs > 0 {
		return
	}
	if fb.scans > 0 {
		p.WaitUntil(fb.idle, func() bool { return fb.scans == 0 })
	}
	for _, o := range fb.objs {
		if o != nil {
			o.fbRefs--
			o.put(p)
		}
	}
}

// scanRoute is the route of the scanout's reads of o: from the memory
// holding its first page to the controller.
func (d *Device) scanRoute(o *gemObject) (fabric.Route, error) {
	pa := o.sgt.SGL[0].Phys()
	src, ok := machine.Endpoint{}, false
	if d.cfg.Locate != nil {
		src, ok = d.cfg.Locate(pa)
	}
	if !ok {
		node, found := d.m.Mem.NodeOf(pa)
		if !found {
			node = d.hw.Node
		}
		var err error
		if src, err = d.m.HostMemory(node); err != nil {
			return fabric.Route{}, err
		}
	}
	return d.m.DMARoute(src, d.hw.Side(), d.hw.DMA())
}

// scanout fills the framebuffer's reads for the mode: each plane's
// visible lines (the mode's size from the top left), as spans of the
// range they cover and the bytes of their pixels.
func (fb *Framebuffer) scanout(m Mode) {
	if fb.spans != nil {
		return
	}
	fi, _ := fb.Format.info()
	for i := 0; i < fi.planes; i++ {
		w, h := fi.planeSize(i, m.HDisplay, m.VDisplay)
		line := uint64(w) * uint64(fi.cpp[i])
		n := uint64(h-1)*uint64(fb.cmd.Pitches[i]) + line
		fb.spans = append(fb.spans, fb.objs[i].spans(uint64(fb.cmd.Offsets[i]), n)...)
	}
	fb.bytes = FrameBytes(fb.Format, m.HDisplay, m.VDisplay)
}

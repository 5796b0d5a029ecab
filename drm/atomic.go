package drm

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/sim"
)

// Commit is what one DRM_IOCTL_MODE_ATOMIC with
// DRM_MODE_ATOMIC_NONBLOCK sets: the primary plane's FB_ID and
// IN_FENCE_FD, the CRTC's OUT_FENCE_PTR, and DRM_MODE_PAGE_FLIP_EVENT
// with its user data.
type Commit struct {
	// FB is the framebuffer to show; at least the mode's size.
	FB uint32
	// InFenceFD is a sync file of the file's process the flip waits
	// for; -1 for none, in which case the flip waits for the write
	// fences in the reservation objects of the framebuffer's dma-bufs
	// (implicit sync, drm_gem_plane_helper_prepare_fb).
	InFenceFD int
	// OutFence asks for a sync file that signals when the flip latches
	// (the previous framebuffer may be written again from then).
	OutFence bool
	// Event asks for a DRM_EVENT_FLIP_COMPLETE on the file, carrying
	// UserData.
	Event    bool
	UserData uint64
}

// commit is struct drm_crtc_commit with the state it swaps in.
type commit struct {
	file      *File
	fb        *Framebuffer
	old       *Framebuffer // the one it replaced, dropped by work
	fences    []*dmabuf.Fence
	out       *dmabuf.Fence
	req       Commit
	committed sim.Time
	target    uint64
	ready     bool
	readyAt   sim.Time
	latched   *sim.Completion
	done      *sim.Completion
}

// AtomicCommit is DRM_IOCTL_MODE_ATOMIC with DRM_MODE_ATOMIC_NONBLOCK
// by thread p: a page flip to c.FB. It returns at once; a kernel worker
// (drm_atomic_helper_commit_tail) waits for the in-fences
// (drm_atomic_helper_wait_for_fences) in virtual time and arms the
// flip, which latches at the first vblank after that: the out-fence
// signals and the flip-complete event is sent then, and the previous
// framebuffer is released. The target is the first vblank after the
// commit; each later one it latches at is a missed vblank. The result
// is the out-fence's descriptor in the file's process (-1 without
// OutFence). EINVAL with the CRTC off, for a framebuffer smaller than
// the mode or a bad in-fence descriptor's file; ENOENT for an unknown
// FB; EBADF for a descriptor the process lacks; EBUSY while the
// previous commit has not latched (drm_atomic_helper_setup_commit's
// stall check for non-blocking commits).
func (f *File) AtomicCommit(p *sim.Proc, c Commit) (int, error) {
	d := f.d
	ev := Event{Op: OpCommit, Process: f.proc.Name(), FB: c.FB}
	fail := func(err error) (int, error) {
		err = fmt.Errorf("drm %s: atomic commit fb %d: %w", d.name, c.FB, err)
		d.emit(p, ev.fail(err))
		return -1, err
	}
	if !d.on {
		return fail(fmt.Errorf("CRTC inactive: %w", syscall.EINVAL))
	}
	if d.pending != nil {
		return fail(fmt.Errorf("previous commit not yet flipped: %w", syscall.EBUSY))
	}
	fb, ok := d.fbs[c.FB]
	if !ok {
		return fail(fmt.Errorf("no such framebuffer: %w", syscall.ENOENT))
	}
	if fb.Width < d.cfg.Mode.HDisplay || fb.Height < d.cfg.Mode.VDisplay {
		return fail(fmt.Errorf("%dx%d framebuffer smaller than the %s mode (no scaling): %w", fb.Width, fb.Height, d.cfg.Mode.Name, syscall.EINVAL))
	}
	cm := &commit{file: f, fb: fb, req: c, committed: p.Now(), target: d.seq + 1,
		latched: d.eng.NewNamedCompletion(d.name + " flip"), done: d.eng.NewNamedCompletion(d.name + " commit")}
	if c.InFenceFD >= 0 {
		s, err := d.bufs.SyncFileGet(f.proc, c.InFenceFD)
		if err != nil {
			return fail(fmt.Errorf("IN_FENCE_FD: %w", err))
		}
		cm.fences = []*dmabuf.Fence{s.Fence()}
	} else {
		seen := map[*gemObject]bool{}
		for _, o := range fb.objs {
			if o != nil && !seen[o] {
				seen[o] = true
				cm.fences = append(cm.fences, o.buf.Resv().Fences(dmabuf.UsageWrite)...)
			}
		}
	}
	outFD := -1
	if c.OutFence {
		d.fenceSeq++
		cm.out = d.bufs.NewFence("drm", d.name+"-crtc-0", d.fenceCtx, d.fenceSeq)
		var err error
		if outFD, err = d.bufs.NewSyncFile("drm out-fence", cm.out).FD(f.proc); err != nil {
			return fail(fmt.Errorf("OUT_FENCE_PTR: %w", err))
		}
		ev.Fence = cm.out.String()
	}
	fb.refs++
	fb.scanout(d.cfg.Mode)
	d.pending = cm
	d.emit(p, ev)
	d.eng.Spawn(d.name+":commit", cm.work)
	return outFD, nil
}

// work is the commit's tail in a kernel worker: wait for the fences,
// arm the flip, wait for the vblank that latches it, then drop the
// framebuffer it replaced.
func (c *commit) work(p *sim.Proc) {
	d := c.file.d
	start := p.Now()
	for _, fe := range c.fences {
		fe.Wait(p)
	}
	if len(c.fences) > 0 {
		names := ""
		for i, fe := range c.fences {
			if i > 0 {
				names += ","
			}
			names += fe.String()
		}
		d.emit(p, Event{Op: OpFenceWait, Process: c.file.proc.Name(), FB: c.fb.ID, Fence: names, Waited: p.Now() - start}.cause(sim.CauseQueue))
	}
	c.ready, c.readyAt = true, p.Now()
	p.Wait(c.latched)
	if old := c.old; old != nil {
		old.unref(p)
	}
	c.done.Complete()
}

package drm

import (
	"github.com/dmalab/dmalab/sim"
)

// Op is what an Event reports.
type Op uint8

const (
	// OpPrimeImport is DRM_IOCTL_PRIME_FD_TO_HANDLE: a dma-buf imported
	// (attached and mapped for the controller) as GEM handle Handle.
	OpPrimeImport Op = iota + 1
	// OpGEMClose is DRM_IOCTL_GEM_CLOSE.
	OpGEMClose
	// OpAddFB is DRM_IOCTL_MODE_ADDFB2: framebuffer FB made.
	OpAddFB
	// OpRmFB is DRM_IOCTL_MODE_RMFB.
	OpRmFB
	// OpEnable is the mode set that turns the CRTC on; OpDisable the
	// one that turns it off.
	OpEnable
	OpDisable
	// OpCommit is DRM_IOCTL_MODE_ATOMIC: a page flip to FB queued
	// (Failed with EBUSY while another is pending).
	OpCommit
	// OpFenceWait is the commit's wait for its in-fences ending
	// (drm_atomic_helper_wait_for_fences): Waited is how long.
	OpFenceWait
	// OpVBlank is a vertical blanking interval beginning: Seq is the
	// vblank counter.
	OpVBlank
	// OpFlip is a commit latched at vblank Seq: FB is on glass from
	// OnGlass; the out-fence signals and the flip-complete event is
	// queued now. Missed counts the vblanks it came late for.
	OpFlip
	// OpScanout is the start of one refresh's scanout of FB: Bytes read
	// by DMA over the active period.
	OpScanout
	// OpUnderrun is a scanout whose bytes did not all arrive within the
	// active period (the fabric could not feed it).
	OpUnderrun
)

var opNames = [...]string{"", "prime-import", "gem-close", "addfb2", "rmfb", "enable", "disable",
	"atomic-commit", "fence-wait", "vblank", "flip", "scanout", "underrun"}

func (o Op) String() string {
	if int(o) < len(opNames) && o > 0 {
		return opNames[o]
	}
	return "drm-op?"
}

// Event is one event of a display controller, delivered through
// Device.Hooks; the Header's Component is the controller's device name.
type Event struct {
	sim.Header
	Op Op
	// Process is the process whose DRM file made the call.
	Process string
	// Handle is a GEM handle, FB a framebuffer ID.
	Handle uint32
	FB     uint32
	// Buffer names the dma-buf ("dmabuf:3").
	Buffer string
	// Seq is the vblank counter: the vblank's, the one a flip latched
	// at, or for a scanout or underrun the number of its refresh (the
	// vblanks before it). OnGlass is the flip's timestamp (the start of
	// the refresh that shows it).
	Seq     uint64
	OnGlass sim.Time
	// Missed is the number of vblanks a flip came late for.
	Missed int
	// Bytes is what a scanout reads.
	Bytes int64
	// Fence names the in-fence waited for or the out-fence signalled.
	Fence string
	// Waited is how long a commit waited for its fences.
	Waited sim.Time
	// Failed says the call failed; Err says why.
	Failed bool
	Err    string
}

func (d *Device) emit(p *sim.Proc, e Event) {
	if !d.Hooks.Active() {
		return
	}
	e.Time, e.Component = d.eng.Now(), d.name
	if p != nil {
		e.Proc = p.Name()
	}
	if e.Cause == 0 {
		e.Cause = sim.CauseCall
	}
	d.Hooks.Emit(&e)
}

func (e Event) fail(err error) Event {
	e.Failed, e.Err = true, err.Error()
	return e
}

func (e Event) cause(c sim.Cause) Event {
	e.Cause = c
	return e
}

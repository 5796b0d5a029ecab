package drm

import (
	"fmt"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/sim"
)

// The CRTC's timeline, refresh k from the enable:
//
//	FrameStart(k)            scanout of refresh k begins (its first line)
//	FrameStart(k) + Active   vblank k+1 begins: the counter becomes k+1,
//	                         an armed flip latches, its event is sent
//	FrameStart(k+1)          the latched framebuffer begins to scan out
//
// Hardware latches double-buffered plane registers at the start of
// vertical blanking, and a flip armed before then is shown from the
// next refresh; the event's timestamp is that refresh's start.

// refresh begins refresh k: the plane's framebuffer is read by DMA
// over the active period, then the vblank comes.
func (d *Device) refresh(k uint64) {
	start := d.enabledAt + d.cfg.Mode.FrameStart(k)
	if fb := d.cur; fb != nil {
		d.scan(fb, start)
	}
	d.next = d.eng.At(start+d.cfg.Mode.Active(), func() { d.vblank(k) })
}

// scan reads the framebuffer once: one transfer of the controller
// through the DMA layer, its rate held to the frame's bytes over the
// active period, as the display FIFO pulls lines at the pixel clock.
// A transfer whose bytes take longer than that (the fabric shared with
// other masters) is an underrun.
func (d *Device) scan(fb *Framebuffer, start sim.Time) {
	active := d.cfg.Mode.Active()
	rate := float64(fb.bytes) / active.Seconds()
	route := fb.route
	t := &dma.Transfer{Name: d.name + " scanout", Route: &route, Bytes: fb.bytes, Read: fb.spans,
		Opts: []fabric.Option{fabric.MaxRate(rate), fabric.Tag(d)}}
	fb.scans++
	d.stats.Scans++
	d.stats.Bytes += fb.bytes
	d.emit(nil, Event{Op: OpScanout, FB: fb.ID, Bytes: fb.bytes, Seq: d.seq}.cause(sim.CauseTransfer))
	lat := sim.Time(float64(route.Latency()) * d.m.Fabric.Factors().Latency)
	if _, err := d.dev.StartTransfer(t, func(i *dma.TransferInfo) {
		if fb.scans--; fb.scans == 0 {
			fb.idle.Broadcast()
		}
		// The bytes' own time, less the route's latency, against the
		// active period; a picosecond per flow for the rounding up
		// of its end.
		if i.End-i.Start-lat > active+sim.Nanosecond {
			d.stats.Underruns++
			d.emit(nil, Event{Op: OpUnderrun, FB: fb.ID, Bytes: fb.bytes, Seq: d.seq}.cause(sim.CauseTransfer))
		}
	}); err != nil {
		panic(fmt.Sprintf("drm %s: scanout: %v", d.name, err)) // a malformed transfer is a bug of this package
	}
}

// vblank is the start of vertical blanking after refresh k: the
// counter steps, an armed flip latches, and refresh k+1 is scheduled.
func (d *Device) vblank(k uint64) {
	d.seq++
	d.stats.VBlanks++
	d.emit(nil, Event{Op: OpVBlank, Seq: d.seq}.cause(sim.CauseLifecycle))
	if c := d.pending; c != nil && c.ready {
		d.latch(c, d.enabledAt+d.cfg.Mode.FrameStart(k+1))
	}
	d.refresh(k + 1)
}

// latch swaps the commit's framebuffer in: the out-fence signals, the
// flip-complete event is queued on the file, the worker is woken to
// release the framebuffer replaced.
func (d *Device) latch(c *commit, onGlass sim.Time) {
	d.pending = nil
	c.old, d.cur = d.cur, c.fb
	missed := int(d.seq - c.target)
	fl := Flip{FB: c.fb.ID, Committed: c.committed, Ready: c.readyAt, Target: c.target, Seq: d.seq,
		Missed: missed, VBlank: d.eng.Now(), OnGlass: onGlass}
	d.flips = append(d.flips, fl)
	d.stats.Flips++
	d.stats.Missed += uint64(missed)
	ev := Event{Op: OpFlip, Process: c.file.proc.Name(), FB: c.fb.ID, Seq: d.seq, OnGlass: onGlass, Missed: missed}.cause(sim.CauseLifecycle)
	if c.out != nil {
		c.out.Signal(nil)
		ev.Fence = c.out.String()
	}
	if c.req.Event {
		c.file.events = append(c.file.events, FlipEvent{UserData: c.req.UserData, Sequence: d.seq, Time: onGlass, FB: c.fb.ID})
		c.file.cond.Broadcast()
	}
	d.emit(nil, ev)
	c.latched.Complete()
}

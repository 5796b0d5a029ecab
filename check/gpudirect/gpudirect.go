package gpudirect

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/sim"
)

// CallbackBlockLimit is how long a free callback may hold the freeing
// thread before the pack reports it. The guide says only that the
// callback "may block briefly"; the limit is assumed, ten times the
// model's nvidia_p2p call cost (nvp2p.CallCost), long enough for a
// driver to invalidate its mappings and short of anything that waits
// on other threads.
var CallbackBlockLimit = 50 * sim.Microsecond

// pin is a page table the pack saw made and not yet released.
type pin struct {
	// made is the get_pages call, as an origin; proc its thread and
	// process the process whose context the driver pinned in.
	made, proc, process string
	device              int
	addr                mem.GPUAddr
	size                uint64
	bufferID            uint64
	bar                 []mem.PhysAddr
	persistent          bool
	// cb is the free callback's start while it runs.
	cb       *sim.Time
	cbProc   string
	reported bool
}

// pinPage is page i of pin p.
type pinPage struct {
	p *pin
	i int
}

// page is the GPU page that BAR1 maps.
const page = nvp2p.GPUPageSize

// window is a synchronous copy into pinned device memory whose writes
// are not yet visible to peers.
type window struct {
	addr     mem.GPUAddr
	size     uint64
	from, to sim.Time
	origin   string
}

// launch is a kernel launch's buffers on a device, kept until the GPU
// reports the kernel ran.
type launch struct {
	device int
	proc   string
	t      sim.Time
	origin string
	bufs   []span
}

type span struct {
	addr mem.GPUAddr
	size uint64
}

// write is a peer write into pinned GPU memory, kept until the kernels
// that could have run meanwhile are known.
type write struct {
	t   sim.Time
	dev string
	// va is the GPU memory written: unified addresses name it on
	// every GPU, so a kernel on another GPU that uses it is found too.
	va  []span
	bar mem.DMAAddr
}

// Pack checks GPUDirect RDMA: the nvidia_p2p calls of third-party
// drivers, their free callbacks, and peer accesses to pinned GPU
// memory against CUDA copies and kernels. It serves one simulation and
// is not safe for concurrent use.
type Pack struct {
	chk *check.Checker
	mem *mem.Memory

	// pins are the live page tables, in pin order; bar indexes their
	// BAR1 pages by bus address (64 KiB-aligned: a BAR is aligned to its
	// size, and BAR1's pages to 64 KiB from its base).
	pins     []*pin
	bar      map[mem.PhysAddr]pinPage
	windows  []window
	launches []*launch
	writes   []write
}

// New returns a Pack that records on c, hooked to nothing; its P2P,
// Access, CUDA, GPU and Kernel methods take the events.
func New(c *check.Checker) *Pack {
	x := &Pack{chk: c, bar: map[mem.PhysAddr]pinPage{}}
	c.AtEnd(x.Finish)
	return x
}

// Attach makes a Pack on c and hooks it to d's nvidia_p2p events.
func Attach(c *check.Checker, d *nvp2p.Driver) *Pack {
	x := New(c)
	d.Hooks.Hook(x.P2P)
	return x
}

// WatchDMA hooks the pack to x's device accesses: peer reads and
// writes of BAR1 pages.
func (x *Pack) WatchDMA(d *dma.DMA) { d.Hooks.Hook(x.Access) }

// WatchCUDA hooks the pack to cu's observations (copies that return
// before they are visible, kernel launches) and its GPUs' activities
// (when each kernel ran).
func (x *Pack) WatchCUDA(cu *cuda.Driver) {
	cu.Hooks.Hook(x.CUDA)
	cu.System().Hooks.Hook(x.GPU)
}

// WatchKernel hooks the pack to k's process exits: a pin its process
// made and left is reported when the process exits.
func (x *Pack) WatchKernel(k *kernel.Kernel) { k.Hooks.Hook(x.Kernel) }

// Kernel reports, at a process's exit, the pins it made and never
// released that its exit did not take back (the driver takes back the
// pins of the memory the process owned, through their free callbacks:
// what is left was pinned in it from another process's memory).
func (x *Pack) Kernel(e *kernel.Event) {
	if e.Op != kernel.OpExit {
		return
	}
	for _, p := range x.pins {
		if p.process != e.Process || p.reported || p.cb != nil {
			continue
		}
		p.reported = true
		buf := rangeOf(p.addr, p.size)
		x.record(cLeak, e.Time, e.Proc, gpuName(p.device), buf,
			fmt.Sprintf("process %s exited holding its pin of %s: never released with nvidia_p2p_put_pages", e.Process, buf), p.made)
	}
}

// WatchMemory lets the pack read versions: the proof that a peer read
// got old bytes names the version it read.
func (x *Pack) WatchMemory(m *mem.Memory) { x.mem = m }

func (x *Pack) record(k cls, t sim.Time, proc, dev, buf, msg, orig string) {
	x.chk.Record(classes[k], check.Diagnostic{Time: t, Proc: proc, Device: dev, Buffer: buf, Message: msg, Origin: orig})
}

func gpuName(i int) string {
	if i < 0 {
		return ""
	}
	return fmt.Sprintf("gpu%d", i)
}

func rangeOf(a mem.GPUAddr, n uint64) string { return fmt.Sprintf("%v +%d", a, n) }

// P2P checks one nvidia_p2p event.
func (x *Pack) P2P(e *nvp2p.Event) {
	switch e.Op {
	case nvp2p.OpGetPages:
		x.getPages(e)
	case nvp2p.OpPutPages:
		p := x.find(e)
		if e.InCallback {
			orig := ""
			if p != nil {
				orig = p.made
			}
			x.record(cPutInCallback, e.Time, e.Proc, gpuName(e.Device), rangeOf(e.Addr, e.Size),
				fmt.Sprintf("%s from inside the free callback of the pin of %s: the thread freeing the memory holds the lock it takes (deadlock on the hardware; the model returned EDEADLK). The callback must call nvidia_p2p_free_page_table only", e.Call, rangeOf(e.Addr, e.Size)), orig)
			return
		}
		if e.Err == nil && p != nil {
			x.drop(p)
		}
	case nvp2p.OpFreeCallback:
		if p := x.find(e); p != nil {
			t := e.Time
			p.cb, p.cbProc = &t, e.Proc
		}
	case nvp2p.OpCallbackReturned:
		p := x.find(e)
		if p == nil {
			return
		}
		if e.Held > CallbackBlockLimit {
			x.record(cBlocks, e.Time, e.Proc, gpuName(e.Device), rangeOf(e.Addr, e.Size),
				fmt.Sprintf("the free callback of the pin of %s held the freeing thread %s for %v (beyond %v): it may block only briefly, and what it waits on may need the lock that thread holds", rangeOf(e.Addr, e.Size), e.Proc, e.Held, CallbackBlockLimit), p.made)
		}
		x.drop(p)
	case nvp2p.OpFreedWhilePinned:
		if p := x.find(e); p != nil && !p.reported {
			p.reported = true
			x.record(cLeak, e.Time, e.Proc, gpuName(e.Device), rangeOf(e.Addr, e.Size),
				fmt.Sprintf("memory of %s freed while its persistent pin is held: nvidia_p2p_put_pages_persistent was never called (the pin keeps its BAR1 pages)", e.Owner), p.made)
		}
	case nvp2p.OpDMAMapPages:
		if e.IOMMU {
			orig := ""
			if p := x.find(e); p != nil {
				orig = p.made
			}
			x.record(cIOMMU, e.Time, e.Proc, e.Peer, rangeOf(e.Addr, e.Size),
				fmt.Sprintf("%s for %s, whose IOMMU domain translates: refused (-ENOTSUPP); GPUDirect RDMA needs the IOMMU off or in passthrough", e.Call, e.Peer), orig)
		}
	}
}

func (x *Pack) getPages(e *nvp2p.Event) {
	buf := rangeOf(e.Addr, e.Size)
	dev := gpuName(e.Device)
	if e.Err != nil {
		switch {
		case errors.Is(e.Err, syscall.ENOMEM):
			x.record(cBAR1, e.Time, e.Proc, dev, buf,
				fmt.Sprintf("%s of %d bytes by %s: BAR1 exhausted (%d bytes free): %v", e.Call, e.Size, e.Process, e.BARFree, e.Err), "")
		case !errors.Is(e.Err, syscall.EINVAL):
		case !e.Tegra && (uint64(e.Addr)%nvp2p.GPUPageSize != 0 || e.Size%nvp2p.GPUPageSize != 0):
			x.record(cUnaligned, e.Time, e.Proc, dev, buf,
				fmt.Sprintf("%s of %s: the address and length must be multiples of the 64 KiB GPU page", e.Call, buf), "")
		case e.Token == 0 && e.Owner != "" && e.Owner != e.Process:
			x.record(cToken, e.Time, e.Proc, dev, buf,
				fmt.Sprintf("%s with tokens 0 from process %s of memory process %s owns: refused; only the owner may pin without tokens", e.Call, e.Process, e.Owner), "")
		}
		return
	}
	x.add(&pin{
		made: check.Origin(fmt.Sprintf("%s(%s, %d)", e.Call, e.Addr, e.Size), e.Time, e.Proc),
		proc: e.Proc, process: e.Process, device: e.Device, addr: e.Addr, size: e.Size, bufferID: e.BufferID,
		bar: append([]mem.PhysAddr(nil), e.BAR...), persistent: e.Persistent,
	})
}

// find is the live pin an event names: the oldest of the range.
func (x *Pack) find(e *nvp2p.Event) *pin {
	for _, p := range x.pins {
		if p.addr == e.Addr && p.size == e.Size && p.bufferID == e.BufferID && p.persistent == e.Persistent {
			return p
		}
	}
	return nil
}

func (x *Pack) drop(p *pin) {
	for i, q := range x.pins {
		if q == p {
			x.pins = append(x.pins[:i], x.pins[i+1:]...)
			break
		}
	}
	for _, b := range p.bar {
		if x.bar[b].p != p {
			continue
		}
		// An overlapping pin that shares the page names it now.
		delete(x.bar, b)
		for _, q := range x.pins {
			if j := slices.Index(q.bar, b); j >= 0 {
				x.bar[b] = pinPage{q, j}
				break
			}
		}
	}
}

// add makes p live and indexes its BAR1 pages; a page an older pin
// holds stays that pin's.
func (x *Pack) add(p *pin) {
	x.pins = append(x.pins, p)
	for i, b := range p.bar {
		if _, ok := x.bar[b]; !ok {
			x.bar[b] = pinPage{p, i}
		}
	}
}

// resolve is the GPU memory a peer's access to bus addresses [a, a+n)
// reaches through pinned BAR1 pages: the first pin hit and the GPU VA
// ranges, walked a 64 KiB page at a time through the index.
func (x *Pack) resolve(a mem.DMAAddr, n uint64) (*pin, []span) {
	var hit *pin
	var out []span
	for off := uint64(0); off < n; {
		at := mem.PhysAddr(uint64(a) + off)
		in := uint64(at) % page
		step := min(n-off, page-in)
		off += step
		pp, ok := x.bar[at-mem.PhysAddr(in)]
		if !ok {
			continue
		}
		va := pp.p.addr + mem.GPUAddr(uint64(pp.i)*page+in)
		if k := len(out) - 1; k >= 0 && out[k].addr+mem.GPUAddr(out[k].size) == va {
			out[k].size += step
		} else {
			out = append(out, span{va, step})
		}
		if hit == nil {
			hit = pp.p
		}
	}
	return hit, out
}

func overlaps(a mem.GPUAddr, an uint64, b mem.GPUAddr, bn uint64) bool {
	return a < b+mem.GPUAddr(bn) && b < a+mem.GPUAddr(an)
}

// Access checks a device's access: a peer read of pinned GPU memory
// inside a copy's visibility window; peer writes are kept for the
// kernels.
func (x *Pack) Access(e *dma.Event) {
	if e.Op != dma.OpDeviceAccess || e.Failed || len(x.pins) == 0 {
		return
	}
	p, va := x.resolve(e.Addr, e.Size)
	if p == nil {
		return
	}
	if e.Write {
		// Only a kernel launched already can run beside the write.
		if len(x.launches) > 0 {
			x.writes = append(x.writes, write{t: e.Time, dev: e.Device, va: va, bar: e.Addr})
		}
		return
	}
	x.expire(e.Time)
	for _, w := range x.windows {
		if e.Time < w.from || e.Time >= w.to {
			continue
		}
		for _, s := range va {
			if !overlaps(s.addr, s.size, w.addr, w.size) {
				continue
			}
			msg := fmt.Sprintf("%s reads %s (BAR1 %v) %v after %s returned, %v before its writes are visible: the buffer lacks CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, so the read gets the old bytes",
				e.Device, rangeOf(s.addr, s.size), e.Addr, e.Time-w.from, w.origin, w.to-e.Time)
			if x.mem != nil {
				msg += fmt.Sprintf(" (VRAM %v holds version %d, written before the copy)", e.Phys, x.mem.Latest(e.Phys))
			}
			x.record(cBeforeVisible, e.Time, e.Device, e.Device, rangeOf(s.addr, s.size), msg, w.origin)
			return
		}
	}
}

// expire forgets windows closed by now.
func (x *Pack) expire(now sim.Time) {
	out := x.windows[:0]
	for _, w := range x.windows {
		if w.to > now {
			out = append(out, w)
		}
	}
	x.windows = out
}

// CUDA takes copies that return before they are visible and kernel
// launches.
func (x *Pack) CUDA(o *cuda.Observation) {
	switch {
	case o.Op == cuda.OpCopyUnflushed:
		x.windows = append(x.windows, window{addr: o.Addr, size: o.Size, from: o.Time, to: o.Time + o.Visible,
			origin: check.Origin(fmt.Sprintf("%s(%v, %d)", o.Call, o.Addr, o.Size), o.Time, o.Proc)})
	case o.Op == cuda.OpKernel && o.Err == nil:
		// One launch reports each of its accesses at one instant; every
		// launch is kept, whatever memory it uses, so that each kernel
		// the GPU reports finds its own.
		var l *launch
		if n := len(x.launches); n > 0 {
			if last := x.launches[n-1]; last.t == o.Time && last.device == o.Device && last.proc == o.Proc {
				l = last
			}
		}
		if l == nil {
			l = &launch{device: o.Device, proc: o.Proc, t: o.Time, origin: check.Origin(o.Call, o.Time, o.Proc)}
			x.launches = append(x.launches, l)
		}
		if o.Target.Kind == cuda.MemDevice {
			l.bufs = append(l.bufs, span{o.Addr, o.Size})
		}
	}
}

// GPU takes a kernel's run: the peer writes made while it ran, to
// memory it uses, are reported.
func (x *Pack) GPU(a *gpu.Activity) {
	if a.Kind != gpu.ActivityKernel {
		return
	}
	// The launch is the latest one on the device issued by the time the
	// kernel was queued (gpu queues it after its enqueue cost).
	li := -1
	for i, l := range x.launches {
		if l.device == a.Device && l.t <= a.Queued && (li < 0 || l.t >= x.launches[li].t) {
			li = i
		}
	}
	if li < 0 {
		return
	}
	l := x.launches[li]
	x.launches = append(x.launches[:li], x.launches[li+1:]...)
	for _, w := range x.writes {
		if w.t < a.Start || w.t >= a.End {
			continue
		}
		if s, ok := w.hits(l.bufs); ok {
			x.record(cDuringKernel, w.t, w.dev, w.dev, rangeOf(s.addr, s.size),
				fmt.Sprintf("%s writes %s (BAR1 %v) while kernel %s runs on %s (%v..%v) using that memory: no CUDA synchronisation orders the write against the kernel",
					w.dev, rangeOf(s.addr, s.size), w.bar, a.Name, gpuName(a.Device), a.Start, a.End), l.origin)
		}
	}
	x.prune()
}

func (w write) hits(bufs []span) (span, bool) {
	for _, s := range w.va {
		for _, b := range bufs {
			if overlaps(s.addr, s.size, b.addr, b.size) {
				return s, true
			}
		}
	}
	return span{}, false
}

// prune forgets the peer writes no kernel still to be reported can have
// run beside: those before the oldest launch pending.
func (x *Pack) prune() {
	if len(x.launches) == 0 {
		x.writes = x.writes[:0]
		return
	}
	oldest := x.launches[0].t
	out := x.writes[:0]
	for _, w := range x.writes {
		if w.t >= oldest {
			out = append(out, w)
		}
	}
	x.writes = out
}

// Finish is the end of the run at now: free callbacks that never
// returned (a deadlock) and pins still held are reported, once each.
func (x *Pack) Finish(now sim.Time) {
	for _, p := range x.pins {
		if p.reported {
			continue
		}
		p.reported = true
		buf := rangeOf(p.addr, p.size)
		if p.cb != nil {
			x.record(cBlocks, *p.cb, p.cbProc, gpuName(p.device), buf,
				fmt.Sprintf("the free callback of the pin of %s, called in %s at %v, never returned (still blocked at %v): it waits on something the thread freeing the memory holds, a deadlock", buf, p.cbProc, *p.cb, now), p.made)
			continue
		}
		what := "pin"
		if p.persistent {
			what = "persistent pin"
		}
		x.record(cLeak, now, p.proc, gpuName(p.device), buf,
			fmt.Sprintf("%s of %s still held at the end of the run: never released with nvidia_p2p_put_pages", what, buf), p.made)
	}
}

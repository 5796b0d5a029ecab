package dmabufcheck

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/mem"
)

// Access checks one memory access against the live buffers it touches:
// a race with a fence of their reservation objects, a device's use
// after its attachment was unmapped or detached, stale bytes for want
// of DMA_BUF_IOCTL_SYNC. An access that could not happen is ignored.
func (x *Pack) Access(a *mem.Access) {
	if len(x.spans) == 0 || a.Err != nil || a.Size == 0 {
		return
	}
	lo, hi := uint64(a.Phys), uint64(a.Phys)+a.Size
	i := 0
	for j := len(x.spans); i < j; {
		h := int(uint(i+j) >> 1)
		if x.spans[h].hi <= lo {
			i = h + 1
		} else {
			j = h
		}
	}
	var last *buffer
	for ; i < len(x.spans) && x.spans[i].lo < hi; i++ {
		b := x.spans[i].b
		if b == last {
			continue
		}
		last = b
		x.race(a, b)
		if a.Kind == mem.DeviceRead || a.Kind == mem.DeviceWrite {
			x.afterDetach(a, b)
		}
		if a.Stale {
			x.stale(a, b)
		}
	}
}

func writes(k mem.AccessKind) bool { return k == mem.CPUWrite || k == mem.DeviceWrite }

func who(a *mem.Access) string {
	if a.Kind == mem.DeviceRead || a.Kind == mem.DeviceWrite {
		return "device " + a.Proc
	}
	return "CPU (" + a.Proc + ")"
}

// owns says whether accessor (a device's name, or a thread's) does the
// work fence f completes: the fence's timeline or driver is named after
// it or after the thread's process ("cam0", "cam0.out").
func owns(f *fence, accessor string) bool {
	for _, n := range []string{accessor, process(accessor)} {
		for _, name := range []string{f.tlName, f.driver} {
			if name == n || strings.HasPrefix(name, n) && !isWordRune(name[len(n)]) {
				return true
			}
		}
	}
	return false
}

func isWordRune(c byte) bool {
	return c == '_' || unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c))
}

// race reports an access made while a fence of b's reservation object
// that it should have waited for is unsignalled: a reader the writers'
// (and the kernel's), a writer everyone's but the bookkeeping ones.
func (x *Pack) race(a *mem.Access, b *buffer) {
	if len(b.resv) == 0 {
		return
	}
	u := dmabuf.UsageRW(writes(a.Kind))
	for _, rf := range b.resv {
		f := rf.f
		if rf.u > u || f.signaled || owns(f, a.Proc) {
			continue
		}
		if !x.once(fmt.Sprintf("race %d %s %s", f.id, a.Proc, b.name)) {
			continue
		}
		verb := "reads"
		if writes(a.Kind) {
			verb = "writes"
		}
		msg := fmt.Sprintf("%s %s %s (%v +%d) while %s, in its reservation object as %s, has not signalled: %s is racing with the work of %s",
			who(a), verb, b.name, a.Phys, a.Size, f.name, usageName(rf.u), a.Proc, f.tlName)
		msg += fmt.Sprintf("; wait for it first (dma_resv_wait_timeout for %s, or the fence's sync_file)", usageName(u))
		dev := a.Proc
		if a.Kind == mem.CPURead || a.Kind == mem.CPUWrite {
			dev = f.tlName // the other party: the CPU is no device
		}
		x.record(cRace, a.Time, a.Proc, dev, b.name, msg, f.made.origin())
	}
}

func usageName(u dmabuf.Usage) string { return "DMA_RESV_USAGE_" + strings.ToUpper(u.String()) }

// afterDetach reports a device access to b by a device that had b
// mapped and has it mapped no more.
func (x *Pack) afterDetach(a *mem.Access, b *buffer) {
	if !b.mappedBy[a.Proc] {
		return
	}
	// Every device access to the buffer comes here: no allocation.
	var gone *attachment
	for _, at := range b.atts {
		if at.dev != a.Proc {
			continue
		}
		if at.mapped != nil {
			return
		}
		if at.unmapped != nil && (gone == nil || at.unmapped.t > gone.unmapped.t || at.unmapped.t == gone.unmapped.t && at.id > gone.id) {
			gone = at
		}
	}
	if gone == nil || !x.once(fmt.Sprintf("detach %s %s %d %v", b.name, a.Proc, gone.id, gone.unmapped.t)) {
		return
	}
	how := "unmapped"
	if gone.detached != nil {
		how = "detached"
	}
	msg := fmt.Sprintf("device %s %s %s (%v +%d) after its attachment %d was %s (%s at %s): the memory is no longer the device's to use",
		a.Proc, map[bool]string{true: "writes", false: "reads"}[writes(a.Kind)], b.name, a.Phys, a.Size, gone.id, how, gone.unmapped.call, gone.unmapped.at())
	x.record(cDetach, a.Time, a.Proc, a.Proc, b.name, msg, gone.attached.origin())
}

// stale reports a stale access to b between the CPU and a
// non-coherent importer: a CPU read without begin_cpu_access after the
// device wrote, a device read of what the CPU wrote without
// end_cpu_access.
func (x *Pack) stale(a *mem.Access, b *buffer) {
	var imp *attachment
	for _, at := range b.sortedAtts() {
		if at.mapped != nil && !x.coherent(at.dev) {
			if a.Kind == mem.DeviceRead && at.dev != a.Proc {
				continue
			}
			imp = at
			break
		}
	}
	if imp == nil {
		return
	}
	key := fmt.Sprintf("%s %s %v %d", b.name, a.Proc, a.Time, a.Kind)
	if key == x.lastStale {
		return
	}
	x.lastStale = key
	var msg string
	switch a.Kind {
	case mem.CPURead:
		msg = fmt.Sprintf("CPU (%s) read %s (%v +%d) and obtained version %d at %v, older than the latest write, %d: the buffer is mapped by the non-coherent %s, whose writes do not reach the lines the CPU's cache holds",
			a.Proc, b.name, a.Phys, a.Size, a.Got, a.StaleAt, a.Want, imp.dev)
		if c, ok := b.cpu[process(a.Proc)]; ok {
			msg += fmt.Sprintf("; the read is inside a begin_cpu_access made at %s, before the device's write: begin it after the device's fence", c.at())
		} else {
			msg += "; begin the CPU access with DMA_BUF_IOCTL_SYNC(DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ) (dma_buf_begin_cpu_access) first"
		}
	case mem.DeviceRead:
		msg = fmt.Sprintf("non-coherent device %s read %s (%v +%d) and obtained version %d at %v, older than the latest write, %d, which a CPU left in its cache",
			a.Proc, b.name, a.Phys, a.Size, a.Got, a.StaleAt, a.Want)
		msg += "; end the CPU access with DMA_BUF_IOCTL_SYNC(DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE) (dma_buf_end_cpu_access) before the device reads"
		if b.lastEnd.call != "" {
			msg += fmt.Sprintf(" (the last end_cpu_access was at %s)", b.lastEnd.at())
		}
	default:
		return
	}
	x.record(cUnsynced, a.Time, a.Proc, imp.dev, b.name, msg, imp.mapped.origin())
}

// coherent says whether device dev snoops the CPU caches; false when
// the pack does not know (a stale access proved it does not).
func (x *Pack) coherent(dev string) bool {
	if x.dma == nil {
		return false
	}
	d, err := x.dma.Device(dev)
	return err == nil && d.Coherent()
}

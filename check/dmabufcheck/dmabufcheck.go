package dmabufcheck

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// call is a call's provenance: what, when, by whom.
type call struct {
	call string
	t    sim.Time
	proc string
}

func (c call) origin() string { return check.Origin(c.call, c.t, c.proc) }

func (c call) at() string {
	s := c.t.String()
	if c.proc != "" {
		s += " by " + c.proc
	}
	return s
}

// Pack checks the buffers and fences of one DMA-BUF layer. It serves
// one simulation and is not safe for concurrent use.
type Pack struct {
	chk *check.Checker
	dma *dma.DMA

	bufs   map[string]*buffer
	fences map[uint64]*fence
	// spans are the live buffers' physical runs, sorted by start, for
	// the memory hook.
	spans []span
	// waiting is, per process, the fences of the wait it is blocked in.
	waiting map[string][]*waiter

	// fds is the kernel's descriptor tables as its events tell them:
	// per process, descriptor → file; held the files each process ever
	// had a descriptor of; sent the pairs of processes a descriptor
	// passed between (SCM_RIGHTS), either way.
	fds  map[string]map[int]fd
	held map[string]map[string]bool
	sent map[[2]string]bool

	// reported says which findings were made already: one per fence
	// and accessor, per buffer and device, per fence at the end.
	reported map[string]bool
	// lastStale is the last stale access reported (an access crossing
	// several physical runs is reported once).
	lastStale string
}

// buffer is what the pack knows of one dma-buf.
type buffer struct {
	name, exporter string
	made           call
	pages          []mem.PhysRange
	atts           map[int]*attachment
	resv           []resvFence
	// cpu is, per process, its open begin_cpu_access; lastEnd the last
	// end_cpu_access.
	cpu     map[string]call
	lastEnd call
	// mappedBy are the devices that had a mapping once.
	mappedBy map[string]bool
}

type attachment struct {
	id       int
	dev      string
	attached call
	detached *call
	mapped   *call
	unmapped *call
}

type resvFence struct {
	f *fence
	u dmabuf.Usage
}

type fence struct {
	id             uint64
	name           string
	ctx, seq       uint64
	made           call
	signaled       bool
	signal         call
	waiters        []*waiter
	inResv         []string
	driver, tlName string
}

type waiter struct {
	proc   string
	begin  sim.Time
	buffer string
	ended  bool
	failed bool
	end    sim.Time
}

type span struct {
	lo, hi uint64
	b      *buffer
}

type fd struct {
	file string
	made call
}

// New returns a Pack that records on c, hooked to nothing; its DMABuf,
// Access and Kernel methods take the events.
func New(c *check.Checker) *Pack {
	x := &Pack{chk: c, bufs: map[string]*buffer{}, fences: map[uint64]*fence{}, waiting: map[string][]*waiter{},
		fds: map[string]map[int]fd{}, held: map[string]map[string]bool{}, sent: map[[2]string]bool{}, reported: map[string]bool{}}
	c.AtEnd(x.Finish)
	return x
}

// Attach makes a Pack on c and hooks it to l's events.
func Attach(c *check.Checker, l *dmabuf.Layer) *Pack {
	x := New(c)
	l.Hooks.Hook(x.DMABuf)
	return x
}

// WatchMemory hooks the pack to m's accesses: races with fences, uses
// after detach and stale CPU accesses need them.
func (x *Pack) WatchMemory(m *mem.Memory) { m.Hooks.Hook(x.Access) }

// WatchKernel hooks the pack to k's descriptor events: a dma_buf_get of
// a descriptor that is not the process's then names the process whose
// descriptor that number is.
func (x *Pack) WatchKernel(k *kernel.Kernel) { k.Hooks.Hook(x.Kernel) }

// WatchDMA lets the pack ask d which importers are coherent.
func (x *Pack) WatchDMA(d *dma.DMA) { x.dma = d }

func (x *Pack) record(k cls, t sim.Time, proc, dev, buf, msg, orig string) {
	x.chk.Record(classes[k], check.Diagnostic{Time: t, Proc: proc, Device: dev, Buffer: buf, Message: msg, Origin: orig})
}

// once reports whether key is new, and marks it seen.
func (x *Pack) once(key string) bool {
	if x.reported[key] {
		return false
	}
	x.reported[key] = true
	return true
}

func opCall(e *dmabuf.Event) call {
	return call{t: e.Time, proc: e.Proc}
}

// DMABuf checks one event of the DMA-BUF layer.
func (x *Pack) DMABuf(e *dmabuf.Event) {
	switch e.Op {
	case dmabuf.OpExport:
		x.export(e)
	case dmabuf.OpGet:
		x.get(e)
	case dmabuf.OpAttach:
		if b := x.bufs[e.Buffer]; b != nil && !e.Failed {
			c := opCall(e)
			c.call = fmt.Sprintf("dma_buf_attach(%s, %s)", e.Buffer, e.Device)
			b.atts[e.Attachment] = &attachment{id: e.Attachment, dev: e.Device, attached: c}
		}
	case dmabuf.OpDetach, dmabuf.OpMap, dmabuf.OpUnmap:
		x.attachmentOp(e)
	case dmabuf.OpBeginCPU:
		if b := x.bufs[e.Buffer]; b != nil && !e.Failed {
			c := opCall(e)
			c.call = fmt.Sprintf("dma_buf_begin_cpu_access(%s, %s)", e.Buffer, dirName(e.Dir))
			b.cpu[process(e.Proc)] = c
		}
	case dmabuf.OpEndCPU:
		if b := x.bufs[e.Buffer]; b != nil {
			delete(b.cpu, process(e.Proc))
			b.lastEnd = opCall(e)
			b.lastEnd.call = fmt.Sprintf("dma_buf_end_cpu_access(%s, %s)", e.Buffer, dirName(e.Dir))
		}
	case dmabuf.OpRelease:
		x.release(e)
	case dmabuf.OpFenceInit:
		f := &fence{id: e.FenceIDs[0], name: e.Fence, ctx: e.Context, seq: e.Seqno,
			made: call{call: "dma_fence_init(" + e.Fence + ")", t: e.Time, proc: e.Proc}}
		f.driver, f.tlName = fenceNames(e.Fence)
		x.fences[f.id] = f
	case dmabuf.OpFenceSignal:
		x.signal(e)
	case dmabuf.OpResvAdd, dmabuf.OpImportSyncFile:
		if b := x.bufs[e.Buffer]; b != nil && !e.Failed {
			for _, id := range e.FenceIDs {
				if f := x.fences[id]; f != nil {
					b.add(f, e.Usage)
				}
			}
		}
	case dmabuf.OpFenceWaitBegin:
		var ws []*waiter
		for _, id := range e.FenceIDs {
			if f := x.fences[id]; f != nil {
				w := &waiter{proc: e.Proc, begin: e.Time, buffer: e.Buffer}
				f.waiters = append(f.waiters, w)
				ws = append(ws, w)
			}
		}
		x.waiting[e.Proc] = ws
	case dmabuf.OpFenceWait:
		for _, w := range x.waiting[e.Proc] {
			w.ended, w.failed, w.end = true, e.Failed, e.Time
		}
		delete(x.waiting, e.Proc)
	}
}

// fenceNames parses "driver:timeline ctx:seq" into driver and timeline.
func fenceNames(name string) (string, string) {
	n, _, _ := strings.Cut(name, " ")
	d, tl, _ := strings.Cut(n, ":")
	return d, tl
}

// add is dma_resv_add_fence's replacement rule (dmabuf's Resv.AddFence),
// so that the pack's copy of the object holds what the object holds.
func (b *buffer) add(f *fence, u dmabuf.Usage) {
	if !slices.Contains(f.inResv, b.name) {
		f.inResv = append(f.inResv, b.name)
	}
	for i, old := range b.resv {
		later := old.f.ctx == f.ctx && old.f.seq > f.seq
		if old.f.ctx == f.ctx && old.u >= u && !later || old.f.signaled {
			b.resv[i] = resvFence{f, u}
			return
		}
	}
	b.resv = append(b.resv, resvFence{f, u})
}

func (x *Pack) export(e *dmabuf.Event) {
	b := &buffer{name: e.Buffer, exporter: e.Exporter, pages: e.Pages, atts: map[int]*attachment{}, cpu: map[string]call{}, mappedBy: map[string]bool{},
		made: call{call: fmt.Sprintf("dma_buf_export(%s, %d)", e.Exporter, e.Size), t: e.Time, proc: e.Proc}}
	x.bufs[e.Buffer] = b
	for _, r := range e.Pages {
		x.spans = append(x.spans, span{lo: uint64(r.Start), hi: uint64(r.Start) + r.Size, b: b})
	}
	slices.SortFunc(x.spans, func(a, c span) int { return cmp.Compare(a.lo, c.lo) })
}

// attachmentOp checks a detach, map or unmap: one on an attachment
// already detached is a use after detach.
func (x *Pack) attachmentOp(e *dmabuf.Event) {
	b := x.bufs[e.Buffer]
	if b == nil {
		return
	}
	a := b.atts[e.Attachment]
	if a == nil {
		return
	}
	what := map[dmabuf.Op]string{dmabuf.OpDetach: "dma_buf_detach", dmabuf.OpMap: "dma_buf_map_attachment", dmabuf.OpUnmap: "dma_buf_unmap_attachment"}[e.Op]
	if a.detached != nil {
		msg := fmt.Sprintf("%s of %s's attachment %d to %s after its dma_buf_detach at %s", what, a.dev, a.id, e.Buffer, a.detached.at())
		if e.Op == dmabuf.OpMap {
			msg += ": a map without an attach"
		}
		if e.Failed {
			msg += " (refused: " + errnoOf(e.Err) + ")"
		}
		x.record(cDetach, e.Time, e.Proc, a.dev, e.Buffer, msg, a.attached.origin())
		return
	}
	if e.Failed {
		return
	}
	c := opCall(e)
	switch e.Op {
	case dmabuf.OpDetach:
		c.call = fmt.Sprintf("dma_buf_detach(%s, %s)", e.Buffer, a.dev)
		a.detached = &c
		if a.mapped != nil {
			a.unmapped, a.mapped = &c, nil
		}
	case dmabuf.OpMap:
		c.call = fmt.Sprintf("dma_buf_map_attachment(%s, %s, %s)", e.Buffer, a.dev, dirName(e.Dir))
		a.mapped, a.unmapped = &c, nil
		b.mappedBy[a.dev] = true
	case dmabuf.OpUnmap:
		c.call = fmt.Sprintf("dma_buf_unmap_attachment(%s, %s)", e.Buffer, a.dev)
		a.unmapped, a.mapped = &c, nil
	}
}

// errnoOf is the last part of an error's text: its errno's words.
func errnoOf(err string) string {
	if i := strings.LastIndex(err, ": "); i >= 0 {
		return err[i+2:]
	}
	return err
}

// release reports a buffer released while mapped, and forgets it.
func (x *Pack) release(e *dmabuf.Event) {
	b := x.bufs[e.Buffer]
	if b == nil {
		return
	}
	var mapped []*attachment
	for _, a := range b.sortedAtts() {
		if a.mapped != nil {
			mapped = append(mapped, a)
		}
	}
	if len(mapped) > 0 {
		a := mapped[0]
		msg := fmt.Sprintf("%s (exporter %s) released, its last reference gone, while %s still mapped: %s's attachment %d, mapped at %s",
			e.Buffer, e.Exporter, check.Plural(len(mapped), "attachment")+" "+isAre(len(mapped)), a.dev, a.id, a.mapped.at())
		msg += "; the importer's device may still reach memory the exporter has freed"
		x.record(cReleaseMapped, e.Time, e.Proc, a.dev, e.Buffer, msg, a.mapped.origin())
	}
	delete(x.bufs, e.Buffer)
	x.spans = slices.DeleteFunc(x.spans, func(s span) bool { return s.b == b })
	b.resv = nil
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func (b *buffer) sortedAtts() []*attachment {
	as := make([]*attachment, 0, len(b.atts))
	for _, a := range b.atts {
		as = append(as, a)
	}
	slices.SortFunc(as, func(a, c *attachment) int { return a.id - c.id })
	return as
}

// signal records a signal, and reports a second one.
func (x *Pack) signal(e *dmabuf.Event) {
	f := x.fences[e.FenceIDs[0]]
	if f == nil {
		return
	}
	if e.Failed || f.signaled {
		msg := fmt.Sprintf("dma_fence_signal of %s, already signalled", f.name)
		if f.signaled {
			msg += " at " + f.signal.at()
		}
		msg += " (dma_fence_signal returns -EINVAL): two completions claim the same work, or one was reused for another job"
		x.record(cDouble, e.Time, e.Proc, f.tlName, "", msg, f.made.origin())
		return
	}
	f.signaled = true
	f.signal = call{call: "dma_fence_signal(" + f.name + ")", t: e.Time, proc: e.Proc}
	f.waiters = nil // only a fence never signalled names them
}

// Finish reports the fences that a process waited on, or that sat in
// a reservation object, and never signalled, each once, with their
// waiters. The Checker calls it at the end of a run.
func (x *Pack) Finish(now sim.Time) {
	ids := make([]uint64, 0, len(x.fences))
	for id, f := range x.fences {
		if !f.signaled && (len(f.waiters) > 0 || len(f.inResv) > 0) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		f := x.fences[id]
		if !x.once(fmt.Sprintf("never %d", id)) {
			continue
		}
		msg := fmt.Sprintf("%s never signalled by the end of the run", f.name)
		proc := ""
		var ws []string
		for _, w := range f.waiters {
			if proc == "" {
				proc = w.proc
			}
			s := fmt.Sprintf("%s from %v", w.proc, w.begin)
			if w.buffer != "" {
				s += " (through " + w.buffer + "'s reservation)"
			}
			switch {
			case !w.ended:
				s += ", still blocked"
			case w.failed:
				s += fmt.Sprintf(", gave up at %v (ETIME)", w.end)
			}
			ws = append(ws, s)
		}
		if len(ws) > 0 {
			msg += "; waited on by " + strings.Join(ws, "; ")
		}
		if len(f.inResv) > 0 {
			msg += "; in the reservation object of " + strings.Join(f.inResv, ", ")
		}
		x.record(cNever, now, proc, f.tlName, "", msg, f.made.origin())
	}
}

func dirName(d dma.Direction) string {
	switch d {
	case dma.Bidirectional:
		return "DMA_BIDIRECTIONAL"
	case dma.ToDevice:
		return "DMA_TO_DEVICE"
	case dma.FromDevice:
		return "DMA_FROM_DEVICE"
	}
	return fmt.Sprintf("direction(%d)", int(d))
}

// process is the process of a thread name ("app/worker" → "app").
func process(thread string) string {
	p, _, _ := strings.Cut(thread, "/")
	return p
}

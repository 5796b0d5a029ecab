package dmalab

import (
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// factors lists the platform's efficiency factors with their sources.
func factors(spec *platform.Spec) map[string]report.Factor {
	f := map[string]report.Factor{
		"fabric.bandwidth_factor": {Value: spec.Fabric.Bandwidth(), Source: spec.Fabric.BandwidthFactor.Source},
		"fabric.latency_factor":   {Value: spec.Fabric.Latency(), Source: spec.Fabric.LatencyFactor.Source},
		"fabric.cross_traffic":    {Value: spec.Fabric.Cross(), Source: spec.Fabric.CrossTraffic.Source},
	}
	link := func(name string, l platform.PCIeLink) {
		if l.Bandwidth.V > 0 {
			return // a link given by its bandwidth has no efficiency factor
		}
		f[name+".link.efficiency"] = report.Factor{Value: l.Efficiency.V, Source: l.Efficiency.Source}
	}
	for _, s := range spec.Switches {
		link(s.Name, s.Link)
	}
	for _, g := range spec.GPUs {
		if !g.Integrated {
			link(g.Name, g.Link)
		}
	}
	for _, d := range spec.Devices {
		link(d.Name, d.Link)
	}
	for _, l := range spec.NVLinks {
		f["nvlink."+l.A+"-"+l.B+".efficiency"] = report.Factor{Value: l.Efficiency.V, Source: l.Efficiency.Source}
	}
	return f
}

// buildVersion is the program's module version and VCS revision, as the Go
// toolchain stamped them in the binary ("(devel)" for a build from a
// work tree), for the trace's metadata.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += " (modified)"
		}
	}
	return v
}

// tracer draws a system's events on a report.Trace as they happen:
//
//   - the machine's process has a counter per link direction, its load
//     in bytes/s at every change (the flows crossing it, each at its
//     rate times the bytes the hop carries per byte);
//   - a process per GPU and device, with a track per engine (a GPU's
//     copy engines, a device's DMA queues), one for the transfers of a
//     master without a queue (a GPU's SMs, a NIC's rings), and one per
//     stream for a GPU's kernels;
//   - the CPU's process, a track per thread of the model, with its CPU
//     work (sim.CPUWork: what CPUTime counts), named after the DMA-API
//     call or kernel operation that ended with it.
//
// Tracks are named as the platform names things: a link by its two ends
// and its kind (PCIe generation and width, or an on-chip port such as a
// Zynq AXI HP port), never by the fabric's internal link names.
type tracer struct {
	t *report.Trace
	// name, when set, is the system's name in another system's trace.
	name string
	spec *platform.Spec
	m    *machine.Machine
	cpu  *report.TraceProcess

	links   map[linkDir]*linkLoad
	flows   map[*fabric.Flow]float64
	dirty   []*linkLoad
	dirtyAt sim.Time

	threads map[string]*cpuThread
	// hardware are the prefixes of processes that are not CPU threads:
	// a GPU stream's worker computes on the GPU.
	hardware []string
}

// maxCPUTracks bounds the CPU's tracks: a scenario that spawns a thread
// per measurement (transfers) would otherwise get a track for each.
const maxCPUTracks = 16

type linkDir struct {
	l   *fabric.Link
	dir fabric.Dir
}

// linkLoad is a link direction's load: the sum of its flows' rates.
type linkLoad struct {
	c     *report.Counter
	load  float64
	flows int
	dirty bool
}

// cpuThread is one thread's CPU track, with its last span held back
// until the event that names it (a call reports as it returns) can come.
type cpuThread struct {
	track  *report.Track
	shared bool
	pend   cpuSpan
	has    bool
}

type cpuSpan struct {
	proc       string
	name, cat  string
	start, end sim.Time
	named      bool
}

// newTracer hooks a tracer on the machine, the DMA layer and the kernel.
func newTracer(s *System, t *report.Trace, name string) *tracer {
	tc := &tracer{
		t: t, spec: s.Spec, m: s.Machine, name: name,
		links:   map[linkDir]*linkLoad{},
		flows:   map[*fabric.Flow]float64{},
		threads: map[string]*cpuThread{},
	}
	for _, g := range s.Spec.GPUs {
		tc.hardware = append(tc.hardware, g.Name+".stream")
	}
	s.DMA.Hooks.Hook(tc.dmaEvent)
	s.Machine.Fabric.Hooks.Hook(tc.flowEvent)
	s.Engine.CPU.Hook(tc.cpuWork)
	s.Kernel.Hooks.Hook(func(e *kernel.Event) { tc.named(e.Proc, e.Time, e.Op.String(), e.Cause) })
	return tc
}

// process is the trace process called name, after the system's name
// when it draws into another system's trace.
func (tc *tracer) process(name string) *report.TraceProcess {
	if tc.name != "" {
		name = tc.name + ": " + name
	}
	return tc.t.Process(name)
}

// machine is the process of the machine's links: the trace's first, or
// the system's own in another system's trace.
func (tc *tracer) machine() *report.TraceProcess {
	if tc.name != "" {
		return tc.t.Process(tc.name)
	}
	return tc.t.Machine()
}

// hookGPU draws the GPUs' kernels, once the CUDA façade is up.
func (tc *tracer) hookGPU(g *gpu.System) {
	g.Hooks.Hook(func(a *gpu.Activity) {
		if a.Kind != gpu.ActivityKernel || a.Device < 0 || a.Device >= len(tc.m.GPUs) {
			return
		}
		name := tc.m.GPUs[a.Device].Name
		tc.device(name).Thread(fmt.Sprintf("%s.stream%d kernels", name, a.Stream)).
			Slice(a.Cause.String(), a.Name, a.Start, a.End, report.Arg{Key: "queued_us", Value: a.Queued})
	})
}

// device is the trace process of a GPU or device: its name, its kind
// and the link it hangs on, as the platform describes them.
func (tc *tracer) device(name string) *report.TraceProcess {
	for _, g := range tc.spec.GPUs {
		if g.Name == name {
			if g.Integrated {
				return tc.process(name + " (integrated GPU)")
			}
			return tc.process(fmt.Sprintf("%s (GPU, %s below %s)", name, linkKind(g.Link), g.Parent))
		}
	}
	for _, d := range tc.spec.Devices {
		if d.Name == name {
			return tc.process(fmt.Sprintf("%s (%s, %s below %s)", name, d.Kind, linkKind(d.Link), d.Parent))
		}
	}
	return tc.process(name)
}

// linkKind is what a device's upstream link is: PCIe of a generation and
// width, or an on-chip port given by its bandwidth (a Zynq AXI HP port,
// a Tegra memory client), which no PCIe generation describes.
func linkKind(l platform.PCIeLink) string {
	if l.Bandwidth.V > 0 {
		return "on-chip port"
	}
	return fmt.Sprintf("PCIe Gen%d x%d", l.Gen, l.Width)
}

func (tc *tracer) dmaEvent(e *dma.Event) {
	if e.Proc != "" {
		// The call as its C name ("dma_map_single"), else the op.
		name, _, ok := strings.Cut(e.Call, "(")
		if !ok || name == "" {
			name = e.Op.String()
		}
		tc.named(e.Proc, e.Time, name, e.Cause)
	}
	tr := e.Transfer
	if e.Op != dma.OpTransfer || tr == nil {
		return
	}
	thread := tr.Engine
	if thread == "" {
		// A master without a queue: a GPU's SMs, a device's rings.
		thread = e.Device + " DMA"
		for _, g := range tc.spec.GPUs {
			if g.Name == e.Device {
				thread = e.Device + " SMs"
			}
		}
	}
	cat := sim.CauseTransfer.String()
	if tr.Err != nil {
		cat = sim.CauseFault.String()
	}
	args := []report.Arg{
		{Key: "bytes", Value: tr.Bytes},
		{Key: "src", Value: tr.Src.String()},
		{Key: "dst", Value: tr.Dst.String()},
		{Key: "call_us", Value: tr.Call},
		{Key: "overhead_us", Value: tr.Overhead},
		{Key: "queue_us", Value: tr.Queue},
		{Key: "translate_us", Value: tr.Translate},
	}
	if tr.Engine == "" {
		// Without a queue, a master's transfers overlap as far as its
		// rings or queue depth let them: an async group, not a lane
		// per transfer in flight.
		args = append(args, report.Arg{Key: "transfer", Value: tr.Name})
		tc.device(e.Device).Async(cat, thread, tr.Start, tr.End, args...)
		return
	}
	tc.device(e.Device).Thread(thread).Slice(cat, tr.Name, tr.Start, tr.End, args...)
}

// flowEvent keeps each link direction's load and writes its counter
// once per instant at which it changed.
func (tc *tracer) flowEvent(e *fabric.Event) {
	if e.Time != tc.dirtyAt {
		tc.flushLinks()
		tc.dirtyAt = e.Time
	}
	var rate float64
	switch e.Kind {
	case fabric.FlowRate:
		rate = e.Rate
	case fabric.FlowEnd:
	default:
		return
	}
	old, seen := tc.flows[e.Flow]
	if e.Kind == fabric.FlowEnd {
		if !seen {
			return
		}
		delete(tc.flows, e.Flow)
	} else {
		tc.flows[e.Flow] = rate
	}
	for _, h := range e.Flow.Route().Hops {
		ll := tc.link(h.Link, h.Dir)
		w := h.Weight
		if w == 0 {
			w = 1
		}
		ll.load += (rate - old) * w
		switch {
		case !seen:
			ll.flows++
		case e.Kind == fabric.FlowEnd:
			ll.flows--
		}
		if ll.flows == 0 {
			ll.load = 0 // no rounding left over
		}
		if !ll.dirty {
			ll.dirty = true
			tc.dirty = append(tc.dirty, ll)
		}
	}
}

func (tc *tracer) flushLinks() {
	for _, ll := range tc.dirty {
		ll.c.Set(tc.dirtyAt, math.Round(ll.load))
		ll.dirty = false
	}
	tc.dirty = tc.dirty[:0]
}

// link is the load of l in direction d; a shared link has one for both.
func (tc *tracer) link(l *fabric.Link, d fabric.Dir) *linkLoad {
	if l.Sharing() == fabric.Shared {
		d = fabric.AtoB
	}
	k := linkDir{l, d}
	ll := tc.links[k]
	if ll == nil {
		ll = &linkLoad{c: tc.machine().Counter(tc.linkLabel(l, d), "bytes/s")}
		tc.links[k] = ll
	}
	return ll
}

// linkLabel names a link (direction) as the platform does: its ends and
// its kind.
func (tc *tracer) linkLabel(l *fabric.Link, d fabric.Dir) string {
	from, to := l.From(d).Name(), l.To(d).Name()
	name := l.Name()
	arrow := from + " → " + to
	switch {
	case strings.HasSuffix(name, ".dram"):
		return strings.TrimSuffix(name, ".dram") + " DRAM"
	case strings.HasSuffix(name, ".hbm"):
		return strings.TrimSuffix(name, ".hbm") + " HBM"
	case strings.HasSuffix(name, ".mc"):
		return strings.TrimSuffix(name, ".mc") + " memory port"
	case strings.HasSuffix(name, ".line"):
		return arrow + " (line)"
	case strings.HasPrefix(name, "nvlink."):
		return arrow + " (NVLink)"
	case strings.HasSuffix(name, ".pcie"):
		if pl, ok := tc.upstream(strings.TrimSuffix(name, ".pcie")); ok {
			return arrow + " (" + linkKind(pl) + ")"
		}
	}
	for _, rc := range tc.spec.RootComplexes {
		if rc.Name == name {
			return arrow + " (root complex)"
		}
	}
	for _, sl := range tc.spec.SocketLinks {
		if sl.Name == name {
			return arrow + " (" + name + ")"
		}
	}
	return name + " " + arrow
}

// upstream is the link a switch, GPU or device hangs on.
func (tc *tracer) upstream(name string) (platform.PCIeLink, bool) {
	for _, s := range tc.spec.Switches {
		if s.Name == name {
			return s.Link, true
		}
	}
	for _, g := range tc.spec.GPUs {
		if g.Name == name {
			return g.Link, true
		}
	}
	for _, d := range tc.spec.Devices {
		if d.Name == name {
			return d.Link, true
		}
	}
	return platform.PCIeLink{}, false
}

// cpuWork draws a span of a thread's CPU work. The span is held until
// the thread's next span or an event at its end names it.
func (tc *tracer) cpuWork(w *sim.CPUWork) {
	th := tc.thread(w.Proc)
	if th == nil {
		return
	}
	name := "cpu"
	if w.Charged {
		name = "cpu copy"
	}
	cat := w.Cause.String()
	if th.has && !th.pend.named && th.pend.end == w.Time && th.pend.cat == cat {
		// Back-to-back work of one kind (cache maintenance line after
		// line) is one slice.
		th.pend.end = w.End
		return
	}
	tc.flushThread(th)
	th.pend = cpuSpan{proc: w.Proc, name: name, cat: cat, start: w.Time, end: w.End}
	th.has = true
}

// named names the held span of proc's thread that ended at t after the
// call or operation that ended then.
func (tc *tracer) named(proc string, t sim.Time, name string, cause sim.Cause) {
	if proc == "" {
		return
	}
	th := tc.threads[proc]
	if th == nil || !th.has || th.pend.named || th.pend.end != t {
		return
	}
	th.pend.name, th.pend.named = name, true
	if cause != 0 {
		th.pend.cat = cause.String()
	}
}

func (tc *tracer) thread(proc string) *cpuThread {
	if th := tc.threads[proc]; th != nil {
		return th
	}
	for _, h := range tc.hardware {
		if strings.HasPrefix(proc, h) {
			return nil
		}
	}
	if tc.cpu == nil {
		tc.cpu = tc.process("CPU")
	}
	label := proc
	if label == "" {
		label = "(unnamed thread)"
	}
	th := &cpuThread{}
	if len(tc.threads) < maxCPUTracks {
		th.track = tc.cpu.Thread(label)
	} else {
		// Past the bound, threads share one track; their slices carry
		// the thread's name.
		th.shared = true
	}
	tc.threads[proc] = th
	return th
}

func (tc *tracer) flushThread(th *cpuThread) {
	if !th.has {
		return
	}
	p := th.pend
	if th.shared {
		// An async group: the held spans of many threads come out of
		// order of start, which lanes would spread over many tracks.
		tc.cpu.Async(p.cat, "other threads", p.start, p.end,
			report.Arg{Key: "thread", Value: p.proc}, report.Arg{Key: "work", Value: p.name})
	} else {
		th.track.Slice(p.cat, p.name, p.start, p.end)
	}
	th.has = false
}

// close writes what is held back: the last CPU spans and the links'
// last changes, in a fixed order.
func (tc *tracer) close() {
	tc.flushLinks()
	for _, th := range tc.sortedThreads() {
		tc.flushThread(th)
	}
}

func (tc *tracer) sortedThreads() []*cpuThread {
	names := make([]string, 0, len(tc.threads))
	for n := range tc.threads {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*cpuThread, 0, len(names))
	for _, n := range names {
		if th := tc.threads[n]; th != nil {
			out = append(out, th)
		}
	}
	return out
}

// closeTrace ends the trace, when the system has one: the tracer's held
// spans, then the metadata (the run's parameters as the result has
// them, and runErr's text when the run failed) and the end of the
// document. It returns the trace writer's first error; closing again
// does nothing more.
func (s *System) closeTrace(runErr error) error {
	if s.tracer != nil {
		s.tracer.close()
		s.tracer = nil
	}
	if s.Trace == nil {
		return nil
	}
	m := s.Trace.Meta()
	m.Scenario, m.Platform = s.Result.Scenario, s.Result.Platform
	m.Params = s.Result.Params
	if runErr != nil && m.Error == "" {
		m.Error = UsageMessage(runErr)
	}
	s.Trace.SetMeta(m)
	return s.Trace.Close()
}

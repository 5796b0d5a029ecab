package scenario

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
	"github.com/dmalab/dmalab/xfer"
)

var umPrefetchModes = []string{"on-demand", "prefetch", "advise", "device"}

// Bounds of the unified-memory scenarios' parameters. The model raises a
// fault per 4 KiB page and keeps state per touched 2 MiB block, so a
// managed buffer costs time and memory with its size: 1 TiB is well above
// any GPU's memory (an H200 has 141 GiB) and still a bounded run. The
// counts bound the rows.
const (
	maxManaged = 1 << 40
	maxKernels = 10000
	maxPasses  = 10000
)

func init() {
	register(&Scenario{
		Name:     "um-prefetch",
		Summary:  "the first kernel on managed memory without prefetch: its latency spike, and prefetch, advice and device memory beside it",
		Platform: "h200-pcie",
		Doc: `A well-known pitfall: cudaMallocManaged() in production inference
without cudaMemPrefetchAsync() causes unpredictable latency spikes at first
access (the CUDA Programming Guide's unified-memory performance hints), and
its cures beside it. A program allocates a buffer of
size, writes it with the CPU (first touch: the pages are populated in system
memory), then launches a kernel streaming over it kernels times, each timed
between two events (cuEventElapsedTime). Modes:

  on-demand  cuMemAllocManaged and nothing else: kernel 1 faults every page
             over (a fault-buffer entry per 4 KiB page, serviced in batches
             of 256, the tree prefetcher migrating whole 2 MiB blocks);
             the kernels after it run from VRAM.
  prefetch   the same, with cuMemPrefetchAsync to the GPU before the timed
             kernels (its own row): the pages move at link speed without
             faults, and every kernel runs from VRAM.
  advise     cuMemAdvise SetPreferredLocation(GPU) and SetAccessedBy(GPU)
             before the CPU writes: the CPU's pages stay in system memory (on
             PCIe the CPU cannot map VRAM) and the GPU maps them, so no kernel
             faults and none migrates them either: every kernel reads over
             PCIe. Advice removes the faults, not the distance.
  device     cuMemAlloc, filled by cuMemcpyAsync from a pinned buffer the CPU
             wrote (its own row): the explicit baseline.

Rows: direction kernel for a kernel (ops: its index from 1), h2d for the
prefetch or copy before the first kernel (ops 0); seconds between the events,
GB/s the buffer over that time. Each row's name says what the unified-memory
driver did meanwhile: GPU faults, bytes migrated, chunks evicted.`,
		Params: []Param{
			{Name: "size", Kind: dmalab.ParamSize, Max: maxManaged, Default: "256MiB", Help: "the buffer"},
			{Name: "kernels", Kind: dmalab.ParamInt, Min: 1, Max: maxKernels, Default: "5", Help: "kernels launched over it, one after the other"},
			{Name: "modes", Kind: dmalab.ParamList, Item: "mode", Values: umPrefetchModes, Default: "on-demand,prefetch,advise,device", Help: "variants to run: on-demand, prefetch, advise, device"},
			{Name: "gpu", Kind: dmalab.ParamInt, Default: "0", Help: "index of the GPU"},
		},
		Run: runUMPrefetch,
	})
}

// umSample is one measured step of a unified-memory scenario with what
// the unified-memory driver did during it.
type umSample struct {
	mode string
	// step is the kernel's index from 1, or 0 for the setup (prefetch,
	// copy) before the first kernel.
	step  int
	bytes int64
	took  sim.Time
	umStats
}

// umStats is what the unified-memory driver did (uvm.Stats): GPU
// fault-buffer entries, bytes migrated for any cause but eviction,
// chunks evicted and the bytes they wrote back.
type umStats struct{ faults, migrated, evictions, evicted int64 }

func umNow(um *uvm.Driver) umStats {
	s := um.Stats()
	var moved int64
	for c, b := range s.MigratedBytes {
		if uvm.Cause(c) != uvm.CauseEviction {
			moved += b
		}
	}
	return umStats{faults: s.GPUFaults, migrated: moved, evictions: s.Evictions, evicted: s.EvictedBytes}
}

func (s umStats) minus(t umStats) umStats {
	return umStats{s.faults - t.faults, s.migrated - t.migrated, s.evictions - t.evictions, s.evicted - t.evicted}
}

// umGPU is a process on the GPU's node with the GPU's primary context and
// a stream: the program of the unified-memory scenarios.
type umGPU struct {
	d   *cuda.Driver
	ctx *cuda.Context
	s   *cuda.Stream
	dev int
	e0  *cuda.Event
	e1  *cuda.Event
}

// newUMGPU starts the program on GPU dev, whose modes must be possible
// there: prefetch needs concurrent managed access (Pascal and later).
func newUMGPU(c *Context, dev int, modes *[]string) (*umGPU, error) {
	if dev >= len(c.Machine.GPUs) {
		return nil, noGPU(c, dev)
	}
	d, err := c.CUDA()
	if err != nil {
		return nil, err
	}
	if d.UVM() == nil {
		return nil, usagef("platform %s: no unified-memory model for its GPUs", c.Machine.Spec.Name)
	}
	if slices.Contains(*modes, "prefetch") && !d.ConcurrentManagedAccess() && !c.Explicit("modes") {
		// Left out of the default modes, as a GPU without it would.
		*modes = slices.DeleteFunc(*modes, func(m string) bool { return m == "prefetch" })
	}
	if slices.Contains(*modes, "prefetch") && !d.ConcurrentManagedAccess() {
		return nil, usagef("platform %s: mode prefetch: %v GPUs have no cuMemPrefetchAsync (no concurrent managed access); leave it out of modes",
			c.Machine.Spec.Name, d.UVM().Generation())
	}
	pr, err := d.NewProcess("app", c.Machine.GPUs[dev].Node)
	if err != nil {
		return nil, err
	}
	ctx, err := pr.PrimaryContext(dev)
	if err != nil {
		return nil, err
	}
	g := &umGPU{d: d, ctx: ctx, dev: dev}
	if g.s, err = ctx.StreamCreate(0); err != nil {
		return nil, err
	}
	if g.e0, err = ctx.EventCreate(0); err != nil {
		return nil, err
	}
	if g.e1, err = ctx.EventCreate(0); err != nil {
		return nil, err
	}
	return g, nil
}

// fits refuses, before anything is allocated, a managed buffer of n
// bytes that the machine cannot hold: its pages live in the GPU's memory
// or in the DRAM of the GPU's node, and the unified-memory driver evicts
// from one to the other, so more than both together is out of memory on
// the real system too (the kernel's OOM killer, not a fault).
func (g *umGPU) fits(c *Context, n uint64) error {
	node := c.Machine.GPUs[g.dev].Node
	_, dram := c.Mem.NodeRange(node)
	_, vram := g.d.System().Devices[g.dev].MemGetInfo()
	if g.d.System().Devices[g.dev].GPU.Spec.Integrated {
		vram = 0 // an integrated GPU's memory is that same DRAM
	}
	if n > dram+vram {
		return usagef("--set size=%s: a managed buffer larger than node%d's DRAM (%s) and %s's memory (%s) together cannot be backed; use a smaller size",
			report.FormatBytes(int64(n)), node, report.FormatBytes(int64(dram)), c.Machine.GPUs[g.dev].Name, report.FormatBytes(int64(vram)))
	}
	return nil
}

// timed runs enqueue (work on g.s) between two events and waits for
// it: the time is the GPU's, as cuEventElapsedTime gives it.
func (g *umGPU) timed(p *sim.Proc, enqueue func() error) (sim.Time, error) {
	if err := g.e0.Record(p, g.s); err != nil {
		return 0, err
	}
	if err := enqueue(); err != nil {
		return 0, err
	}
	if err := g.e1.Record(p, g.s); err != nil {
		return 0, err
	}
	if err := g.e1.Synchronize(p); err != nil {
		return 0, err
	}
	ms, err := cuda.EventElapsedTime(g.e0, g.e1)
	if err != nil {
		return 0, err
	}
	return sim.Time(float64(ms) * float64(sim.Millisecond)), nil
}

// sample times enqueue and records what uvm did meanwhile.
func (g *umGPU) sample(p *sim.Proc, mode string, step int, bytes int64, enqueue func() error) (umSample, error) {
	before := umNow(g.d.UVM())
	took, err := g.timed(p, enqueue)
	if err != nil {
		return umSample{}, err
	}
	return umSample{mode: mode, step: step, bytes: bytes, took: took, umStats: umNow(g.d.UVM()).minus(before)}, nil
}

// streamKernel reads [addr, addr+size) once, coalesced.
func streamKernel(addr mem.GPUAddr, size uint64) gpu.Kernel {
	return gpu.Kernel{Name: "stream", Accesses: []gpu.Access{{Addr: addr, Size: size}}}
}

func runUMPrefetch(c *Context) error {
	samples, err := measureUMPrefetch(c)
	if err != nil {
		return err
	}
	for _, s := range samples {
		c.Result.Results = append(c.Result.Results, umPrefetchRow(s))
	}
	return nil
}

func umPrefetchRow(s umSample) report.Row {
	path := map[string]xfer.Path{"on-demand": xfer.ManagedFault, "prefetch": xfer.ManagedPrefetch,
		"advise": xfer.ManagedAdvise, "device": xfer.Device}[s.mode]
	dir, what := xfer.Kernel, fmt.Sprintf("kernel %d", s.step)
	if s.step == 0 {
		dir, what = xfer.H2D, "setup"
	}
	return report.Row{
		Name: fmt.Sprintf("%s %s of %s", s.mode, what, report.FormatBytes(s.bytes)),
		Path: string(path), Direction: string(dir), Mode: s.mode, Bytes: s.bytes, Step: s.step,
		Faults: s.faults, MigratedBytes: s.migrated, Evictions: s.evictions,
		Seconds: s.took.Seconds(), GBps: float64(s.bytes) / s.took.Seconds() / 1e9,
	}
}

func measureUMPrefetch(c *Context) ([]umSample, error) {
	size := c.Size("size")
	kernels := c.Int("kernels")
	modes := c.List("modes")
	dev := c.Int("gpu")
	g, err := newUMGPU(c, dev, &modes)
	if err != nil {
		return nil, err
	}
	n := uint64(size)
	if err := g.fits(c, n); err != nil {
		return nil, err
	}
	var out []umSample
	var runErr error
	c.Machine.Engine.Spawn("app", func(p *sim.Proc) {
		for _, mode := range modes {
			c.Progressf("um-prefetch: %s", mode)
			s, err := g.prefetchMode(p, mode, n, kernels)
			if err != nil {
				runErr = fmt.Errorf("%s: %w", mode, err)
				return
			}
			out = append(out, s...)
		}
	})
	guardErr := c.RunEngine("size")
	if runErr != nil {
		return nil, runErr
	}
	return out, guardErr
}

// prefetchMode runs one variant: the buffer made and written by the CPU,
// made ready for the GPU as the mode says, then the kernels.
func (g *umGPU) prefetchMode(p *sim.Proc, mode string, n uint64, kernels int) ([]umSample, error) {
	ctx := g.ctx
	var out []umSample
	var buf mem.GPUAddr
	var free func() error
	switch mode {
	case "device":
		host, err := ctx.MemAllocHost(p, n)
		if err != nil {
			return nil, err
		}
		if err := ctx.CPUAccess(p, mem.GPUAddr(host), n, true); err != nil {
			return nil, err
		}
		if buf, err = ctx.MemAlloc(p, n); err != nil {
			return nil, err
		}
		s, err := g.sample(p, mode, 0, int64(n), func() error { return ctx.MemcpyAsync(p, buf, mem.GPUAddr(host), n, g.s) })
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		free = func() error {
			if err := ctx.MemFree(p, buf); err != nil {
				return err
			}
			return ctx.MemFreeHost(p, host)
		}
	default:
		var err error
		if buf, err = ctx.MemAllocManaged(p, n, cuda.MemAttachGlobal); err != nil {
			return nil, err
		}
		if mode == "advise" {
			if err := ctx.MemAdvise(p, buf, n, cuda.AdviseSetPreferredLocation, g.dev); err != nil {
				return nil, err
			}
			if err := ctx.MemAdvise(p, buf, n, cuda.AdviseSetAccessedBy, g.dev); err != nil {
				return nil, err
			}
		}
		if err := ctx.CPUAccess(p, buf, n, true); err != nil {
			return nil, err
		}
		if mode == "prefetch" {
			s, err := g.sample(p, mode, 0, int64(n), func() error { return ctx.MemPrefetchAsync(p, buf, n, g.dev, g.s) })
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		free = func() error { return ctx.MemFree(p, buf) }
	}
	for k := 1; k <= kernels; k++ {
		s, err := g.sample(p, mode, k, int64(n), func() error { return ctx.LaunchKernel(p, streamKernel(buf, n), g.s) })
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, free()
}

var umOversubModes = []string{"on-demand", "prefetch", "zero-copy"}

func init() {
	register(&Scenario{
		Name:     "um-oversubscribe",
		Summary:  "managed memory from half to twice the GPU's memory: on-demand faults, prefetch and zero-copy",
		Platform: "h200-pcie",
		Doc: `A working set from half to twice the GPU's memory, swept twice by a kernel
streaming over it, three ways:

  on-demand  cuMemAllocManaged written by the CPU: pages fault over; once the
             GPU's memory is full every fault evicts the least recently used
             2 MiB chunk back to system memory.
  prefetch   the same, with cuMemPrefetchAsync of what fits (the first
             min(working set, GPU memory) bytes) before the first pass (its
             own row, ops 0).
  zero-copy  cuMemHostAlloc(DEVICEMAP) written by the CPU: the kernel reads
             pinned host memory over PCIe, pass after pass, and nothing moves.

A pass is the kernel's sweep: launches over consecutive chunks of the working
set in address order (only the first pays the launch latency), since the model
serves one launch's access all at once and a grid touches memory in about
that order, which is what LRU eviction sees. Below 1x the managed modes run
from VRAM after the first pass; above it a sequential sweep is LRU's worst
case: every page faults and evicts again on each pass, and on-demand falls
below zero-copy.

The GPU is given vram bytes of memory for the run (the platform with
gpus.NAME.vram changed, as --set platform.gpus.gpu0.vram would): the model
raises one fault per 4 KiB page, so the ratios of an H200's 141 GiB take
about 6 to 7 CPU seconds by the core (scenario
BenchmarkUMOversubscribeH200); a 1 GiB GPU gives about the same GB/s
at the same ratios (the one launch latency per pass weighs a little
more). vram=platform keeps the platform's. Rows:
direction kernel for a pass (ops: its number from 1), h2d for the
prefetch; GB/s is the working set over the pass's time (events); each row's
name gives the ratio and what the unified-memory driver did. GPUs without
concurrent managed access (pre-Pascal) have no prefetch and cannot
oversubscribe: there only zero-copy runs above 1x.`,
		Params: []Param{
			{Name: "vram", Kind: dmalab.ParamSize, Max: maxManaged, Word: "platform", Default: "1GiB", Help: `the GPU's memory for this run ("platform": the platform's own)`},
			{Name: "ratios", Kind: dmalab.ParamFloats, Item: "ratio", Max: 64, Default: "0.5,1,1.5,2", Help: "working sets, as multiples of the GPU's memory"},
			{Name: "passes", Kind: dmalab.ParamInt, Min: 1, Max: maxPasses, Default: "2", Help: "passes of the kernel over the working set"},
			{Name: "chunk", Kind: dmalab.ParamSize, Default: "64MiB", Help: "the span one launch streams (a pass is launches over consecutive chunks; at most a quarter of the GPU's memory)"},
			{Name: "modes", Kind: dmalab.ParamList, Item: "mode", Values: umOversubModes, Default: "on-demand,prefetch,zero-copy", Help: "variants to run: on-demand, prefetch, zero-copy"},
			{Name: "gpu", Kind: dmalab.ParamInt, Default: "0", Help: "index of the GPU"},
		},
		Adjust: withVRAM,
		Run:    runUMOversubscribe,
	})
}

// withVRAM gives GPU gpu vram bytes of memory for the run (the spec
// through platform.Set, as --set platform.gpus.NAME.vram would), before
// the system boots: a 141 GiB working set costs the model a fault per
// 4 KiB page, and a smaller GPU keeps the run quick. The system is then
// built once, with every option of the run (payload, checker, trace).
func withVRAM(spec *platform.Spec, v *dmalab.Values) (*platform.Spec, error) {
	dev := v.Int("gpu")
	if dev >= len(spec.GPUs) {
		return nil, noGPUIn(spec.Name, len(spec.GPUs), dev)
	}
	g := spec.GPUs[dev]
	if g.Integrated {
		return nil, usagef("platform %s: %s is an integrated GPU with no memory of its own to oversubscribe", spec.Name, g.Name)
	}
	if v.IsWord("vram") {
		return spec, nil
	}
	vram := v.Text("vram")
	spec, err := platform.Set(spec, "gpus."+g.Name+".vram.value", vram)
	if err == nil {
		spec, err = platform.Set(spec, "gpus."+g.Name+".vram.source", "the scenario's vram parameter")
	}
	if err != nil {
		return nil, usagef("--set vram=%s: %v", vram, err)
	}
	return spec, nil
}

func runUMOversubscribe(c *Context) error {
	samples, err := measureUMOversubscribe(c)
	if err != nil {
		return err
	}
	for _, s := range samples {
		c.Result.Results = append(c.Result.Results, umOversubRow(s))
	}
	return nil
}

// umPass is a sample of um-oversubscribe: one pass (or the prefetch
// before the first) over a working set of ratio times the GPU memory.
type umPass struct {
	umSample
	ratio float64
}

func umOversubRow(s umPass) report.Row {
	path := map[string]xfer.Path{"on-demand": xfer.ManagedFault, "prefetch": xfer.ManagedPrefetch, "zero-copy": xfer.Mapped}[s.mode]
	dir, what := xfer.Kernel, fmt.Sprintf("pass %d", s.step)
	if s.step == 0 {
		dir, what = xfer.H2D, "prefetch"
	}
	return report.Row{
		Name: fmt.Sprintf("%s %gx %s of %s", s.mode, s.ratio, what, report.FormatBytes(s.bytes)),
		Path: string(path), Direction: string(dir), Mode: s.mode, Bytes: s.bytes, Step: s.step,
		Faults: s.faults, MigratedBytes: s.migrated, Evictions: s.evictions,
		Seconds: s.took.Seconds(), GBps: float64(s.bytes) / s.took.Seconds() / 1e9,
	}
}

func measureUMOversubscribe(c *Context) ([]umPass, error) {
	dev := c.Int("gpu") // withVRAM checked it
	ratios := c.Floats("ratios")
	passes := c.Int("passes")
	chunk := c.Size("chunk")
	modes := c.List("modes")
	g, err := newUMGPU(c, dev, &modes)
	if err != nil {
		return nil, err
	}
	_, total := g.ctx.MemGetInfo()
	if managed := slices.ContainsFunc(modes, func(m string) bool { return m != "zero-copy" }); managed && !g.d.ConcurrentManagedAccess() && slices.Max(ratios) > 1 {
		// Before Pascal managed memory lives in device memory while
		// kernels run: cuMemAllocManaged fails beyond it.
		return nil, usagef("platform %s: %v GPUs cannot oversubscribe managed memory: keep ratios at most 1, or modes=zero-copy",
			c.Machine.Spec.Name, g.d.UVM().Generation())
	}
	// Chunks of whole 2 MiB blocks, and a few per GPU memory at least, so
	// that a pass sweeps the memory as a grid does instead of asking for
	// more than fits at once.
	ck := max(uvm.BlockSize, min(uint64(chunk), total/4)) &^ (uvm.BlockSize - 1)
	var out []umPass
	var runErr error
	c.Machine.Engine.Spawn("app", func(p *sim.Proc) {
		for _, r := range ratios {
			ws := (uint64(r*float64(total)) + uvm.BlockSize - 1) &^ (uvm.BlockSize - 1)
			for _, mode := range modes {
				c.Progressf("um-oversubscribe: %gx %s", r, mode)
				s, err := g.oversubMode(p, mode, ws, total, ck, passes)
				if err != nil {
					runErr = fmt.Errorf("%s at %gx: %w", mode, r, err)
					return
				}
				for _, x := range s {
					out = append(out, umPass{umSample: x, ratio: r})
				}
			}
		}
	})
	guardErr := c.RunEngine("vram", "ratios")
	if runErr != nil {
		return nil, runErr
	}
	return out, guardErr
}

// sweep enqueues one pass of the streaming kernel over [buf, buf+ws) as
// launches over consecutive chunks: a grid sweeping memory touches it
// in about that order, which is what LRU eviction sees.
func (g *umGPU) sweep(p *sim.Proc, buf mem.GPUAddr, ws, chunk uint64) error {
	for off := uint64(0); off < ws; off += chunk {
		k := streamKernel(buf+mem.GPUAddr(off), min(chunk, ws-off))
		if off > 0 {
			// One grid: only the first launch pays the launch latency.
			k.Launch = 1
		}
		if err := g.ctx.LaunchKernel(p, k, g.s); err != nil {
			return err
		}
	}
	return nil
}

// oversubMode runs one variant over a working set of ws bytes on a GPU
// with total bytes of memory.
func (g *umGPU) oversubMode(p *sim.Proc, mode string, ws, total, chunk uint64, passes int) ([]umSample, error) {
	ctx := g.ctx
	var out []umSample
	var buf mem.GPUAddr
	var free func() error
	switch mode {
	case "zero-copy":
		host, err := ctx.MemHostAlloc(p, ws, cuda.HostAllocDeviceMap)
		if err != nil {
			return nil, err
		}
		if err := ctx.CPUAccess(p, mem.GPUAddr(host), ws, true); err != nil {
			return nil, err
		}
		if buf, err = ctx.MemHostGetDevicePointer(host, 0); err != nil {
			return nil, err
		}
		free = func() error { return ctx.MemFreeHost(p, host) }
	default:
		var err error
		if buf, err = ctx.MemAllocManaged(p, ws, cuda.MemAttachGlobal); err != nil {
			return nil, err
		}
		if err := ctx.CPUAccess(p, buf, ws, true); err != nil {
			return nil, err
		}
		if mode == "prefetch" {
			fit := min(ws, total&^(uvm.BlockSize-1))
			s, err := g.sample(p, mode, 0, int64(fit), func() error { return ctx.MemPrefetchAsync(p, buf, fit, g.dev, g.s) })
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		free = func() error { return ctx.MemFree(p, buf) }
	}
	for pass := 1; pass <= passes; pass++ {
		s, err := g.sample(p, mode, pass, int64(ws), func() error { return g.sweep(p, buf, ws, chunk) })
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, free()
}

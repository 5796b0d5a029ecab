package scenario

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gdr"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

func init() {
	register(&Scenario{
		Name:     "bar-vs-dma",
		Summary:  "CPU loads and stores through BAR1 (gdrcopy) against cuMemcpy, zero-copy, two streams and unified memory, 8 B to 64 MiB, sequential and scattered: who wins where, and why",
		Platform: bvDefaultPlatforms[0],
		Doc: `Is it faster to map GPU memory into the CPU's address space and load or
store it directly (gdrcopy over BAR1) than to copy it by DMA, and when?
Every method below moves size bytes between the CPU's side and the GPU,
through the model's own calls, and each row is timed from the first call
to the data usable on the other side (the CPU thread's clock; the CPU
time it spent is the CPU/op column).

Direction h2d: data the CPU has, consumed by a GPU kernel that reads it
once (its compute time is size / kernel_rate: the kernel must run in any
case, so every h2d row includes it; only zero-copy and the two streams
overlap it with the transfer):

  memcpy            cuMemcpyHtoD from pinned memory (a copy engine's DMA),
                    then the kernel on device memory;
  gdr               gdr_copy_to_mapping: the CPU stores into device memory
                    through its BAR1 mapping (write-combined), then the
                    kernel;
  cpu-mapped        integrated GPUs only (what replaces BAR1 there): the
                    CPU stores into cuMemHostAlloc memory, which the GPU
                    reads in place; cached on the CPU from Xavier on (I/O
                    coherent), uncached before (cuda/tegra.go);
  zero-copy         the kernel reads the pinned host buffer itself
                    (cuMemHostAlloc DEVICEMAP), over PCIe on a discrete GPU;
  2-streams         double buffering: the buffer in chunks of chunk bytes
                    (at least two), cuMemcpyAsync and the kernel of each
                    chunk on one of two streams in turn, so that the copy
                    of one chunk overlaps the kernel of the previous;
  managed           cuMemAllocManaged written by the CPU (before the clock
                    starts), then the kernel: its pages fault over;
  managed-prefetch  the same with cuMemPrefetchAsync to the GPU first
                    (not on Tegra: no concurrent managed access).

Direction d2h: data a GPU kernel produces (it writes it once, compute as
above), wanted by the CPU:

  memcpy      the kernel writes device memory, cuMemcpyDtoH to pinned;
  gdr         the kernel writes device memory, gdr_copy_from_mapping
              loads it through BAR1 (uncached loads, each a PCIe round
              trip, a few in flight);
  cpu-mapped  integrated GPUs only: the kernel writes cuMemHostAlloc
              memory, the CPU loads it;
  zero-copy   the kernel writes the pinned host buffer itself.

Patterns: sequential is one contiguous buffer. scattered is the "array of
pointers" case: the size is made of objects of object bytes (one object if
size is smaller), object i at offset 2·i·object of a region twice the
size (each object followed by as many bytes the program does not move),
each reached through its own pointer. What each method does with them is
what a program would do: memcpy gathers the objects with the CPU into a
pinned staging buffer, one cuMemcpy, the kernel reads it packed (d2h: a
gather kernel packs them in device memory, one cuMemcpyDtoH); gdr and
cpu-mapped store or load each object on its own, at its own place (one
gdr call or CPU access per object); zero-copy and managed run the kernel
with a strided access over the region (gpu.Strided: an object every
2·object bytes; managed faults only the pages the objects touch, every
other page at 4 KiB objects, and the prefetcher moves the regions they
fill past its threshold); 2-streams gathers each chunk with the CPU into one of
two pinned staging buffers, waiting for that buffer's last copy first.
The pointer array itself is not counted.

Each platform prints its rows (platform, path = method, direction,
mode = pattern), then the summary: per platform, direction and pattern
the method that wins at each size, the crossover sizes (interpolated
between the two sizes around the change) and the reason, from the rows'
own times (a method's cost at the smallest size, its rate at the
largest) and the model's parameters (gdr's store overhead and
write-combining rate, its loads per round trip, the copy overhead).

On jetson-orin there is no BAR1 (the integrated GPU's memory is the
SoC's DRAM): gdr_pin_buffer fails (nvidia_p2p_get_pages: ENOTSUPP) and
the gdr rows say so; cpu-mapped runs in its place.`,
		Params: []Param{
			{Name: "sizes", Kind: dmalab.ParamSizes, Max: bvMaxSize, Default: bvDefaultSizes, Help: "sizes, comma-separated, with units (B, KiB, MiB), 8 B to 64 MiB by default"},
			{Name: "platforms", Default: "", Help: "comma-separated platforms (default: h200-pcie and jetson-orin when the run's platform is h200-pcie, else the run's)"},
			{Name: "patterns", Kind: dmalab.ParamList, Values: bvPatterns, Item: "pattern", Default: strings.Join(bvPatterns, ","), Help: "access patterns: sequential, scattered"},
			{Name: "methods", Kind: dmalab.ParamList, Values: bvMethods, Item: "method", Default: strings.Join(bvMethods, ","), Help: "methods to compare (a method the platform lacks says why or is skipped)"},
			{Name: "object", Kind: dmalab.ParamSize, Max: bvMaxSize, Default: "4KiB", Help: "object size of the scattered pattern"},
			{Name: "chunk", Kind: dmalab.ParamSize, Max: bvMaxSize, Default: "1MiB", Help: "chunk of the 2-streams method (at most half the size)"},
			{Name: "kernel_rate", Kind: dmalab.ParamFloats, Default: "100", Help: "GB/s at which the consuming (or producing) kernel computes: its compute time is size / kernel_rate"},
		},
		Run: runBarVsDMA,
	})
}

const (
	bvDefaultSizes = "8B,32B,128B,512B,2KiB,8KiB,32KiB,128KiB,512KiB,2MiB,8MiB,32MiB,64MiB"
	// bvMaxSize bounds a size: the run allocates twice the largest
	// (the scattered region) in pinned, device and managed memory.
	bvMaxSize = 1 << 30
	// bvMaxObjects bounds the objects of one scattered row: each is a
	// call of its own in the model.
	bvMaxObjects = 1 << 16
)

var (
	bvDefaultPlatforms = []string{"h200-pcie", "jetson-orin"}
	bvPatterns         = []string{"sequential", "scattered"}
	bvMethods          = []string{"memcpy", "gdr", "cpu-mapped", "zero-copy", "2-streams", "managed", "managed-prefetch"}
	// bvD2H are the methods that run in direction d2h too.
	bvD2H = []string{"memcpy", "gdr", "cpu-mapped", "zero-copy"}
)

func runBarVsDMA(c *Context) error {
	sizes := c.Sizes("sizes")
	obj := uint64(c.Size("object"))
	for _, n := range sizes {
		if uint64(n)/obj > bvMaxObjects {
			return usagef("--set sizes: %s of %s objects is %d objects; at most %d (raise object)",
				report.FormatBytes(n), report.FormatBytes(int64(obj)), uint64(n)/obj, bvMaxObjects)
		}
	}
	rates := c.Floats("kernel_rate")
	if len(rates) != 1 || !(rates[0] > 0) || math.IsInf(rates[0], 0) {
		return usagef("--set kernel_rate: one rate in GB/s, above 0")
	}
	specs, err := platformsParam(c, bvDefaultPlatforms)
	if err != nil {
		return err
	}
	opt := c.Options()
	opt.Progress, opt.Trace = nil, false
	// Each platform's system draws into the run's trace.
	opt.TraceInto = c.Trace
	cfg := bvConfig{
		sizes: sizes, object: obj, chunk: uint64(c.Size("chunk")), rate: rates[0] * 1e9,
		patterns: c.List("patterns"), methods: c.List("methods"),
	}
	var summary []string
	for _, spec := range specs {
		r, err := bvPlatform(c, spec, opt, cfg)
		if err != nil {
			return err
		}
		c.Result.Results = append(c.Result.Results, r.rows...)
		summary = append(summary, bvSummary(spec.Name, r)...)
	}
	c.Result.Summary = summary
	return nil
}

type bvConfig struct {
	sizes             []int64
	object, chunk     uint64
	rate              float64
	patterns, methods []string
}

// bvRun is one platform's rows and what the summary explains them with.
type bvRun struct {
	rows []report.Row
	// why is, per method and direction, what its cost is made of, in
	// the model's parameters.
	why map[string]string
	// refused are sentences for the methods the platform refused.
	refused []string
	// kernel says what the consuming or producing kernel costs.
	kernel string
}

// bvLayout is where the objects of a row lie: count objects of size
// obj at stride bytes from each other (stride == obj: contiguous).
type bvLayout struct {
	count, obj, stride uint64
}

func bvLayoutOf(pattern string, n, object uint64) bvLayout {
	if pattern == "sequential" || n <= object {
		return bvLayout{count: 1, obj: n, stride: n}
	}
	return bvLayout{count: n / object, obj: object, stride: 2 * object}
}

// region is the bytes the objects span.
func (l bvLayout) region() uint64 { return (l.count-1)*l.stride + l.obj }

// access is a kernel's access to the objects at addr.
func (l bvLayout) access(addr mem.GPUAddr, write bool) gpu.Access {
	a := gpu.Access{Addr: addr, Size: l.region(), Bytes: l.count * l.obj, Write: write}
	if l.count > 1 {
		a.Pattern = gpu.Strided{Stride: l.stride, Elem: l.obj}
	}
	return a
}

// bvProg is the program of one platform: its buffers, allocated once
// for the largest size.
type bvProg struct {
	t        *sim.Proc
	ctx      *cuda.Context
	s        [2]*cuda.Stream
	ev       [2]*cuda.Event
	host     mem.VirtAddr // pinned, mapped: the source (h2d) or the destination (d2h)
	stage    mem.VirtAddr // pinned staging for gathers
	dev      mem.GPUAddr  // the objects in device memory
	pack     mem.GPUAddr  // packed objects in device memory
	gh       *gdr.Handle
	mp       *gdr.Mapping
	gdrErr   error
	rate     float64
	integr   bool
	prefetch bool
	coherent bool // the GPU's DMA snoops the CPU caches
	node     int  // the GPU's node, where the program runs
	data     []byte
	// off and offCPU are the time and CPU time of a row's steps that
	// are not the move (making managed data, freeing it): taken off
	// the row.
	off, offCPU sim.Time
}

// untimed runs f off the row's clock.
func (b *bvProg) untimed(f func() error) error {
	t0, cpu0 := b.t.Now(), b.t.CPUTime()
	err := f()
	b.off += b.t.Now() - t0
	b.offCPU += b.t.CPUTime() - cpu0
	return err
}

func (b *bvProg) kernel(name string, rate float64, accs ...gpu.Access) gpu.Kernel {
	return gpu.Kernel{Name: name, Accesses: accs, Compute: sim.TransferTime(float64(accs[0].Bytes), rate)}
}

func (b *bvProg) launch(k gpu.Kernel, s *cuda.Stream) error { return b.ctx.LaunchKernel(b.t, k, s) }

func bvPlatform(c *Context, spec *platform.Spec, opt dmalab.Options, cfg bvConfig) (bvRun, error) {
	out := bvRun{why: map[string]string{}}
	opt.TraceName = spec.Name
	sys, err := dmalab.BootSpec(spec, opt)
	if err != nil {
		return out, err
	}
	defer sys.Close()
	if len(sys.Machine.GPUs) == 0 {
		return out, noGPUIn(spec.Name, 0, 0)
	}
	cu, err := sys.CUDA()
	if err != nil {
		return out, usagef("platform %s: %v", spec.Name, err)
	}
	p2p, err := sys.NVP2P()
	if err != nil {
		return out, usagef("platform %s: %v", spec.Name, err)
	}
	gd, err := gdr.New(cu, p2p)
	if err != nil {
		return out, err
	}
	maxN := uint64(slices.Max(cfg.sizes))
	// gdr pins and maps whole 64 KiB GPU pages: the device buffer is
	// as many.
	region := (2*maxN + gdr.GPUPageSize - 1) &^ (gdr.GPUPageSize - 1)
	err = sys.RunOn(sys.Machine.GPUs[0].Node, "bar-vs-dma", func(p *dmalab.Process) error {
		t := p.Thread
		pr, err := p.CUDA()
		if err != nil {
			return err
		}
		ctx, err := pr.PrimaryContext(0)
		if err != nil {
			return err
		}
		coherent, err := spec.DeviceCoherent(sys.Machine.GPUs[0].Name)
		if err != nil {
			return err
		}
		b := &bvProg{t: t, ctx: ctx, coherent: coherent, node: sys.Machine.GPUs[0].Node, rate: cfg.rate, integr: sys.Machine.GPUs[0].Spec.Integrated,
			prefetch: cu.ConcurrentManagedAccess(), data: make([]byte, maxN)}
		for i := range b.s {
			if b.s[i], err = ctx.StreamCreate(0); err != nil {
				return err
			}
			if b.ev[i], err = ctx.EventCreate(0); err != nil {
				return err
			}
		}
		if b.host, err = ctx.MemHostAlloc(t, region, cuda.HostAllocDeviceMap); err != nil {
			return err
		}
		// Staging for gathers: the whole size for memcpy; two chunks of
		// at most half of it for 2-streams.
		if b.stage, err = ctx.MemHostAlloc(t, maxN, cuda.HostAllocDeviceMap); err != nil {
			return err
		}
		if b.dev, err = ctx.MemAlloc(t, region); err != nil {
			return err
		}
		if b.pack, err = ctx.MemAlloc(t, maxN); err != nil {
			return err
		}
		// The first touch of the host buffers is the program's, not a
		// row's.
		if err := errors.Join(ctx.CPUAccess(t, mem.GPUAddr(b.host), region, true),
			ctx.CPUAccess(t, mem.GPUAddr(b.stage), maxN, true)); err != nil {
			return err
		}
		if b.gh, err = gd.Open(t, p.Process); err != nil {
			return err
		}
		if mh, err := b.gh.PinBuffer(t, b.dev, region, 0, 0); err != nil {
			b.gdrErr = err
		} else if b.mp, err = b.gh.Map(t, mh, region); err != nil {
			return err
		}
		b.explain(&out, spec)
		for _, pattern := range cfg.patterns {
			for _, dir := range []string{"h2d", "d2h"} {
				for _, method := range cfg.methods {
					if dir == "d2h" && !slices.Contains(bvD2H, method) {
						continue
					}
					if method == "cpu-mapped" && !b.integr {
						continue
					}
					if why := b.refuse(method); why != "" {
						row := report.Row{Name: spec.Name + " " + method + " " + dir + " " + pattern, Path: method, Direction: dir,
							Mode: pattern, Platform: spec.Name, Note: spec.Name + ": " + why}
						out.rows = append(out.rows, row)
						if pattern == cfg.patterns[0] && dir == "h2d" {
							out.refused = append(out.refused, fmt.Sprintf("%s %s: %s", spec.Name, method, why))
						}
						continue
					}
					for _, n := range cfg.sizes {
						l := bvLayoutOf(pattern, uint64(n), cfg.object)
						t0, cpu0 := t.Now(), t.CPUTime()
						b.off, b.offCPU = 0, 0
						if err := b.run(method, dir, l, cfg.chunk); err != nil {
							return fmt.Errorf("%s %s %s %s: %w", method, dir, pattern, report.FormatBytes(n), err)
						}
						took := t.Now() - t0 - b.off
						out.rows = append(out.rows, report.Row{
							Name: spec.Name + " " + method + " " + dir + " " + pattern, Path: method, Direction: dir, Mode: pattern,
							Bytes: n, Seconds: took.Seconds(), GBps: float64(n) / took.Seconds() / 1e9,
							CPUSeconds: (t.CPUTime() - cpu0 - b.offCPU).Seconds(), Platform: spec.Name,
						})
					}
				}
			}
		}
		return b.gh.Close(t)
	})
	forward(c, sys, spec.Name)
	if err != nil {
		return out, fmt.Errorf("bar-vs-dma: %s: %w", spec.Name, err)
	}
	return out, nil
}

// refuse says why the platform cannot run a method, or "".
func (b *bvProg) refuse(method string) string {
	switch {
	case method == "gdr" && b.gdrErr != nil && b.integr:
		return fmt.Sprintf("no BAR1 to map: the integrated GPU's memory is the SoC's DRAM, which the CPU cannot reach through a cuMemAlloc pointer (%v); cpu-mapped is what replaces it", b.gdrErr)
	case method == "gdr" && b.gdrErr != nil:
		return fmt.Sprintf("gdr_pin_buffer refused: %v", b.gdrErr)
	case method == "managed-prefetch" && !b.prefetch:
		return "cuMemPrefetchAsync needs concurrent managed access, which this GPU lacks (CUDA for Tegra: not supported on the iGPU)"
	}
	return ""
}

// run moves one row's bytes by method in direction dir and waits until
// they are usable on the other side.
func (b *bvProg) run(method, dir string, l bvLayout, chunk uint64) error {
	t, ctx := b.t, b.ctx
	n := l.count * l.obj
	host := mem.GPUAddr(b.host)
	packed := bvLayout{count: 1, obj: n, stride: n}
	consume := func(addr mem.GPUAddr, l bvLayout) error {
		if err := b.launch(b.kernel("consume", b.rate, l.access(addr, false)), nil); err != nil {
			return err
		}
		return ctx.Synchronize(t)
	}
	produce := func(addr mem.GPUAddr, l bvLayout) error {
		if err := b.launch(b.kernel("produce", b.rate, l.access(addr, true)), nil); err != nil {
			return err
		}
		return ctx.Synchronize(t)
	}
	// gather copies the objects from the host buffer into staging at
	// off with the CPU: a load of each, the packed stores.
	gather := func(first, count, off uint64) error {
		for i := first; i < first+count; i++ {
			if err := ctx.CPUAccess(t, host+mem.GPUAddr(i*l.stride), l.obj, false); err != nil {
				return err
			}
		}
		return ctx.CPUAccess(t, mem.GPUAddr(b.stage)+mem.GPUAddr(off), count*l.obj, true)
	}
	each := func(f func(off uint64) error) error {
		for i := range l.count {
			if err := f(i * l.stride); err != nil {
				return err
			}
		}
		return nil
	}
	switch method + " " + dir {
	case "memcpy h2d":
		src := host
		if l.count > 1 {
			if err := gather(0, l.count, 0); err != nil {
				return err
			}
			src = mem.GPUAddr(b.stage)
		}
		if err := ctx.Memcpy(t, b.dev, src, n); err != nil {
			return err
		}
		return consume(b.dev, packed)
	case "memcpy d2h":
		if err := produce(b.dev, l); err != nil {
			return err
		}
		from := b.dev
		if l.count > 1 {
			// A gather kernel packs the objects: memory-bound, no compute.
			k := gpu.Kernel{Name: "gather", Accesses: []gpu.Access{l.access(b.dev, false), packed.access(b.pack, true)}}
			if err := b.launch(k, nil); err != nil {
				return err
			}
			from = b.pack
		}
		return ctx.Memcpy(t, host, from, n)
	case "gdr h2d":
		if err := each(func(off uint64) error { return b.gh.CopyToMapping(t, b.mp, off, b.data[:l.obj]) }); err != nil {
			return err
		}
		return consume(b.dev, l)
	case "gdr d2h":
		if err := produce(b.dev, l); err != nil {
			return err
		}
		return each(func(off uint64) error { return b.gh.CopyFromMapping(t, b.mp, off, b.data[:l.obj]) })
	case "cpu-mapped h2d":
		if err := each(func(off uint64) error { return ctx.CPUAccess(t, host+mem.GPUAddr(off), l.obj, true) }); err != nil {
			return err
		}
		return consume(host, l)
	case "cpu-mapped d2h":
		if err := produce(host, l); err != nil {
			return err
		}
		return each(func(off uint64) error { return ctx.CPUAccess(t, host+mem.GPUAddr(off), l.obj, false) })
	case "zero-copy h2d":
		return consume(host, l)
	case "zero-copy d2h":
		return produce(host, l)
	case "2-streams h2d":
		c := min(chunk, max(n/2, 1))
		per := max(c/l.obj, 1) // objects per chunk when scattered
		if l.count > 1 {
			c = per * l.obj
		}
		var used [2]bool
		for k, off := 0, uint64(0); off < n; k, off = k+1, off+c {
			m := min(c, n-off)
			s, i := b.s[k%2], k%2
			src := host + mem.GPUAddr(off)
			if l.count > 1 {
				// Reuse staging buffer i only when its last copy is done.
				if used[i] {
					if err := b.ev[i].Synchronize(t); err != nil {
						return err
					}
				}
				slot := uint64(i) * c
				if err := gather(off/l.obj, m/l.obj, slot); err != nil {
					return err
				}
				src = mem.GPUAddr(b.stage) + mem.GPUAddr(slot)
			}
			if err := ctx.MemcpyAsync(t, b.dev+mem.GPUAddr(off), src, m, s); err != nil {
				return err
			}
			if err := b.ev[i].Record(t, s); err != nil {
				return err
			}
			used[i] = true
			part := bvLayout{count: 1, obj: m, stride: m}
			if err := b.launch(b.kernel("consume", b.rate, part.access(b.dev+mem.GPUAddr(off), false)), s); err != nil {
				return err
			}
		}
		return errors.Join(b.s[0].Synchronize(t), b.s[1].Synchronize(t))
	case "managed h2d", "managed-prefetch h2d":
		// Allocating the managed buffer and the CPU's writes are the
		// data's making, freeing it the program's end: not the move.
		size := l.region()
		var addr mem.GPUAddr
		if err := b.untimed(func() error {
			var err error
			if addr, err = ctx.MemAllocManaged(t, size, cuda.MemAttachGlobal); err != nil {
				return err
			}
			return ctx.CPUAccess(t, addr, size, true)
		}); err != nil {
			return err
		}
		if method == "managed-prefetch" {
			if err := ctx.MemPrefetchAsync(t, addr, size, 0, nil); err != nil {
				return err
			}
		}
		if err := consume(addr, l); err != nil {
			return err
		}
		return b.untimed(func() error { return ctx.MemFree(t, addr) })
	}
	return fmt.Errorf("no method %s in direction %s", method, dir)
}

// explain fills what each method's cost is made of, from the model's
// parameters for the platform.
func (b *bvProg) explain(out *bvRun, spec *platform.Spec) {
	g := spec.GPUs[0]
	out.why["memcpy"] = fmt.Sprintf("each cuMemcpy costs copy_overhead %s before its bytes move at its route's rate",
		report.FormatSeconds(g.CopyOverhead.V.Seconds()))
	out.why["gdr h2d"] = fmt.Sprintf("write-combined stores: %s per call (gdr.StoreOverhead), then at most %s GB/s (gdr.WCStoreRate)",
		report.FormatSeconds(gdr.StoreOverhead.Seconds()), strconv.FormatFloat(gdr.WCStoreRate/1e9, 'g', -1, 64))
	n := spec.Nodes[b.node]
	cpuRate := n.MemcpyRate.V
	kind := "cached"
	if cached, _ := uvm.PinnedCacheability(uvm.Tegra, b.coherent); !cached {
		cpuRate, kind = n.Cache.UncachedRate.V, "uncached"
	}
	out.why["cpu-mapped"] = fmt.Sprintf("%s pinned memory: no call, the CPU's accesses at %s GB/s; the GPU reads the same DRAM",
		kind, report.FormatGBps(float64(cpuRate)/1e9))
	out.why["zero-copy"] = fmt.Sprintf("one kernel launch (kernel_launch %s) whose accesses cross to host memory while it computes",
		report.FormatSeconds(g.Launch().Seconds()))
	out.kernel = fmt.Sprintf("kernel_launch %s, then compute at kernel_rate %s GB/s; after the move for memcpy, gdr and cpu-mapped, overlapped with it for zero-copy and 2-streams",
		report.FormatSeconds(g.Launch().Seconds()), report.FormatGBps(b.rate/1e9))
	out.why["2-streams"] = "a copy overhead per chunk, the chunks' copies overlapping the kernels"
	out.why["managed"] = fmt.Sprintf("the kernel faults (fault_latency %s a batch) and the pages migrate on demand", report.FormatSeconds(g.UVM.Fault().Seconds()))
	if b.integr {
		out.why["managed"] = "one allocation in DRAM, never migrated: the kernel reads it in place"
	}
	out.why["managed-prefetch"] = "cuMemPrefetchAsync moves the pages by copy engine before the kernel: no faults"
	if b.mp != nil {
		rtt, _ := b.gh.RoundTrip(b.mp)
		out.why["gdr d2h"] = fmt.Sprintf("uncached loads: one PCIe round trip (%s) per call, then %d loads of %d B per round trip (gdr.LoadsInFlight, gdr.LoadBytes): %s GB/s",
			report.FormatSeconds(rtt.Seconds()), gdr.LoadsInFlight, gdr.LoadBytes, report.FormatGBps(gdr.LoadRate(rtt)/1e9))
	}
}

// bvSummary says, per direction and pattern, which method wins at each
// size, where the lead changes hands (interpolated between the two sizes
// around the change: each method's time is nearly linear in the size
// there), and why: from the rows (a method's time at the smallest size,
// its rate at the largest) and the parameters in r.why.
func bvSummary(plat string, r bvRun) []string {
	type key struct{ dir, pattern string }
	by := map[key]map[string][]report.Row{}
	methods := map[key][]string{}
	var order []key
	for _, row := range r.rows {
		if row.Seconds <= 0 {
			continue
		}
		k := key{row.Direction, row.Mode}
		if by[k] == nil {
			by[k] = map[string][]report.Row{}
			order = append(order, k)
		}
		if by[k][row.Path] == nil {
			methods[k] = append(methods[k], row.Path)
		}
		by[k][row.Path] = append(by[k][row.Path], row)
	}
	out := []string{fmt.Sprintf("%s: every row includes the kernel that consumes (h2d) or produces (d2h) the data: %s", plat, r.kernel)}
	for _, k := range order {
		ms := methods[k]
		rows := by[k]
		n := len(rows[ms[0]])
		winner := make([]string, n)
		for i := range n {
			for _, m := range ms {
				if winner[i] == "" || rows[m][i].Seconds < rows[winner[i]][i].Seconds {
					winner[i] = m
				}
			}
		}
		var segs []string
		for i := 0; i < n; {
			j := i
			for j+1 < n && winner[j+1] == winner[i] {
				j++
			}
			span := report.FormatBytes(rows[winner[i]][i].Bytes)
			if j > i {
				span += "–" + report.FormatBytes(rows[winner[i]][j].Bytes)
			}
			segs = append(segs, winner[i]+" "+span)
			i = j + 1
		}
		out = append(out, fmt.Sprintf("%s %s %s: fastest %s", plat, k.dir, k.pattern, strings.Join(segs, ", ")))
		for i := 1; i < n; i++ {
			a, b := winner[i-1], winner[i]
			if a == b {
				continue
			}
			out = append(out, "  "+bvCrossover(rows[a], rows[b], i, bvWhy(r.why, a, k.dir), bvWhy(r.why, b, k.dir)))
		}
		// The question asked of the BAR: the CPU's own accesses against
		// the copy engine, head to head, whoever else is faster.
		for _, cpu := range []string{"gdr", "cpu-mapped"} {
			rc, rm := rows[cpu], rows["memcpy"]
			if len(rc) != n || len(rm) != n {
				continue
			}
			line := fmt.Sprintf("  %s against memcpy: ", cpu)
			changed := false
			for i := 1; i < n; i++ {
				if (rc[i-1].Seconds < rm[i-1].Seconds) != (rc[i].Seconds < rm[i].Seconds) {
					a, b := rc, rm
					if rc[i-1].Seconds > rm[i-1].Seconds {
						a, b = rm, rc
					}
					line += bvCrossover(a, b, i, bvWhy(r.why, a[0].Path, k.dir), bvWhy(r.why, b[0].Path, k.dir))
					changed = true
					break
				}
			}
			if !changed {
				w := cpu
				if rc[n-1].Seconds > rm[n-1].Seconds {
					w = "memcpy"
				}
				line += fmt.Sprintf("%s is ahead at every size (%s against %s at %s)", w,
					report.FormatSeconds(rc[0].Seconds), report.FormatSeconds(rm[0].Seconds), report.FormatBytes(rc[0].Bytes))
			}
			out = append(out, line)
		}
	}
	return append(out, r.refused...)
}

func bvWhy(why map[string]string, method, dir string) string {
	if w, ok := why[method+" "+dir]; ok {
		return w
	}
	return why[method]
}

// bvCrossover explains the change of lead from method a (rows ra) to
// method b (rows rb) between sizes i-1 and i.
func bvCrossover(ra, rb []report.Row, i int, whyA, whyB string) string {
	lo, hi := ra[i-1], ra[i]
	dlo := lo.Seconds - rb[i-1].Seconds // < 0: a ahead
	dhi := hi.Seconds - rb[i].Seconds   // > 0: b ahead
	at := float64(lo.Bytes)
	if dhi != dlo {
		at += float64(hi.Bytes-lo.Bytes) * -dlo / (dhi - dlo)
	}
	first, last := 0, len(ra)-1
	line := fmt.Sprintf("%s → %s at ~%s (between %s and %s): %s costs %s at %s and reaches %s GB/s at %s; %s costs %s and reaches %s GB/s",
		lo.Path, rb[i].Path, report.FormatSize(int64(math.Round(at))), report.FormatBytes(lo.Bytes), report.FormatBytes(hi.Bytes),
		lo.Path, report.FormatSeconds(ra[first].Seconds), report.FormatBytes(ra[first].Bytes), report.FormatGBps(ra[last].GBps), report.FormatBytes(ra[last].Bytes),
		rb[i].Path, report.FormatSeconds(rb[first].Seconds), report.FormatGBps(rb[last].GBps))
	if whyA != "" || whyB != "" {
		line += fmt.Sprintf(" (%s: %s; %s: %s)", lo.Path, whyA, rb[i].Path, whyB)
	}
	return line
}

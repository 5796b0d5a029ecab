package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// Path names, shared with "dmalab probe" so the model and the hardware
// print side by side.
var allPaths = []string{"pinned", "pageable", "writecombined", "registered", "mapped",
	"managed-prefetch", "managed-fault", "managed-cpu-fault", "device", "peer"}

// modelledPaths are the directions each path supports, in output order.
var modelledPaths = map[string][]string{
	"pinned":            {"h2d", "d2h", "bidir"},
	"pageable":          {"h2d", "d2h", "bidir"},
	"mapped":            {"h2d", "d2h", "bidir"},
	"managed-prefetch":  {"h2d", "d2h"},
	"managed-fault":     {"h2d"},
	"managed-cpu-fault": {"d2h"},
	"writecombined":     {"h2d", "d2h", "bidir"},
	"registered":        {"h2d", "d2h", "bidir"},
	"device":            {"d2d"},
	"peer":              {"d2d", "bidir"},
}

var allDirections = []string{"h2d", "d2h", "bidir", "d2d"}

// timeHorizon bounds a run's virtual time well inside sim.Time's range
// (int64 picoseconds, about 106 days).
const timeHorizon = 50 * 24 * 3600 * sim.Second

const defaultSizes = "8B,4KiB,64KiB,1MiB,16MiB,256MiB,1GiB"

func init() {
	register(&Scenario{
		Name:     "transfers",
		Summary:  "host<->GPU, GPU-local and GPU<->GPU copy bandwidth and per-call time over a size sweep",
		Platform: "h200-pcie",
		Doc: `Synchronous copies, one at a time, as cuMemcpy issues them: each pays the
GPU's per-call overhead, waits for its copy engine, then moves as a flow over
its route (host DRAM, socket links, root complex, PCIe switches and link, VRAM;
NVLink for peers where there is one). Paths: pinned (page-locked host memory,
h2d, d2h and bidir: both directions at once on two copy engines);
writecombined and registered (host memory allocated write-combined, or
pinned after the fact with cuMemHostRegister, whose one-time cost is not in
the row: to a copy engine both are pinned memory); pageable (ordinary host
memory: the driver stages it through two pinned buffers of the GPU's
pageable_chunk, one CPU thread copying a chunk at the node's memcpy rate
while the copy engine moves the previous one); device (a copy within one
GPU's memory, d2d); peer (GPU to GPU, d2d, and bidir) where the platform has
two GPUs or more. Through the CUDA driver model: mapped (zero-copy: a copy
kernel reading or writing pinned host memory mapped into the GPU, over
PCIe, no copy engine); managed-prefetch (cuMemPrefetchAsync of managed
memory to the GPU, h2d, and back, d2h); managed-fault (a kernel touching every
4 KiB page of managed memory resident on the CPU, as the probe's page-touch
kernel does: fault-driven migration, h2d); managed-cpu-fault (the CPU
reading a word of every page of managed memory resident on the GPU,
faulting it back, d2h). For bidir, GB/s is per direction, as
nvbandwidth reports it. seconds is the time of one copy, overhead included.`,
		Params: []Param{
			{Name: "sizes", Default: defaultSizes, Help: "copy sizes, comma-separated, with units (B, KiB, MiB, GiB, TiB, or KB, MB, GB)", Check: checkSizes},
			{Name: "paths", Default: strings.Join(allPaths, ","), Help: "paths to run: " + strings.Join(allPaths, ", "), Check: checkPaths},
			{Name: "directions", Default: strings.Join(allDirections, ","), Help: "directions to run: h2d, d2h, bidir, d2d", Check: checkDirections},
			{Name: "gpu", Default: "0", Help: "index of the GPU to measure", Check: checkIndex},
			{Name: "peer", Default: "1", Help: "index of the peer GPU for the peer path", Check: checkIndex},
			{Name: "node", Default: "gpu", Help: `NUMA node of the host buffer: a node number, or "gpu" for the GPU's own node`, Check: checkNode},
		},
		Run: runTransfers,
	})
}

func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := platform.ParseBytes(f)
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return nil, fmt.Errorf("size %q: must be positive", f)
		}
		out = append(out, int64(n))
	}
	if len(out) == 0 {
		return nil, errors.New("no sizes")
	}
	return out, nil
}

func checkSizes(s string) error { _, err := parseSizes(s); return err }

func parseList(s string, known []string, what string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown %s %q (known: %s)", what, f, strings.Join(known, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %ss", what)
	}
	return out, nil
}

func checkPaths(s string) error { _, err := parseList(s, allPaths, "path"); return err }

func checkDirections(s string) error { _, err := parseList(s, allDirections, "direction"); return err }

func checkIndex(s string) error {
	if n, err := strconv.Atoi(s); err != nil || n < 0 {
		return fmt.Errorf("want a non-negative integer, got %q", s)
	}
	return nil
}

func checkNode(s string) error {
	if s == "gpu" {
		return nil
	}
	return checkIndex(s)
}

// transfer is one measurement: a path, a direction and a size.
type transfer struct {
	path, dir string
	bytes     int64
}

func runTransfers(c *Context) error {
	m := c.Machine
	sizes, _ := parseSizes(c.Params["sizes"])
	paths, _ := parseList(c.Params["paths"], allPaths, "path")
	dirs, _ := parseList(c.Params["directions"], allDirections, "direction")
	gi, _ := strconv.Atoi(c.Params["gpu"])
	g, err := m.GPU(gi)
	if err != nil {
		return c.noGPU(gi)
	}
	node := g.Node
	if c.Params["node"] != "gpu" {
		node, _ = strconv.Atoi(c.Params["node"])
	}
	host, err := m.HostMemory(node)
	if err != nil {
		return usagef("--set node=%d: %v", node, err)
	}
	var peer *machine.GPU
	if slices.Contains(paths, "peer") {
		pi, _ := strconv.Atoi(c.Params["peer"])
		switch {
		case len(m.GPUs) < 2 && !c.Explicit["paths"] && !c.Explicit["peer"]:
			paths = slices.DeleteFunc(paths, func(p string) bool { return p == "peer" })
		case pi == gi:
			return usagef("--set peer=%d: the peer must be another GPU than gpu=%d", pi, gi)
		default:
			if peer, err = m.GPU(pi); err != nil {
				return usagef("the peer path needs two GPUs: %v", err)
			}
		}
	}

	// Paths the GPU does not have: cuMemHostRegister needs I/O coherence
	// on an integrated GPU (CUDA for Tegra: "supported only on I/O
	// coherent platforms"; not before Xavier).
	if coherent, _ := m.Spec.DeviceCoherent(g.Name); g.Spec.Integrated && !coherent {
		if paths, err = dropPath(c, paths, "registered", fmt.Sprintf("%s is integrated without I/O coherence: no cuMemHostRegister", g.Name)); err != nil {
			return err
		}
	}

	var ctx *cuda.Context
	if slices.ContainsFunc(paths, isCUDAPath) {
		drv, err := c.CUDA()
		if err != nil {
			return err
		}
		proc, err := drv.NewProcess("transfers", g.Node)
		if err != nil {
			return err
		}
		if ctx, err = proc.PrimaryContext(g.Index); err != nil {
			return err
		}
		// cuMemPrefetchAsync needs concurrent managed access (Pascal and
		// later discrete GPUs); managed-cpu-fault prefetches to the GPU
		// first.
		if !drv.ConcurrentManagedAccess() {
			why := fmt.Sprintf("%s has no concurrent managed access: no cuMemPrefetchAsync", g.Name)
			for _, p := range []string{"managed-prefetch", "managed-cpu-fault"} {
				if paths, err = dropPath(c, paths, p, why); err != nil {
					return err
				}
			}
		}
	}

	// The mapped and managed paths allocate real buffers (pinned host
	// memory, VRAM, managed memory first touched on the CPU), so their
	// sizes are bounded by the memories: too large is bad input when
	// those paths were asked for, and skipped when they only came with
	// the default list.
	gpuMem := int64(g.Spec.VRAM.V)
	if g.Spec.Integrated {
		gpuMem = int64(m.Spec.Nodes[g.Node].DRAM.V) // device memory is the node's DRAM
	}
	limit := min(int64(m.Spec.Nodes[node].DRAM.V), gpuMem)
	var todo []transfer
	for _, p := range paths {
		for _, d := range modelledPaths[p] {
			if !slices.Contains(dirs, d) {
				continue
			}
			for _, n := range sizes {
				if isCUDAPath(p) && n > limit {
					if c.Explicit["paths"] {
						return usagef("path %s: %s does not fit in the memory it needs (%s: the smaller of node%d's DRAM and %s's VRAM)",
							p, report.FormatBytes(n), report.FormatBytes(limit), node, g.Name)
					}
					continue
				}
				todo = append(todo, transfer{p, d, n})
			}
		}
	}
	if len(todo) == 0 {
		return usagef("no measurement matches paths=%s and directions=%s", c.Params["paths"], c.Params["directions"])
	}

	var runErr error
	m.Engine.Spawn("transfers", func(p *sim.Proc) {
		for i, t := range todo {
			c.Progressf("transfers: %d/%d %s %s %s", i+1, len(todo), t.path, t.dir, report.FormatBytes(t.bytes))
			var row report.Row
			var err error
			if isCUDAPath(t.path) {
				row, err = measureCUDA(p, ctx, t)
			} else {
				row, err = measure(p, c.DMA, t, g, peer, host)
			}
			if err != nil {
				runErr = err
				return
			}
			// The fabric clamps an end beyond the clock's range to
			// sim.Forever; stop before the next step would overflow.
			if p.Now() >= timeHorizon {
				runErr = usagef("the sweep needs more than %v of virtual time (at %s): use smaller sizes", timeHorizon, row.Name)
				return
			}
			c.Result.Results = append(c.Result.Results, row)
		}
	})
	guardErr := runEngine(c, "sizes")
	if runErr != nil {
		return runErr
	}
	return guardErr
}

// dropPath removes path from paths when the platform does not have it:
// a usage error naming why when the user asked for it, silently when it
// came with the default list.
func dropPath(c *Context, paths []string, path, why string) ([]string, error) {
	if !slices.Contains(paths, path) {
		return paths, nil
	}
	if c.Explicit["paths"] {
		return nil, usagef("path %s on %s: %s", path, c.Machine.Spec.Name, why)
	}
	return slices.DeleteFunc(paths, func(p string) bool { return p == path }), nil
}

// measure runs one measurement: one copy, or for bidir one copy in each
// direction started together; the row's time is that of the slower.
// Each leg is one transfer of the DMA layer by the GPU that issues it,
// on the copy engine the GPU model picks for its direction.
func measure(p *sim.Proc, x *dma.DMA, t transfer, g, peer *machine.GPU, host machine.Endpoint) (report.Row, error) {
	type leg struct {
		by       *machine.GPU
		kind     machine.CopyKind
		src, dst machine.Endpoint
	}
	var legs []leg
	switch {
	case t.path == "pageable":
		return measurePageable(p, x, t, g, host)
	case t.path == "pinned", t.path == "writecombined", t.path == "registered":
		h2d := leg{g, machine.HostToDevice, host, g.Memory()}
		d2h := leg{g, machine.DeviceToHost, g.Memory(), host}
		switch t.dir {
		case "h2d":
			legs = []leg{h2d}
		case "d2h":
			legs = []leg{d2h}
		case "bidir":
			legs = []leg{h2d, d2h}
		}
	case t.path == "device":
		legs = []leg{{g, machine.DeviceToDevice, g.Memory(), g.Memory()}}
	case t.path == "peer":
		legs = []leg{{g, machine.PeerToPeer, g.Memory(), peer.Memory()}}
		if t.dir == "bidir" {
			legs = append(legs, leg{peer, machine.PeerToPeer, peer.Memory(), g.Memory()})
		}
	}
	name := fmt.Sprintf("%s %s %s", t.path, t.dir, report.FormatBytes(t.bytes))
	start := p.Now()
	errs := make([]error, len(legs))
	var kids []*sim.Proc
	for i, l := range legs {
		dev, err := x.Device(l.by.Name)
		if err != nil {
			return report.Row{}, err
		}
		kids = append(kids, p.Spawn(name, func(q *sim.Proc) {
			_, errs[i] = dev.Transfer(q, &dma.Transfer{
				Name: name, Engine: l.by.CopyEngine(l.kind), Src: l.src, Dst: l.dst, Bytes: t.bytes,
				Overhead: l.by.Spec.CopyOverhead.V,
			})
		}))
	}
	for _, k := range kids {
		p.Join(k)
	}
	if err := errors.Join(errs...); err != nil {
		return report.Row{}, err
	}
	secs := (p.Now() - start).Seconds()
	return report.Row{
		Name: name, Path: t.path, Direction: t.dir, Bytes: t.bytes,
		Seconds: secs, GBps: float64(t.bytes) / secs / 1e9,
	}, nil
}

// measurePageable is a synchronous cuMemcpy from or to pageable memory in
// one or both directions: each direction is its own staged pipeline.
func measurePageable(p *sim.Proc, x *dma.DMA, t transfer, g *machine.GPU, host machine.Endpoint) (report.Row, error) {
	dev, err := x.Device(g.Name)
	if err != nil {
		return report.Row{}, err
	}
	name := fmt.Sprintf("%s %s %s", t.path, t.dir, report.FormatBytes(t.bytes))
	dirs := []string{t.dir}
	if t.dir == "bidir" {
		dirs = []string{"h2d", "d2h"}
	}
	start := p.Now()
	errs := make([]error, len(dirs))
	var kids []*sim.Proc
	for i, d := range dirs {
		kids = append(kids, p.Spawn(name, func(q *sim.Proc) {
			errs[i] = cuda.StagedCopy(q, x.Machine(), cuda.Staging{
				Name: name, GPU: g, DMA: dev, Host: host, Node: g.Node,
				ToDevice: d == "h2d", Bytes: t.bytes, Overhead: g.Spec.CopyOverhead.V,
			})
		}))
	}
	for _, k := range kids {
		p.Join(k)
	}
	if err := errors.Join(errs...); err != nil {
		return report.Row{}, err
	}
	secs := (p.Now() - start).Seconds()
	return report.Row{Name: name, Path: t.path, Direction: t.dir, Bytes: t.bytes,
		Seconds: secs, GBps: float64(t.bytes) / secs / 1e9}, nil
}

// isCUDAPath says whether a path runs through the CUDA driver model
// (kernels, unified memory) rather than straight on the copy engines.
func isCUDAPath(path string) bool {
	return path == "mapped" || strings.HasPrefix(path, "managed-")
}

// measureCUDA runs one measurement of a zero-copy or managed path as a
// program would, through the CUDA driver model, and frees what it
// allocated.
func measureCUDA(p *sim.Proc, c *cuda.Context, t transfer) (report.Row, error) {
	name := fmt.Sprintf("%s %s %s", t.path, t.dir, report.FormatBytes(t.bytes))
	n := uint64(t.bytes)
	var took sim.Time
	var err error
	switch t.path {
	case "mapped":
		took, err = zeroCopy(p, c, name, t.dir, n)
	default:
		took, err = managed(p, c, name, t.path, t.dir, n)
	}
	if err != nil {
		return report.Row{}, fmt.Errorf("%s: %w", name, err)
	}
	secs := took.Seconds()
	return report.Row{Name: name, Path: t.path, Direction: t.dir, Bytes: t.bytes,
		Seconds: secs, GBps: float64(t.bytes) / secs / 1e9}, nil
}

// zeroCopy times a copy kernel between device memory and pinned host
// memory mapped into the GPU (cuMemHostAlloc with DEVICEMAP): the kernel's
// loads or stores of host memory cross PCIe; launch included.
func zeroCopy(p *sim.Proc, c *cuda.Context, name, dir string, n uint64) (sim.Time, error) {
	host, err := c.MemHostAlloc(p, n, cuda.HostAllocPortable|cuda.HostAllocDeviceMap)
	if err != nil {
		return 0, err
	}
	defer c.MemFreeHost(p, host)
	hptr, err := c.MemHostGetDevicePointer(host, 0)
	if err != nil {
		return 0, err
	}
	dev, err := c.MemAlloc(p, n)
	if err != nil {
		return 0, err
	}
	defer c.MemFree(p, dev)
	copyOf := func(src, dst mem.GPUAddr) []gpu.Access {
		return []gpu.Access{
			{Addr: src, Size: n, Bytes: n, Pattern: gpu.Streaming{}},
			{Addr: dst, Size: n, Bytes: n, Pattern: gpu.Streaming{}, Write: true},
		}
	}
	k := gpu.Kernel{Name: name}
	if dir != "d2h" {
		k.Accesses = append(k.Accesses, copyOf(hptr, dev)...)
	}
	if dir != "h2d" {
		k.Accesses = append(k.Accesses, copyOf(dev, hptr)...)
	}
	t0 := p.Now()
	if err := c.LaunchKernel(p, k, nil); err != nil {
		return 0, err
	}
	if err := c.Synchronize(p); err != nil {
		return 0, err
	}
	return p.Now() - t0, nil
}

// managed times one unified-memory movement of n bytes of a fresh
// managed allocation: a prefetch either way, a kernel's fault-driven
// migration to the GPU, or the CPU faulting GPU-resident pages back.
func managed(p *sim.Proc, c *cuda.Context, name, path, dir string, n uint64) (sim.Time, error) {
	buf, err := c.MemAllocManaged(p, n, cuda.MemAttachGlobal)
	if err != nil {
		return 0, err
	}
	defer c.MemFree(p, buf)
	gpuIdx := c.Device()
	// First touch on the CPU: the pages start resident in host memory.
	if err := c.CPUAccess(p, buf, n, true); err != nil {
		return 0, err
	}
	toGPU := func() error {
		if err := c.MemPrefetchAsync(p, buf, n, gpuIdx, nil); err != nil {
			return err
		}
		return c.Synchronize(p)
	}
	if dir == "d2h" {
		if err := toGPU(); err != nil {
			return 0, err
		}
	}
	t0 := p.Now()
	switch {
	case path == "managed-prefetch" && dir == "h2d":
		err = toGPU()
	case path == "managed-prefetch":
		if err = c.MemPrefetchAsync(p, buf, n, cuda.DeviceCPU, nil); err == nil {
			err = c.Synchronize(p)
		}
	case path == "managed-fault":
		// The probe's page-touch kernel: many threads, one 4-byte read
		// per 4 KiB page.
		pages := (n + mem.PageSize - 1) / mem.PageSize
		k := gpu.Kernel{Name: name, Accesses: []gpu.Access{{Addr: buf, Size: n, Bytes: pages * 4,
			Pattern: gpu.Strided{Stride: mem.PageSize, Elem: 4}}}}
		if err = c.LaunchKernel(p, k, nil); err == nil {
			err = c.Synchronize(p)
		}
	case path == "managed-cpu-fault":
		// As the probe does: the CPU reads one word of every page.
		for off := uint64(0); off < n && err == nil; off += mem.PageSize {
			err = c.CPUAccess(p, buf+mem.GPUAddr(off), min(8, n-off), false)
		}
	}
	return p.Now() - t0, err
}

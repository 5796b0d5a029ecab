package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/xfer"
)

// modelledPaths are the directions each path of xfer.CopyPaths supports,
// in output order.
var modelledPaths = map[xfer.Path][]xfer.Direction{
	xfer.Pinned:          {xfer.H2D, xfer.D2H, xfer.Bidir},
	xfer.Pageable:        {xfer.H2D, xfer.D2H, xfer.Bidir},
	xfer.Mapped:          {xfer.H2D, xfer.D2H, xfer.Bidir},
	xfer.ManagedPrefetch: {xfer.H2D, xfer.D2H},
	xfer.ManagedFault:    {xfer.H2D},
	xfer.ManagedCPUFault: {xfer.D2H},
	xfer.WriteCombined:   {xfer.H2D, xfer.D2H, xfer.Bidir},
	xfer.Registered:      {xfer.H2D, xfer.D2H, xfer.Bidir},
	xfer.Device:          {xfer.D2D},
	xfer.Peer:            {xfer.D2D, xfer.Bidir},
}

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
			{Name: "sizes", Kind: dmalab.ParamSizes, Default: defaultSizes, Help: "copy sizes, comma-separated, with units (B, KiB, MiB, GiB, TiB, or KB, MB, GB)"},
			{Name: "paths", Kind: dmalab.ParamList, Item: "path", Values: allPaths, Default: strings.Join(allPaths, ","), Help: "paths to run: " + strings.Join(allPaths, ", ")},
			{Name: "directions", Kind: dmalab.ParamList, Item: "direction", Values: allDirections, Default: strings.Join(allDirections, ","), Help: "directions to run: h2d, d2h, bidir, d2d"},
			{Name: "gpu", Kind: dmalab.ParamInt, Default: "0", Help: "index of the GPU to measure"},
			{Name: "peer", Kind: dmalab.ParamInt, Default: "1", Help: "index of the peer GPU for the peer path"},
			{Name: "node", Kind: dmalab.ParamInt, Word: "gpu", Default: "gpu", Help: `NUMA node of the host buffer: a node number, or "gpu" for the GPU's own node`},
		},
		Run: runTransfers,
	})
}

var (
	allPaths      = xfer.Names(xfer.CopyPaths())
	allDirections = xfer.Names(xfer.CopyDirections())
)

// transfer is one measurement: a path, a direction and a size.
type transfer struct {
	path  xfer.Path
	dir   xfer.Direction
	bytes int64
}

func runTransfers(c *Context) error {
	m := c.Machine
	sizes := c.Sizes("sizes")
	paths := pathsOf(c.List("paths"))
	dirs := directionsOf(c.List("directions"))
	gi := c.Int("gpu")
	g, err := m.GPU(gi)
	if err != nil {
		return noGPU(c, gi)
	}
	node := g.Node
	if !c.IsWord("node") {
		node = c.Int("node")
	}
	host, err := m.HostMemory(node)
	if err != nil {
		return usagef("--set node=%d: %v", node, err)
	}
	var peer *machine.GPU
	if slices.Contains(paths, xfer.Peer) {
		pi := c.Int("peer")
		switch {
		case len(m.GPUs) < 2 && !c.Explicit("paths") && !c.Explicit("peer"):
			paths = slices.DeleteFunc(paths, func(p xfer.Path) bool { return p == xfer.Peer })
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
		if paths, err = dropPath(c, paths, xfer.Registered, fmt.Sprintf("%s is integrated without I/O coherence: no cuMemHostRegister", g.Name)); err != nil {
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
			for _, p := range []xfer.Path{xfer.ManagedPrefetch, xfer.ManagedCPUFault} {
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
					if c.Explicit("paths") {
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
		return usagef("no measurement matches paths=%s and directions=%s", c.Text("paths"), c.Text("directions"))
	}

	var runErr error
	m.Engine.Spawn("transfers", func(p *sim.Proc) {
		// Behind an IOMMU the pageable path's staging buffers are the
		// driver's, made and mapped once, before the first row.
		var staging *cuda.StagingMemory
		if slices.ContainsFunc(todo, func(t transfer) bool { return t.path == xfer.Pageable }) {
			dev, err := c.DMA.Device(g.Name)
			if err == nil {
				staging, err = cuda.NewStagingMemory(p, m, dev, node, uint64(g.Spec.Chunk()))
			}
			if err != nil {
				runErr = err
				return
			}
		}
		for i, t := range todo {
			c.Progressf("transfers: %d/%d %s %s %s", i+1, len(todo), t.path, t.dir, report.FormatBytes(t.bytes))
			var row report.Row
			var err error
			if isCUDAPath(t.path) {
				row, err = measureCUDA(p, ctx, t)
			} else {
				row, err = measure(p, c.DMA, t, g, peer, host, node, staging)
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
	guardErr := c.RunEngine("sizes")
	if runErr != nil {
		return runErr
	}
	return guardErr
}

// dropPath removes path from paths when the platform does not have it:
// a usage error naming why when the user asked for it, silently when it
// came with the default list.
func dropPath(c *Context, paths []xfer.Path, path xfer.Path, why string) ([]xfer.Path, error) {
	if !slices.Contains(paths, path) {
		return paths, nil
	}
	if c.Explicit("paths") {
		return nil, usagef("path %s on %s: %s", path, c.Machine.Spec.Name, why)
	}
	return slices.DeleteFunc(paths, func(p xfer.Path) bool { return p == path }), nil
}

func pathsOf(names []string) []xfer.Path {
	out := make([]xfer.Path, len(names))
	for i, n := range names {
		out[i] = xfer.Path(n)
	}
	return out
}

func directionsOf(names []string) []xfer.Direction {
	out := make([]xfer.Direction, len(names))
	for i, n := range names {
		out[i] = xfer.Direction(n)
	}
	return out
}

// measure runs one measurement: one copy, or for bidir one copy in each
// direction started together; the row's time is that of the slower.
// Each leg is one transfer of the DMA layer by the GPU that issues it,
// on the copy engine the GPU model picks for its direction.
//
// Behind an IOMMU a copy of pinned host memory reads or writes a real
// buffer of node's DRAM at the IOVA the driver's mapping gave it (made
// before the row is timed, as cuMemHostAlloc's is), so its pages are
// translated; under dma-direct only bytes move.
func measure(p *sim.Proc, x *dma.DMA, t transfer, g, peer *machine.GPU, host machine.Endpoint, node int, staging *cuda.StagingMemory) (report.Row, error) {
	type leg struct {
		by       *machine.GPU
		kind     machine.CopyKind
		src, dst machine.Endpoint
	}
	var legs []leg
	switch {
	case t.path == xfer.Pageable:
		return measurePageable(p, x, t, g, host, staging)
	case t.path == xfer.Pinned, t.path == xfer.WriteCombined, t.path == xfer.Registered:
		h2d := leg{g, machine.HostToDevice, host, g.Memory()}
		d2h := leg{g, machine.DeviceToHost, g.Memory(), host}
		switch t.dir {
		case xfer.H2D:
			legs = []leg{h2d}
		case xfer.D2H:
			legs = []leg{d2h}
		case xfer.Bidir:
			legs = []leg{h2d, d2h}
		}
	case t.path == xfer.Device:
		legs = []leg{{g, machine.DeviceToDevice, g.Memory(), g.Memory()}}
	case t.path == xfer.Peer:
		legs = []leg{{g, machine.PeerToPeer, g.Memory(), peer.Memory()}}
		if t.dir == xfer.Bidir {
			legs = append(legs, leg{peer, machine.PeerToPeer, peer.Memory(), g.Memory()})
		}
	}
	name := fmt.Sprintf("%s %s %s", t.path, t.dir, report.FormatBytes(t.bytes))
	errs := make([]error, len(legs))
	var kids []*sim.Proc
	devs := make([]*dma.Device, len(legs))
	spans := make([][]dma.Span, len(legs))
	for i, l := range legs {
		dev, err := x.Device(l.by.Name)
		if err != nil {
			return report.Row{}, err
		}
		devs[i] = dev
		if l.kind != machine.HostToDevice && l.kind != machine.DeviceToHost {
			continue
		}
		sp, release, err := pinnedBuffer(p, x, dev, node, t.bytes)
		if err != nil {
			return report.Row{}, fmt.Errorf("%s: %w", name, err)
		}
		defer release()
		spans[i] = sp
	}
	start := p.Now()
	for i, l := range legs {
		tr := &dma.Transfer{
			Name: name, Engine: l.by.CopyEngine(l.kind), Src: l.src, Dst: l.dst, Bytes: t.bytes,
			Overhead: l.by.Spec.CopyOverhead.V,
		}
		if l.kind == machine.HostToDevice {
			tr.Read = spans[i]
		} else {
			tr.Write = spans[i]
		}
		kids = append(kids, p.Spawn(name, func(q *sim.Proc) {
			_, errs[i] = devs[i].Transfer(q, tr)
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
		Name: name, Path: string(t.path), Direction: string(t.dir), Bytes: t.bytes,
		Seconds: secs, GBps: float64(t.bytes) / secs / 1e9,
	}, nil
}

// pinnedBuffer is the pinned host buffer of n bytes of a copy by dev
// when dev is behind an IOMMU domain: pages of node's DRAM mapped for
// dev as the GPU driver maps pinned memory (one IOVA range, read and
// write), as the spans the copy engine addresses, and the release that
// unmaps and frees it after the row. Under dma-direct: no buffer, no
// spans (the copy moves bytes only, as before).
func pinnedBuffer(p *sim.Proc, x *dma.DMA, dev *dma.Device, node int, n int64) ([]dma.Span, func(), error) {
	mp, ok := dev.Translator().(dma.Mapper)
	if !ok || n <= 0 {
		return nil, func() {}, nil
	}
	size := (uint64(n) + mem.PageSize - 1) &^ (mem.PageSize - 1)
	m := x.Memory()
	pa, err := m.AllocPages(node, size, mem.ZoneNormal)
	if err != nil {
		return nil, nil, usagef("a pinned buffer behind the IOMMU: %v: use smaller sizes", err)
	}
	iova, err := mp.MapSG(p, []mem.PhysRange{{Start: pa, Size: size}}, dma.Bidirectional)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("mapping a pinned buffer for %s: %w", dev.Name(), err), m.FreePages(pa, size))
	}
	release := func() {
		mp.Unmap(p, iova, size, dma.Bidirectional)
		m.FreePages(pa, size)
	}
	return []dma.Span{dma.PinnedSpan(iova, uint64(n))}, release, nil
}

// measurePageable is a synchronous cuMemcpy from or to pageable memory in
// one or both directions: each direction is its own staged pipeline.
func measurePageable(p *sim.Proc, x *dma.DMA, t transfer, g *machine.GPU, host machine.Endpoint, staging *cuda.StagingMemory) (report.Row, error) {
	dev, err := x.Device(g.Name)
	if err != nil {
		return report.Row{}, err
	}
	name := fmt.Sprintf("%s %s %s", t.path, t.dir, report.FormatBytes(t.bytes))
	dirs := []xfer.Direction{t.dir}
	if t.dir == xfer.Bidir {
		dirs = []xfer.Direction{xfer.H2D, xfer.D2H}
	}
	start := p.Now()
	errs := make([]error, 2*len(dirs))
	var kids []*sim.Proc
	var landed []*sim.Completion
	for i, d := range dirs {
		done := p.Engine().NewNamedCompletion(name + " landed")
		landed = append(landed, done)
		kids = append(kids, p.Spawn(name, func(q *sim.Proc) {
			errs[i] = cuda.StagedCopy(q, x.Machine(), cuda.Staging{
				Name: name, GPU: g, DMA: dev, Host: host, Node: g.Node,
				ToDevice: d == xfer.H2D, Bytes: t.bytes, Overhead: g.Spec.CopyOverhead.V,
				Completion: g.Spec.CopyCompletion.V, Buffers: staging, Rate: float64(g.Spec.StagingRate.V),
				Landed: done, LandedErr: &errs[len(dirs)+i],
			})
		}))
	}
	for _, k := range kids {
		p.Join(k)
	}
	// The row is the call's time: to the device it returns once staged.
	// The next row starts once the last chunk has landed.
	secs := (p.Now() - start).Seconds()
	for i, c := range landed {
		if errs[i] == nil {
			p.Wait(c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return report.Row{}, err
	}
	return report.Row{Name: name, Path: string(t.path), Direction: string(t.dir), Bytes: t.bytes,
		Seconds: secs, GBps: float64(t.bytes) / secs / 1e9}, nil
}

// isCUDAPath says whether a path runs through the CUDA driver model
// (kernels, unified memory) rather than straight on the copy engines.
func isCUDAPath(path xfer.Path) bool {
	return path == xfer.Mapped || strings.HasPrefix(string(path), string(xfer.Managed)+"-")
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
	case xfer.Mapped:
		took, err = zeroCopy(p, c, name, t.dir, n)
	default:
		took, err = managed(p, c, name, t.path, t.dir, n)
	}
	if err != nil {
		return report.Row{}, fmt.Errorf("%s: %w", name, err)
	}
	secs := took.Seconds()
	return report.Row{Name: name, Path: string(t.path), Direction: string(t.dir), Bytes: t.bytes,
		Seconds: secs, GBps: float64(t.bytes) / secs / 1e9}, nil
}

// zeroCopy times a copy kernel between device memory and pinned host
// memory mapped into the GPU (cuMemHostAlloc with DEVICEMAP): the kernel's
// loads or stores of host memory cross PCIe; launch included.
func zeroCopy(p *sim.Proc, c *cuda.Context, name string, dir xfer.Direction, n uint64) (sim.Time, error) {
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
	if dir != xfer.D2H {
		k.Accesses = append(k.Accesses, copyOf(hptr, dev)...)
	}
	if dir != xfer.H2D {
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
func managed(p *sim.Proc, c *cuda.Context, name string, path xfer.Path, dir xfer.Direction, n uint64) (sim.Time, error) {
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
	if dir == xfer.D2H {
		if err := toGPU(); err != nil {
			return 0, err
		}
	}
	t0 := p.Now()
	switch {
	case path == xfer.ManagedPrefetch && dir == xfer.H2D:
		err = toGPU()
	case path == xfer.ManagedPrefetch:
		if err = c.MemPrefetchAsync(p, buf, n, cuda.DeviceCPU, nil); err == nil {
			err = c.Synchronize(p)
		}
	case path == xfer.ManagedFault:
		// The probe's page-touch kernel: many threads, one 4-byte read
		// per 4 KiB page.
		pages := (n + mem.PageSize - 1) / mem.PageSize
		k := gpu.Kernel{Name: name, Accesses: []gpu.Access{{Addr: buf, Size: n, Bytes: pages * 4,
			Pattern: gpu.Strided{Stride: mem.PageSize, Elem: 4}}}}
		if err = c.LaunchKernel(p, k, nil); err == nil {
			err = c.Synchronize(p)
		}
	case path == xfer.ManagedCPUFault:
		// As the probe does: the CPU reads one word of every page.
		for off := uint64(0); off < n && err == nil; off += mem.PageSize {
			err = c.CPUAccess(p, buf+mem.GPUAddr(off), min(8, n-off), false)
		}
	}
	return p.Now() - t0, err
}

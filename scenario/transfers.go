package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// Path names, shared with "dmalab probe" so the model and the hardware
// print side by side. The host-memory types other than pinned arrive with
// the GPU memory model (issue 5).
var allPaths = []string{"pinned", "pageable", "writecombined", "registered", "mapped",
	"managed-prefetch", "managed-fault", "managed-cpu-fault", "device", "peer"}

// modelledPaths are the paths the transfers scenario runs today, and the
// directions each supports, in output order.
var modelledPaths = map[string][]string{
	"pinned":        {"h2d", "d2h", "bidir"},
	"pageable":      {"h2d", "d2h", "bidir"},
	"writecombined": {"h2d", "d2h", "bidir"},
	"registered":    {"h2d", "d2h", "bidir"},
	"device":        {"d2d"},
	"peer":          {"d2d", "bidir"},
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
two GPUs or more. For bidir, GB/s is per direction, as
nvbandwidth reports it. seconds is the time of one copy, overhead included.`,
		Params: []Param{
			{Name: "sizes", Default: defaultSizes, Help: "copy sizes, comma-separated, with units (B, KiB, MiB, GiB, TiB, or KB, MB, GB)", Check: checkSizes},
			{Name: "paths", Default: "pinned,pageable,writecombined,registered,device,peer", Help: "paths to run: " + strings.Join(allPaths, ", "), Check: checkPaths},
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

func checkPaths(s string) error {
	paths, err := parseList(s, allPaths, "path")
	if err != nil {
		return err
	}
	for _, p := range paths {
		if _, ok := modelledPaths[p]; !ok {
			return fmt.Errorf("path %q is not modelled yet (modelled: pinned, pageable, writecombined, registered, device, peer; mapped and managed paths come with the GPU memory model)", p)
		}
	}
	return nil
}

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
		return usagef("--set gpu=%d: %v", gi, err)
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

	var todo []transfer
	for _, p := range paths {
		for _, d := range modelledPaths[p] {
			if !slices.Contains(dirs, d) {
				continue
			}
			for _, n := range sizes {
				todo = append(todo, transfer{p, d, n})
			}
		}
	}
	if len(todo) == 0 {
		return usagef("no measurement matches paths=%s and directions=%s", c.Params["paths"], c.Params["directions"])
	}

	var runErr error
	m.Engine.Spawn("transfers", func(p *sim.Proc) {
		for _, t := range todo {
			row, err := measure(p, m, t, g, peer, host)
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
	m.Engine.Run()
	if runErr != nil {
		return runErr
	}
	if b := m.Engine.Blocked(); len(b) > 0 {
		return fmt.Errorf("transfers: model deadlocked: %s", strings.Join(b, "; "))
	}
	return nil
}

// engineFor picks the copy engine the driver would: host-to-device and
// device-to-host copies on different engines, so both directions can run
// at once; with a single engine they share it and serialise.
func engineFor(g *machine.GPU, dir string) *machine.Engine {
	if dir == "d2h" && len(g.CopyEngines) > 1 {
		return g.CopyEngines[1]
	}
	return g.CopyEngines[0]
}

// measure runs one measurement: one copy, or for bidir one copy in each
// direction started together; the row's time is that of the slower.
func measure(p *sim.Proc, m *machine.Machine, t transfer, g, peer *machine.GPU, host machine.Endpoint) (report.Row, error) {
	type leg struct {
		dir      string
		en       *machine.Engine
		src, dst machine.Endpoint
		overhead sim.Time
	}
	var legs []leg
	switch {
	case t.path == "pageable":
		return measurePageable(p, m, t, g, host)
	case t.path == "pinned", t.path == "writecombined", t.path == "registered":
		h2d := leg{"h2d", engineFor(g, "h2d"), host, g.Memory(), g.Spec.CopyOverhead.V}
		d2h := leg{"d2h", engineFor(g, "d2h"), g.Memory(), host, g.Spec.CopyOverhead.V}
		switch t.dir {
		case "h2d":
			legs = []leg{h2d}
		case "d2h":
			legs = []leg{d2h}
		case "bidir":
			legs = []leg{h2d, d2h}
		}
	case t.path == "device":
		legs = []leg{{"d2d", engineFor(g, "d2d"), g.Memory(), g.Memory(), g.Spec.CopyOverhead.V}}
	case t.path == "peer":
		legs = []leg{{"d2d", engineFor(g, "d2d"), g.Memory(), peer.Memory(), g.Spec.CopyOverhead.V}}
		if t.dir == "bidir" {
			legs = append(legs, leg{"d2d", engineFor(peer, "d2d"), peer.Memory(), g.Memory(), peer.Spec.CopyOverhead.V})
		}
	}
	name := fmt.Sprintf("%s %s %s", t.path, t.dir, report.FormatBytes(t.bytes))
	start := p.Now()
	errs := make([]error, len(legs))
	var kids []*sim.Proc
	for i, l := range legs {
		kids = append(kids, p.Spawn(name, func(q *sim.Proc) {
			_, errs[i] = m.Copy(q, machine.CopyOp{
				Name: name, Engine: l.en, Src: l.src, Dst: l.dst, Bytes: t.bytes, Overhead: l.overhead,
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
func measurePageable(p *sim.Proc, m *machine.Machine, t transfer, g *machine.GPU, host machine.Endpoint) (report.Row, error) {
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
			errs[i] = cuda.StagedCopy(q, m, cuda.Staging{
				Name: name, GPU: g, Host: host, Node: g.Node,
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

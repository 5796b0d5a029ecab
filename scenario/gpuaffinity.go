package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/xfer"
)

func init() {
	register(&Scenario{
		Name:     "gpu-affinity",
		Summary:  "host↔GPU copies from memory on the GPU's socket against the other socket's, one GPU and several at once: what the socket link costs",
		Platform: gaDefaultPlatforms[0],
		Doc: `What do I lose if my GPU sits on the other socket? A program's
cuMemcpy between host memory and GPU memory, with the host memory on
the GPU's NUMA node or on the other one, through the CUDA driver model:
the pinned buffers come from cuMemAllocHost, which places its pages by
the calling thread's memory policy and node (as the NVIDIA driver's
nv_alloc_system_pages takes them with the task's mempolicy); the
pageable ones are anonymous memory placed at first touch. Each copying
thread runs on a CPU of its GPU's node (numactl --cpunodebind, as
NVIDIA's guidance for GPU servers asks); the memory's node is set by the
process's policy (numactl --membind).

  one GPU, pinned     local (memory on the GPU's node) against remote
                      (memory on the other node: the DMA crosses the
                      socket link), per direction: h2d, d2h and bidir
                      (both at once, on two copy engines);
  one GPU, pageable   the same through the driver's staging buffers:
                      the thread's memcpy reads (h2d) or writes (d2h)
                      the other node's memory across the socket link;
  several GPUs        2, 4, ... (every discrete GPU last) at once, each
                      GPU with its own pinned buffers, chosen
                      alternately from each socket: memory local to each
                      GPU's socket against all of it on node 0 (numactl
                      --membind=0), where every remote GPU's copy shares
                      the socket link.

Per row: the time of the batch (every copy started at once, until the
last ends), GB/s per GPU and direction (the mean of the copies' own
rates), and in the note the aggregate GB/s, the bytes the socket links
carried, their busiest direction's rate over the batch and its share of
the link's capacity. The summary answers the question from the model's
quantities: the PCIe rate against the socket link's, the remote latency,
the memcpy's fall on remote memory.`,
		Params: []Param{
			{Name: "size", Kind: dmalab.ParamSize, Default: "256MiB", Help: "bytes per copy (per GPU and direction)"},
			{Name: "platforms", Default: "", Help: "comma-separated platforms (default: 2s-4gpu-pcie and dgx-h100 when the run's platform is 2s-4gpu-pcie, else the run's)"},
			{Name: "directions", Kind: dmalab.ParamList, Values: gaDirections, Item: "direction", Default: strings.Join(gaDirections, ","), Help: "copy directions, in order"},
		},
		Run: runGPUAffinity,
	})
}

var (
	gaDefaultPlatforms = []string{"2s-4gpu-pcie", "dgx-h100"}
	gaDirections       = []string{string(xfer.H2D), string(xfer.D2H), string(xfer.Bidir)}
)

// gaMaxSize bounds a copy: every GPU pins two of them on one node.
const gaMaxSize = 4 << 30

// gaCase is one measurement: copies on gpus at once, each direction of
// dir, from pinned or pageable memory placed by place.
type gaCase struct {
	path xfer.Path
	dir  xfer.Direction
	gpus []int
	// place: "local" (each GPU's node), "remote" (the node after each
	// GPU's), "node0" (node 0 for all).
	place string
}

// mode labels the row in the table: GPUs and placement.
func (c gaCase) mode() string {
	if len(c.gpus) == 1 {
		return "1gpu-" + c.place
	}
	return fmt.Sprintf("%dgpus-%s", len(c.gpus), c.place)
}

func (c gaCase) name(spec *platform.Spec) string {
	var g []string
	for _, i := range c.gpus {
		g = append(g, spec.GPUs[i].Name)
	}
	n := "1 GPU"
	if len(c.gpus) > 1 {
		n = fmt.Sprintf("%d GPUs", len(c.gpus))
	}
	return fmt.Sprintf("%s (%s) %s %s %s", n, strings.Join(g, ","), c.path, c.dir, c.place)
}

func runGPUAffinity(c *Context) error {
	size := c.Size("size")
	if size <= 0 || size > gaMaxSize {
		return usagef("--set size: %s: a copy is 1 B to %s", report.FormatBytes(size), report.FormatBytes(gaMaxSize))
	}
	specs, err := platformsParam(c, gaDefaultPlatforms)
	if err != nil {
		return err
	}
	var dirs []xfer.Direction
	for _, d := range c.List("directions") {
		dirs = append(dirs, xfer.Direction(d))
	}
	opt := c.Options()
	opt.Progress, opt.Trace = nil, false
	// Each platform's system draws into the run's trace.
	opt.TraceInto = c.Trace
	for _, spec := range specs {
		rows, summary, err := gaPlatform(spec, opt, uint64(size), dirs)
		if err != nil {
			return err
		}
		c.Result.Results = append(c.Result.Results, rows...)
		c.Result.Summary = append(c.Result.Summary, summary...)
	}
	return nil
}

// gaOrder is the discrete GPUs taken alternately from each node: the
// first of node 0, the first of node 1, the second of node 0, ..., so
// that any prefix spreads over the sockets.
func gaOrder(m *machine.Machine) []int {
	type pick struct{ rank, node, i int }
	var ps []pick
	seen := map[int]int{}
	for i, g := range m.GPUs {
		if g.Spec.Integrated {
			continue
		}
		n := g.Node
		ps = append(ps, pick{seen[n], n, i})
		seen[n]++
	}
	slices.SortStableFunc(ps, func(a, b pick) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return a.node - b.node
	})
	out := make([]int, len(ps))
	for k, p := range ps {
		out[k] = p.i
	}
	return out
}

// gaCounts is 2, 4, 8, ... below n, then n.
func gaCounts(n int) []int {
	var out []int
	for k := 2; k < n; k *= 2 {
		out = append(out, k)
	}
	if n >= 2 {
		out = append(out, n)
	}
	return out
}

// gaPlatform boots spec once and measures every case on it, one after
// the other, each in a process of its own that exits before the next.
func gaPlatform(spec *platform.Spec, opt dmalab.Options, size uint64, dirs []xfer.Direction) ([]report.Row, []string, error) {
	if len(spec.Nodes) < 2 {
		return nil, nil, usagef("platform %s has one NUMA node: gpu-affinity needs two", spec.Name)
	}
	opt.TraceName = spec.Name
	s, err := dmalab.BootSpec(spec, opt)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	cu, err := s.CUDA()
	if err != nil {
		return nil, nil, usagef("platform %s: %v", spec.Name, err)
	}
	order := gaOrder(s.Machine)
	if len(order) == 0 {
		return nil, nil, usagef("platform %s has no discrete GPU", spec.Name)
	}
	var cases []gaCase
	for _, p := range []xfer.Path{xfer.Pinned, xfer.Pageable} {
		for _, d := range dirs {
			for _, pl := range []string{"local", "remote"} {
				cases = append(cases, gaCase{path: p, dir: d, gpus: order[:1], place: pl})
			}
		}
	}
	for _, n := range gaCounts(len(order)) {
		for _, d := range dirs {
			for _, pl := range []string{"local", "node0"} {
				cases = append(cases, gaCase{path: xfer.Pinned, dir: d, gpus: order[:n], place: pl})
			}
		}
	}
	links := gaSocketLinks(s, spec)
	var dram *fabric.Link
	for _, l := range s.Machine.Fabric.Links() {
		if l.Name() == "node0.dram" {
			dram = l
		}
	}
	if len(links) == 0 || dram == nil {
		return nil, nil, usagef("platform %s: no socket link or no node0.dram to measure", spec.Name)
	}
	var res []gaResult
	err = s.Run("gpu-affinity", func(p *dmalab.Process) error {
		for i, cs := range cases {
			r, err := gaMeasure(s, cu, p.Thread, i, cs, size, links, dram)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", cs.name(spec), spec.Name, err)
			}
			r.row.Platform = spec.Name
			res = append(res, r)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var rows []report.Row
	for _, r := range res {
		rows = append(rows, r.row)
	}
	return rows, gaSummary(s, order[0], res, links), nil
}

// gaSocketLinks are the fabric links of the platform's socket links.
func gaSocketLinks(s *dmalab.System, spec *platform.Spec) []*fabric.Link {
	var out []*fabric.Link
	for _, sl := range spec.SocketLinks {
		for _, l := range s.Machine.Fabric.Links() {
			if l.Name() == sl.Name {
				out = append(out, l)
			}
		}
	}
	return out
}

// gaResult is a case's row and the numbers the summary reads.
type gaResult struct {
	cs  gaCase
	row report.Row
	// agg is the aggregate GB/s; upi the busiest socket link
	// direction's GB/s over the batch and its share of the capacity;
	// dram node 0's DRAM share (read and written, one capacity).
	agg, upi, share, dram float64
}

// gaCopy is one copy of a case: its GPU, direction, thread's node and
// buffers.
type gaCopy struct {
	gpu      int
	dir      xfer.Direction
	node     int // the copying thread's
	ctx      *cuda.Context
	dev      mem.GPUAddr
	host     mem.VirtAddr
	took     sim.Time
	err      error
	pageable bool
}

// gaMeasure runs one case in a new process: buffers placed, then every
// copy started at once by its own thread on its GPU's node.
func gaMeasure(s *dmalab.System, cu *cuda.Driver, t *sim.Proc, i int, cs gaCase, size uint64, links []*fabric.Link, dram *fabric.Link) (gaResult, error) {
	spec := s.Machine.Spec
	kp, err := s.Kernel.NewProcess(fmt.Sprintf("gpu-affinity-%d", i), 0)
	if err != nil {
		return gaResult{}, err
	}
	pr, err := cu.Attach(kp)
	if err != nil {
		return gaResult{}, err
	}
	nodes := len(spec.Nodes)
	switch cs.place {
	case "node0":
		err = kp.SetMemPolicy(kernel.MPOLBind, 0)
	case "remote":
		// One GPU: its memory on the next node (numactl --membind).
		err = kp.SetMemPolicy(kernel.MPOLBind, (s.Machine.GPUs[cs.gpus[0]].Node+1)%nodes)
	}
	if err != nil {
		return gaResult{}, err
	}
	dirs := []xfer.Direction{cs.dir}
	if cs.dir == xfer.Bidir {
		dirs = []xfer.Direction{xfer.H2D, xfer.D2H}
	}
	var copies []*gaCopy
	for _, g := range cs.gpus {
		node := s.Machine.GPUs[g].Node
		// The setting-up thread runs where the copying thread will, so
		// that the default policy places memory there.
		if err := kp.SetThreadAffinity(t, s.Kernel.CPUsOfNode(node)[0]); err != nil {
			return gaResult{}, err
		}
		ctx, err := pr.PrimaryContext(g)
		if err != nil {
			return gaResult{}, err
		}
		for _, d := range dirs {
			x := &gaCopy{gpu: g, dir: d, node: node, ctx: ctx, pageable: cs.path == xfer.Pageable}
			if x.dev, err = ctx.MemAlloc(t, size); err != nil {
				return gaResult{}, err
			}
			if x.pageable {
				// Anonymous memory, first touched here (the program
				// filling its buffer): placed by the policy for this
				// thread's node.
				if x.host, err = kp.MmapAnon(size); err == nil {
					err = kp.Populate(t, x.host, size)
				}
			} else {
				x.host, err = ctx.MemAllocHost(t, size)
			}
			if err != nil {
				return gaResult{}, err
			}
			copies = append(copies, x)
		}
	}
	before := gaLinkBytes(append(slices.Clone(links), dram))
	start := t.Now()
	var kids []*sim.Proc
	for k, x := range copies {
		kids = append(kids, t.Spawn(fmt.Sprintf("copy %d", k), func(q *sim.Proc) {
			if x.err = kp.SetThreadAffinity(q, s.Kernel.CPUsOfNode(x.node)[0]); x.err != nil {
				return
			}
			t0 := q.Now()
			if x.dir == xfer.H2D {
				x.err = x.ctx.Memcpy(q, x.dev, mem.GPUAddr(x.host), size)
			} else {
				x.err = x.ctx.Memcpy(q, mem.GPUAddr(x.host), x.dev, size)
			}
			x.took = q.Now() - t0
		}))
	}
	for _, k := range kids {
		t.Join(k)
	}
	secs := (t.Now() - start).Seconds()
	after := gaLinkBytes(append(slices.Clone(links), dram))
	var errs []error
	perGPU := 0.0
	for _, x := range copies {
		errs = append(errs, x.err)
		perGPU += float64(size) / x.took.Seconds() / 1e9
	}
	if err := errors.Join(errs...); err != nil {
		return gaResult{}, err
	}
	perGPU /= float64(len(copies))
	if err := kp.Exit(t); err != nil {
		return gaResult{}, err
	}
	total := float64(size) * float64(len(copies))
	row := report.Row{
		Name: cs.name(spec), Path: string(cs.path), Direction: string(cs.dir), Mode: cs.mode(), Bytes: int64(size),
		Seconds: secs, GBps: perGPU, Ops: int64(len(copies)),
	}
	res := gaResult{cs: cs, agg: total / secs / 1e9}
	var crossed float64
	var notes []string
	notes = append(notes, fmt.Sprintf("aggregate %.1f GB/s", total/secs/1e9))
	for k, l := range links {
		b := after[k][0] - before[k][0] + after[k][1] - before[k][1]
		busiest := max(after[k][0]-before[k][0], after[k][1]-before[k][1])
		crossed += b
		if r := busiest / secs / 1e9; r > res.upi {
			res.upi, res.share = r, busiest/secs/l.Effective()
		}
		row.Links = append(row.Links, report.LinkBytes{Link: l.Name(), Bytes: int64(b)})
		notes = append(notes, fmt.Sprintf("%s %s (busiest way %.1f GB/s, %.0f%% of %.1f)", l.Name(),
			report.FormatBytes(int64(b)), busiest/secs/1e9, 100*busiest/secs/l.Effective(), l.Effective()/1e9))
	}
	if crossed > 0 {
		notes = append(notes, fmt.Sprintf("%.0f%% of the bytes crossed sockets", 100*crossed/total))
	}
	k := len(links)
	db := after[k][0] - before[k][0] + after[k][1] - before[k][1]
	res.dram = db / secs / dram.Effective()
	row.Links = append(row.Links, report.LinkBytes{Link: dram.Name(), Bytes: int64(db)})
	notes = append(notes, fmt.Sprintf("%s %.0f%% of %.1f GB/s", dram.Name(), 100*res.dram, dram.Effective()/1e9))
	row.Note = strings.Join(notes, "; ")
	res.row = row
	return res, nil
}

// gaLinkBytes is each link's bytes so far, per direction.
func gaLinkBytes(links []*fabric.Link) [][2]float64 {
	out := make([][2]float64, len(links))
	for i, l := range links {
		out[i] = l.Stats().Bytes
	}
	return out
}

// gaSummary answers "what do I lose if my GPU sits on the other
// socket?" from the rows and the model's quantities: the GPU's PCIe
// rate against the socket link's, the remote latency, the memcpy's
// fall on remote memory, and where several GPUs share the link.
func gaSummary(s *dmalab.System, first int, res []gaResult, links []*fabric.Link) []string {
	spec := s.Machine.Spec
	if len(links) == 0 {
		return nil
	}
	g := s.Machine.GPUs[first]
	pcie := 0.0
	for _, l := range s.Machine.Fabric.Links() {
		if l.Name() == g.Name+".pcie" {
			pcie = l.Effective() / 1e9
		}
	}
	sl := spec.SocketLinks[0]
	upi := links[0].Effective() / 1e9
	structure := fmt.Sprintf("%.1f GB/s", upi)
	if sl.Links.V > 0 {
		structure = fmt.Sprintf("%.1f GB/s (%d × %.0f GB/s × %.3g)", upi, sl.Links.V, float64(sl.LinkRate.V)/1e9, sl.Efficiency.V)
	}
	near, far := g.Node, (g.Node+1)%len(spec.Nodes)
	find := func(path xfer.Path, dir xfer.Direction, mode string) *gaResult {
		for i := range res {
			r := &res[i]
			if r.cs.path == path && r.cs.dir == dir && r.cs.mode() == mode {
				return r
			}
		}
		return nil
	}
	pair := func(path xfer.Path, local, remote string) (string, float64) {
		var parts []string
		worst := 0.0
		for _, d := range gaDirections {
			l, r := find(path, xfer.Direction(d), local), find(path, xfer.Direction(d), remote)
			if l == nil || r == nil {
				continue
			}
			loss := 100 * (1 - r.row.GBps/l.row.GBps)
			worst = max(worst, loss)
			parts = append(parts, fmt.Sprintf("%s %.1f → %.1f GB/s (%s)", d, l.row.GBps, r.row.GBps, gaChange(loss)))
		}
		return strings.Join(parts, ", "), worst
	}
	var out []string
	if txt, worst := pair(xfer.Pinned, "1gpu-local", "1gpu-remote"); txt != "" {
		q := fmt.Sprintf("%s: what do I lose if my GPU sits on the other socket? With pinned memory, ", spec.Name)
		if worst < 1 {
			out = append(out, q+fmt.Sprintf("next to nothing: %s per GPU and direction. "+
				"%s's PCIe link (%.1f GB/s a direction) binds below %s's %s, so the remote copy pays only the socket link's latency (%v) once more per copy.",
				txt, g.Name, pcie, sl.Name, structure, spec.SocketLatency(near, far)))
		} else {
			out = append(out, q+fmt.Sprintf("the socket link's rate: %s per GPU and direction. "+
				"%s's %s binds below %s's PCIe link (%.1f GB/s a direction).",
				txt, sl.Name, structure, g.Name, pcie))
		}
	}
	if txt, _ := pair(xfer.Pageable, "1gpu-local", "1gpu-remote"); txt != "" {
		out = append(out, fmt.Sprintf("%s: with pageable memory on the other socket the staging memcpy pays it: %s. "+
			"One thread's memcpy (%.1f GB/s locally) binds, and its line fills wait the remote load latency (%v against %v), so its rate falls by Little's law; "+
			"pin the buffers or run the copying thread's memory on the GPU's node (numactl --cpunodebind=%d --membind=%d).",
			spec.Name, txt, float64(spec.Nodes[near].MemcpyRate.V)/1e9, spec.LoadLatency(near, far), spec.LoadLatency(near, near), near, near))
	}
	// Several GPUs: the largest count, and the first where node 0's
	// memory falls behind.
	most := 0
	for _, r := range res {
		most = max(most, len(r.cs.gpus))
	}
	if most > 1 {
		var parts, why []string
		peak, peakDir := 0.0, ""
		for _, d := range gaDirections {
			l := find(xfer.Pinned, xfer.Direction(d), fmt.Sprintf("%dgpus-local", most))
			r := find(xfer.Pinned, xfer.Direction(d), fmt.Sprintf("%dgpus-node0", most))
			if l == nil || r == nil {
				continue
			}
			loss := 100 * (1 - r.agg/l.agg)
			parts = append(parts, fmt.Sprintf("%s %.1f → %.1f GB/s (%s)", d, l.agg, r.agg, gaChange(loss)))
			if r.share > peak {
				peak, peakDir = r.share, d
			}
			if loss < 1 {
				continue
			}
			// Name what binds: the busier of the socket link and node
			// 0's DRAM.
			if r.dram >= r.share {
				why = append(why, fmt.Sprintf("%s loses to node 0's DRAM (%.1f GB/s read and written, %.0f%% busy; %s at %.0f%%)", d, s.Machine.Nodes[0].DRAM.Effective()/1e9, 100*r.dram, sl.Name, 100*r.share))
			} else {
				why = append(why, fmt.Sprintf("%s loses to %s (%.0f%% busy in one direction)", d, sl.Name, 100*r.share))
			}
		}
		line := fmt.Sprintf("%s: %d GPUs at once, all memory on node 0 against each GPU's own node, aggregate: %s. "+
			"%s carries the other socket's GPUs' bytes, at most %.0f%% of its %.1f GB/s a direction (%s)",
			spec.Name, most, strings.Join(parts, ", "), sl.Name, 100*peak, upi, peakDir)
		if len(why) == 0 {
			line += ": their PCIe uplinks fill it but do not exceed it, so nothing is lost."
		} else {
			line += "; " + strings.Join(why, "; ") + "."
		}
		out = append(out, line)
	}
	return out
}

// gaChange writes a loss in percent as a signed change: −x % for a
// loss, +x % for a gain, ±0.0 % for none (under a tenth of a percent).
func gaChange(loss float64) string {
	switch {
	case loss >= 0.05:
		return fmt.Sprintf("−%.1f%%", loss)
	case loss <= -0.05:
		return fmt.Sprintf("+%.1f%%", -loss)
	}
	return "±0.0%"
}

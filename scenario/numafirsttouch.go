package scenario

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// ftVariants are numa-first-touch's variants: the pitfall and its three
// fixes.
var ftVariants = []string{"first-touch", "parallel-init", "interleave", "mbind-move"}

func init() {
	register(&Scenario{
		Name:     "numa-first-touch",
		Summary:  "the first-touch pitfall (a main thread initialises what workers on the other node use) and its three fixes",
		Platform: "2s-4gpu-pcie",
		Doc: `A buffer in anonymous memory (mmap), initialised, then read and written by
worker threads bound to CPUs of node 0 and node 1 (workers=both) or of node 1
only (workers=node1), each on its own contiguous part, passes times. Linux
places a page where the thread that touches it first runs (the default
policy), so the variant decides where the pages are:

  first-touch    the pitfall: the main thread (on node 0) initialises the
                 whole buffer, so every page is on node 0 and the workers on
                 node 1 use remote memory only, over UPI
  parallel-init  each worker initialises its own part: every page is on
                 its worker's node
  interleave     mbind(MPOL_INTERLEAVE, nodes 0 and 1) before the main
                 thread initialises: page i on node i mod 2, half of every
                 worker's part remote
  mbind-move     the main thread initialises, then mbind(MPOL_BIND, node 1,
                 MPOL_MF_MOVE) of the node-1 workers' parts migrates their
                 pages, one page copy each (the "migrate" row)

Rows per variant: the initialisation, the migration (mbind-move), the
workers of each node and all of them: time, bytes per thread (read and
written), aggregate and per-thread GB/s, and the share of the bytes that
were on the accessing thread's node. The variant's numastat is on its last
row. Phase times are the slowest thread's.

With --numactl the process starts under numactl's policy and CPUs: the main
thread runs where it says, and the pages the variants do not place
themselves (first-touch and parallel-init entirely; interleave and
mbind-move set their own policy) follow its policy: --numactl
"--membind=1" puts the first-touch buffer on node 1.`,
		Params: []Param{
			{Name: "size", Kind: dmalab.ParamSize, Default: "64MiB", Max: 64 << 30, Help: "size of the buffer"},
			{Name: "threads", Kind: dmalab.ParamInt, Default: "8", Min: 1, Max: 1024, Help: "worker threads per node used"},
			{Name: "workers", Kind: dmalab.ParamEnum, Values: []string{"both", "node1"}, Item: "placement", Default: "both", Help: "where the workers run: both nodes, or node 1 only"},
			{Name: "passes", Kind: dmalab.ParamInt, Default: "1", Min: 1, Max: 100, Help: "passes of each worker over its part (a read and a write each)"},
			{Name: "variants", Kind: dmalab.ParamList, Values: ftVariants, Item: "variant", Default: strings.Join(ftVariants, ","), Help: "variants to run: " + strings.Join(ftVariants, ", ")},
		},
		Run: runNUMAFirstTouch,
	})
}

// numaWorkers places threads workers per node on nodes: worker i runs on
// the (i mod threads)-th CPU of its node. It is usage error when a node
// has fewer CPUs.
func numaWorkers(c *Context, nodes []int, threads int) ([]int, error) {
	var cpus []int
	for _, n := range nodes {
		cs := c.Kernel.CPUsOfNode(n)
		if threads > len(cs) {
			return nil, usagef("--set threads=%d: node %d of %s has %d CPUs", threads, n, c.Spec.Name, len(cs))
		}
		cpus = append(cpus, cs[:threads]...)
	}
	return cpus, nil
}

// numaNeedTwoNodes refuses a platform with fewer than two NUMA nodes.
func numaNeedTwoNodes(c *Context) error {
	if c.Kernel.Nodes() < 2 {
		return usagef("platform %s has %d NUMA node(s); %s needs two (2s-4gpu-pcie, dgx-h100)", c.Spec.Name, c.Kernel.Nodes(), c.Scenario.Name)
	}
	return nil
}

// numaThreadPart is the part of a buffer one thread uses.
type numaThreadPart struct {
	va   mem.VirtAddr
	size uint64
}

// numaSplit cuts size bytes at va into n page-aligned parts of equal size
// (the remainder unused).
func numaSplit(va mem.VirtAddr, size uint64, n int) []numaThreadPart {
	each := size / mem.PageSize / uint64(n) * mem.PageSize
	out := make([]numaThreadPart, n)
	for i := range out {
		out[i] = numaThreadPart{va + mem.VirtAddr(uint64(i)*each), each}
	}
	return out
}

// numaLocalBytes counts the bytes of part on node node and on other nodes,
// by page placement; every page must be placed. It reads the part's
// physical pieces (Translate), not page by page, as it runs per thread.
func numaLocalBytes(m *mem.Memory, part numaThreadPart, node int) (local, remote int64, err error) {
	segs, _, _, err := m.Translate(part.va, part.size)
	if err != nil {
		return 0, 0, err
	}
	for _, sg := range segs {
		for n := range m.Nodes() {
			base, size := m.NodeRange(n)
			lo, hi := max(sg.Start, base), min(sg.Start+mem.PhysAddr(sg.Size), base+mem.PhysAddr(size))
			if lo >= hi {
				continue
			}
			if n == node {
				local += int64(hi - lo)
			} else {
				remote += int64(hi - lo)
			}
		}
	}
	return local, remote, nil
}

// numaThreadGroup sums up threads' work into a row.
type numaThreadGroup struct {
	threads       int
	bytes         int64 // per thread
	start, end    sim.Time
	local, remote int64
	threadSeconds float64 // summed over threads
}

func (g *numaThreadGroup) add(bytes int64, start, end sim.Time, local, remote int64) {
	if g.threads == 0 || start < g.start {
		g.start = start
	}
	g.end = max(g.end, end)
	g.threads++
	g.bytes = bytes
	g.local += local
	g.remote += remote
	g.threadSeconds += (end - start).Seconds()
}

func (g *numaThreadGroup) row(path, dir string) report.Row {
	secs := (g.end - g.start).Seconds()
	total := g.bytes * int64(g.threads)
	r := report.Row{Name: path + " " + dir, Path: path, Direction: dir, Bytes: g.bytes, Ops: int64(g.threads), Seconds: secs,
		LocalBytes: g.local, RemoteBytes: g.remote}
	if secs > 0 {
		r.GBps = float64(total) / secs / 1e9
	}
	if g.threadSeconds > 0 {
		r.ThreadGBps = float64(total) / g.threadSeconds / 1e9
	}
	return r
}

// numaStatSince is the numastat counters added since before.
func numaStatSince(k *kernel.Kernel, before []kernel.NUMAStat) []report.NUMANode {
	var out []report.NUMANode
	for n, s := range k.NUMAStats() {
		b := before[n]
		out = append(out, report.NUMANode{Node: n, NumaHit: s.NumaHit - b.NumaHit, NumaMiss: s.NumaMiss - b.NumaMiss,
			NumaForeign: s.NumaForeign - b.NumaForeign, InterleaveHit: s.InterleaveHit - b.InterleaveHit,
			LocalNode: s.LocalNode - b.LocalNode, OtherNode: s.OtherNode - b.OtherNode})
	}
	return out
}

// ftResult is one variant's outcome, for the summary.
type ftResult struct {
	variant string
	byNode  map[int]report.Row
	all     report.Row
}

func runNUMAFirstTouch(c *Context) error {
	if err := numaNeedTwoNodes(c); err != nil {
		return err
	}
	size := uint64(c.Size("size"))
	threads := c.Int("threads")
	passes := c.Int("passes")
	nodes := []int{0, 1}
	if c.Value("workers") == "node1" {
		nodes = []int{1}
	}
	cpus, err := numaWorkers(c, nodes, threads)
	if err != nil {
		return err
	}
	if size/mem.PageSize < uint64(len(cpus)) {
		return usagef("--set size=%s: less than a page per worker (%d workers)", c.Text("size"), len(cpus))
	}
	var results []ftResult
	for _, v := range c.List("variants") {
		c.Progressf("%s", v)
		res, err := ftVariant(c, v, size, cpus, passes)
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		results = append(results, res)
	}
	c.Result.Summary = ftSummary(results, nodes)
	if note := numaDRAMNote(c, threads, size/uint64(len(cpus))); note != "" {
		c.Result.Summary = append(c.Result.Summary, note)
	}
	return nil
}

// numaDRAMNote warns when one node's threads together could stream
// faster than its DRAM and a thread's slice (slice bytes) is small
// enough that parts of its accesses stay under machine.LocalFlowMin of
// local memory: those cost a sleep at the thread's rate rather than a
// flow on the node's DRAM bus (larger ones share the bus, so the
// aggregate is the DRAM's at most), so local rates may be overstated.
// A quarter of a slice is the smallest local part (weighted
// interleaving 3:1).
func numaDRAMNote(c *Context, threads int, slice uint64) string {
	n := c.Spec.Nodes[0]
	if float64(threads)*float64(n.MemcpyRate.V) <= float64(n.DRAMBandwidth.V) || slice/4 >= uint64(machine.LocalFlowMin) {
		return ""
	}
	return fmt.Sprintf("note: %d threads x %s exceed node 0's DRAM bandwidth of %s, and a thread's slice of %s leaves local parts under %s, which the model does not share on the DRAM bus: local rates here may be overstated",
		threads, n.MemcpyRate.V, n.DRAMBandwidth.V, report.FormatSize(int64(slice)), report.FormatBytes(machine.LocalFlowMin))
}

// ftVariant runs one variant in a process of its own.
func ftVariant(c *Context, variant string, size uint64, cpus []int, passes int) (ftResult, error) {
	k, m := c.Kernel, c.Mem
	before := k.NUMAStats()
	p, err := k.NewProcess("first-touch-"+variant, 0)
	if err != nil {
		return ftResult{}, err
	}
	res := ftResult{variant: variant, byNode: map[int]report.Row{}}
	var rows []report.Row
	var runErr error
	p.Spawn("main", func(t *sim.Proc) {
		runErr = func() error {
			va, err := p.MmapAnon(size)
			if err != nil {
				return err
			}
			parts := numaSplit(va, size, len(cpus))
			// workers runs body in one thread per CPU of cpus, each
			// bound to it, and waits for them all.
			workers := func(phase string, body func(w *sim.Proc, i int) error) error {
				var ts []*sim.Proc
				errs := make([]error, len(cpus))
				for i, cpu := range cpus {
					w := p.Spawn(fmt.Sprintf("%s%d", phase, i), func(w *sim.Proc) { errs[i] = body(w, i) })
					if err := p.SetThreadAffinity(w, cpu); err != nil {
						return err
					}
					ts = append(ts, w)
				}
				for _, w := range ts {
					t.Join(w)
				}
				for _, err := range errs {
					if err != nil {
						return err
					}
				}
				return nil
			}
			if variant == "interleave" {
				if err := p.Mbind(t, va, size, kernel.MPOLInterleave, 0, []int{0, 1}, 0); err != nil {
					return err
				}
			}
			// Initialisation: one write of every byte, by the main
			// thread or by each worker of its own part.
			var init numaThreadGroup
			if variant == "parallel-init" {
				err = workers("init", func(w *sim.Proc, i int) error {
					start := w.Now()
					if v := m.Write(w, p.ThreadNode(w), parts[i].va, parts[i].size); v == 0 {
						return fmt.Errorf("initialising part %d: write failed", i)
					}
					l, r, err := numaLocalBytes(m, parts[i], p.ThreadNode(w))
					if err != nil {
						return err
					}
					init.add(int64(parts[i].size), start, w.Now(), l, r)
					return nil
				})
				if err != nil {
					return err
				}
			} else {
				start := t.Now()
				if v := m.Write(t, p.ThreadNode(t), va, size); v == 0 {
					return fmt.Errorf("initialising %#x bytes: write failed", size)
				}
				l, r, err := numaLocalBytes(m, numaThreadPart{va, size}, p.ThreadNode(t))
				if err != nil {
					return err
				}
				init.add(int64(size), start, t.Now(), l, r)
			}
			rows = append(rows, init.row(variant, "init"))
			if variant == "mbind-move" {
				// The fix after the fact: bind each node-1 worker's part
				// to node 1 and move what is elsewhere.
				start := t.Now()
				var moved int64
				for i, cpu := range cpus {
					if k.NodeOfCPU(cpu) != 1 {
						continue
					}
					_, r, err := numaLocalBytes(m, parts[i], 1)
					if err != nil {
						return err
					}
					moved += r
					if err := p.Mbind(t, parts[i].va, parts[i].size, kernel.MPOLBind, 0, []int{1}, kernel.MPOLMFMove|kernel.MPOLMFStrict); err != nil {
						return err
					}
				}
				secs := (t.Now() - start).Seconds()
				row := report.Row{Name: variant + " migrate", Path: variant, Direction: "migrate", Bytes: moved, Seconds: secs,
					Note: fmt.Sprintf("mbind(MPOL_BIND, node 1, MPOL_MF_MOVE) of the node-1 workers' parts: %d pages copied by the main thread", moved/mem.PageSize)}
				if secs > 0 {
					row.GBps = float64(moved) / secs / 1e9
				}
				rows = append(rows, row)
			}
			groups := map[int]*numaThreadGroup{}
			var all numaThreadGroup
			per := int64(parts[0].size) * 2 * int64(passes)
			err = workers("worker", func(w *sim.Proc, i int) error {
				node := p.ThreadNode(w)
				l, r, err := numaLocalBytes(m, parts[i], node)
				if err != nil {
					return err
				}
				start := w.Now()
				for range passes {
					if a := m.Read(w, node, parts[i].va, parts[i].size); a.Err != nil {
						return a.Err
					}
					if v := m.Write(w, node, parts[i].va, parts[i].size); v == 0 {
						return fmt.Errorf("worker %d: write failed", i)
					}
				}
				l, r = l*2*int64(passes), r*2*int64(passes)
				g := groups[node]
				if g == nil {
					g = &numaThreadGroup{}
					groups[node] = g
				}
				g.add(per, start, w.Now(), l, r)
				all.add(per, start, w.Now(), l, r)
				return nil
			})
			if err != nil {
				return err
			}
			for _, n := range slices.Sorted(numaKeys(groups)) {
				row := groups[n].row(variant, fmt.Sprintf("node%d workers", n))
				res.byNode[n] = row
				rows = append(rows, row)
			}
			res.all = all.row(variant, "all workers")
			return p.Munmap(t, va)
		}()
		if err := p.Exit(t); runErr == nil {
			runErr = err
		}
	})
	if err := c.RunEngine("size"); err != nil {
		return ftResult{}, err
	}
	if runErr != nil {
		return ftResult{}, runErr
	}
	res.all.NUMAStat = numaStatSince(k, before)
	c.Result.Results = append(c.Result.Results, rows...)
	c.Result.Results = append(c.Result.Results, res.all)
	return res, nil
}

func numaKeys[V any](m map[int]V) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ftSummary says what the pitfall costs the workers of the last node and
// what each fix gives back.
func ftSummary(results []ftResult, nodes []int) []string {
	far := nodes[len(nodes)-1]
	var out []string
	var base *ftResult
	for i := range results {
		if results[i].variant == "first-touch" {
			base = &results[i]
		}
	}
	// The bandwidth lost is against the best a far worker got, whichever
	// variant gave it (all local when a fix ran).
	var best float64
	for _, r := range results {
		best = max(best, r.byNode[far].ThreadGBps)
	}
	for _, r := range results {
		row := r.byNode[far]
		line := fmt.Sprintf("%s: node%d workers %s local, %s GB/s a thread", r.variant, far, numaShare(row.LocalFraction()), report.FormatGBps(row.ThreadGBps))
		if row.ThreadGBps < best {
			line += fmt.Sprintf(" (%.0f %% below %s)", 100*(1-row.ThreadGBps/best), report.FormatGBps(best))
		}
		line += fmt.Sprintf("; all workers %s GB/s", report.FormatGBps(r.all.GBps))
		if base != nil && r.variant != base.variant && base.all.GBps > 0 {
			line += fmt.Sprintf(" (%.2fx the pitfall's)", r.all.GBps/base.all.GBps)
		}
		out = append(out, line)
	}
	return out
}

func numaShare(f float64) string {
	if f < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*f)
}

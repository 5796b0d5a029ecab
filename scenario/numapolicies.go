package scenario

import (
	"fmt"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// npPolicies are numa-policies' memory policies, by name.
var npPolicies = []string{"default", "bind0", "bind1", "preferred1", "interleave", "weighted"}

// npPlacements are where numa-policies' threads run.
var npPlacements = []string{"node0", "node1", "both"}

func init() {
	register(&Scenario{
		Name:     "numa-policies",
		Summary:  "a STREAM triad (a = b + s*c) per memory policy and thread placement",
		Platform: "2s-4gpu-pcie",
		Doc: `STREAM's triad, a[i] = b[i] + s*c[i] over three arrays of 8-byte elements in
anonymous memory, per memory policy (set_mempolicy before the arrays are
touched) and thread placement. The threads initialise their own parts of the
arrays first, as STREAM's OpenMP loops do, then run the triad once; the row is
the triad. Bandwidth counts STREAM's way: 3 x 8 B per element (two loads, one
store), whatever the caches do.

  default      the process's policy: local allocation, or what --numactl set
  bind0/bind1  MPOL_BIND to node 0 / node 1
  preferred1   MPOL_PREFERRED node 1 (node 1 has room, so it acts as bind1)
  interleave   MPOL_INTERLEAVE over nodes 0 and 1: page i on node i mod 2
  weighted     MPOL_WEIGHTED_INTERLEAVE over nodes 0 and 1 with the weights
               (/sys/kernel/mm/mempolicy/weighted_interleave/nodeN)

Placements: threads per node on node0, node1, or both (twice as many
threads). Each row: triad time, aggregate and per-thread GB/s, and the share
of the bytes on the accessing thread's node; numastat per row.`,
		Params: []Param{
			{Name: "size", Kind: dmalab.ParamSize, Default: "16MiB", Max: 16 << 30, Help: "size of each array"},
			{Name: "threads", Kind: dmalab.ParamInt, Default: "8", Min: 1, Max: 1024, Help: "threads per node used"},
			{Name: "policies", Kind: dmalab.ParamList, Values: npPolicies, Item: "policy", Default: strings.Join(npPolicies, ","), Help: "policies: " + strings.Join(npPolicies, ", ")},
			{Name: "placements", Kind: dmalab.ParamList, Values: npPlacements, Item: "placement", Default: strings.Join(npPlacements, ","), Help: "thread placements: " + strings.Join(npPlacements, ", ")},
			{Name: "weights", Kind: dmalab.ParamString, Default: "3,1", Check: npCheckWeights, Help: "weighted interleave's weights of node 0 and node 1, 1 to 255"},
		},
		Run: runNUMAPolicies,
	})
}

// npCheckWeights checks "w0,w1", each 1 to 255.
func npCheckWeights(s string) error {
	_, err := npParseWeights(s)
	return err
}

func npParseWeights(s string) ([2]uint8, error) {
	var w [2]uint8
	parts := strings.Split(s, ",")
	if len(parts) != 2 {
		return w, fmt.Errorf("want two weights, node 0's and node 1's (3,1)")
	}
	for i, p := range parts {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(p), "%d", &n); err != nil || n < 1 || n > 255 || fmt.Sprint(n) != strings.TrimSpace(p) {
			return w, fmt.Errorf("weight %q: want 1 to 255", p)
		}
		w[i] = uint8(n)
	}
	return w, nil
}

// npPolicy is set_mempolicy's arguments for a policy name; ok false for
// "default", which leaves the process's policy.
func npPolicy(name string) (mode kernel.PolicyMode, nodes []int, ok bool) {
	switch name {
	case "bind0":
		return kernel.MPOLBind, []int{0}, true
	case "bind1":
		return kernel.MPOLBind, []int{1}, true
	case "preferred1":
		return kernel.MPOLPreferred, []int{1}, true
	case "interleave":
		return kernel.MPOLInterleave, []int{0, 1}, true
	case "weighted":
		return kernel.MPOLWeightedInterleave, []int{0, 1}, true
	}
	return kernel.MPOLDefault, nil, false
}

func runNUMAPolicies(c *Context) error {
	if err := numaNeedTwoNodes(c); err != nil {
		return err
	}
	size := uint64(c.Size("size"))
	threads := c.Int("threads")
	w, _ := npParseWeights(c.Text("weights")) // checked by the parameter
	for n, x := range w {
		if err := c.Kernel.SetInterleaveWeight(n, x); err != nil {
			return err
		}
	}
	for _, pl := range c.List("placements") {
		var best, worst report.Row
		nodes := map[string][]int{"node0": {0}, "node1": {1}, "both": {0, 1}}[pl]
		cpus, err := numaWorkers(c, nodes, threads)
		if err != nil {
			return err
		}
		if size/mem.PageSize < uint64(len(cpus)) {
			return usagef("--set size=%s: less than a page per thread (%d threads)", c.Text("size"), len(cpus))
		}
		for _, pol := range c.List("policies") {
			c.Progressf("%s, threads on %s", pol, pl)
			row, err := npTriad(c, pol, pl, size, cpus)
			if err != nil {
				return fmt.Errorf("%s on %s: %w", pol, pl, err)
			}
			c.Result.Results = append(c.Result.Results, row)
			if best.Path == "" || row.GBps > best.GBps {
				best = row
			}
			if worst.Path == "" || row.GBps < worst.GBps {
				worst = row
			}
		}
		c.Result.Summary = append(c.Result.Summary, fmt.Sprintf("threads on %s: best %s, %s GB/s (%s local); worst %s, %s GB/s (%s local)",
			pl, best.Path, report.FormatGBps(best.GBps), numaShare(best.LocalFraction()), worst.Path, report.FormatGBps(worst.GBps), numaShare(worst.LocalFraction())))
	}
	if note := numaDRAMNote(c, threads, size/uint64(2*threads)); note != "" {
		c.Result.Summary = append(c.Result.Summary, note)
	}
	return nil
}

// npTriad runs one policy and placement in a process of its own.
func npTriad(c *Context, pol, placement string, size uint64, cpus []int) (report.Row, error) {
	k, m := c.Kernel, c.Mem
	before := k.NUMAStats()
	p, err := k.NewProcess(fmt.Sprintf("stream-%s-%s", pol, placement), 0)
	if err != nil {
		return report.Row{}, err
	}
	if mode, nodes, ok := npPolicy(pol); ok {
		if err := p.SetMemPolicy(mode, nodes...); err != nil {
			return report.Row{}, err
		}
	}
	var g numaThreadGroup
	var runErr error
	p.Spawn("main", func(t *sim.Proc) {
		runErr = func() error {
			var arrays [3][]numaThreadPart // a, b, c
			for i := range arrays {
				va, err := p.MmapAnon(size)
				if err != nil {
					return err
				}
				arrays[i] = numaSplit(va, size, len(cpus))
			}
			// phase runs body in one thread per CPU, bound to it, and
			// waits for them all.
			phase := func(name string, body func(w *sim.Proc, i int) error) error {
				var ts []*sim.Proc
				errs := make([]error, len(cpus))
				for i, cpu := range cpus {
					w := p.Spawn(fmt.Sprintf("%s%d", name, i), func(w *sim.Proc) { errs[i] = body(w, i) })
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
			// STREAM's initialisation: each thread writes its parts.
			err := phase("init", func(w *sim.Proc, i int) error {
				for _, a := range arrays {
					if v := m.Write(w, p.ThreadNode(w), a[i].va, a[i].size); v == 0 {
						return fmt.Errorf("initialising: write failed")
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			part := arrays[0][0].size
			return phase("triad", func(w *sim.Proc, i int) error {
				node := p.ThreadNode(w)
				var local, remote int64
				for _, a := range arrays {
					l, r, err := numaLocalBytes(m, a[i], node)
					if err != nil {
						return err
					}
					local, remote = local+l, remote+r
				}
				start := w.Now()
				for _, a := range arrays[1:] {
					if acc := m.Read(w, node, a[i].va, a[i].size); acc.Err != nil {
						return acc.Err
					}
				}
				if v := m.Write(w, node, arrays[0][i].va, arrays[0][i].size); v == 0 {
					return fmt.Errorf("triad: write failed")
				}
				g.add(int64(3*part), start, w.Now(), local, remote)
				return nil
			})
		}()
		if err := p.Exit(t); runErr == nil {
			runErr = err
		}
	})
	if err := c.RunEngine("size"); err != nil {
		return report.Row{}, err
	}
	if runErr != nil {
		return report.Row{}, runErr
	}
	row := g.row(pol, "threads on "+placement)
	row.Name = "triad " + pol + " " + placement
	row.NUMAStat = numaStatSince(k, before)
	if mode, nodes, ok := npPolicy(pol); ok {
		row.Note = fmt.Sprintf("set_mempolicy(%v, %v)", mode, nodes)
		if pol == "weighted" {
			row.Note += fmt.Sprintf(", weights %d:%d", k.InterleaveWeight(0), k.InterleaveWeight(1))
		}
	}
	return row, nil
}

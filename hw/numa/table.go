package numa

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/hw/topo"
	"github.com/dmalab/dmalab/numactl"
)

// WriteTable writes the report for people: the machine, its nodes as
// numactl -H, the latency and bandwidth matrices in MLC's layout (CPU
// node in rows, memory node in columns, medians), where the buffers
// landed, first touch, and the notes.
func (r *Report) WriteTable(w io.Writer) error {
	var sb strings.Builder
	m := &r.Machine
	fmt.Fprintf(&sb, "NUMA probe of %s: %s, %d CPUs (this process may use %s), largest cache %s, transparent huge pages %q, kernel %s\n",
		orDash(m.Hostname), orDash(m.CPUModel), m.CPUs, orDash(m.AllowedCPUs), cacheString(m.LLCBytes), m.THP, orDash(m.Kernel))
	fmt.Fprintf(&sb, "buffer %s per memory node, %d samples per measurement (median shown; min, max and every sample in --json)\n\n",
		topo.Bytes(r.Options.BufferBytes), r.Options.Samples)
	numactl.WriteHardware(&sb, topo.NumactlNodes(r.Nodes))
	writeMatrix(&sb, "Idle latency (ns per load, pointer chase)", r.Latency, 1)
	writeMatrix(&sb, "Read bandwidth (MB/s, 1 MB/s = 1,000,000 bytes/s)", r.Bandwidth, 0)
	if len(r.Placement) > 0 {
		sb.WriteString("\nWhere the buffers are (move_pages query):\n")
		for _, p := range r.Placement {
			if p.Error != "" {
				fmt.Fprintf(&sb, "  node %d: %s; unknown: %s\n", p.Node, p.Policy, p.Error)
				continue
			}
			fmt.Fprintf(&sb, "  node %d: %s; %d of %d pages on node %d (%.1f%%)%s; %s\n",
				p.Node, p.Policy, p.OnNode, p.Pages, p.Node, 100*p.Fraction, elsewhere(p.ByNode, p.Node), hugeString(p.HugePageBytes))
		}
	}
	if len(r.FirstTouch) > 0 {
		sb.WriteString("\nFirst touch (default policy: a thread on the node writes each page of a new mapping):\n")
		for _, f := range r.FirstTouch {
			by := "an unpinned thread"
			if f.CPU >= 0 {
				by = "CPU " + strconv.Itoa(f.CPU)
			}
			if f.Error != "" {
				fmt.Fprintf(&sb, "  node %d (%s): unknown: %s\n", f.Node, by, f.Error)
				continue
			}
			fmt.Fprintf(&sb, "  node %d (%s): %d of %d pages local (%.1f%%)%s\n",
				f.Node, by, f.Local, f.Pages, 100*f.Fraction, elsewhere(f.ByNode, f.Node))
		}
	}
	if len(r.Notes) > 0 {
		sb.WriteString("\nNotes:\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&sb, "  %s\n", n)
		}
	}
	if _, err := io.WriteString(w, sb.String()); err != nil {
		return fmt.Errorf("write NUMA report: %w", err)
	}
	return nil
}

// writeMatrix writes pairs as MLC does: "Numa node" over the memory
// nodes' columns, one row per CPU node.
func writeMatrix(sb *strings.Builder, title string, pairs []Pair, decimals int) {
	fmt.Fprintf(sb, "\n%s, CPU node (rows) reading memory node (columns):\n", title)
	if len(pairs) == 0 {
		sb.WriteString("  not measured (see the notes)\n")
		return
	}
	var rows, cols []int
	val := map[[2]int]float64{}
	for _, p := range pairs {
		if !containsInt(rows, p.CPUNode) {
			rows = append(rows, p.CPUNode)
		}
		if !containsInt(cols, p.MemNode) {
			cols = append(cols, p.MemNode)
		}
		val[[2]int{p.CPUNode, p.MemNode}] = p.Median
	}
	const cell = 10
	fmt.Fprintf(sb, "%-10s%*s\n", "", cell, "Numa node")
	line := fmt.Sprintf("%-10s", "Numa node")
	for _, c := range cols {
		line += fmt.Sprintf("%*d", cell, c)
	}
	sb.WriteString(line + "\n")
	for _, r := range rows {
		line = fmt.Sprintf("%9d ", r)
		for _, c := range cols {
			v, ok := val[[2]int{r, c}]
			if !ok {
				line += fmt.Sprintf("%*s", cell, "-")
				continue
			}
			line += fmt.Sprintf("%*.*f", cell, decimals, v)
		}
		sb.WriteString(line + "\n")
	}
	if len(pairs[0].CPUs) == 0 {
		sb.WriteString("  (threads unpinned: see the notes)\n")
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// elsewhere lists the pages not on node, by node ("-2" is -ENOENT).
func elsewhere(by map[int]int, node int) string {
	var parts []string
	for n := -200; n < 1<<12; n++ {
		if c, ok := by[n]; ok && n != node {
			parts = append(parts, fmt.Sprintf("%d on %s", c, pageStatus(n)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, ", ")
}

// pageStatus names a move_pages status: a node, or a negative errno.
func pageStatus(s int) string {
	switch {
	case s >= 0:
		return "node " + strconv.Itoa(s)
	case s == -2:
		return "no page (ENOENT)"
	case s == -14:
		return "no mapping (EFAULT)"
	}
	return "error " + strconv.Itoa(s)
}

func hugeString(b int64) string {
	if b < 0 {
		return "huge pages unknown"
	}
	return topo.Bytes(b).String() + " in transparent huge pages"
}

func cacheString(b int64) string {
	if b == 0 {
		return "?"
	}
	return topo.Bytes(b).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

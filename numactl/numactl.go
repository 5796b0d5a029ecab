package numactl

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Unknown is a Size or Free that the source does not know; numactl prints
// such a value as "<not available>", as it does for numa_node_size64's -1.
const Unknown = -1

// Node is one NUMA node as numactl -H shows it.
type Node struct {
	ID int
	// CPUs are the node's CPU numbers; none for a memory-only node.
	CPUs []int
	// Size and Free are bytes of memory (Unknown when not known).
	Size, Free int64
	// Distance is the node's SLIT row, one entry per node of the view in
	// the order of the view's nodes (sorted by ID); nil when unknown.
	Distance []int
}

// WriteHardware writes nodes as numactl -H does. Nodes are printed in ID
// order whatever their order in the slice; Distance rows must follow that
// order. With no node it says what numactl says without NUMA support.
func WriteHardware(w io.Writer, nodes []Node) error {
	var sb strings.Builder
	if len(nodes) == 0 {
		sb.WriteString("No NUMA available on this system\n")
		_, err := io.WriteString(w, sb.String())
		return err
	}
	nodes = slices.SortedFunc(slices.Values(nodes), func(a, b Node) int { return cmp.Compare(a.ID, b.ID) })
	ids := make([]int, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	fmt.Fprintf(&sb, "available: %d nodes (%s)\n", len(nodes), Ranges(ids))
	for _, n := range nodes {
		fmt.Fprintf(&sb, "node %d cpus:", n.ID)
		for _, c := range n.CPUs {
			fmt.Fprintf(&sb, " %d", c)
		}
		sb.WriteByte('\n')
		fmt.Fprintf(&sb, "node %d size: %s\n", n.ID, mb(n.Size))
		fmt.Fprintf(&sb, "node %d free: %s\n", n.ID, mb(n.Free))
	}
	writeDistances(&sb, nodes)
	_, err := io.WriteString(w, sb.String())
	return err
}

// writeDistances writes the SLIT table, or numactl's sentence when a row
// is missing or short.
func writeDistances(sb *strings.Builder, nodes []Node) {
	for _, n := range nodes {
		if len(n.Distance) != len(nodes) {
			sb.WriteString("No distance information available.\n")
			return
		}
	}
	sb.WriteString("node distances:\n")
	line := "node "
	for _, n := range nodes {
		line += fmt.Sprintf("% 3d ", n.ID)
	}
	sb.WriteString(strings.TrimRight(line, " ") + "\n")
	for _, n := range nodes {
		line = fmt.Sprintf("% 3d: ", n.ID)
		for _, d := range n.Distance {
			line += fmt.Sprintf("% 3d ", d)
		}
		sb.WriteString(strings.TrimRight(line, " ") + "\n")
	}
}

// mb writes a size as numactl's fmt_mem does: whole MiB, "MB".
func mb(b int64) string {
	if b < 0 {
		return "<not available>"
	}
	return strconv.FormatInt(b>>20, 10) + " MB"
}

// Ranges writes sorted, distinct numbers as numactl writes the available
// nodes and the kernel a cpulist: "0-3,8,10-11".
func Ranges(ns []int) string {
	var sb strings.Builder
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(ns[i]))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(ns[j]))
		}
		i = j + 1
	}
	return sb.String()
}

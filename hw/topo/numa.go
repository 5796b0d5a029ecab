package topo

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/numactl"
)

// ReadNUMA reads only the NUMA part of the tree under root: the nodes
// under sys/devices/system/node and numa_balancing. It is what a NUMA
// probe needs without walking the PCI tree; the other fields are empty.
func ReadNUMA(root string) (*Topology, error) {
	if _, err := os.ReadDir(root); err != nil {
		return nil, fmt.Errorf("read NUMA nodes under %s: %w", root, err)
	}
	r := &reader{root: root, t: &Topology{
		Root: root, NUMABalancing: Unknown, Nodes: []Node{}, HostBridges: []string{},
		Devices: []PCIDevice{}, GPUs: []GPU{}, NVLinks: []NVLink{}, Matrix: []MatrixRow{}, Warnings: []string{},
	}}
	r.readNodes()
	r.readNUMABalancing()
	return r.t, nil
}

// CPUIDs returns the CPUs of the node's CPUList in increasing order; nil
// for a memory-only node or a list that does not parse.
func (n *Node) CPUIDs() []int {
	var out []int
	for part := range strings.SplitSeq(n.CPUList, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}

// NumactlNodes converts nodes to the numactl -H view's; a zero MemTotal
// or MemFree (no meminfo) is numactl's "<not available>".
func NumactlNodes(nodes []Node) []numactl.Node {
	out := make([]numactl.Node, 0, len(nodes))
	known := func(b Bytes) int64 {
		if b == 0 {
			return numactl.Unknown
		}
		return int64(b)
	}
	for i := range nodes {
		n := &nodes[i]
		out = append(out, numactl.Node{ID: n.ID, CPUs: n.CPUIDs(), Size: known(n.MemTotal), Free: known(n.MemFree), Distance: n.Distance})
	}
	return out
}

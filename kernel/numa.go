package kernel

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// NUMAStat is one node's line of numastat (the numa_* counters of
// /sys/devices/system/node/nodeN/numastat, zone_statistics in
// mm/page_alloc.c), in pages, counting the anonymous pages the kernel
// places (first touch and migration; the kernel's other allocations
// are not counted).
type NUMAStat struct {
	// NumaHit: allocated here, and here was the intended node.
	NumaHit uint64
	// NumaMiss: allocated here though another node was intended.
	NumaMiss uint64
	// NumaForeign: intended here, allocated elsewhere.
	NumaForeign uint64
	// InterleaveHit: an interleave policy's page that landed on the
	// node interleaving chose.
	InterleaveHit uint64
	// LocalNode: allocated here for a CPU of this node.
	LocalNode uint64
	// OtherNode: allocated here for a CPU of another node.
	OtherNode uint64
}

// SetMemory gives the kernel the machine's memory, so that it can place
// anonymous memory (MmapAnon) by policy: node fallback lists by the
// platform's SLIT distances, and each node's CPUs (platform Node.Cores),
// numbered node by node (node 0's first).
func (k *Kernel) SetMemory(m *mem.Memory) {
	k.mem = m
	k.cpuNode = k.cpuNode[:0]
	for n := range k.nodes {
		for range m.NodeCPUs(n) {
			k.cpuNode = append(k.cpuNode, n)
		}
	}
	k.zonelists = zonelists(k.nodes, m.Distance)
	// Anonymous page faults cost the faulting thread (do_anonymous_page).
	m.SetFaultCost(k.faultEntry)
}

// DefaultFaultEntry is the fixed part of an anonymous page fault
// (do_anonymous_page without clear_page): the exception entry and
// return, the lookup of the VMA, alloc_pages, the PTE set and the
// rss/numastat accounting. Assumed: measured minor faults of a zeroed
// 4 KiB page take ~0.6 µs at best and ~1 µs at the median on a 3.2 GHz
// core (rdtsc around the first touch of a fresh MAP_ANONYMOUS page,
// Linux 6.6: https://ddumbying.vercel.app/experiments/pagefault-latency),
// of which clear_page, the most expensive step of the handler
// (Christoph Lameter's prezeroing posting,
// https://www.kernel.org/pub/linux/kernel/people/christoph/prezero/posts/1.0),
// is 4 KiB of stores, ~0.4 µs at 10 GB/s; mem adds that part at the
// node's streaming store rate (mem.Memory.SetFaultCost).
const DefaultFaultEntry = 500 * sim.Nanosecond

// SetFaultEntry sets the fixed part of an anonymous page fault's cost
// (DefaultFaultEntry unless set; 0 leaves only the zeroing).
func (k *Kernel) SetFaultEntry(d sim.Time) {
	k.faultEntry = d
	if k.mem != nil {
		k.mem.SetFaultCost(d)
	}
}

// Memory is the memory SetMemory gave, nil before.
func (k *Kernel) Memory() *mem.Memory { return k.mem }

// defaultDistance is the SLIT distance of a machine that gives none.
func defaultDistance(a, b int) int {
	if a == b {
		return 10
	}
	return 21
}

// zonelists is node_zonelist for each node: every node, nearest first,
// ties by node number (build_zonelists, without its load balancing
// among equals).
func zonelists(nodes int, dist func(a, b int) int) [][]int {
	out := make([][]int, nodes)
	for n := range nodes {
		l := make([]int, nodes)
		for i := range l {
			l[i] = i
		}
		slices.SortStableFunc(l, func(a, b int) int { return cmp.Compare(dist(n, a), dist(n, b)) })
		out[n] = l
	}
	return out
}

// Zonelist is node's fallback order: every node, nearest first by SLIT
// distance, ties by node number.
func (k *Kernel) Zonelist(node int) []int {
	if node < 0 || node >= k.nodes {
		return nil
	}
	return slices.Clone(k.zonelists[node])
}

// CPUs is the number of CPUs of the machine.
func (k *Kernel) CPUs() int { return len(k.cpuNode) }

// NodeOfCPU is the node of cpu (cpu_to_node), -1 for none.
func (k *Kernel) NodeOfCPU(cpu int) int {
	if cpu < 0 || cpu >= len(k.cpuNode) {
		return -1
	}
	return k.cpuNode[cpu]
}

// CPUsOfNode lists node's CPUs (cpumask_of_node).
func (k *Kernel) CPUsOfNode(node int) []int {
	var out []int
	for c, n := range k.cpuNode {
		if n == node {
			out = append(out, c)
		}
	}
	return out
}

// NUMAStat is node's numastat counters.
func (k *Kernel) NUMAStat(node int) NUMAStat {
	if node < 0 || node >= len(k.stat) {
		return NUMAStat{}
	}
	return k.stat[node]
}

// NUMAStats is every node's numastat counters, by node.
func (k *Kernel) NUMAStats() []NUMAStat { return slices.Clone(k.stat) }

// AnonPages is how many anonymous pages the kernel has placed, ever
// (faults and migrations): 0 means no run allocated anonymous memory.
func (k *Kernel) AnonPages() uint64 { return k.placed }

// SetInterleaveWeight is writing w to
// /sys/kernel/mm/mempolicy/weighted_interleave/nodeN: node's share in
// weighted interleave (1 by default). EINVAL for 0 (the kernel refuses
// a zero weight) or a node the machine lacks.
func (k *Kernel) SetInterleaveWeight(node int, w uint8) error {
	if node < 0 || node >= k.nodes || w == 0 {
		return fmt.Errorf("weighted_interleave/node%d = %d: %w", node, w, syscall.EINVAL)
	}
	k.weights[node] = w
	return nil
}

// InterleaveWeight is node's weighted-interleave weight.
func (k *Kernel) InterleaveWeight(node int) uint8 {
	if node < 0 || node >= k.nodes {
		return 0
	}
	return k.weights[node]
}

// interleaveNode is interleave_nid / weighted_interleave_nid: the node
// of page index ilx under pol.
func (k *Kernel) interleaveNode(pol *MemPolicy, ilx uint64) int {
	if pol.Mode == MPOLInterleave {
		return pol.Nodes[ilx%uint64(len(pol.Nodes))]
	}
	var total uint64
	for _, n := range pol.Nodes {
		total += uint64(k.weights[n])
	}
	t := ilx % total
	for _, n := range pol.Nodes {
		w := uint64(k.weights[n])
		if t < w {
			return n
		}
		t -= w
	}
	return pol.Nodes[len(pol.Nodes)-1]
}

// placement is where an allocation may go: the nodes to try in order
// (the first is the intended node, numastat's preferred zone), and, for
// MPOL_PREFERRED_MANY, the order to fall back to once its nodes are
// full; il is the node interleaving chose, -1 if none.
type placement struct {
	order, then []int
	il          int
}

// place is alloc_pages_mpol's choice for a page of index ilx under pol,
// touched by a CPU of node cpu, in a cpuset with mems (nil: all).
func (k *Kernel) place(pol *MemPolicy, ilx uint64, cpu int, mems []int) placement {
	allowed := func(nid int, mask []int) []int {
		var out []int
		for _, n := range k.zonelists[nid] {
			if (mems == nil || slices.Contains(mems, n)) && (mask == nil || slices.Contains(mask, n)) {
				out = append(out, n)
			}
		}
		return out
	}
	pl := placement{il: -1}
	switch pol.Mode {
	case MPOLPreferred:
		pl.order = allowed(pol.Nodes[0], nil)
	case MPOLBind:
		pl.order = allowed(cpu, pol.Nodes)
	case MPOLPreferredMany:
		pl.order, pl.then = allowed(cpu, pol.Nodes), allowed(cpu, nil)
	case MPOLInterleave, MPOLWeightedInterleave:
		pl.il = k.interleaveNode(pol, ilx)
		pl.order = allowed(pl.il, nil)
	default:
		pl.order = allowed(cpu, nil)
	}
	return pl
}

// allocPage allocates one page under pol for a CPU of node cpu (by
// the placement's order, then its fallback) and counts it in numastat.
// ENOMEM when every allowed node is full: MPOL_BIND's nodes are all it
// may use.
func (k *Kernel) allocPage(pol *MemPolicy, ilx uint64, cpu int, mems []int) (mem.PhysAddr, error) {
	pl := k.place(pol, ilx, cpu, mems)
	for _, order := range [][]int{pl.order, pl.then} {
		for _, n := range order {
			pa, err := k.mem.AllocPages(n, mem.PageSize, mem.ZoneNormal)
			if errors.Is(err, mem.ErrNoMemory) {
				continue
			}
			if err != nil {
				return 0, err
			}
			k.count(n, order[0], cpu, pl.il)
			return pa, nil
		}
	}
	return 0, fmt.Errorf("%v policy over %v: every allowed node full: %w", pol.Mode, pol.Nodes, syscall.ENOMEM)
}

// count is zone_statistics for a page placed on node got, intended for
// want, for a CPU of node cpu; il is interleaving's node (-1: none).
func (k *Kernel) count(got, want, cpu, il int) {
	k.placed++
	s := &k.stat[got]
	if got == want {
		s.NumaHit++
	} else {
		s.NumaMiss++
		k.stat[want].NumaForeign++
	}
	if got == cpu {
		s.LocalNode++
	} else {
		s.OtherNode++
	}
	if got == il {
		s.InterleaveHit++
	}
}

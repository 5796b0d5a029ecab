package kernel

import (
	"slices"

	"github.com/dmalab/dmalab/sim"
)

// AllocNodes is the order in which a page allocation made in thread t
// of the process, outside its address space, tries the nodes: a
// driver's own pages for the process, as the NVIDIA driver's
// nv_alloc_system_pages (open-gpu-kernel-modules,
// kernel-open/nvidia/nv-vm.c) takes them with __get_free_pages, that is
// alloc_pages → alloc_pages_mpol with the calling task's policy
// (get_task_policy) and numa_node_id() (mm/mempolicy.c). The first
// node is the one intended; the rest are the fallback the policy
// allows, nearest first (MPOL_BIND: its nodes only; MPOL_PREFERRED_MANY:
// its nodes, then every other). Interleave policies have no address to
// take an index from: each call takes the next node of the policy's
// rotation (interleave_nodes and the task's il_prev), so that
// successive allocations go round the nodes. A nil t is the process's
// node. Nil when the kernel has no memory (SetMemory).
func (p *Process) AllocNodes(t *sim.Proc) []int {
	if p.k.mem == nil {
		return nil
	}
	node := p.node
	if t != nil {
		node = p.ThreadNode(t)
	}
	pol := &p.Policy
	var ilx uint64
	if pol.Mode == MPOLInterleave || pol.Mode == MPOLWeightedInterleave {
		ilx = p.ilNext
		p.ilNext++
	}
	pl := p.k.place(pol, ilx, node, p.mems)
	out := slices.Clone(pl.order)
	for _, n := range pl.then {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

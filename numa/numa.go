package numa

import (
	"errors"
	"fmt"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Lib is libnuma as thread t of process p uses it.
type Lib struct {
	p *kernel.Process
	t *sim.Proc
	// strict is numa_set_bind_policy: MPOL_BIND when set (libnuma's
	// default), MPOL_PREFERRED otherwise.
	strict bool
}

// New is libnuma in thread t of p (t may be nil for set-up code: calls
// that migrate or bind a thread then act on the process only).
func New(p *kernel.Process, t *sim.Proc) *Lib { return &Lib{p: p, t: t, strict: true} }

func (l *Lib) k() *kernel.Kernel { return l.p.Kernel() }

// Available is numa_available: 0 when the kernel places memory by
// policy (it has the machine's memory), -1 otherwise.
func (l *Lib) Available() int {
	if l.k().Memory() == nil {
		return -1
	}
	return 0
}

// MaxNode is numa_max_node: the highest node number.
func (l *Lib) MaxNode() int { return l.k().Nodes() - 1 }

// NumConfiguredNodes is numa_num_configured_nodes.
func (l *Lib) NumConfiguredNodes() int { return l.k().Nodes() }

// NumConfiguredCPUs is numa_num_configured_cpus.
func (l *Lib) NumConfiguredCPUs() int { return l.k().CPUs() }

// Distance is numa_distance: the SLIT distance between nodes a and b
// (10 local), 0 when either does not exist, as libnuma reports an
// unknown distance.
func (l *Lib) Distance(a, b int) int {
	n, m := l.k().Nodes(), l.k().Memory()
	if a < 0 || b < 0 || a >= n || b >= n || m == nil {
		return 0
	}
	return m.Distance(a, b)
}

// NodeOfCPU is numa_node_of_cpu: -1 (EINVAL) for a CPU the machine
// lacks.
func (l *Lib) NodeOfCPU(cpu int) int { return l.k().NodeOfCPU(cpu) }

// allNodes is numa_all_nodes_ptr as the cpuset allows it.
func (l *Lib) allNodes() []int { return l.p.Mems() }

// alloc maps size bytes and, unless mode is MPOL_DEFAULT, mbinds them.
func (l *Lib) alloc(call string, size uint64, mode kernel.PolicyMode, nodes []int) (mem.VirtAddr, error) {
	va, err := l.p.MmapAnon(size)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", call, err)
	}
	if mode != kernel.MPOLDefault {
		if err := l.p.Mbind(l.t, va, size, mode, 0, nodes, 0); err != nil {
			return 0, fmt.Errorf("%s: %w", call, errors.Join(err, l.p.Munmap(l.t, va)))
		}
	}
	return va, nil
}

// bindMode is the mode of calls that bind to a node.
func (l *Lib) bindMode() kernel.PolicyMode {
	if l.strict {
		return kernel.MPOLBind
	}
	return kernel.MPOLPreferred
}

// SetBindPolicy is numa_set_bind_policy: strict binds to the node
// (MPOL_BIND: a full node fails the page), otherwise prefers it
// (MPOL_PREFERRED: a full node falls back to the nearest).
func (l *Lib) SetBindPolicy(strict bool) { l.strict = strict }

// Alloc is numa_alloc: pages placed by the process's policy.
func (l *Lib) Alloc(size uint64) (mem.VirtAddr, error) {
	return l.alloc(fmt.Sprintf("numa_alloc(%#x)", size), size, kernel.MPOLDefault, nil)
}

// AllocOnnode is numa_alloc_onnode: pages on node (by the bind policy).
func (l *Lib) AllocOnnode(size uint64, node int) (mem.VirtAddr, error) {
	return l.alloc(fmt.Sprintf("numa_alloc_onnode(%#x, %d)", size, node), size, l.bindMode(), []int{node})
}

// AllocInterleaved is numa_alloc_interleaved: pages interleaved over
// every node the cpuset allows, page i on the (i mod n)-th.
func (l *Lib) AllocInterleaved(size uint64) (mem.VirtAddr, error) {
	return l.AllocInterleavedSubset(size, l.allNodes())
}

// AllocInterleavedSubset is numa_alloc_interleaved_subset.
func (l *Lib) AllocInterleavedSubset(size uint64, nodes []int) (mem.VirtAddr, error) {
	return l.alloc(fmt.Sprintf("numa_alloc_interleaved(%#x, %v)", size, nodes), size, kernel.MPOLInterleave, nodes)
}

// AllocLocal is numa_alloc_local: pages on the node of the CPU that
// touches each first (MPOL_LOCAL).
func (l *Lib) AllocLocal(size uint64) (mem.VirtAddr, error) {
	return l.alloc(fmt.Sprintf("numa_alloc_local(%#x)", size), size, kernel.MPOLLocal, nil)
}

// Free is numa_free: unmaps what an Alloc returned, freeing its pages.
func (l *Lib) Free(va mem.VirtAddr) error {
	if err := l.p.Munmap(l.t, va); err != nil {
		return fmt.Errorf("numa_free(%v): %w", va, err)
	}
	return nil
}

// TonodeMemory is numa_tonode_memory: [va, va+size) bound to node (by
// the bind policy); pages already placed stay.
func (l *Lib) TonodeMemory(va mem.VirtAddr, size uint64, node int) error {
	return l.p.Mbind(l.t, va, size, l.bindMode(), 0, []int{node}, 0)
}

// InterleaveMemory is numa_interleave_memory.
func (l *Lib) InterleaveMemory(va mem.VirtAddr, size uint64, nodes []int) error {
	return l.p.Mbind(l.t, va, size, kernel.MPOLInterleave, 0, nodes, 0)
}

// RunOnNode is numa_run_on_node: the thread (and the process's node)
// bound to node's CPUs; -1 lets it run anywhere (all CPUs, the process's
// node unchanged).
func (l *Lib) RunOnNode(node int) error {
	call := fmt.Sprintf("numa_run_on_node(%d)", node)
	var cpus []int
	if node == -1 {
		for c := range l.k().CPUs() {
			cpus = append(cpus, c)
		}
	} else {
		cpus = l.k().CPUsOfNode(node)
		if len(cpus) == 0 {
			return fmt.Errorf("%s: %w", call, syscall.EINVAL)
		}
		if err := l.p.SetAffinity(node); err != nil {
			return fmt.Errorf("%s: %w", call, err)
		}
	}
	if l.t != nil {
		if err := l.p.SetThreadAffinity(l.t, cpus...); err != nil {
			return fmt.Errorf("%s: %w", call, err)
		}
	}
	return nil
}

// SetPreferred is numa_set_preferred: MPOL_PREFERRED on node; -1 is
// numa_set_localalloc.
func (l *Lib) SetPreferred(node int) error {
	if node == -1 {
		return l.SetLocalAlloc()
	}
	return l.p.SetMemPolicy(kernel.MPOLPreferred, node)
}

// SetLocalAlloc is numa_set_localalloc: MPOL_LOCAL.
func (l *Lib) SetLocalAlloc() error { return l.p.SetMemPolicy(kernel.MPOLLocal) }

// SetInterleaveMask is numa_set_interleave_mask: the process's policy
// interleaves over nodes (none: back to MPOL_DEFAULT).
func (l *Lib) SetInterleaveMask(nodes []int) error {
	if len(nodes) == 0 {
		return l.p.SetMemPolicy(kernel.MPOLDefault)
	}
	return l.p.SetMemPolicy(kernel.MPOLInterleave, nodes...)
}

// SetMembind is numa_set_membind: the process's policy binds to nodes.
func (l *Lib) SetMembind(nodes []int) error { return l.p.SetMemPolicy(kernel.MPOLBind, nodes...) }

// Preferred is numa_preferred: the node the process's policy places its
// next page on first: the preferred node, a bind's first node, else the
// thread's own node.
func (l *Lib) Preferred() int {
	pol := l.p.Policy
	if (pol.Mode == kernel.MPOLPreferred || pol.Mode == kernel.MPOLBind || pol.Mode == kernel.MPOLPreferredMany) && len(pol.Nodes) > 0 {
		return slices.Min(pol.Nodes)
	}
	if l.t != nil {
		return l.p.ThreadNode(l.t)
	}
	return l.p.Node()
}

// MovePages is numa_move_pages on the calling process (move_pages(2)).
func (l *Lib) MovePages(pages []mem.VirtAddr, nodes []int) ([]int, error) {
	return l.p.MovePages(l.t, l.p, pages, nodes, kernel.MPOLMFMove)
}

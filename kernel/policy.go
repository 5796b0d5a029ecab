package kernel

import (
	"fmt"
	"slices"
	"syscall"
)

// PolicyMode is a NUMA memory policy mode, with the values of
// include/uapi/linux/mempolicy.h.
type PolicyMode uint8

const (
	MPOLDefault    PolicyMode = 0 // MPOL_DEFAULT: the node of the touching thread
	MPOLPreferred  PolicyMode = 1 // MPOL_PREFERRED
	MPOLBind       PolicyMode = 2 // MPOL_BIND
	MPOLInterleave PolicyMode = 3 // MPOL_INTERLEAVE
)

func (m PolicyMode) String() string {
	switch m {
	case MPOLDefault:
		return "default"
	case MPOLPreferred:
		return "preferred"
	case MPOLBind:
		return "bind"
	case MPOLInterleave:
		return "interleave"
	}
	return fmt.Sprintf("PolicyMode(%d)", int(m))
}

// MemPolicy is struct mempolicy: a mode and its node mask. The zero
// value is MPOL_DEFAULT. Placement by policy is the NUMA layer's; the
// kernel keeps the policy where set_mempolicy puts it, on the process.
type MemPolicy struct {
	Mode  PolicyMode
	Nodes []int
}

// SetMemPolicy is set_mempolicy(2): EINVAL for an unknown mode, an empty
// mask with a mode that needs one, or a node the machine lacks.
func (p *Process) SetMemPolicy(mode PolicyMode, nodes ...int) error {
	if mode > MPOLInterleave {
		return fmt.Errorf("set_mempolicy(%d) in %s: %w", mode, p.name, syscall.EINVAL)
	}
	if mode == MPOLDefault && len(nodes) > 0 || mode != MPOLDefault && mode != MPOLPreferred && len(nodes) == 0 {
		return fmt.Errorf("set_mempolicy(%v, %v) in %s: %w", mode, nodes, p.name, syscall.EINVAL)
	}
	for _, n := range nodes {
		if n < 0 || n >= p.k.nodes {
			return fmt.Errorf("set_mempolicy(%v, %v) in %s: node %d of %d: %w", mode, nodes, p.name, n, p.k.nodes, syscall.EINVAL)
		}
	}
	p.Policy = MemPolicy{Mode: mode, Nodes: slices.Clone(nodes)}
	return nil
}

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
	MPOLDefault            PolicyMode = 0 // MPOL_DEFAULT: the process's policy, else local
	MPOLPreferred          PolicyMode = 1 // MPOL_PREFERRED: one node first, then the nearest
	MPOLBind               PolicyMode = 2 // MPOL_BIND: only these nodes, nearest first
	MPOLInterleave         PolicyMode = 3 // MPOL_INTERLEAVE: page i on the (i mod n)th node
	MPOLLocal              PolicyMode = 4 // MPOL_LOCAL: the node of the touching CPU
	MPOLPreferredMany      PolicyMode = 5 // MPOL_PREFERRED_MANY: these nodes first, then any
	MPOLWeightedInterleave PolicyMode = 6 // MPOL_WEIGHTED_INTERLEAVE: interleave by per-node weights
	mpolMax                PolicyMode = 7 // MPOL_MAX
)

var modeNames = [...]string{"default", "preferred", "bind", "interleave", "local", "preferred-many", "weighted-interleave"}

func (m PolicyMode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("PolicyMode(%d)", int(m))
}

// ModeFlags are the flags set_mempolicy and mbind take or'ed into the
// mode (include/uapi/linux/mempolicy.h).
type ModeFlags uint16

const (
	// MPOLFStaticNodes (MPOL_F_STATIC_NODES): the nodes are physical
	// node numbers, kept as given; a cpuset change intersects them with
	// the new mems instead of remapping them.
	MPOLFStaticNodes ModeFlags = 1 << 15
	// MPOLFRelativeNodes (MPOL_F_RELATIVE_NODES): node k means the k-th
	// node the cpuset allows (mpol_relative_nodemask), whatever its mems.
	MPOLFRelativeNodes ModeFlags = 1 << 14
)

// MemPolicy is struct mempolicy: a mode, its effective node mask (the
// nodes given, intersected with or remapped onto the cpuset's mems as
// mpol_set_nodemask does) and its mode flags. The zero value is
// MPOL_DEFAULT.
type MemPolicy struct {
	Mode  PolicyMode
	Nodes []int
	Flags ModeFlags
	// user is the mask as the caller gave it (w.user_nodemask, for the
	// static and relative flags); mems the cpuset's mems when Nodes was
	// computed (w.cpuset_mems_allowed, for remapping on a change).
	user, mems []int
}

// SetMemPolicy is set_mempolicy(2) without mode flags: EINVAL for an
// unknown mode, an empty mask with a mode that needs one, a mask with
// MPOL_DEFAULT or MPOL_LOCAL, or a node the machine lacks.
// MPOL_PREFERRED with no node is MPOL_LOCAL, as in mpol_new.
func (p *Process) SetMemPolicy(mode PolicyMode, nodes ...int) error {
	return p.SetMemPolicyFlags(mode, 0, nodes...)
}

// SetMemPolicyFlags is set_mempolicy(2) with mode flags.
func (p *Process) SetMemPolicyFlags(mode PolicyMode, flags ModeFlags, nodes ...int) error {
	pol, err := p.newPolicy(mode, flags, nodes)
	if err != nil {
		return fmt.Errorf("set_mempolicy(%v, %v) in %s: %w", mode, nodes, p.name, err)
	}
	p.Policy = pol
	return nil
}

// newPolicy is mpol_new + mpol_set_nodemask: the policy of mode over
// nodes in p's cpuset.
func (p *Process) newPolicy(mode PolicyMode, flags ModeFlags, nodes []int) (MemPolicy, error) {
	if mode >= mpolMax || flags&^(MPOLFStaticNodes|MPOLFRelativeNodes) != 0 ||
		flags == MPOLFStaticNodes|MPOLFRelativeNodes {
		return MemPolicy{}, syscall.EINVAL
	}
	for _, n := range nodes {
		if n < 0 || n >= p.k.nodes {
			return MemPolicy{}, fmt.Errorf("node %d of %d: %w", n, p.k.nodes, syscall.EINVAL)
		}
	}
	user := normalize(nodes)
	if len(user) == 0 {
		switch mode {
		case MPOLDefault:
			if flags != 0 {
				return MemPolicy{}, syscall.EINVAL
			}
			return MemPolicy{}, nil
		case MPOLPreferred:
			if flags != 0 {
				return MemPolicy{}, syscall.EINVAL
			}
			mode = MPOLLocal
		case MPOLLocal:
		default:
			return MemPolicy{}, fmt.Errorf("%v needs nodes: %w", mode, syscall.EINVAL)
		}
	} else if mode == MPOLDefault || mode == MPOLLocal {
		return MemPolicy{}, fmt.Errorf("%v takes no nodes: %w", mode, syscall.EINVAL)
	}
	if mode == MPOLLocal {
		if flags != 0 {
			return MemPolicy{}, syscall.EINVAL
		}
		return MemPolicy{Mode: MPOLLocal}, nil
	}
	mems := p.Mems()
	pol := MemPolicy{Mode: mode, Flags: flags, user: user, mems: mems}
	pol.Nodes = effective(flags, user, mems)
	if len(pol.Nodes) == 0 {
		return MemPolicy{}, fmt.Errorf("nodes %v outside the cpuset's mems %v: %w", user, mems, syscall.EINVAL)
	}
	if mode == MPOLPreferred {
		// MPOL_PREFERRED keeps one node: first_node of the mask.
		pol.Nodes = pol.Nodes[:1]
	}
	return pol, nil
}

// effective is the mask a policy works with: with MPOL_F_RELATIVE_NODES
// the user's nodes folded onto mems (mpol_relative_nodemask: node k is
// the (k mod |mems|)-th node of mems); otherwise (MPOL_F_STATIC_NODES,
// or no flag when the policy is set) the user's nodes that mems allows.
// Without a flag a cpuset change remaps the nodes instead (rebind).
func effective(flags ModeFlags, user, mems []int) []int {
	if flags&MPOLFRelativeNodes != 0 {
		var out []int
		for _, n := range user {
			out = append(out, mems[n%len(mems)])
		}
		return normalize(out)
	}
	return intersect(user, mems)
}

// rebind is mpol_rebind_policy for the cpuset's new mems.
func (pol *MemPolicy) rebind(mems []int) {
	switch pol.Mode {
	case MPOLDefault, MPOLLocal:
		return
	case MPOLPreferred, MPOLPreferredMany:
		// mpol_rebind_preferred only records the mems: the preferred
		// nodes stay, and allocation skips those the cpuset forbids.
		pol.mems = slices.Clone(mems)
		return
	}
	var nodes []int
	if pol.Flags&(MPOLFStaticNodes|MPOLFRelativeNodes) != 0 {
		nodes = effective(pol.Flags, pol.user, mems)
	} else {
		// nodes_remap from the old mems to the new by position; a node
		// the old mems lacked stays as it is (node_remap).
		for _, n := range pol.Nodes {
			if i := slices.Index(pol.mems, n); i >= 0 {
				n = mems[i%len(mems)]
			}
			nodes = append(nodes, n)
		}
		nodes = normalize(nodes)
	}
	if len(nodes) == 0 {
		// mpol_rebind_nodemask: a mask left empty takes all of mems.
		nodes = slices.Clone(mems)
	}
	pol.Nodes, pol.mems = nodes, slices.Clone(mems)
}

// normalize sorts a node list and drops duplicates (a nodemask).
func normalize(nodes []int) []int {
	out := slices.Clone(nodes)
	slices.Sort(out)
	return slices.Compact(out)
}

func intersect(a, b []int) []int {
	var out []int
	for _, n := range a {
		if slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

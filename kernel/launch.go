package kernel

import (
	"fmt"
	"slices"
	"syscall"
)

// Launcher is the placement every new process inherits from the task
// that starts it: its memory policy (copy_process duplicates the
// parent's with mpol_dup) and its CPU affinity (the parent's cpus_mask).
// It is what numactl(8) sets in itself with set_mempolicy and
// sched_setaffinity before it execs a program, so that the program and
// all its children run under them. A program may still change either
// for itself afterwards (SetMemPolicy, SetThreadAffinity, Mbind).
type Launcher struct {
	// Mode, Flags and Nodes are the memory policy, as set_mempolicy
	// takes them (MPOLDefault with no nodes leaves the default).
	Mode  PolicyMode
	Flags ModeFlags
	Nodes []int
	// CPUs are the CPUs the process's threads may run on; nil leaves
	// them where the process is created.
	CPUs []int
}

// SetLauncher makes every process created from now on inherit l. EINVAL
// (and no change) for a policy set_mempolicy would refuse or a CPU the
// machine lacks.
func (k *Kernel) SetLauncher(l Launcher) error {
	for _, c := range l.CPUs {
		if k.NodeOfCPU(c) < 0 {
			return fmt.Errorf("launcher: sched_setaffinity(%v): cpu %d of %d: %w", l.CPUs, c, k.CPUs(), syscall.EINVAL)
		}
	}
	if l.CPUs != nil && len(l.CPUs) == 0 {
		return fmt.Errorf("launcher: sched_setaffinity: empty set: %w", syscall.EINVAL)
	}
	probe := &Process{k: k, name: "launcher"}
	if _, err := probe.newPolicy(l.Mode, l.Flags, l.Nodes); err != nil {
		return fmt.Errorf("launcher: set_mempolicy(%v, %v): %w", l.Mode, l.Nodes, err)
	}
	l.Nodes, l.CPUs = slices.Clone(l.Nodes), normalize(l.CPUs)
	if len(l.CPUs) == 0 {
		l.CPUs = nil
	}
	k.launcher = &l
	return nil
}

// inherit gives a new process the launcher's placement: its policy, and,
// when the launcher restricts the CPUs, the node it runs on (node, if
// one of the CPUs is on it, else the first CPU's) and its affinity (the
// CPUs' nodes).
func (k *Kernel) inherit(p *Process) {
	l := k.launcher
	if l == nil {
		return
	}
	// SetLauncher checked the policy; the new process has no cpuset.
	p.Policy, _ = p.newPolicy(l.Mode, l.Flags, l.Nodes)
	if l.CPUs == nil {
		return
	}
	p.launchCPUs = l.CPUs
	var nodes []int
	for _, c := range l.CPUs {
		if n := k.NodeOfCPU(c); !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	if !slices.Contains(nodes, p.node) {
		p.node = nodes[0]
	}
	p.aff = append([]int{p.node}, slices.DeleteFunc(nodes, func(n int) bool { return n == p.node })...)
}

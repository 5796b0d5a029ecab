package kernel

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

func TestLauncher(t *testing.T) {
	tests := []struct {
		name      string
		l         Launcher
		node      int // NewProcess's node
		wantNode  int
		wantCPU   int // an unbound thread's CPU
		wantMode  PolicyMode
		wantNodes []int
		wantPages []int // where 4 pages touched by the unbound thread land
	}{
		{"none", Launcher{}, 0, 0, 0, MPOLDefault, nil, []int{0, 0, 0, 0}},
		{"membind 1, cpus of node 0", Launcher{Mode: MPOLBind, Nodes: []int{1}, CPUs: []int{0, 1, 2, 3}}, 0, 0, 0, MPOLBind, []int{1}, []int{1, 1, 1, 1}},
		{"cpunodebind 1 moves a node-0 process", Launcher{CPUs: []int{4, 5, 6, 7}}, 0, 1, 4, MPOLDefault, nil, []int{1, 1, 1, 1}},
		{"physcpubind 6 on node 1", Launcher{CPUs: []int{6}}, 1, 1, 6, MPOLDefault, nil, []int{1, 1, 1, 1}},
		{"interleave", Launcher{Mode: MPOLInterleave, Nodes: []int{0, 1}}, 0, 0, 0, MPOLInterleave, []int{0, 1}, []int{0, 1, 0, 1}},
		{"preferred 1 on cpus of both", Launcher{Mode: MPOLPreferred, Nodes: []int{1}, CPUs: []int{3, 4}}, 0, 0, 3, MPOLPreferred, []int{1}, []int{1, 1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, m := numaMachine(t, false, twoNodes)
			if err := k.SetLauncher(tc.l); err != nil {
				t.Fatal(err)
			}
			p, err := k.NewProcess("app", tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if p.Node() != tc.wantNode || p.Policy.Mode != tc.wantMode || !slices.Equal(p.Policy.Nodes, tc.wantNodes) {
				t.Fatalf("node %d policy %v %v, want node %d policy %v %v", p.Node(), p.Policy.Mode, p.Policy.Nodes, tc.wantNode, tc.wantMode, tc.wantNodes)
			}
			va, err := p.MmapAnon(4 * mem.PageSize)
			if err != nil {
				t.Fatal(err)
			}
			var cpu int
			p.Spawn("main", func(th *sim.Proc) {
				cpu = p.ThreadCPU(th)
				m.Write(th, p.ThreadNode(th), va, 4*mem.PageSize)
			})
			k.Engine().Run()
			if cpu != tc.wantCPU {
				t.Errorf("unbound thread on cpu %d, want %d", cpu, tc.wantCPU)
			}
			var got []int
			for i := range 4 {
				n, _, _ := m.PageNode(va + mem.VirtAddr(i*mem.PageSize))
				got = append(got, n)
			}
			if !slices.Equal(got, tc.wantPages) {
				t.Errorf("pages on %v, want %v", got, tc.wantPages)
			}
		})
	}
}

func TestLauncherErrors(t *testing.T) {
	for _, l := range []Launcher{
		{Mode: MPOLBind},                             // bind needs nodes
		{Mode: MPOLBind, Nodes: []int{2}},            // no node 2
		{Mode: MPOLLocal, Nodes: []int{0}},           // local takes none
		{CPUs: []int{8}},                             // no CPU 8
		{CPUs: []int{}},                              // empty set
		{Mode: mpolMax, Nodes: []int{0}},             // no such mode
		{Mode: MPOLDefault, Flags: MPOLFStaticNodes}, // default takes no flag
	} {
		k, _ := numaMachine(t, false, twoNodes)
		if err := k.SetLauncher(l); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("SetLauncher(%+v) = %v, want EINVAL", l, err)
		}
		if p, _ := k.NewProcess("app", 0); p.Policy.Mode != MPOLDefault || p.Node() != 0 {
			t.Errorf("after a refused SetLauncher(%+v): policy %v, node %d", l, p.Policy.Mode, p.Node())
		}
	}
}

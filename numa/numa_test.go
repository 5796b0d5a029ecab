package numa_test

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/numa"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// machine boots 2s-4gpu-pcie's memory and kernel (two nodes), with a
// process on node 0.
func machine(t testing.TB) (*mem.Memory, *kernel.Process) {
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	eng := sim.New(1)
	m, err := mem.New(spec, eng, mem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := kernel.New(eng, m.Nodes())
	k.SetMemory(m)
	p, _ := k.NewProcess("app", 0)
	return m, p
}

func where(m *mem.Memory, va mem.VirtAddr, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i], _, _ = m.PageNode(va + mem.VirtAddr(i*mem.PageSize))
	}
	return out
}

func TestAllocPlacement(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alloc func(l *numa.Lib) (mem.VirtAddr, error)
		cpu   int // node of the CPU that touches the pages
		want  []int
	}{
		{"alloc (process policy: local)", func(l *numa.Lib) (mem.VirtAddr, error) { return l.Alloc(4 * mem.PageSize) }, 1, []int{1, 1, 1, 1}},
		{"onnode 1 touched by node 0", func(l *numa.Lib) (mem.VirtAddr, error) { return l.AllocOnnode(4*mem.PageSize, 1) }, 0, []int{1, 1, 1, 1}},
		{"interleaved", func(l *numa.Lib) (mem.VirtAddr, error) { return l.AllocInterleaved(4 * mem.PageSize) }, 0, []int{0, 1, 0, 1}},
		{"local", func(l *numa.Lib) (mem.VirtAddr, error) { return l.AllocLocal(4 * mem.PageSize) }, 1, []int{1, 1, 1, 1}},
		{"tonode after alloc", func(l *numa.Lib) (mem.VirtAddr, error) {
			va, err := l.Alloc(4 * mem.PageSize)
			if err == nil {
				err = l.TonodeMemory(va+2*mem.PageSize, 2*mem.PageSize, 1)
			}
			return va, err
		}, 0, []int{0, 0, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, p := machine(t)
			l := numa.New(p, nil)
			va, err := tc.alloc(l)
			if err != nil {
				t.Fatal(err)
			}
			m.Write(nil, tc.cpu, va, 4*mem.PageSize)
			if got := where(m, va, 4); !slices.Equal(got, tc.want) {
				t.Errorf("pages on %v, want %v", got, tc.want)
			}
			if err := l.Free(va); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestTopologyAndBinding(t *testing.T) {
	_, p := machine(t)
	th := p.Spawn("main", func(*sim.Proc) {})
	l := numa.New(p, th)
	if l.Available() != 0 || l.MaxNode() != 1 || l.NumConfiguredNodes() != 2 {
		t.Errorf("available %d, max node %d", l.Available(), l.MaxNode())
	}
	if l.Distance(0, 0) != 10 || l.Distance(0, 1) <= 10 || l.Distance(0, 2) != 0 {
		t.Errorf("distances %d %d %d", l.Distance(0, 0), l.Distance(0, 1), l.Distance(0, 2))
	}
	last := l.NumConfiguredCPUs() - 1
	if l.NodeOfCPU(0) != 0 || l.NodeOfCPU(last) != 1 || l.NodeOfCPU(last+1) != -1 {
		t.Errorf("CPUs %d: node of 0 %d, of %d %d", last+1, l.NodeOfCPU(0), last, l.NodeOfCPU(last))
	}
	if err := l.RunOnNode(1); err != nil || p.ThreadNode(th) != 1 || p.Node() != 1 {
		t.Errorf("run on node 1: %v, thread on %d", err, p.ThreadNode(th))
	}
	if err := l.RunOnNode(5); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("run on node 5: %v", err)
	}
	if err := l.SetPreferred(0); err != nil || l.Preferred() != 0 {
		t.Errorf("preferred 0: %v %d", err, l.Preferred())
	}
	if err := l.SetPreferred(-1); err != nil || l.Preferred() != 1 || p.Policy.Mode != kernel.MPOLLocal {
		t.Errorf("localalloc: %v, preferred %d, %v", err, l.Preferred(), p.Policy.Mode)
	}
}

// A strict bind to a full node fails the page; numa_set_bind_policy(0)
// prefers the node and falls back.
func TestBindPolicy(t *testing.T) {
	for _, strict := range []bool{true, false} {
		m, p := machine(t)
		l := numa.New(p, nil)
		l.SetBindPolicy(strict)
		lo, hi := m.NodeFree(1)
		if _, err := m.AllocPages(1, lo+hi, mem.ZoneNormal); err != nil {
			t.Fatal(err)
		}
		va, _ := l.AllocOnnode(mem.PageSize, 1)
		a := m.Read(nil, 0, va, 8)
		if strict && !errors.Is(a.Err, syscall.ENOMEM) || !strict && (a.Err != nil || where(m, va, 1)[0] != 0) {
			t.Errorf("strict %v: %v, page on %v", strict, a.Err, where(m, va, 1))
		}
	}
}

// numa_alloc_interleaved spreads a buffer's pages over the nodes; the
// move_pages query says where each is.
func Example() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	eng := sim.New(1)
	m, _ := mem.New(spec, eng, mem.Options{})
	k := kernel.New(eng, m.Nodes())
	k.SetMemory(m)
	p, _ := k.NewProcess("app", 0)
	l := numa.New(p, nil)
	va, _ := l.AllocInterleaved(6 * mem.PageSize)
	m.Write(nil, 0, va, 6*mem.PageSize)
	var pages []mem.VirtAddr
	for i := range 6 {
		pages = append(pages, va+mem.VirtAddr(i*mem.PageSize))
	}
	status, _ := l.MovePages(pages, nil)
	fmt.Println("nodes:", status, "distance 0-1:", l.Distance(0, 1))
	// Output: nodes: [0 1 0 1 0 1] distance 0-1: 21
}

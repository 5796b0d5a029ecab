package kernel_test

import (
	"fmt"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// The first-touch pitfall: the main thread initialises a buffer, so every
// page lands on its node. mbind with MPOL_MF_MOVE migrates only the
// pages outside the nodes it is given: interleaving over both nodes moves
// none (later faults would interleave, placed pages stay); binding to
// node 1 moves them all, each at the cost of a page copy.
func ExampleProcess_Mbind() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	eng := sim.New(1)
	m, _ := mem.New(spec, eng, mem.Options{})
	k := kernel.New(eng, m.Nodes())
	k.SetMemory(m)
	p, _ := k.NewProcess("app", 0)
	va, _ := p.MmapAnon(8 * mem.PageSize)
	where := func() (out []int) {
		for i := range 8 {
			n, _, _ := m.PageNode(va + mem.VirtAddr(i*mem.PageSize))
			out = append(out, n)
		}
		return out
	}
	p.Spawn("main", func(t *sim.Proc) {
		m.Write(t, p.ThreadNode(t), va, 8*mem.PageSize) // initialisation
		fmt.Println("first touch:", where())
		_ = p.Mbind(t, va, 8*mem.PageSize, kernel.MPOLInterleave, 0, []int{0, 1}, kernel.MPOLMFMove)
		fmt.Println("interleave, move:", where())
		_ = p.Mbind(t, va, 8*mem.PageSize, kernel.MPOLBind, 0, []int{1}, kernel.MPOLMFMove)
		fmt.Println("bind 1, move:", where())
	})
	eng.Run()
	s0, s1 := k.NUMAStat(0), k.NUMAStat(1)
	fmt.Printf("node0 numa_hit %d local_node %d; node1 numa_hit %d other_node %d\n", s0.NumaHit, s0.LocalNode, s1.NumaHit, s1.OtherNode)
	// Output:
	// first touch: [0 0 0 0 0 0 0 0]
	// interleave, move: [0 0 0 0 0 0 0 0]
	// bind 1, move: [1 1 1 1 1 1 1 1]
	// node0 numa_hit 8 local_node 8; node1 numa_hit 8 other_node 8
}

// Automatic NUMA balancing undoing the first-touch pitfall: the main
// thread places a buffer on node 0, a worker on node 1 reads it; the
// first scan (scan_delay, 1 s) marks it, the worker's hinting faults
// migrate every page to node 1 (about 1.9 µs each: the 1 µs fault and
// the copy), and its reads become local. The second scan (2 s) marks
// nothing: the process has one thread, and its pages are on its node.
func ExampleKernel_SetNUMABalancing() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	eng := sim.New(1)
	m, _ := mem.New(spec, eng, mem.Options{})
	k := kernel.New(eng, m.Nodes())
	k.SetMemory(m)
	k.SetNUMABalancing(true, kernel.AutoNUMA{}) // numa_balancing=1, Linux's defaults
	p, _ := k.NewProcess("app", 0)
	const size = 8 * mem.PageSize
	va, _ := p.MmapAnon(size)
	m.Write(nil, 0, va, size) // first touch on node 0
	w := p.Spawn("worker", func(t *sim.Proc) {
		for t.Now() < 2*sim.Second {
			m.Read(t, p.ThreadNode(t), va, size)
			t.Sleep(100 * sim.Millisecond)
		}
	})
	_ = p.SetThreadAffinity(w, k.CPUsOfNode(1)[0])
	eng.Run()
	n, _, _ := m.PageNode(va)
	vm := k.VMStat()
	fmt.Printf("page 0 on node %d; pte updates %d, hint faults %d (local %d), migrated %d\n",
		n, vm.NumaPTEUpdates, vm.NumaHintFaults, vm.NumaHintFaultsLocal, vm.NumaPagesMigrated)
	fmt.Println(p.TaskNUMA(w))
	// Output:
	// page 0 on node 1; pte updates 8, hint faults 8 (local 0), migrated 8
	// faults [0 8] preferred -1 hint 8 (local 0) migrated 8 in 15.179928us
}

// A driver allocating pages for a thread (cuMemHostAlloc's pinned
// memory) tries the nodes in the order the thread's node and the
// process's policy give: the default starts on the thread's node, a
// bind keeps to its nodes, and interleaving turns round them call after
// call.
func ExampleProcess_AllocNodes() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	eng := sim.New(1)
	m, _ := mem.New(spec, eng, mem.Options{})
	k := kernel.New(eng, m.Nodes())
	k.SetMemory(m)
	p, _ := k.NewProcess("app", 0)
	p.Spawn("main", func(t *sim.Proc) {
		fmt.Println("default:", p.AllocNodes(t))
		_ = p.SetThreadAffinity(t, k.CPUsOfNode(1)[0])
		fmt.Println("thread on node 1:", p.AllocNodes(t))
		_ = p.SetMemPolicy(kernel.MPOLBind, 0)
		fmt.Println("bind 0:", p.AllocNodes(t))
		_ = p.SetMemPolicy(kernel.MPOLInterleave, 0, 1)
		fmt.Println("interleave:", p.AllocNodes(t)[0], p.AllocNodes(t)[0], p.AllocNodes(t)[0])
	})
	eng.Run()
	// Output:
	// default: [0 1]
	// thread on node 1: [1 0]
	// bind 0: [0]
	// interleave: 0 1 0
}

package kernel

import (
	"bytes"
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// numaMachine is a machine of len(dist) nodes of 8 MiB and 4 CPUs each,
// with the SLIT distances dist, and its kernel with that memory.
func numaMachine(t *testing.T, payload bool, dist [][]int) (*Kernel, *mem.Memory) {
	t.Helper()
	spec := &platform.Spec{Name: "numa-test", Distances: dist}
	for i := range dist {
		spec.Nodes = append(spec.Nodes, platform.Node{
			ID:         i,
			Cores:      platform.P(4, "test"),
			DRAM:       platform.P[platform.Bytes](8<<20, "test"),
			MemcpyRate: platform.P[platform.Rate](10e9, "test"),
			Cache:      platform.CPUCache{LineSize: platform.P[platform.Bytes](64, "test")},
		})
	}
	eng := sim.New(1)
	m, err := mem.New(spec, eng, mem.Options{Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	k := New(eng, len(dist))
	k.SetMemory(m)
	return k, m
}

var (
	twoNodes   = [][]int{{10, 21}, {21, 10}}
	threeNodes = [][]int{{10, 30, 15}, {30, 10, 20}, {15, 20, 10}}
)

// fill takes every free page of node.
func fill(t *testing.T, m *mem.Memory, node int) {
	t.Helper()
	for _, chunk := range []uint64{1 << 20, mem.PageSize} {
		for {
			if _, err := m.AllocPages(node, chunk, mem.ZoneNormal); err != nil {
				break
			}
		}
	}
	if lo, hi := m.NodeFree(node); lo+hi != 0 {
		t.Fatalf("node %d still has %d bytes free", node, lo+hi)
	}
}

// nodesOf is the node of each page of [va, va+n pages), -1 for absent.
func nodesOf(t *testing.T, m *mem.Memory, va mem.VirtAddr, n int) []int {
	t.Helper()
	out := make([]int, n)
	for i := range out {
		node, present, err := m.PageNode(va + mem.VirtAddr(i*mem.PageSize))
		if err != nil {
			t.Fatal(err)
		}
		if !present {
			node = -1
		}
		out[i] = node
	}
	return out
}

func count(nodes []int, n int) int {
	c := 0
	for _, x := range nodes {
		if x == n {
			c++
		}
	}
	return c
}

func TestInterleaveExact(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    PolicyMode
		weights []uint8
		want    []int // node of pages 0..3, repeating
		per     [2]int
	}{
		{"interleave", MPOLInterleave, nil, []int{0, 1, 0, 1}, [2]int{8, 8}},
		{"weighted 3:1", MPOLWeightedInterleave, []uint8{3, 1}, []int{0, 0, 0, 1}, [2]int{12, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, m := numaMachine(t, false, twoNodes)
			for n, w := range tc.weights {
				if err := k.SetInterleaveWeight(n, w); err != nil {
					t.Fatal(err)
				}
			}
			p, _ := k.NewProcess("app", 0)
			if err := p.SetMemPolicy(tc.mode, 0, 1); err != nil {
				t.Fatal(err)
			}
			va, err := p.MmapAnon(16 * mem.PageSize)
			if err != nil {
				t.Fatal(err)
			}
			if got := nodesOf(t, m, va, 16); count(got, -1) != 16 {
				t.Fatalf("pages placed before any touch: %v", got)
			}
			if v := m.Write(nil, 0, va, 16*mem.PageSize); v == 0 {
				t.Fatal("write failed")
			}
			got := nodesOf(t, m, va, 16)
			for i, n := range got {
				if n != tc.want[i%4] {
					t.Fatalf("page %d on node %d: %v", i, n, got)
				}
			}
			if count(got, 0) != tc.per[0] || count(got, 1) != tc.per[1] {
				t.Errorf("pages per node %d/%d, want %v", count(got, 0), count(got, 1), tc.per)
			}
			for n := range 2 {
				s := k.NUMAStat(n)
				if s.InterleaveHit != uint64(tc.per[n]) || s.NumaHit != uint64(tc.per[n]) || s.NumaMiss != 0 {
					t.Errorf("node %d: %+v", n, s)
				}
			}
			if s := k.NUMAStat(1); s.OtherNode != uint64(tc.per[1]) || s.LocalNode != 0 {
				t.Errorf("node 1 pages were for a CPU of node 0: %+v", s)
			}
		})
	}
}

func TestFirstTouchByThreadNode(t *testing.T) {
	k, m := numaMachine(t, false, twoNodes)
	p, _ := k.NewProcess("app", 0)
	va, err := p.MmapAnon(8 * mem.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	half := uint64(4 * mem.PageSize)
	main := p.Spawn("main", func(t *sim.Proc) { m.Write(t, p.ThreadNode(t), va, half) })
	worker := p.Spawn("worker", func(t *sim.Proc) { m.Read(t, p.ThreadNode(t), va+mem.VirtAddr(half), half) })
	if err := p.SetThreadAffinity(worker, 5, 6); err != nil { // CPUs 4-7 are node 1's
		t.Fatal(err)
	}
	if p.ThreadCPU(worker) != 5 || p.ThreadNode(worker) != 1 || p.ThreadNode(main) != 0 {
		t.Fatalf("worker on CPU %d node %d, main on node %d", p.ThreadCPU(worker), p.ThreadNode(worker), p.ThreadNode(main))
	}
	k.Engine().Run()
	if got, want := nodesOf(t, m, va, 8), []int{0, 0, 0, 0, 1, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("pages on %v, want %v", got, want)
	}
	if s0, s1 := k.NUMAStat(0), k.NUMAStat(1); s0.LocalNode != 4 || s1.LocalNode != 4 || s0.NumaHit != 4 || s1.NumaHit != 4 {
		t.Errorf("numastat %+v %+v", s0, s1)
	}
	// A page placed stays where it was first touched: node 0 reading the
	// worker's half does not move it.
	m.Read(nil, 0, va, 8*mem.PageSize)
	if got := nodesOf(t, m, va, 8); got[7] != 1 {
		t.Errorf("page moved on a later touch: %v", got)
	}
}

func TestFallbackOnFullNode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  PolicyMode
		nodes []int
		want  int   // node of the page, -1: the access fails
		miss  []int // numa_miss per node
	}{
		// Node 1 is full; the CPU is node 1's. Its zonelist is 1, 2, 0.
		{"default", MPOLDefault, nil, 2, []int{0, 0, 1}},
		{"local", MPOLLocal, nil, 2, []int{0, 0, 1}},
		{"preferred", MPOLPreferred, []int{1}, 2, []int{0, 0, 1}},
		{"preferred-many", MPOLPreferredMany, []int{1}, 2, []int{0, 0, 1}},
		{"bind", MPOLBind, []int{1}, -1, []int{0, 0, 0}},
		{"bind two", MPOLBind, []int{0, 1}, 0, []int{1, 0, 0}},
		{"interleave", MPOLInterleave, []int{1}, 2, []int{0, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, m := numaMachine(t, false, threeNodes)
			fill(t, m, 1)
			p, _ := k.NewProcess("app", 1)
			if err := p.SetMemPolicy(tc.mode, tc.nodes...); err != nil {
				t.Fatal(err)
			}
			va, _ := p.MmapAnon(mem.PageSize)
			a := m.Read(nil, 1, va, 64)
			got := nodesOf(t, m, va, 1)[0]
			if tc.want < 0 {
				if !errors.Is(a.Err, syscall.ENOMEM) || got != -1 {
					t.Fatalf("bind to a full node: err %v, page on %d", a.Err, got)
				}
				return
			}
			if a.Err != nil || got != tc.want {
				t.Fatalf("page on node %d (err %v), want %d", got, a.Err, tc.want)
			}
			for n, want := range tc.miss {
				if s := k.NUMAStat(n); s.NumaMiss != uint64(want) {
					t.Errorf("node %d numa_miss %d, want %d", n, s.NumaMiss, want)
				}
			}
			if s := k.NUMAStat(1); s.NumaForeign != 1 {
				t.Errorf("node 1, intended and full: numa_foreign %d", s.NumaForeign)
			}
		})
	}
}

func TestMbindMoveMigratesMisplaced(t *testing.T) {
	k, m := numaMachine(t, true, threeNodes)
	p, _ := k.NewProcess("app", 0)
	va, _ := p.MmapAnon(6 * mem.PageSize)
	// Pages 0-2 first touched on node 0, 3-5 on node 2, each with bytes.
	data := make([][]byte, 6)
	vers := make([]mem.Version, 6)
	for i := range 6 {
		data[i] = bytes.Repeat([]byte{byte(i + 1)}, mem.PageSize)
		vers[i] = m.WriteBytes(nil, []int{0, 2}[i/3], va+mem.VirtAddr(i*mem.PageSize), data[i])
	}
	before := make([]mem.PhysAddr, 6)
	for i := range before {
		_, before[i], _ = m.Classify(va + mem.VirtAddr(i*mem.PageSize))
	}
	// Without MOVE, STRICT finds the node-2 pages misplaced.
	if err := p.Mbind(nil, va, 6*mem.PageSize, MPOLBind, 0, []int{0, 1}, MPOLMFStrict); !errors.Is(err, syscall.EIO) {
		t.Fatalf("strict without move: %v", err)
	}
	if mode, nodes, _ := p.GetMemPolicy(MPOLFAddr, va); PolicyMode(mode) != MPOLBind || !slices.Equal(nodes, []int{0, 1}) {
		t.Errorf("strict still sets the policy: %v %v", PolicyMode(mode), nodes)
	}
	if got := nodesOf(t, m, va, 6); !slices.Equal(got, []int{0, 0, 0, 2, 2, 2}) {
		t.Fatalf("strict moved pages: %v", got)
	}
	var th *sim.Proc
	th = p.Spawn("main", func(t *sim.Proc) {
		if err := p.Mbind(th, va, 6*mem.PageSize, MPOLBind, 0, []int{0, 1}, MPOLMFMove|MPOLMFStrict); err != nil {
			panic(err)
		}
	})
	k.Engine().Run()
	// Bound to {0, 1}, a node-0 CPU places by its zonelist: node 0.
	if got := nodesOf(t, m, va, 6); !slices.Equal(got, []int{0, 0, 0, 0, 0, 0}) {
		t.Fatalf("after MOVE: %v", got)
	}
	for i := range 6 {
		_, pa, _ := m.Classify(va + mem.VirtAddr(i*mem.PageSize))
		if moved := pa != before[i]; moved != (i >= 3) {
			t.Errorf("page %d moved %v: only the misplaced pages 3-5 move", i, moved)
		}
		buf := make([]byte, mem.PageSize)
		a := m.ReadBytes(nil, 0, va+mem.VirtAddr(i*mem.PageSize), buf)
		if a.Stale || !bytes.Equal(buf, data[i]) || m.LatestIn(a.Phys, mem.PageSize) != vers[i] {
			t.Errorf("page %d after migration: stale %v, bytes kept %v, version %d want %d", i, a.Stale, bytes.Equal(buf, data[i]), m.LatestIn(a.Phys, mem.PageSize), vers[i])
		}
	}
	if k.Engine().Now() == 0 {
		t.Error("three page copies cost no time")
	}
}

func TestMovePages(t *testing.T) {
	k, m := numaMachine(t, false, twoNodes)
	p, _ := k.NewProcess("app", 0)
	va, _ := p.MmapAnon(4 * mem.PageSize)
	m.Write(nil, 0, va, 2*mem.PageSize) // pages 0 and 1 placed
	pages := []mem.VirtAddr{va, va + mem.PageSize, va + 2*mem.PageSize, 0x1000}
	st, err := p.MovePages(nil, p, pages, nil, 0)
	if want := []int{0, 0, -int(syscall.ENOENT), -int(syscall.EFAULT)}; err != nil || !slices.Equal(st, want) {
		t.Fatalf("query: %v %v, want %v", st, err, want)
	}
	st, err = p.MovePages(nil, p, pages[:3], []int{1, 0, 1}, MPOLMFMove)
	if want := []int{1, 0, -int(syscall.ENOENT)}; err != nil || !slices.Equal(st, want) {
		t.Fatalf("move: %v %v, want %v", st, err, want)
	}
	if got := nodesOf(t, m, va, 4); !slices.Equal(got, []int{1, 0, -1, -1}) {
		t.Errorf("pages on %v", got)
	}
	if _, err := p.MovePages(nil, p, pages[:1], []int{2}, 0); !errors.Is(err, syscall.ENODEV) {
		t.Errorf("node 2: %v", err)
	}
	fill(t, m, 1)
	if st, _ := p.MovePages(nil, p, pages[1:2], []int{1}, 0); st[0] != -int(syscall.ENOMEM) {
		t.Errorf("to a full node: %v", st)
	}
	if left, err := p.MigratePages(nil, p, []int{1}, []int{0}); err != nil || left != 0 {
		t.Errorf("migrate_pages: %d %v", left, err)
	}
	if got := nodesOf(t, m, va, 4); !slices.Equal(got, []int{0, 0, -1, -1}) {
		t.Errorf("after migrate_pages: %v", got)
	}
	if n, _, err := p.GetMemPolicy(MPOLFNode|MPOLFAddr, va+3*mem.PageSize); err != nil || n != 0 {
		t.Errorf("get_mempolicy node of an absent page: %d %v (faults it in on the process's node)", n, err)
	}
}

func TestNUMAStatAddsUp(t *testing.T) {
	k, m := numaMachine(t, false, twoNodes)
	p, _ := k.NewProcess("app", 0)
	q, _ := k.NewProcess("other", 1)
	_ = q.SetMemPolicy(MPOLPreferred, 0)
	_ = p.SetMemPolicy(MPOLInterleave, 0, 1)
	va, _ := p.MmapAnon(64 * mem.PageSize)
	vb, _ := q.MmapAnon(64 * mem.PageSize)
	m.Write(nil, 0, va, 32*mem.PageSize)
	m.Write(nil, 1, vb, 32*mem.PageSize)
	fill(t, m, 0)
	m.Write(nil, 1, va+32*mem.PageSize, 32*mem.PageSize) // node 0's half falls back to 1
	m.Write(nil, 0, vb+32*mem.PageSize, 32*mem.PageSize) // preferred node 0 is full
	var hm uint64
	s := k.NUMAStats()
	for _, x := range s {
		hm += x.NumaHit + x.NumaMiss
		if x.LocalNode+x.OtherNode != x.NumaHit+x.NumaMiss {
			t.Errorf("local+other != hit+miss: %+v", x)
		}
	}
	if hm != k.AnonPages() || hm != 128 {
		t.Errorf("hits+misses %d, pages placed %d, want 128", hm, k.AnonPages())
	}
	if s[0].NumaForeign != s[1].NumaMiss || s[1].NumaForeign != s[0].NumaMiss || s[1].NumaMiss != 48 {
		t.Errorf("foreign and misses do not match: %+v", s)
	}
}

func TestPolicyFlagsAndCpuset(t *testing.T) {
	k := New(sim.New(1), 4)
	p, _ := k.NewProcess("app", 0)
	for _, tc := range []struct {
		name  string
		mode  PolicyMode
		flags ModeFlags
		nodes []int
		err   bool
	}{
		{"local with nodes", MPOLLocal, 0, []int{1}, true},
		{"default with nodes", MPOLDefault, 0, []int{1}, true},
		{"both flags", MPOLBind, MPOLFStaticNodes | MPOLFRelativeNodes, []int{1}, true},
		{"unknown mode", mpolMax, 0, []int{1}, true},
		{"preferred-many", MPOLPreferredMany, 0, []int{1, 2}, false},
		{"preferred none is local", MPOLPreferred, 0, nil, false},
	} {
		err := p.SetMemPolicyFlags(tc.mode, tc.flags, tc.nodes...)
		if (err != nil) != tc.err || err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if p.Policy.Mode != MPOLLocal {
		t.Errorf("MPOL_PREFERRED with no node: %v", p.Policy.Mode)
	}
	// Cpuset {0,1}; then moved to {2,3}.
	if err := p.SetCpuset([]int{0, 1}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.SetMemPolicy(MPOLBind, 2); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("bind outside the cpuset: %v", err)
	}
	for _, tc := range []struct {
		flags  ModeFlags
		nodes  []int
		at, to []int // effective nodes in {0,1}, then in {2,3}
	}{
		{0, []int{1}, []int{1}, []int{3}},                     // remapped by position
		{MPOLFStaticNodes, []int{1, 2}, []int{1}, []int{2}},   // intersected
		{MPOLFRelativeNodes, []int{1}, []int{1}, []int{3}},    // the second allowed node
		{MPOLFRelativeNodes, []int{0, 2}, []int{0}, []int{2}}, // folded: 2 mod 2 = 0
		{MPOLFStaticNodes, []int{0}, []int{0}, []int{2, 3}},   // nothing left: all of mems
	} {
		_ = p.SetCpuset([]int{0, 1}, nil)
		if err := p.SetMemPolicyFlags(MPOLInterleave, tc.flags, tc.nodes...); err != nil || !slices.Equal(p.Policy.Nodes, tc.at) {
			t.Errorf("%#x %v: %v %v, want %v", tc.flags, tc.nodes, p.Policy.Nodes, err, tc.at)
			continue
		}
		_ = p.SetCpuset([]int{2, 3}, nil)
		if !slices.Equal(p.Policy.Nodes, tc.to) {
			t.Errorf("%#x %v rebound to %v, want %v", tc.flags, tc.nodes, p.Policy.Nodes, tc.to)
		}
	}
	if _, nodes, err := p.GetMemPolicy(MPOLFMemsAllowed, 0); err != nil || !slices.Equal(nodes, []int{2, 3}) {
		t.Errorf("mems allowed: %v %v", nodes, err)
	}
	if err := p.SetCpuset([]int{2, 3}, []int{2, 3}); err != nil || p.Node() != 2 {
		t.Errorf("process left on node %d outside its cpuset's CPUs: %v", p.Node(), err)
	}
}

func TestPopulatePinsOnProcessNode(t *testing.T) {
	k, m := numaMachine(t, false, twoNodes)
	p, _ := k.NewProcess("app", 1)
	va, _ := p.MmapAnon(3 * mem.PageSize)
	if _, _, _, err := m.Translate(va, mem.PageSize); !errors.Is(err, mem.ErrNotPresent) {
		t.Fatalf("translate of an absent page: %v", err)
	}
	if err := m.Populate(va, 3*mem.PageSize, -1); err != nil {
		t.Fatal(err)
	}
	if got := nodesOf(t, m, va, 3); !slices.Equal(got, []int{1, 1, 1}) {
		t.Errorf("pinned pages on %v, want the process's node 1", got)
	}
	lo, hi := m.NodeFree(1)
	if err := p.Munmap(nil, va); err != nil {
		t.Fatal(err)
	}
	if lo2, hi2 := m.NodeFree(1); lo2+hi2 != lo+hi+3*mem.PageSize {
		t.Errorf("munmap freed %d bytes, want 3 pages", lo2+hi2-lo-hi)
	}
}

func TestGetMemPolicyAndExit(t *testing.T) {
	k, m := numaMachine(t, false, twoNodes)
	p, _ := k.NewProcess("app", 1)
	_ = p.SetMemPolicy(MPOLWeightedInterleave, 0, 1)
	va, _ := p.MmapAnon(4 * mem.PageSize)
	_ = p.Mbind(nil, va+2*mem.PageSize, mem.PageSize, MPOLPreferred, 0, []int{0}, 0)
	for _, tc := range []struct {
		name  string
		flags GetFlags
		addr  mem.VirtAddr
		mode  int
		nodes []int
		err   syscall.Errno
	}{
		{"process policy", 0, 0, int(MPOLWeightedInterleave), []int{0, 1}, 0},
		{"addr without MPOL_F_ADDR", 0, va, 0, nil, syscall.EINVAL},
		{"range policy", MPOLFAddr, va + 2*mem.PageSize, int(MPOLPreferred), []int{0}, 0},
		{"no range policy: default", MPOLFAddr, va, int(MPOLDefault), nil, 0},
		{"node of a page (faults it in)", MPOLFNode | MPOLFAddr, va + 2*mem.PageSize, 0, nil, 0},
		{"next interleave node", MPOLFNode, 0, 0, nil, 0},
		{"unmapped", MPOLFAddr, 0x1000, 0, nil, syscall.EFAULT},
		{"mems allowed with another flag", MPOLFMemsAllowed | MPOLFNode, 0, 0, nil, syscall.EINVAL},
	} {
		mode, nodes, err := p.GetMemPolicy(tc.flags, tc.addr)
		if tc.err != 0 {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || mode != tc.mode || !slices.Equal(nodes, tc.nodes) {
			t.Errorf("%s: %d %v %v, want %d %v", tc.name, mode, nodes, err, tc.mode, tc.nodes)
		}
	}
	if err := k.SetInterleaveWeight(0, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("weight 0: %v", err)
	}
	lo, hi := m.NodeFree(0)
	var th *sim.Proc
	th = p.Spawn("main", func(*sim.Proc) {
		if err := p.Exit(th); err != nil {
			panic(err)
		}
	})
	k.Engine().Run()
	if lo2, hi2 := m.NodeFree(0); lo2+hi2 != lo+hi+mem.PageSize {
		t.Errorf("exit freed %d bytes of node 0, want the one page placed", lo2+hi2-lo-hi)
	}
}

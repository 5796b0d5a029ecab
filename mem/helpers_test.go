package mem

import (
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

const (
	kiB = 1 << 10
	miB = 1 << 20
	giB = 1 << 30
)

// testCache is a small cache with round costs: 64-byte lines, 8 KiB,
// no prefetch, 10 ns per line written back, 4 ns per line invalidated,
// uncached access at 1 GB/s.
func testCache() platform.CPUCache {
	return platform.CPUCache{
		LineSize:       platform.P[platform.Bytes](64, "test"),
		Size:           platform.P[platform.Bytes](8*kiB, "test"),
		WritebackCost:  platform.P(10*sim.Nanosecond, "test"),
		InvalidateCost: platform.P(4*sim.Nanosecond, "test"),
		UncachedRate:   platform.P[platform.Rate](1e9, "test"),
	}
}

// testSpec is a machine with one node per DRAM size, each with
// testCache, copying at 10 GB/s.
func testSpec(dram ...uint64) *platform.Spec {
	s := &platform.Spec{Name: "test"}
	for i, d := range dram {
		s.Nodes = append(s.Nodes, platform.Node{
			ID:         i,
			Cores:      platform.P(8, "test"),
			DRAM:       platform.P(platform.Bytes(d), "test"),
			MemcpyRate: platform.P[platform.Rate](10e9, "test"),
			Cache:      testCache(),
		})
	}
	return s
}

// newMem builds a Memory and fails the test on error; with check, every
// access verifies the invariants.
func newMem(t testing.TB, spec *platform.Spec, opt Options) *Memory {
	t.Helper()
	m, err := New(spec, sim.New(1), opt)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// verified fails t if the content model's invariants do not hold.
func verified(t testing.TB, m *Memory) {
	t.Helper()
	if err := m.verify(); err != nil {
		t.Fatal(err)
	}
}

// inProc runs body as a process on m's engine and returns the virtual
// time it took.
func inProc(m *Memory, body func(p *sim.Proc)) sim.Time {
	var took sim.Time
	m.eng.Spawn("cpu", func(p *sim.Proc) {
		t0 := p.Now()
		body(p)
		took = p.Now() - t0
	})
	m.eng.Run()
	return took
}

// buf allocates size bytes of node's DRAM (zone normal) and returns the
// physical and linear addresses.
func buf(t testing.TB, m *Memory, node int, size uint64) (PhysAddr, VirtAddr) {
	t.Helper()
	pa, err := m.AllocPages(node, size, ZoneNormal)
	if err != nil {
		t.Fatal(err)
	}
	return pa, m.PhysToVirt(pa)
}

// latestMap is the map of m's latest writes, kept or not (latest.go):
// m.latest once kept, else the coherent values it stands for.
func latestMap(m *Memory) *spanMap[Version] {
	if m.keep {
		return &m.latest
	}
	var l spanMap[Version]
	m.coherentMap(&l)
	return &l
}

// linesMap is the map of c's lines, c a cache of m, with every version
// explicit (latest.go): c.lines once the latest writes are kept.
func linesMap(m *Memory, c *cache) *spanMap[lineState] {
	if m.keep {
		return &c.lines
	}
	var l spanMap[lineState]
	l.setLazy(voidLine)
	m.explicitLines(c, &l)
	return &l
}

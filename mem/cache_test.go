package mem

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// line reports the state of node's copy of pa.
type lineWant struct {
	v              Version
	present, dirty bool
}

func checkLine(t *testing.T, m *Memory, node int, pa PhysAddr, want lineWant) {
	t.Helper()
	v, present, dirty := m.CacheLine(node, pa)
	if (lineWant{v, present, dirty}) != want {
		t.Errorf("node %d cache at %v: %+v, want %+v", node, pa, lineWant{v, present, dirty}, want)
	}
}

func checkStale(t *testing.T, what string, a Access, at PhysAddr, got, want Version) {
	t.Helper()
	if a.Err != nil {
		t.Fatalf("%s: %v", what, a.Err)
	}
	if !a.Stale || a.StaleAt != at || a.Got != got || a.Want != want {
		t.Errorf("%s: stale %v at %v got %d want %d; want stale at %v got %d want %d",
			what, a.Stale, a.StaleAt, a.Got, a.Want, at, got, want)
	}
}

func checkFresh(t *testing.T, what string, a Access) {
	t.Helper()
	if a.Err != nil || a.Stale {
		t.Errorf("%s: stale %v at %v (got %d, want %d), err %v", what, a.Stale, a.StaleAt, a.Got, a.Want, a.Err)
	}
}

func TestWriteBack(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	pa, va := buf(t, m, 0, PageSize)
	v := m.Write(nil, 0, va+8, 100)
	if v != 1 || m.Latest(pa+8) != v || m.Latest(pa) != 0 {
		t.Fatalf("version %d, latest %d", v, m.Latest(pa+8))
	}
	if m.DRAMVersion(pa+8) != 0 {
		t.Error("a write-back cache wrote through to DRAM")
	}
	checkLine(t, m, 0, pa, lineWant{0, true, true}) // write-allocate: the whole line
	checkLine(t, m, 0, pa+8, lineWant{v, true, true})
	checkLine(t, m, 0, pa+100, lineWant{v, true, true})
	checkLine(t, m, 0, pa+108, lineWant{0, true, true})
	checkLine(t, m, 0, pa+128, lineWant{})
	checkStale(t, "non-coherent device read", m.DeviceRead("dev", false, pa, 128), pa+8, 0, v)
	checkFresh(t, "coherent device read", m.DeviceRead("dev", true, pa, 128))
	checkFresh(t, "CPU read", m.Read(nil, 0, va, 128))
	m.Clean(nil, pa, 128)
	checkLine(t, m, 0, pa+8, lineWant{v, true, false})
	if m.DRAMVersion(pa+8) != v {
		t.Error("clean did not write back")
	}
	checkFresh(t, "non-coherent read after clean", m.DeviceRead("dev", false, pa, 128))
	verified(t, m)
}

func TestEvictionWritesBackDirty(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{}) // 8 KiB cache: 128 lines
	a, va := buf(t, m, 0, 8*kiB)
	_, vb := buf(t, m, 0, PageSize)
	v := m.Write(nil, 0, va, 8*kiB)
	if st := m.CacheStats(0); st.Used != 8*kiB || st.Evictions != 0 {
		t.Fatalf("stats %+v", st)
	}
	m.Read(nil, 0, vb, 100) // two more lines: the two oldest go
	checkLine(t, m, 0, a, lineWant{})
	checkLine(t, m, 0, a+64, lineWant{})
	checkLine(t, m, 0, a+128, lineWant{v, true, true})
	if m.DRAMVersion(a) != v || m.DRAMVersion(a+127) != v || m.DRAMVersion(a+128) != 0 {
		t.Error("evicted dirty lines not written back (or more written back)")
	}
	if st := m.CacheStats(0); st.Used != 8*kiB || st.Evictions != 2 {
		t.Errorf("stats %+v", st)
	}
	// Re-reading the evicted line refills it from DRAM, fresh.
	checkFresh(t, "re-read", m.Read(nil, 0, va, 64))
	verified(t, m)
}

// TestEvictionOverDeviceData is the hazard of a dirty line left in the
// cache over a buffer a non-coherent device then writes: the eviction,
// whenever it comes, puts the CPU's old line over the device's data.
func TestEvictionOverDeviceData(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	a, va := buf(t, m, 0, PageSize)
	_, other := buf(t, m, 0, 8*kiB)
	v1 := m.Write(nil, 0, va, 8) // a dirty line; no clean before the DMA
	v2 := m.DeviceWrite("dev", false, a, 64)
	checkFresh(t, "device data in DRAM", m.DeviceRead("dev", false, a, 64))
	m.Read(nil, 0, other, 8*kiB) // evicts the dirty line
	if m.DRAMVersion(a) != v1 || m.DRAMVersion(a+8) != 0 {
		t.Errorf("DRAM after eviction: %d %d, want %d 0", m.DRAMVersion(a), m.DRAMVersion(a+8), v1)
	}
	checkStale(t, "device data destroyed", m.DeviceRead("dev", false, a, 64), a, v1, v2)
	verified(t, m)
}

func TestPrefetch(t *testing.T) {
	spec := testSpec(1 * giB)
	spec.Nodes[0].Cache.Prefetch.V = 2
	tests := []struct {
		name    string
		read    uint64 // offset in the page read (1 byte)
		warm    []uint64
		present []uint64
		absent  []uint64
	}{
		{"next two lines", 0, nil, []uint64{0, 64, 128}, []uint64{192}},
		{"stops at the page end", PageSize - 128, nil, []uint64{PageSize - 128, PageSize - 64}, []uint64{PageSize, PageSize + 64}},
		{"last line of a page", PageSize - 64, nil, []uint64{PageSize - 64}, []uint64{PageSize}},
		{"a hit prefetches nothing", 64, []uint64{64}, []uint64{64}, []uint64{128, 192}}, // warming prefetched 128 and 192; they are invalidated
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t, spec, Options{})
			pa, va := buf(t, m, 0, 2*PageSize)
			v := m.DeviceWrite("dev", false, pa, 2*PageSize)
			for _, w := range tc.warm {
				m.Read(nil, 0, va+VirtAddr(w), 1)
				m.Invalidate(nil, pa+PhysAddr(w)+64, 128)
			}
			m.Read(nil, 0, va+VirtAddr(tc.read), 1)
			for _, off := range tc.present {
				checkLine(t, m, 0, pa+PhysAddr(off), lineWant{v, true, false})
			}
			for _, off := range tc.absent {
				checkLine(t, m, 0, pa+PhysAddr(off), lineWant{})
			}
			verified(t, m)
		})
	}
}

// TestFromDeviceNeedsSecondInvalidate: the prefetcher brings lines of a
// buffer the device owns into the cache (the CPU touched a neighbour),
// so DMA_FROM_DEVICE must invalidate again after the device wrote.
func TestFromDeviceNeedsSecondInvalidate(t *testing.T) {
	spec := testSpec(1 * giB)
	spec.Nodes[0].Cache.Prefetch.V = 4
	for _, second := range []bool{false, true} {
		m := newMem(t, spec, Options{})
		page, va := buf(t, m, 0, PageSize)
		b := page + 1024                          // the DMA buffer, 1 KiB, after other data
		m.Invalidate(nil, b, 1024)                // dma_map_single(FROM_DEVICE)
		m.Read(nil, 0, va+1024-64, 8)             // a neighbour: prefetches b's first lines
		v := m.DeviceWrite("dev", false, b, 1024) // the DMA
		if second {
			m.Invalidate(nil, b, 1024) // dma_unmap_single(FROM_DEVICE)
		}
		a := m.Read(nil, 0, m.PhysToVirt(b), 1024)
		if second {
			checkFresh(t, "with the second invalidate", a)
		} else {
			checkStale(t, "without the second invalidate", a, b, 0, v)
		}
		verified(t, m)
	}
}

func TestDeviceAccessCoherence(t *testing.T) {
	tests := []struct {
		name     string
		coherent bool
	}{{"coherent", true}, {"non-coherent", false}}
	for _, tc := range tests {
		t.Run(tc.name+" write", func(t *testing.T) {
			m := newMem(t, testSpec(1*giB), Options{})
			pa, va := buf(t, m, 0, PageSize)
			m.Read(nil, 0, va+128, 64)   // a clean copy
			v1 := m.Write(nil, 0, va, 8) // a dirty line the device write half covers
			v2 := m.DeviceWrite("dev", tc.coherent, pa+8, 184)
			if tc.coherent {
				// The snoop wrote the dirty line back, then invalidated.
				checkLine(t, m, 0, pa, lineWant{})
				checkLine(t, m, 0, pa+128, lineWant{})
				if m.DRAMVersion(pa) != v1 || m.DRAMVersion(pa+8) != v2 {
					t.Error("DRAM after a coherent write")
				}
				checkFresh(t, "CPU read", m.Read(nil, 0, va, 192))
			} else {
				checkLine(t, m, 0, pa, lineWant{v1, true, true})
				checkLine(t, m, 0, pa+128, lineWant{0, true, false})
				checkStale(t, "CPU read", m.Read(nil, 0, va, 192), pa+8, 0, v2)
				m.Invalidate(nil, pa, 192) // loses v1: it was never written back
				checkStale(t, "after invalidate", m.Read(nil, 0, va, 192), pa, 0, v1)
			}
			verified(t, m)
		})
		t.Run(tc.name+" read", func(t *testing.T) {
			m := newMem(t, testSpec(1*giB), Options{})
			pa, va := buf(t, m, 0, PageSize)
			v0 := m.DeviceWrite("dev", false, pa, PageSize)
			v1 := m.Write(nil, 0, va+70, 10)
			a := m.DeviceRead("dev", tc.coherent, pa, PageSize)
			if tc.coherent {
				checkFresh(t, "device read", a)
			} else {
				checkStale(t, "device read", a, pa+70, v0, v1)
			}
			// A snooping read leaves the cache as it was.
			checkLine(t, m, 0, pa+70, lineWant{v1, true, true})
			verified(t, m)
		})
	}
}

// TestCoherentReadTwoCaches: a snooping device read takes dirty lines
// from both nodes' caches, node 1's below node 0's in the range.
func TestCoherentReadTwoCaches(t *testing.T) {
	m := newMem(t, testSpec(1*giB, 1*giB), Options{Payload: true})
	pa, va := buf(t, m, 0, PageSize)
	m.DeviceWrite("dev", false, pa, PageSize)
	m.WriteBytes(nil, 1, va+8, []byte{1, 2, 3})
	m.WriteBytes(nil, 0, va+200, []byte{4, 5})
	got := make([]byte, 256)
	a := m.DeviceReadBytes("dev", true, pa, got)
	checkFresh(t, "device read", a)
	want := make([]byte, 256)
	copy(want[8:], []byte{1, 2, 3})
	copy(want[200:], []byte{4, 5})
	if !bytes.Equal(got, want) {
		t.Errorf("device read %v, want %v", got, want)
	}
	verified(t, m)
}

func TestStaleExactVersions(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	pa, va := buf(t, m, 0, PageSize)
	v1 := m.Write(nil, 0, va, 64)
	v2 := m.DeviceWrite("dev", false, pa+32, 64)
	checkStale(t, "CPU read", m.Read(nil, 0, va, 128), pa+32, v1, v2)
	checkFresh(t, "before the device's bytes", m.Read(nil, 0, va, 32))
	// Line [64, 128) was filled after the device wrote: fresh.
	checkFresh(t, "second line", m.Read(nil, 0, va+96, 32))
	checkStale(t, "device read", m.DeviceRead("dev", false, pa, 128), pa, 0, v1)
	if v3 := m.Write(nil, 0, va+40, 1); v3 != v2+1 {
		t.Errorf("versions are one global counter: %d after %d", v3, v2)
	}
}

func TestMaintenance(t *testing.T) {
	tests := []struct {
		name  string
		op    func(m *Memory, p *sim.Proc, pa PhysAddr, size uint64)
		cost  sim.Time // per line
		line  lineWant // the written line afterwards
		dram  bool     // DRAM holds the write afterwards
		fresh bool     // a CPU read afterwards is fresh
	}{
		{"clean", (*Memory).Clean, 10 * sim.Nanosecond, lineWant{1, true, false}, true, true},
		{"invalidate", (*Memory).Invalidate, 4 * sim.Nanosecond, lineWant{}, false, false},
		{"flush", (*Memory).Flush, 10 * sim.Nanosecond, lineWant{}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t, testSpec(1*giB, 1*giB), Options{})
			pa, va := buf(t, m, 0, 2*PageSize)
			pb := pa + PageSize
			m.Write(nil, 0, va, 64)
			m.Read(nil, 1, m.PhysToVirt(pb), 64) // node 1's cache holds pb
			took := inProc(m, func(p *sim.Proc) { tc.op(m, p, pa, 2*PageSize) })
			if want := 128 * tc.cost; took != want {
				t.Errorf("took %v for 128 lines, want %v", took, want)
			}
			checkLine(t, m, 0, pa, tc.line)
			if _, present, _ := m.CacheLine(1, pb); present == (tc.name != "clean") {
				t.Errorf("node 1's line present %v: maintenance reaches every node", present)
			}
			if (m.DRAMVersion(pa) == 1) != tc.dram {
				t.Errorf("DRAM version %d", m.DRAMVersion(pa))
			}
			if a := m.Read(nil, 0, va, 64); a.Stale == tc.fresh {
				t.Errorf("read after: stale %v", a.Stale)
			}
			// Every line of the range costs, cached or not, and a line only
			// partly inside counts whole.
			took = inProc(m, func(p *sim.Proc) { tc.op(m, p, pa+63, 2) })
			if want := 2 * tc.cost; took != want {
				t.Errorf("two partial lines took %v, want %v", took, want)
			}
			verified(t, m)
		})
	}
}

func TestUncached(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	pa, lin := buf(t, m, 0, PageSize)
	uc, err := m.Remap(pa, PageSize, Uncached)
	if err != nil {
		t.Fatal(err)
	}
	var v1, v2 Version
	var a Access
	took := inProc(m, func(p *sim.Proc) { v1 = m.Write(p, 0, uc, 1000) })
	if took != sim.Microsecond {
		t.Errorf("1000 uncached bytes at 1 GB/s took %v", took)
	}
	if m.DRAMVersion(pa) != v1 || m.CacheStats(0).Used != 0 {
		t.Error("an uncached write goes to DRAM, past the cache")
	}
	checkFresh(t, "non-coherent device read", m.DeviceRead("dev", false, pa, 1000))
	v2 = m.DeviceWrite("dev", false, pa, 64)
	took = inProc(m, func(p *sim.Proc) { a = m.Read(p, 0, uc, 1000) })
	checkFresh(t, "uncached read sees the device", a)
	if took != sim.Microsecond || a.Attr != Uncached {
		t.Errorf("uncached read took %v (%v)", took, a.Attr)
	}
	// A dirty line of a cached alias is invisible to the uncached view.
	v3 := m.Write(nil, 0, lin+128, 8)
	checkStale(t, "uncached read beside a dirty alias", m.Read(nil, 0, uc, 1000), pa+128, v1, v3)
	took = inProc(m, func(p *sim.Proc) { m.Read(p, 0, lin, 1000) })
	if took != 100*sim.Nanosecond {
		t.Errorf("1000 cached bytes at 10 GB/s took %v", took)
	}
	_ = v2
	verified(t, m)
}

func TestUncachedRateDefault(t *testing.T) {
	spec := testSpec(1 * giB)
	spec.Nodes[0].Cache.UncachedRate = platform.Param[platform.Rate]{}
	m := newMem(t, spec, Options{})
	pa, _ := buf(t, m, 0, PageSize)
	uc, _ := m.Remap(pa, PageSize, Uncached)
	if took := inProc(m, func(p *sim.Proc) { m.Read(p, 0, uc, 1000) }); took != sim.Microsecond {
		t.Errorf("without an uncached rate, MemcpyRate/10 = 1 GB/s: took %v", took)
	}
}

func TestCrossNode(t *testing.T) {
	m := newMem(t, testSpec(1*giB, 1*giB), Options{})
	pa, va := buf(t, m, 0, PageSize)
	v1 := m.Write(nil, 0, va, 8)
	checkFresh(t, "node 1 reads node 0's dirty line", m.Read(nil, 1, va, 64))
	checkLine(t, m, 0, pa, lineWant{v1, true, false}) // written back, kept
	checkLine(t, m, 1, pa, lineWant{v1, true, false})
	if m.DRAMVersion(pa) != v1 {
		t.Error("the snoop did not write back")
	}
	verified(t, m)
	v2 := m.Write(nil, 1, va+4, 8)
	checkLine(t, m, 0, pa, lineWant{}) // node 0's copy invalidated
	checkLine(t, m, 1, pa+4, lineWant{v2, true, true})
	checkLine(t, m, 1, pa, lineWant{v1, true, true})
	verified(t, m)
	checkFresh(t, "node 0 reads node 1's dirty line", m.Read(nil, 0, va, 64))
	m.Write(nil, 0, va, 64)
	checkLine(t, m, 1, pa, lineWant{})
	verified(t, m)
}

func TestCPUAccessCost(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	_, va := buf(t, m, 0, 1*miB)
	want := sim.TransferTime(1*miB, 10e9)
	if took := inProc(m, func(p *sim.Proc) { m.Write(p, 0, va, 1*miB) }); took != want {
		t.Errorf("write of 1 MiB took %v, want %v", took, want)
	}
	if took := inProc(m, func(p *sim.Proc) { m.Read(p, 0, va, 1*miB) }); took != want {
		t.Errorf("read of 1 MiB took %v, want %v", took, want)
	}
	if took := inProc(m, func(p *sim.Proc) { m.CopyPhys(p, 0, 0x200000, 0x300000, 1*miB) }); took != want {
		t.Errorf("copy of 1 MiB took %v, want %v", took, want)
	}
	if took := inProc(m, func(p *sim.Proc) { m.Read(p, 0, 0x1000, 64) }); took != 0 {
		t.Errorf("a failed access took %v", took)
	}
}

func TestObservers(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	var got []Access
	m.Hooks.Hook(func(a *Access) { got = append(got, *a) })
	pa, va := buf(t, m, 0, PageSize)
	vm, _ := m.Vmalloc(0, 2*PageSize)
	inProc(m, func(p *sim.Proc) {
		m.Write(p, 0, va, 16)
		m.DeviceRead("nic0", false, pa, 16)
		m.DeviceWrite("nic0", true, pa+64, 16)
		m.Read(p, 0, vm+PageSize-8, 16)
		m.CopyPhys(p, 0, pa+128, pa, 16)
		m.Read(p, 0, 0x1000, 8)
		m.Write(p, 3, va, 8)
		m.DeviceWrite("nic0", false, 5*giB, 8)
	})
	want := []struct {
		kind  AccessKind
		proc  string
		phys  PhysAddr
		size  uint64
		stale bool
		err   error
	}{
		{CPUWrite, "cpu", pa, 16, false, nil},
		{DeviceRead, "nic0", pa, 16, true, nil},
		{DeviceWrite, "nic0", pa + 64, 16, false, nil},
		{CPURead, "cpu", 0, 8, false, nil}, // two pieces of the vmalloc area
		{CPURead, "cpu", 0, 8, false, nil},
		{CPURead, "cpu", pa, 16, false, nil},
		{CPUWrite, "cpu", pa + 128, 16, false, nil},
		{CPURead, "cpu", 0, 8, false, ErrBadAddr},
		{CPUWrite, "cpu", 0, 8, false, ErrInvalid},
		{DeviceWrite, "nic0", 5 * giB, 8, false, ErrBadAddr},
	}
	if len(got) != len(want) {
		t.Fatalf("%d accesses, want %d: %+v", len(got), len(want), got)
	}
	segs, _, _, _ := m.Translate(vm+PageSize-8, 16)
	want[3].phys, want[4].phys = segs[0].Start, segs[1].Start
	for i, w := range want {
		g := got[i]
		if g.Kind != w.kind || g.Proc != w.proc || g.Phys != w.phys || g.Size != w.size || g.Stale != w.stale || !errors.Is(g.Err, w.err) {
			t.Errorf("access %d: %v %q %v %d stale %v err %v; want %v %q %v %d stale %v err %v",
				i, g.Kind, g.Proc, g.Phys, g.Size, g.Stale, g.Err, w.kind, w.proc, w.phys, w.size, w.stale, w.err)
		}
	}
	if got[0].Version != 1 || got[2].Version != 2 || got[6].Version != 3 || got[2].Node != 0 || !got[2].Coherent {
		t.Errorf("versions/node/coherent: %+v %+v %+v", got[0], got[2], got[6])
	}
	if got[4].VA != vm+PageSize {
		t.Errorf("second piece's VA %v", got[4].VA)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Time < got[i-1].Time {
			t.Errorf("access %d reported before %d's time", i, i-1)
		}
	}
}

// TestUncachedRemapFlushesAliases: pages whose cached alias holds dirty
// lines, remapped uncached, are flushed first, so a later uncached store
// is not shadowed by the old lines for a snooping device.
func TestUncachedRemapFlushesAliases(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	va, err := m.Kmalloc(0, PageSize)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := m.VirtToPhys(va)
	m.Write(nil, 0, va, PageSize) // dirty lines through the cached alias
	uc, err := m.Remap(pa, PageSize, Uncached)
	if err != nil {
		t.Fatal(err)
	}
	v := m.Write(nil, 0, uc, PageSize) // straight to DRAM
	if a := m.DeviceRead("dev", true, pa, PageSize); a.Stale || m.Latest(pa) != v {
		t.Fatalf("coherent device read after an uncached store: stale %v (got %d, want %d)", a.Stale, a.Got, a.Want)
	}
}

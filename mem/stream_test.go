package mem

import (
	"runtime"
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// streamSpec is a 128 GiB node with a 8 MiB cache and a prefetcher.
func streamSpec() *platform.Spec {
	s := testSpec(128 * giB)
	s.Nodes[0].Cache.Size.V = 8 * miB
	s.Nodes[0].Cache.Prefetch.V = 2
	return s
}

// stream moves n buffers of 64 KiB from a non-coherent device to the CPU
// through 256 recycled buffers, as a streaming DMA_FROM_DEVICE ring does
// (invalidate, the device writes, invalidate, the CPU reads), and
// returns the largest footprint seen and how many reads were stale.
func stream(m *Memory, p *sim.Proc, n int) (maxFoot, stale int) {
	const bufs, size = 256, 64 * kiB
	var pas [bufs]PhysAddr
	for i := range pas {
		pa, err := m.AllocPages(0, size, ZoneNormal)
		if err != nil {
			panic(err)
		}
		pas[i] = pa
	}
	for i := range n {
		pa := pas[i%bufs]
		m.Invalidate(p, pa, size)
		m.DeviceWrite("nic0", false, pa, size)
		m.Invalidate(p, pa, size)
		if a := m.Read(p, 0, m.PhysToVirt(pa), size); a.Stale {
			stale++
		}
		if i%4096 == 0 {
			maxFoot = max(maxFoot, m.Footprint())
		}
	}
	return max(maxFoot, m.Footprint()), stale
}

func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// TestStreaming64GiB: 64 GiB through the model without payload costs a
// bounded number of spans and a small heap.
func TestStreaming64GiB(t *testing.T) {
	n := 1 << 20 // 1M × 64 KiB = 64 GiB
	if testing.Short() {
		n = 1 << 16
	}
	m := newMem(t, streamSpec(), Options{})
	var foot, stale int
	var took sim.Time
	took = inProc(m, func(p *sim.Proc) { foot, stale = stream(m, p, n) })
	if stale != 0 {
		t.Errorf("%d stale reads with both invalidates", stale)
	}
	// Per buffer: one DRAM span, one latest span, one cached run.
	if foot > 3*256+8 {
		t.Errorf("footprint %d spans for 256 buffers", foot)
	}
	if h := heapMiB(); h > 100 {
		t.Errorf("heap %.1f MiB after streaming", h)
	}
	runtime.KeepAlive(m) // the heap measured holds the model
	if f := len(m.caches[0].fifo); f > 2*256+64 {
		t.Errorf("%d fill records kept", f)
	}
	want := sim.Time(n) * (2*1024*4*sim.Nanosecond + sim.TransferTime(64*kiB, 10e9))
	if took != want {
		t.Errorf("virtual time %v, want %v", took, want)
	}
}

// TestFillRecordsBoundedWithoutEviction: a receive ring in a cache that
// never fills up (no eviction consumes a record) still keeps its fill
// records bounded by its lines: trim drops the records of refilled
// lines.
func TestFillRecordsBoundedWithoutEviction(t *testing.T) {
	spec := testSpec(1*giB, 1*giB)
	spec.Nodes[0].Cache.Size.V = 105 * miB
	spec.Nodes[0].Cache.Prefetch.V = 1
	m := newMem(t, spec, Options{})
	const bufs, stride, size = 256, 2048, 1500
	pa, va := buf(t, m, 0, bufs*stride)
	most := 0
	for i := range 20 * bufs {
		k := uint64(i % bufs)
		m.DeviceWrite("nic", true, pa+PhysAddr(k*stride), size)
		m.Read(nil, 0, va+VirtAddr(k*stride), size)
		most = max(most, len(m.caches[0].fifo))
	}
	c := m.caches[0]
	if c.evictions != 0 {
		t.Fatalf("%d evictions in a cache that holds the ring", c.evictions)
	}
	if lim := 2*c.lines.len() + 33; most > lim {
		t.Fatalf("%d fill records kept for %d spans of lines (at most %d)", most, c.lines.len(), lim)
	}
}

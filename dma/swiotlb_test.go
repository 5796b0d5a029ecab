package dma

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// checkSlots verifies the free-run encoding against a recount.
func checkSlots(t *testing.T, tl *swiotlb) {
	t.Helper()
	used := 0
	for i := len(tl.slots) - 1; i >= 0; i-- {
		s := tl.slots[i]
		want := 0
		if s.orig == invalidPhys {
			want = 1
			if j := i + 1; j < len(tl.slots) && j%ioTLBSegSize != 0 {
				want += tl.slots[j].list
			}
		} else {
			used++
		}
		if s.list != want {
			t.Fatalf("slot %d: list %d, want %d", i, s.list, want)
		}
	}
	if used != tl.used {
		t.Fatalf("used %d, counted %d", tl.used, used)
	}
}

func TestSwiotlbSlots(t *testing.T) {
	const start = 1 << 30
	tl := newSwiotlb(start, 4*ioTLBSegSize)
	checkSlots(t, tl)
	noBoundary := ^uint64(0)

	a, ok := tl.alloc(0x1_0000_0000, 1500, noBoundary)
	if !ok || a != start {
		t.Fatalf("first alloc at %v, %v", a, ok)
	}
	// A page or more is page-aligned: slot 1 is skipped.
	b, ok := tl.alloc(0x2_0000_0000, 8192, noBoundary)
	if !ok || b != start+4096 {
		t.Fatalf("page-sized alloc at %#x, want %#x", uint64(b), start+4096)
	}
	checkSlots(t, tl)
	if orig, remain, ok := tl.lookup(b + 5000); !ok || orig != 0x2_0000_0000+5000 || remain != 8192-5000 {
		t.Errorf("lookup inside: %v %d %v", orig, remain, ok)
	}
	if _, _, ok := tl.lookup(start + 2048); ok {
		t.Error("lookup of a free slot succeeded")
	}
	if tl.release(b+ioTLBSize) || tl.release(b+1) {
		t.Error("released from the middle of a mapping")
	}
	if !tl.release(b) || tl.release(b) {
		t.Error("release of the mapping's start: want once")
	}
	checkSlots(t, tl)

	// At most one segment: 256 KiB fits, a byte more does not.
	if _, ok := tl.alloc(0, MaxBounceSize+1, noBoundary); ok {
		t.Error("a mapping over 256 KiB got slots")
	}
	var segs []mem.PhysAddr
	for range 3 {
		s, ok := tl.alloc(0, MaxBounceSize, noBoundary)
		if !ok || (uint64(s)-start)%(MaxBounceSize) != 0 {
			t.Fatalf("segment alloc at %v, %v", s, ok)
		}
		segs = append(segs, s)
	}
	checkSlots(t, tl)
	// Segment 0 has 127 free slots, not 128: full for a whole segment.
	if _, ok := tl.alloc(0, MaxBounceSize, noBoundary); ok {
		t.Error("fifth segment-sized mapping fit")
	}
	if !tl.release(a) {
		t.Fatal("release a")
	}
	if s, ok := tl.alloc(0, MaxBounceSize, noBoundary); !ok || s != start {
		t.Fatalf("after release: %v, %v", s, ok)
	}
	for _, s := range segs {
		tl.release(s)
	}
	tl.release(start)
	checkSlots(t, tl)
	if tl.used != 0 || tl.highWater != 4*ioTLBSegSize {
		t.Errorf("used %d, high water %d", tl.used, tl.highWater)
	}

	// A device whose segments may not cross 64 KiB gets a run that does
	// not.
	tl = newSwiotlb(start, 2*ioTLBSegSize)
	tl.alloc(0, 60<<10, noBoundary)
	s, ok := tl.alloc(0, 8<<10, 64<<10-1)
	if !ok || (uint64(s)-start)/(64<<10) != (uint64(s)+8<<10-1-start)/(64<<10) {
		t.Errorf("boundary-respecting alloc at %#x", uint64(s)-start)
	}
}

// swiotlbRig is 2s-4gpu-pcie with a small bounce pool: nic2 has a 32-bit
// mask.
func swiotlbRig(t *testing.T, pool platform.Bytes, payload bool, nonCoherent ...string) *rig {
	spec := server(t, nonCoherent...)
	spec.SWIOTLB.V = pool
	return newRig(t, spec, payload)
}

func TestSwiotlbBounce(t *testing.T) {
	r := swiotlbRig(t, 1<<20, true)
	d := r.dev("nic2")
	st := r.dma.Swiotlb()
	if st.Size != 1<<20 || st.Start+mem.PhysAddr(st.Size) > 4<<30 {
		t.Fatalf("pool %+v: want 1 MiB below 4 GiB", st)
	}
	rate := float64(r.m.Spec.Nodes[0].MemcpyRate.V)
	const size = 1500
	pa, va := r.highPage(mem.PageSize)
	inPool := func(h mem.DMAAddr) bool {
		return h != MappingErrorAddr && uint64(h) >= uint64(st.Start) && uint64(h)+size <= uint64(st.Start)+st.Size
	}
	r.run(func(p *sim.Proc) {
		// TO_DEVICE: map copies in; the device reads the CPU's bytes
		// at a handle below 4 GiB; unmap copies nothing back.
		r.mem.WriteBytes(p, 0, va, fill("tx", size))
		t0 := p.Now()
		h := d.MapSingle(p, va, size, ToDevice)
		if !inPool(h) {
			t.Fatalf("handle %v not in the pool", h)
		}
		// The CPU has just written the buffer: the copy reads its cache.
		if got, want := p.Now()-t0, sim.TransferTime(size, rate); got != want {
			t.Errorf("map cost %v, want one memcpy of %d cached bytes, %v", got, size, want)
		}
		if e := r.last(); !e.Bounced || e.Phys != pa || e.Addr != h {
			t.Errorf("map event %+v", e)
		}
		got := make([]byte, size)
		if _, err := d.ReadBytes(h, got); err != nil || !bytes.Equal(got, fill("tx", size)) {
			t.Errorf("device read %q, %v", got[:8], err)
		}
		t0 = p.Now()
		d.UnmapSingle(p, h, size, ToDevice)
		if p.Now() != t0 {
			t.Errorf("TO_DEVICE unmap cost %v, want no copy", p.Now()-t0)
		}
		if r.dma.Swiotlb().Used != 0 {
			t.Error("slots not released")
		}

		// FROM_DEVICE: the map still copies in (no leak of old slot
		// contents); the device's bytes reach the buffer at unmap.
		r.mem.WriteBytes(p, 0, va, fill("stale", size))
		h = d.MapSingle(p, va, size, FromDevice)
		if _, err := d.ReadBytes(h, got); err != nil || !bytes.Equal(got, fill("stale", size)) {
			t.Errorf("slot after FROM_DEVICE map holds %q, want the buffer's bytes", got[:8])
		}
		if _, err := d.WriteBytes(h, fill("rx", size)); err != nil {
			t.Fatal(err)
		}
		r.mem.ReadBytes(p, 0, va, got)
		if !bytes.Equal(got, fill("stale", size)) {
			t.Errorf("buffer changed before unmap: %q", got[:8])
		}
		t0 = p.Now()
		d.UnmapSingle(p, h, size, FromDevice)
		// The device wrote the slot: the copy back reads DRAM.
		if got, want := p.Now()-t0, memcpyTime(r, size, rate); got != want {
			t.Errorf("FROM_DEVICE unmap cost %v, want %v", got, want)
		}
		r.mem.ReadBytes(p, 0, va, got)
		if !bytes.Equal(got, fill("rx", size)) {
			t.Errorf("after unmap the CPU reads %q, want the device's bytes", got[:8])
		}

		// Syncs on a BIDIRECTIONAL mapping copy both ways.
		h = d.MapSingle(p, va, size, Bidirectional)
		d.WriteBytes(h, fill("dev1", size))
		d.SyncSingleForCPU(p, h, size, Bidirectional)
		r.mem.ReadBytes(p, 0, va, got)
		if !bytes.Equal(got, fill("dev1", size)) {
			t.Errorf("sync_for_cpu: CPU reads %q", got[:8])
		}
		r.mem.WriteBytes(p, 0, va, fill("cpu2", size))
		d.SyncSingleForDevice(p, h, size, Bidirectional)
		d.ReadBytes(h, got)
		if !bytes.Equal(got, fill("cpu2", size)) {
			t.Errorf("sync_for_device: device reads %q", got[:8])
		}
		// A TO_DEVICE sync for the CPU copies nothing back.
		d.WriteBytes(h, fill("dev3", size))
		d.SyncSingleForCPU(p, h, size, ToDevice)
		r.mem.ReadBytes(p, 0, va, got)
		if !bytes.Equal(got, fill("cpu2", size)) {
			t.Errorf("TO_DEVICE sync_for_cpu copied back: %q", got[:8])
		}
		d.UnmapSingle(p, h, size, Bidirectional)

		// Memory the mask reaches does not bounce.
		lowPA, err := r.mem.AllocPages(0, size, mem.ZoneDMA32)
		if err != nil {
			t.Fatal(err)
		}
		lowVA := r.mem.PhysToVirt(lowPA)
		if h := d.MapSingle(p, lowVA, size, ToDevice); h != mem.DMAAddr(lowPA) || r.last().Bounced {
			t.Errorf("low buffer mapped at %v (bounced %v), want %v", h, r.last().Bounced, lowPA)
		}
	})
}

func TestSwiotlbExhaustion(t *testing.T) {
	r := swiotlbRig(t, 1<<20, false)
	d := r.dev("nic2")
	_, va := r.highPage(2 << 20)
	r.run(func(p *sim.Proc) {
		var hs []mem.DMAAddr
		for i := range 4 {
			h := d.MapSingle(p, va+mem.VirtAddr(i*MaxBounceSize), MaxBounceSize, ToDevice)
			if d.MappingError(h) {
				t.Fatalf("mapping %d failed: %s", i, r.events[len(r.events)-2].Warn)
			}
			hs = append(hs, h)
		}
		if h := d.MapSingle(p, va, 2048, ToDevice); !d.MappingError(h) {
			t.Fatalf("full pool mapped at %v", h)
		}
		e := r.events[len(r.events)-2]
		if !e.Failed || !strings.Contains(e.Warn, "swiotlb buffer is full") {
			t.Errorf("failed map event: %+v", e)
		}
		d.UnmapSingle(p, hs[0], MaxBounceSize, ToDevice)
		if h := d.MapSingle(p, va, MaxBounceSize+1, ToDevice); h != MappingErrorAddr {
			t.Error("a mapping over 256 KiB bounced")
		}
		if h := d.MapSingle(p, va, MaxBounceSize, ToDevice); h != hs[0] {
			t.Errorf("after an unmap: %v, want the freed slots %v", h, hs[0])
		}
		if st := r.dma.Swiotlb(); st.Used != st.Slots || st.HighWater != st.Slots {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestSwiotlbNonCoherent: on a non-coherent 32-bit device the cache
// operations apply to the slot, and the copies go through the cache.
func TestSwiotlbNonCoherent(t *testing.T) {
	r := swiotlbRig(t, 1<<20, true, "nic2")
	d := r.dev("nic2")
	_, va := r.highPage(mem.PageSize)
	r.run(func(p *sim.Proc) {
		r.mem.WriteBytes(p, 0, va, fill("frame", 1500))
		h := d.MapSingle(p, va, 1500, ToDevice)
		got := make([]byte, 1500)
		if a, _ := d.ReadBytes(h, got); a.Stale || !bytes.Equal(got, fill("frame", 1500)) {
			t.Errorf("device read %q stale=%v: the bounce copy was not flushed", got[:8], a.Stale)
		}
		d.UnmapSingle(p, h, 1500, ToDevice)

		h = d.MapSingle(p, va, 1500, FromDevice)
		d.WriteBytes(h, fill("reply", 1500))
		d.UnmapSingle(p, h, 1500, FromDevice)
		if a := r.mem.ReadBytes(p, 0, va, got); a.Stale || !bytes.Equal(got, fill("reply", 1500)) {
			t.Errorf("CPU read %q stale=%v", got[:8], a.Stale)
		}
	})
}

func TestSwiotlbForceBounce(t *testing.T) {
	r := newRig(t, server(t), false)
	d := r.dev("nic0")
	if r.dma.Swiotlb().Slots == 0 {
		t.Fatal("2s-4gpu-pcie has a 32-bit NIC: the pool should be reserved at boot")
	}
	if err := d.SetForceBounce(true); err != nil {
		t.Fatal(err)
	}
	pa, va := r.kmalloc(512)
	r.run(func(p *sim.Proc) {
		h := d.MapSingle(p, va, 512, ToDevice)
		if h == mem.DMAAddr(pa) || !r.last().Bounced {
			t.Errorf("forced bounce mapped in place at %v", h)
		}
		d.UnmapSingle(p, h, 512, ToDevice)
	})
}

func TestSwiotlbLazyPool(t *testing.T) {
	spec := zynq(t)
	r := newRig(t, spec, false)
	if r.dma.Swiotlb().Slots != 0 {
		t.Fatal("zynq-7000 has all memory under every mask: no pool at boot")
	}
	d := r.dev("gem0")
	if err := d.SetForceBounce(true); err != nil {
		t.Fatal(err)
	}
	if st := r.dma.Swiotlb(); uint64(st.Size) != uint64(spec.SwiotlbSize()) {
		t.Errorf("pool %+v", st)
	}
}

// memcpyTime is one CPU copy of size bytes on node 0 as the machine's
// copy model makes it (machine.CPUCopy): the DRAM's latency, then the
// bytes at the memcpy rate.
func memcpyTime(r *rig, size int, rate float64) sim.Time {
	host, _ := r.m.HostMemory(0)
	route, _ := r.m.Route(host, host)
	return route.Latency() + sim.TransferTime(float64(size), rate)
}

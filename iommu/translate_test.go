package iommu

import (
	"errors"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestIOTLBHugePages reads 8 MiB page by page through 4 KiB and through
// 2 MiB mappings: the first misses once per 4 KiB page, the second once
// per 2 MiB page. The paging-structure caches make the first walk read
// every level down to the leaf, a walk in a new 2 MiB region of the same
// 1 GiB two tables, and every other one the leaf's table only.
func TestIOTLBHugePages(t *testing.T) {
	const size = 8 << 20
	tests := []struct {
		name       string
		leaves     uint64 // mapping granularity
		wantMisses uint64
		wantReads  uint64
	}{
		// 4 cold, 3 more 2 MiB regions at 2, the other 2044 at 1.
		{"4k", 4096, size / 4096, 4 + 3*2 + (size/4096 - 4)},
		// The 2 MiB leaf is at level 2: 3 cold, then 1 each.
		{"2m", 2 << 20, size / (2 << 20), 3 + 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Strict, DefaultParams())
			_, tr := r.attach("nic0", AttachOptions{})
			d := tr.Domain()
			pa := r.pages(size)
			for off := uint64(0); off < size; off += tc.leaves {
				if err := d.Map(mem.DMAAddr(1<<30+off), pa+mem.PhysAddr(off), tc.leaves, ProtRead); err != nil {
					t.Fatal(err)
				}
			}
			var cost sim.Time
			for off := uint64(0); off < size; off += 4096 {
				r, c, err := tr.ToPhys(nil, mem.DMAAddr(1<<30+off), 4096, false)
				if err != nil || len(r) != 1 || r[0].Start != pa+mem.PhysAddr(off) {
					t.Fatalf("ToPhys(+%#x) = %v, %v", off, r, err)
				}
				cost += c
			}
			st := d.Unit().IOTLB().Stats()
			if st.Misses != tc.wantMisses || st.Hits != size/4096-tc.wantMisses {
				t.Errorf("misses %d hits %d, want %d and %d", st.Misses, st.Hits, tc.wantMisses, size/4096-tc.wantMisses)
			}
			us := d.Unit().Stats()
			if us.Walks != tc.wantMisses || us.WalkReads != tc.wantReads {
				t.Errorf("walks %d reading %d tables, want %d and %d", us.Walks, us.WalkReads, tc.wantMisses, tc.wantReads)
			}
			p := DefaultParams()
			want := sim.Time(tc.wantReads)*p.WalkReadCost + sim.Time(st.Hits)*p.HitCost
			if cost != want {
				t.Errorf("translation cost %v, want %v", cost, want)
			}
		})
	}
}

func TestIOTLBLRU(t *testing.T) {
	p := DefaultParams()
	p.IOTLBEntries, p.IOTLBWays = 2, 2 // one set
	r := newRig(t, Strict, p)
	_, tr := r.attach("nic0", AttachOptions{})
	pa := r.pages(4 * 4096)
	if err := tr.Domain().Map(0x1000, pa, 3*4096, ProtRead); err != nil {
		t.Fatal(err)
	}
	// A, B, A, C (evicts B, the least recently used), A hits, B misses.
	for i, iova := range []uint64{0x1000, 0x2000, 0x1000, 0x3000, 0x1000, 0x2000} {
		if _, _, err := tr.ToPhys(nil, mem.DMAAddr(iova), 8, false); err != nil {
			t.Fatal(i, err)
		}
	}
	if st := tr.Domain().Unit().IOTLB().Stats(); st.Hits != 2 || st.Misses != 4 {
		t.Errorf("hits %d misses %d, want 2 and 4", st.Hits, st.Misses)
	}
}

// TestStrictAndLazy: the device reads a buffer, the driver unmaps it,
// the device reads it again. Strict mode faults at once; lazy mode
// still translates through the stale IOTLB entry (reported) until the
// flush queue's timer flushes, then faults.
func TestStrictAndLazy(t *testing.T) {
	for _, mode := range []Mode{Strict, Lazy} {
		t.Run(mode.String(), func(t *testing.T) {
			r := newRig(t, mode, DefaultParams())
			dev, tr := r.attach("nic0", AttachOptions{PCI: true})
			pa := r.pages(4096)
			var errAfterUnmap, errAfterFlush error
			var unmapCost sim.Time
			r.run(func(p *sim.Proc) {
				a := dev.MapPage(p, pa, 0, 4096, dma.ToDevice)
				if _, err := dev.Read(a, 64); err != nil {
					t.Fatal(err)
				}
				t0 := p.Now()
				dev.UnmapPage(p, a, 4096, dma.ToDevice)
				unmapCost = p.Now() - t0
				_, errAfterUnmap = dev.Read(a, 64)
				p.Sleep(DefaultFlushTimeout)
				_, errAfterFlush = dev.Read(a, 64)
			})
			if !errors.Is(errAfterFlush, ErrFault) {
				t.Errorf("read after the flush: %v, want ErrFault", errAfterFlush)
			}
			stale := r.unit.Stats().StaleHits
			switch mode {
			case Strict:
				if !errors.Is(errAfterUnmap, ErrFault) || stale != 0 {
					t.Errorf("read after unmap: %v, %d stale hits; want ErrFault, 0", errAfterUnmap, stale)
				}
				if unmapCost != DefaultInvalidateCost {
					t.Errorf("strict unmap cost %v, want %v", unmapCost, DefaultInvalidateCost)
				}
			case Lazy:
				if errAfterUnmap != nil || stale != 1 || r.count(OpStaleHit) != 1 {
					t.Errorf("read after unmap: %v, %d stale hits; want a stale translation, 1", errAfterUnmap, stale)
				}
				if unmapCost != 0 || r.count(OpFlush) != 1 {
					t.Errorf("lazy unmap cost %v, %d flushes; want 0, 1 (by the timer)", unmapCost, r.count(OpFlush))
				}
			}
			if tr.Domain().Pending() != 0 || tr.Domain().IOVAs().Stats().Frees != 1 {
				t.Error("the IOVA was not freed")
			}
		})
	}
}

// TestLazyQueueFull: the 257th unmap finds the queue full and flushes
// it synchronously, paying one invalidation.
func TestLazyQueueFull(t *testing.T) {
	r := newRig(t, Lazy, DefaultParams())
	dev, tr := r.attach("nic0", AttachOptions{PCI: true})
	pa := r.pages(4096)
	var costs []sim.Time
	r.run(func(p *sim.Proc) {
		for range DefaultFlushQueueSize + 1 {
			a := dev.MapPage(p, pa, 0, 1500, dma.FromDevice)
			t0 := p.Now()
			dev.UnmapPage(p, a, 1500, dma.FromDevice)
			costs = append(costs, p.Now()-t0)
		}
		if got := tr.Domain().Pending(); got != 1 {
			t.Errorf("%d pending after the full queue's flush, want 1", got)
		}
	})
	if costs[DefaultFlushQueueSize-1] != 0 || costs[DefaultFlushQueueSize] != DefaultInvalidateCost {
		t.Errorf("unmap costs %v then %v, want 0 then %v", costs[DefaultFlushQueueSize-1], costs[DefaultFlushQueueSize], DefaultInvalidateCost)
	}
	if r.count(OpFlush) != 2 {
		t.Errorf("%d flushes, want 2 (queue full, then the timer)", r.count(OpFlush))
	}
}

// TestFaultChangesNothing: a write to an IOVA never mapped and a write
// through a DMA_TO_DEVICE (read-only) mapping both fault, and the
// memory's versions do not move.
func TestFaultChangesNothing(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	dev, _ := r.attach("nic0", AttachOptions{PCI: true})
	pa := r.pages(4096)
	r.run(func(p *sim.Proc) {
		a := dev.MapPage(p, pa, 0, 4096, dma.ToDevice)
		before := r.mem.Latest(pa)
		for _, c := range []struct {
			addr mem.DMAAddr
			want error
		}{{a + 1<<20, ErrFault}, {a, ErrPermission}} {
			if _, err := dev.Write(c.addr, 64); !errors.Is(err, c.want) {
				t.Errorf("write at %v: %v, want %v", c.addr, err, c.want)
			}
		}
		if _, err := dev.Read(a, 64); err != nil {
			t.Errorf("read through the read-only mapping: %v", err)
		}
		if got := r.mem.Latest(pa); got != before {
			t.Errorf("version %d after the faults, want %d", got, before)
		}
	})
	if r.count(OpFault) != 2 || r.unit.Stats().Faults != 2 {
		t.Errorf("%d fault events, %d counted; want 2", r.count(OpFault), r.unit.Stats().Faults)
	}
}

// TestMapSGMerges: four scattered pages map to one contiguous IOVA range
// and one DMA segment; unmapping with the returned count or the
// original one removes every page and frees the IOVA.
func TestMapSGMerges(t *testing.T) {
	for _, unmapCount := range []string{"returned", "original"} {
		t.Run(unmapCount, func(t *testing.T) {
			r := newRig(t, Strict, DefaultParams())
			dev, tr := r.attach("nic0", AttachOptions{PCI: true})
			sgl := make([]dma.Scatterlist, 4)
			for i := range sgl {
				sgl[i].SetPage(r.pages(2*4096)+4096, 4096, 0) // never contiguous
			}
			r.run(func(p *sim.Proc) {
				n := dev.MapSG(p, sgl, len(sgl), dma.Bidirectional)
				if n != 1 {
					t.Fatalf("MapSG = %d, want 1 merged segment", n)
				}
				if sgl[0].DMALength != 4*4096 || sgl[1].DMALength != 0 {
					t.Errorf("segment lengths %d, %d; want 16384, 0", sgl[0].DMALength, sgl[1].DMALength)
				}
				for i := range sgl {
					got, ok := tr.Phys(sgl[0].DMAAddress + mem.DMAAddr(i*4096))
					if !ok || got != sgl[i].Phys() {
						t.Errorf("page %d of the segment at %v, want %v", i, got, sgl[i].Phys())
					}
				}
				if _, err := dev.Write(sgl[0].DMAAddress, 4*4096); err != nil {
					t.Errorf("device write over the merged segment: %v", err)
				}
				count := n
				if unmapCount == "original" {
					count = len(sgl)
				}
				dev.UnmapSG(p, sgl, count, dma.Bidirectional)
				for i := range sgl {
					if _, ok := tr.Phys(sgl[0].DMAAddress + mem.DMAAddr(i*4096)); ok {
						t.Errorf("page %d still mapped", i)
					}
				}
			})
			if st := tr.Domain().IOVAs().Stats(); st.Frees != 1 {
				t.Errorf("%d IOVA frees, want 1", st.Frees)
			}
		})
	}
}

// TestMapSGSegmentLimit: entries not ending on a granule, or past the
// max segment size, start new segments.
func TestMapSGSegmentLimit(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	dev, _ := r.attach("nic0", AttachOptions{PCI: true})
	dev.SetMaxSegmentSize(2 * 4096)
	sgl := make([]dma.Scatterlist, 5)
	for i := range sgl {
		sgl[i].SetPage(r.pages(4096), 4096, 0)
	}
	sgl[2].Length = 100 // ends inside its granule: the next starts anew
	r.run(func(p *sim.Proc) {
		// {0,1} merge to the 8 KiB limit; 2 alone; {3,4}? 3 starts a
		// segment after 2's partial granule and 4 joins it.
		if n := dev.MapSG(p, sgl, len(sgl), dma.ToDevice); n != 3 {
			t.Errorf("MapSG = %d, want 3", n)
		}
		dev.UnmapSG(p, sgl, len(sgl), dma.ToDevice)
	})
}

// TestTransferChargesWalk: the DMA layer's transfer pays the IOTLB miss
// (a 4-level walk) the first time and a hit the second, before its bytes
// move.
func TestTransferChargesWalk(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	dev, _ := r.attach("nic0", AttachOptions{PCI: true})
	pa := r.pages(4096)
	var infos []dma.TransferInfo
	r.run(func(p *sim.Proc) {
		a := dev.MapPage(p, pa, 0, 4096, dma.FromDevice)
		for range 2 {
			info, err := dev.Transfer(p, &dma.Transfer{Name: "rx", Route: &fabric.Route{}, Bytes: 64, Write: []dma.Span{dma.BusSpan(a, 64)}})
			if err != nil {
				t.Fatal(err)
			}
			infos = append(infos, info)
		}
	})
	if want := 4 * DefaultWalkReadCost; infos[0].Translate != want || infos[0].Start-infos[0].Call != want {
		t.Errorf("first transfer: translation %v, started after %v; want %v both", infos[0].Translate, infos[0].Start-infos[0].Call, want)
	}
	if infos[1].Translate != DefaultHitCost {
		t.Errorf("second transfer: translation %v, want a hit's %v", infos[1].Translate, DefaultHitCost)
	}
}

// TestUnmapWrongAddress: a driver unmapping inside a 256 KiB mapping
// (not at the address it was given) unmaps from there on, and the IOVA
// it names, unknown to the allocator, is reported, not freed.
func TestUnmapWrongAddress(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	dev, tr := r.attach("nic0", AttachOptions{PCI: true})
	pa := r.pages(256 << 10)
	r.run(func(p *sim.Proc) {
		a := dev.MapPage(p, pa, 0, 256<<10, dma.ToDevice)
		dev.UnmapPage(p, a+4096, 256<<10-4096, dma.ToDevice)
		if _, ok := tr.Phys(a); !ok {
			t.Error("the first page was unmapped")
		}
		if _, ok := tr.Phys(a + 4096); ok {
			t.Error("the second page is still mapped")
		}
	})
	var warned bool
	for _, e := range r.events {
		warned = warned || (e.Op == OpFlush && e.Warn != "")
	}
	if !warned || tr.Domain().IOVAs().Stats().Ranges != 1 {
		t.Errorf("warned %v, %d ranges allocated; want a warning and the range kept", warned, tr.Domain().IOVAs().Stats().Ranges)
	}
}

// TestCoherentThroughIOMMU: dma_alloc_coherent through a domain returns
// an IOVA (iommu_dma_alloc), the device reaches the buffer through it,
// and dma_free_coherent unmaps it.
func TestCoherentThroughIOMMU(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	dev, tr := r.attach("nic0", AttachOptions{PCI: true})
	r.run(func(p *sim.Proc) {
		va, handle, err := dev.AllocCoherent(p, 8192)
		if err != nil {
			t.Fatal(err)
		}
		pa, _ := r.mem.VirtToPhys(va)
		if got, ok := tr.Phys(handle); !ok || got != pa || uint64(handle) == uint64(pa) {
			t.Errorf("handle %v translates to %v, %v; want an IOVA of %v", handle, got, ok, pa)
		}
		if _, err := dev.Write(handle+4096, 4096); err != nil {
			t.Errorf("device write: %v", err)
		}
		dev.FreeCoherent(p, 8192, va, handle)
		if _, ok := tr.Phys(handle); ok {
			t.Error("still mapped after dma_free_coherent")
		}
	})
}

// TestFaultMessage pins what a driver sees of a fault.
func TestFaultMessage(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	dev, _ := r.attach("nic0", AttachOptions{PCI: true})
	_, err := dev.Write(0x5000, 64)
	const want = "nic0: DMA write of dma:0x5000+64: iommu dmar0 domain 1: write at dma:0x5000: iommu: translation fault"
	if err == nil || err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

package iommu

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestMaliciousDevice: 100,000 DMAs of random address, length and
// direction from a device attached to a strict domain with random
// mappings (4 KiB and 2 MiB, read-only, write-only, both). Every access
// either lands entirely inside mappings with the permission it needs,
// at the physical addresses they name, or faults; every byte the device
// writes is in a page mapped writable for it; the pages never mapped
// writable keep their versions.
func TestMaliciousDevice(t *testing.T) {
	const (
		window = 64 << 20 // IOVAs the mappings are placed in
		block  = 32 << 20 // physical memory they point into
		dmas   = 100_000
	)
	r := newRig(t, Strict, DefaultParams())
	r.unit.Hooks = sim.Hooks[Event]{}
	dev, tr := r.attach("nic0", AttachOptions{PCI: true})
	d := tr.Domain()
	base := r.pages(block)
	rng := rand.New(rand.NewPCG(1, 2))

	type page struct {
		pa   mem.PhysAddr
		prot Prot
	}
	shadow := map[uint64]page{} // IOVA page → mapping
	writable := map[mem.PhysAddr]bool{}
	for range 400 {
		size, align := uint64(1+rng.IntN(16))*4096, uint64(4096)
		if rng.IntN(8) == 0 {
			size, align = 2<<20, 2<<20
		}
		iova := rng.Uint64N(window/align) * align
		pa := base + mem.PhysAddr(rng.Uint64N((block-size)/align+1)*align)
		prot := Prot(1 + rng.IntN(3))
		if err := d.Map(mem.DMAAddr(iova), pa, size, prot); err != nil {
			continue
		}
		for off := uint64(0); off < size; off += 4096 {
			shadow[(iova+off)/4096] = page{pa + mem.PhysAddr(off), prot}
			if prot&ProtWrite != 0 {
				writable[(pa+mem.PhysAddr(off))/4096] = true
			}
		}
	}
	var stray int
	r.mem.Hooks.Hook(func(a *mem.Access) {
		if a.Kind != mem.DeviceWrite {
			return
		}
		for pg := a.Phys / 4096; pg <= (a.Phys+mem.PhysAddr(a.Size)-1)/4096; pg++ {
			if !writable[pg] {
				stray++
			}
		}
	})
	before := map[mem.PhysAddr]mem.Version{}
	for pg := base / 4096; pg < (base+block)/4096; pg++ {
		if !writable[pg] {
			before[pg] = r.mem.Latest(pg * 4096)
		}
	}

	var landed, faulted int
	for i := range dmas {
		addr := rng.Uint64N(window + window/4)
		if i%16 == 0 {
			addr = rng.Uint64() & dev.Mask()
		}
		size := 1 + rng.Uint64N(3*4096)
		write := rng.IntN(2) == 0
		need := ProtRead
		if write {
			need = ProtWrite
		}
		ok := addr+size <= window
		for pg := addr / 4096; ok && pg <= (addr+size-1)/4096; pg++ {
			ok = shadow[pg].prot&need != 0
		}
		var err error
		if write {
			_, err = dev.Write(mem.DMAAddr(addr), size)
		} else {
			_, err = dev.Read(mem.DMAAddr(addr), size)
		}
		switch {
		case ok && err != nil:
			t.Fatalf("DMA %d (%#x+%d write %v) inside its mappings faulted: %v", i, addr, size, write, err)
		case !ok && !errors.Is(err, ErrFault) && !errors.Is(err, ErrPermission):
			t.Fatalf("DMA %d (%#x+%d write %v) outside its mappings: %v, want a fault", i, addr, size, write, err)
		case ok:
			landed++
			if got, _ := tr.Phys(mem.DMAAddr(addr)); got != shadow[addr/4096].pa+mem.PhysAddr(addr%4096) {
				t.Fatalf("DMA %d at %#x lands at %v, want %v", i, addr, got, shadow[addr/4096].pa)
			}
		default:
			faulted++
		}
	}
	if stray != 0 {
		t.Errorf("%d device writes reached pages not mapped writable", stray)
	}
	for pg, v := range before {
		if got := r.mem.Latest(pg * 4096); got != v {
			t.Fatalf("page %v not mapped writable changed: version %d → %d", pg*4096, v, got)
		}
	}
	if landed < dmas/20 || faulted < dmas/20 {
		t.Errorf("%d landed, %d faulted: the test does not exercise both", landed, faulted)
	}
	t.Logf("%d DMAs landed, %d faulted; %d table pages", landed, faulted, d.TablePages())
}

// TestMaliciousDeviceLazy: the driver maps and unmaps buffers through
// the DMA API in lazy mode while the device issues random DMAs. An access
// to pages mapped with its permission succeeds; one touching a page
// neither mapped nor unmapped since the last flush faults; a page
// unmapped since the last flush may still be reached through a stale
// IOTLB entry (the window), and only such accesses are reported stale.
// Every device write lands in a page mapped writable now or in the
// window.
func TestMaliciousDeviceLazy(t *testing.T) {
	const steps = 100_000
	r := newRig(t, Lazy, DefaultParams())
	r.unit.Hooks = sim.Hooks[Event]{}
	dev, _ := r.attach("nic0", AttachOptions{PCI: true})
	pool := r.pages(64 * 4096)
	rng := rand.New(rand.NewPCG(3, 4))

	type page struct {
		pa   mem.PhysAddr
		prot Prot
	}
	type mapping struct {
		iova mem.DMAAddr
		pa   mem.PhysAddr
		dir  dma.Direction
	}
	live := map[uint64]page{}   // IOVA page → mapped now
	window := map[uint64]page{} // IOVA page → unmapped since the last flush
	r.unit.Hooks.Hook(func(e *Event) {
		if e.Op == OpFlush {
			clear(window)
		}
	})
	allowed := func(pa mem.PhysAddr) bool {
		for _, m := range []map[uint64]page{live, window} {
			for _, pg := range m {
				if pg.pa == pa&^4095 && pg.prot&ProtWrite != 0 {
					return true
				}
			}
		}
		return false
	}
	var stray int
	r.mem.Hooks.Hook(func(a *mem.Access) {
		if a.Kind == mem.DeviceWrite && !allowed(a.Phys) {
			stray++
		}
	})
	var mapped []mapping
	var landed, faulted, inWindow int
	r.run(func(p *sim.Proc) {
		for i := range steps {
			switch x := rng.IntN(100); {
			case x < 4 && len(mapped) < 48:
				pa := pool + mem.PhysAddr(rng.IntN(64)*4096)
				dir := dma.Direction(rng.IntN(3))
				a := dev.MapPage(p, pa, 0, 4096, dir)
				if a == dma.MappingErrorAddr {
					t.Fatalf("step %d: mapping failed", i)
				}
				mapped = append(mapped, mapping{a, pa, dir})
				delete(window, uint64(a)/4096) // a reused IOVA: flushed before
				live[uint64(a)/4096] = page{pa, protOf(dir)}
			case x < 8 && len(mapped) > 0:
				k := rng.IntN(len(mapped))
				m := mapped[k]
				mapped = append(mapped[:k], mapped[k+1:]...)
				window[uint64(m.iova)/4096] = live[uint64(m.iova)/4096]
				delete(live, uint64(m.iova)/4096)
				dev.UnmapPage(p, m.iova, 4096, m.dir)
			case x < 9:
				p.Sleep(sim.Time(rng.IntN(3)) * sim.Millisecond)
			default:
				// Around a live mapping or a page of the window.
				addr := uint64(1 << 20)
				if len(mapped) > 0 && rng.IntN(4) != 0 {
					addr = uint64(mapped[rng.IntN(len(mapped))].iova)
				} else if len(window) > 0 {
					keys := slices.Sorted(maps.Keys(window))
					addr = keys[rng.IntN(len(keys))] * 4096
				}
				addr = addr - 4096 + rng.Uint64N(3*4096)
				size := 1 + rng.Uint64N(4096)
				write := rng.IntN(2) == 0
				need := ProtRead
				if write {
					need = ProtWrite
				}
				liveOK, mayStale := true, true
				for pg := addr / 4096; pg <= (addr+size-1)/4096; pg++ {
					l := live[pg].prot&need != 0
					w := window[pg].prot&need != 0
					liveOK = liveOK && l
					mayStale = mayStale && (l || w)
				}
				before := r.unit.Stats().StaleHits
				var err error
				if write {
					_, err = dev.Write(mem.DMAAddr(addr), size)
				} else {
					_, err = dev.Read(mem.DMAAddr(addr), size)
				}
				stale := r.unit.Stats().StaleHits > before
				switch {
				case liveOK && (err != nil || stale):
					t.Fatalf("step %d: DMA %#x+%d inside live mappings: %v, stale %v", i, addr, size, err, stale)
				case !mayStale && err == nil:
					t.Fatalf("step %d: DMA %#x+%d outside mappings and window succeeded", i, addr, size)
				case err != nil && !errors.Is(err, ErrFault) && !errors.Is(err, ErrPermission):
					t.Fatalf("step %d: %v, want a fault", i, err)
				case err == nil && stale:
					inWindow++
				case err == nil:
					landed++
				default:
					faulted++
				}
			}
		}
	})
	if stray != 0 {
		t.Errorf("%d device writes outside live and window pages", stray)
	}
	if landed == 0 || faulted == 0 || inWindow == 0 {
		t.Errorf("landed %d, faulted %d, through the window %d: want all three", landed, faulted, inWindow)
	}
	t.Logf("landed %d, faulted %d, through a stale entry %d", landed, faulted, inWindow)
}

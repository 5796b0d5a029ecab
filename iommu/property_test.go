package iommu

import (
	"errors"
	"math/rand/v2"
	"testing"

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

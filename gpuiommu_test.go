package dmalab

import (
	"testing"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// gpuIOMMUCosts are what one program measures on h200-pcie in an IOMMU
// mode: a 64 MiB cuMemHostRegister, a pinned host-to-device cuMemcpy of
// it, a pageable one of the same size, and the unit's IOTLB misses.
type gpuIOMMUCosts struct {
	register, pinned, pageable sim.Time
	misses                     uint64
}

func measureGPUIOMMU(t *testing.T, mode string) gpuIOMMUCosts {
	t.Helper()
	spec, err := platform.Preset("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = platform.Set(spec, "iommu.mode", mode); err != nil {
		t.Fatal(err)
	}
	sys, err := BootSpec(spec, Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	const size = 64 << 20
	var c gpuIOMMUCosts
	err = sys.Run("app", func(p *Process) error {
		pr, err := p.CUDA()
		if err != nil {
			return err
		}
		ctx, err := pr.PrimaryContext(0)
		if err != nil {
			return err
		}
		dev, err := ctx.MemAlloc(p.Thread, size)
		if err != nil {
			return err
		}
		host, err := pr.Malloc(size)
		if err != nil {
			return err
		}
		t0 := p.Now()
		if err := ctx.Memcpy(p.Thread, dev, mem.GPUAddr(host), size); err != nil {
			return err
		}
		c.pageable = p.Now() - t0
		t0 = p.Now()
		if err := ctx.MemHostRegister(p.Thread, host, size, cuda.HostRegisterPortable); err != nil {
			return err
		}
		c.register = p.Now() - t0
		t0 = p.Now()
		if err := ctx.Memcpy(p.Thread, dev, mem.GPUAddr(host), size); err != nil {
			return err
		}
		c.pinned = p.Now() - t0
		if err := ctx.MemHostUnregister(p.Thread, host); err != nil {
			return err
		}
		return ctx.MemFree(p.Thread, dev)
	})
	if err != nil {
		t.Fatalf("%s: %v", mode, err)
	}
	if d := sys.Diagnostics(); len(d) != 0 {
		t.Errorf("%s: %d diagnostics, first %v", mode, len(d), d[0])
	}
	for _, u := range sys.IOMMUs() {
		c.misses += u.IOTLB().Stats().Misses
	}
	return c
}

// TestGPUBehindIOMMU: with the platform's IOMMU strict or lazy, a GPU's
// copies of pinned and pageable memory go through its IOTLB (misses
// counted, none with the IOMMU off), are not faster than with it off,
// and cuMemHostRegister costs more (the pages mapped in the GPU's
// domain); the program stays clean.
func TestGPUBehindIOMMU(t *testing.T) {
	off := measureGPUIOMMU(t, platform.IOMMUOff)
	if off.misses != 0 {
		t.Errorf("off: %d IOTLB misses", off.misses)
	}
	t.Logf("off: register %v, pinned %v, pageable %v, %d IOTLB misses", off.register, off.pinned, off.pageable, off.misses)
	for _, mode := range []string{platform.IOMMUStrict, platform.IOMMULazy} {
		c := measureGPUIOMMU(t, mode)
		t.Logf("%s: register %v, pinned %v, pageable %v, %d IOTLB misses", mode, c.register, c.pinned, c.pageable, c.misses)
		if c.misses == 0 {
			t.Errorf("%s: no IOTLB miss: the GPU's DMA was not translated", mode)
		}
		if c.pinned < off.pinned {
			t.Errorf("%s: pinned copy %v, faster than %v with the IOMMU off", mode, c.pinned, off.pinned)
		}
		if c.pageable < off.pageable {
			t.Errorf("%s: pageable copy %v, faster than %v with the IOMMU off", mode, c.pageable, off.pageable)
		}
		if c.register <= off.register {
			t.Errorf("%s: cuMemHostRegister %v, not more than %v with the IOMMU off", mode, c.register, off.register)
		}
	}
}

// TestManagedBehindIOMMU: with the IOMMU strict, migrating managed memory
// to a GPU and back goes through its IOTLB (the CPU chunks mapped for it,
// in 2 MiB leaves: one miss per block and direction at most), and
// cuMemFree gives the chunks back: the node's free memory, less the
// domain's table pages, is what it was before the allocation.
func TestManagedBehindIOMMU(t *testing.T) {
	spec, err := platform.Preset("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = platform.Set(spec, "iommu.mode", platform.IOMMUStrict); err != nil {
		t.Fatal(err)
	}
	sys, err := BootSpec(spec, Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	const size = 8 << 20
	var before, during, after uint64
	gpu0, err := sys.Device("gpu0")
	if err != nil {
		t.Fatal(err)
	}
	tr, ok := gpu0.Translator().(*iommu.Translator)
	if !ok {
		t.Fatalf("gpu0 translated by %s", gpu0.Translator().Name())
	}
	// Free memory, not counting the domain's table pages, which stay
	// when their entries are unmapped.
	free := func() uint64 {
		lo, hi := sys.Mem.NodeFree(0)
		return lo + hi + uint64(tr.Domain().TablePages())*mem.PageSize
	}
	err = sys.Run("app", func(p *Process) error {
		pr, err := p.CUDA()
		if err != nil {
			return err
		}
		ctx, err := pr.PrimaryContext(0)
		if err != nil {
			return err
		}
		before = free()
		buf, err := ctx.MemAllocManaged(p.Thread, size, cuda.MemAttachGlobal)
		if err != nil {
			return err
		}
		if err := ctx.CPUAccess(p.Thread, buf, size, true); err != nil {
			return err
		}
		if err := ctx.MemPrefetchAsync(p.Thread, buf, size, 0, nil); err != nil {
			return err
		}
		if err := ctx.MemPrefetchAsync(p.Thread, buf, size, cuda.DeviceCPU, nil); err != nil {
			return err
		}
		if err := ctx.Synchronize(p.Thread); err != nil {
			return err
		}
		during = free()
		if err := ctx.MemFree(p.Thread, buf); err != nil {
			return err
		}
		after = free()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st := sys.IOMMUs()[0].IOTLB().Stats()
	if st.Misses == 0 || st.Misses > 2*size/(2<<20) {
		t.Errorf("IOTLB %+v: want 1 to %d misses (2 MiB leaves)", st, 2*size/(2<<20))
	}
	if during > before-size || after != before {
		t.Errorf("node 0 free: %d before, %d with the chunks, %d after cuMemFree", before, during, after)
	}
	if d := sys.Diagnostics(); len(d) != 0 {
		t.Errorf("%d diagnostics, first %v", len(d), d[0])
	}
}

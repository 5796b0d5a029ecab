package gpu

import (
	"testing"

	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestIOMMULeaves: the leaves a mapping writes follow iommu_pgsize: the
// largest page both addresses are aligned to and the rest covers.
func TestIOMMULeaves(t *testing.T) {
	const k4, m2, g1 = 4 << 10, 2 << 20, 1 << 30
	tests := []struct {
		name string
		iova mem.DMAAddr
		pa   mem.PhysAddr
		size uint64
		want int
	}{
		{"one page", 0x1000, 0x5000, k4, 1},
		{"4 KiB-aligned 2 MiB", 0x1000, 0x201000, m2, 512},
		{"2 MiB-aligned 4 MiB", m2, 2 * m2, 2 * m2, 2},
		{"IOVA aligned, memory not", 0, 0x1000, m2, 512},
		{"2 MiB and a page", 0, 0, m2 + k4, 2},
		{"page then 2 MiB", m2 - k4, 2*m2 - k4, m2 + k4, 2},
		{"1 GiB-aligned 1 GiB", g1, g1, g1, 1},
		{"2 MiB-aligned 1 GiB", m2, m2, g1, 512},
	}
	for _, tc := range tests {
		if got := IOMMULeaves(tc.iova, tc.pa, tc.size); got != tc.want {
			t.Errorf("%s: IOMMULeaves(%v, %v, %#x) = %d, want %d", tc.name, tc.iova, tc.pa, tc.size, got, tc.want)
		}
	}
}

// iommuRig is h200 with GPU 0 behind a strict VT-d domain.
func iommuRig(t *testing.T) (*rig, *iommu.Domain) {
	r := h200(t)
	u, err := iommu.NewUnit("dmar0", r.m.Mem, r.m.Engine, 0, iommu.Strict, iommu.DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	dom, err := u.NewDomain()
	if err != nil {
		t.Fatal(err)
	}
	iommu.Attach(r.d.DMA(), dom, iommu.AttachOptions{PCI: true})
	return r, dom
}

// TestRegisterHostBehindIOMMU: pinned memory registered for a GPU behind
// an IOMMU domain is mapped there (its IOVA translates to its pages) at
// the cost of one call and one 2 MiB leaf per 2 MiB of aligned memory;
// the GPU's copy reads it through the IOTLB; unregistering unmaps it.
func TestRegisterHostBehindIOMMU(t *testing.T) {
	r, dom := iommuRig(t)
	const size = 8 << 20
	pa, err := r.m.Mem.AllocPagesAligned(0, size, 2<<20, mem.ZoneNormal)
	if err != nil {
		t.Fatal(err)
	}
	va := r.m.Mem.PhysToVirt(pa)
	r.run(func(p *sim.Proc) {
		t0 := p.Now()
		host, err := r.sys.RegisterHost(p, va, size, HostPortable)
		if err != nil {
			t.Fatal(err)
		}
		// The IOVA range is size-aligned, so 8 MiB of 2 MiB-aligned
		// memory takes four 2 MiB leaves.
		if got, want := p.Now()-t0, IOMMUMapCallCost+4*IOMMUMapLeafCost; got != want {
			t.Errorf("register cost %v, want %v", got, want)
		}
		iovas, err := r.sys.HostIOVAs(va)
		if err != nil {
			t.Fatal(err)
		}
		iova, ok := iovas[0]
		if !ok || len(iovas) != 1 {
			t.Fatalf("IOVAs %v, want one for GPU 0", iovas)
		}
		if got, ok := dom.IOVAToPhys(iova + 4096); !ok || got != pa+4096 {
			t.Fatalf("IOVA %v+4096 translates to %v (%v), want %v", iova, got, ok, pa+4096)
		}
		dev := r.alloc(p, r.d, size)
		s := r.d.NewStream(0)
		if err := s.Memcpy(p, dev, host.Addr, size); err != nil {
			t.Fatal(err)
		}
		s.Synchronize(p)
		if st := dom.Unit().IOTLB().Stats(); st.Misses == 0 || st.Misses > 4 {
			t.Errorf("IOTLB %+v after copying 8 MiB in 2 MiB leaves: want 1 to 4 misses", st)
		}
		if err := r.sys.UnregisterHost(p, va); err != nil {
			t.Fatal(err)
		}
		if _, ok := dom.IOVAToPhys(iova); ok {
			t.Errorf("IOVA %v still mapped after unregistering", iova)
		}
	})
}

// TestUnmappedHostFaults: memory a driver never mapped for the GPU is
// not reachable through its domain: a copy from it is a bus error.
func TestUnmappedHostFaults(t *testing.T) {
	r, dom := iommuRig(t)
	pa, err := r.m.Mem.AllocPages(0, 1<<20, mem.ZoneNormal)
	if err != nil {
		t.Fatal(err)
	}
	spans := r.d.Spans([]mem.PhysRange{{Start: pa, Size: 4096}}, false)
	if len(spans) != 1 || spans[0].Bus != mem.DMAAddr(pa) {
		t.Fatalf("spans %+v, want one at the physical address (no mapping)", spans)
	}
	if _, err := r.d.DMA().Effect(spans, nil, nil); err == nil {
		t.Error("a read of unmapped host memory through the domain succeeded")
	}
	if dom.Unit().Stats().Faults == 0 {
		t.Error("no IOMMU fault counted")
	}
}

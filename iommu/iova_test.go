package iommu

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

func TestIOVATopDown(t *testing.T) {
	v := NewIOVADomain(1)
	const limit = mem.DMAAddr(1<<32 - 1)
	tests := []struct {
		size uint64
		want mem.DMAAddr
	}{
		{4096, 1<<32 - 4096},
		// Three granules round up to four, aligned to 16 KiB.
		{3 * 4096, 1<<32 - 8*4096},
		{1 << 20, 1<<32 - 2<<20},
	}
	for _, tc := range tests {
		got, err := v.Alloc(0, tc.size, limit)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("Alloc(%#x) = %v, want %v", tc.size, got, tc.want)
		}
	}
	if got := v.Stats().Ranges; got != 3 {
		t.Errorf("%d ranges, want 3", got)
	}
}

func TestIOVAExhausted(t *testing.T) {
	v := NewIOVADomain(1)
	// Below 16 KiB only granules 1 to 3 exist (IOVA 0 is never given).
	for range 3 {
		if _, err := v.Alloc(0, 4096, 4<<12-1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Alloc(0, 4096, 4<<12-1); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("fourth Alloc = %v, want ENOMEM", err)
	}
	if _, err := v.Alloc(0, 0, 1<<32); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("Alloc of 0 bytes = %v, want EINVAL", err)
	}
}

func TestIOVARcache(t *testing.T) {
	v := NewIOVADomain(2)
	const limit = mem.DMAAddr(1<<48 - 1)
	a, err := v.Alloc(0, 8192, limit)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Free(0, a, 8192); err != nil {
		t.Fatal(err)
	}
	if v.Stats().Ranges != 1 {
		t.Error("a cached range left the tree")
	}
	// Another CPU does not see CPU 0's cache.
	if b, _ := v.Alloc(1, 8192, limit); b == a {
		t.Error("CPU 1 got CPU 0's cached range")
	}
	if b, _ := v.Alloc(0, 8192, limit); b != a {
		t.Errorf("CPU 0 got %v, want its cached %v", b, a)
	}
	if got := v.Stats().CacheHits; got != 1 {
		t.Errorf("%d cache hits, want 1", got)
	}
	// Ranges above 128 KiB are not cached: freed to the tree.
	big, _ := v.Alloc(0, 256<<10, limit)
	n := v.Stats().Ranges
	if err := v.Free(0, big, 256<<10); err != nil {
		t.Fatal(err)
	}
	if v.Stats().Ranges != n-1 {
		t.Error("a 256 KiB range was cached")
	}
	if err := v.Free(0, big, 256<<10); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("double free = %v, want EINVAL", err)
	}
}

func TestAllocIOVAPolicy(t *testing.T) {
	tests := []struct {
		dev   string
		opt   AttachOptions
		below bool // IOVA below 4 GiB
	}{
		{"nic0", AttachOptions{PCI: true}, true},
		{"nic0", AttachOptions{PCI: true, ForceDAC: true}, false},
		{"nic0", AttachOptions{}, false},
		{"nic2", AttachOptions{ForceDAC: true}, true}, // a 32-bit mask
	}
	for _, tc := range tests {
		r := newRig(t, Strict, DefaultParams())
		dev, _ := r.attach(tc.dev, tc.opt)
		pa := r.pages(4096)
		var a mem.DMAAddr
		r.run(func(p *sim.Proc) { a = dev.MapPage(p, pa, 0, 100, dma.ToDevice) })
		if dev.MappingError(a) {
			t.Fatalf("%s %+v: mapping failed", tc.dev, tc.opt)
		}
		if got := a < 1<<32; got != tc.below {
			t.Errorf("%s %+v: IOVA %v, below 4 GiB %v, want %v", tc.dev, tc.opt, a, got, tc.below)
		}
		if a&0xfff != 0 || uint64(a) > dev.Mask() {
			t.Errorf("%s: IOVA %v not page-aligned or beyond the mask", tc.dev, a)
		}
	}
}

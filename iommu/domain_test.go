package iommu

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/mem"
)

func TestDomainMap(t *testing.T) {
	const (
		k4 = 4 << 10
		m2 = 2 << 20
		g1 = 1 << 30
	)
	tests := []struct {
		name      string
		pre       [][3]uint64 // iova, pa offset, size mapped first
		iova, off uint64
		size      uint64
		prot      Prot
		want      error
		tables    int // table pages after
	}{
		{name: "4k", iova: 0x10000, size: k4, prot: ProtRead, tables: 4},
		{name: "2m huge page", iova: m2, size: m2, prot: ProtRead | ProtWrite, tables: 3},
		{name: "1g huge page", iova: g1, size: g1, prot: ProtWrite, tables: 2},
		{name: "misaligned iova", iova: 0x10800, size: k4, prot: ProtRead, want: syscall.EINVAL, tables: 1},
		{name: "misaligned size", iova: 0x10000, size: 100, prot: ProtRead, want: syscall.EINVAL, tables: 1},
		{name: "no permission", iova: 0x10000, size: k4, want: syscall.EINVAL, tables: 1},
		{name: "beyond 48 bits", iova: 1 << 48, size: k4, prot: ProtRead, want: syscall.ERANGE, tables: 1},
		{name: "eexist", pre: [][3]uint64{{0x10000, 0, k4}}, iova: 0x10000, off: k4, size: k4, prot: ProtRead, want: syscall.EEXIST, tables: 4},
		{name: "eexist inside a huge page", pre: [][3]uint64{{m2, 0, m2}}, iova: m2 + 5*k4, off: 0, size: k4, prot: ProtRead, want: syscall.EEXIST, tables: 3},
		{name: "eexist at the end of the range", pre: [][3]uint64{{m2 + m2 - k4, 0, k4}}, iova: m2, size: m2, prot: ProtRead, want: syscall.EEXIST, tables: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Strict, DefaultParams())
			d := r.domain()
			base := r.pages(g1)
			for _, p := range tc.pre {
				if err := d.Map(mem.DMAAddr(p[0]), base+mem.PhysAddr(p[1]), p[2], ProtRead); err != nil {
					t.Fatal(err)
				}
			}
			pa := base + mem.PhysAddr(tc.off)
			err := d.Map(mem.DMAAddr(tc.iova), pa, tc.size, tc.prot)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Map = %v, want %v", err, tc.want)
			}
			if got := d.TablePages(); got != tc.tables {
				t.Errorf("TablePages = %d, want %d", got, tc.tables)
			}
			if tc.want != nil {
				return
			}
			mid := tc.size / 2 &^ (k4 - 1)
			if got, ok := d.IOVAToPhys(mem.DMAAddr(tc.iova + mid + 7)); !ok || got != pa+mem.PhysAddr(mid+7) {
				t.Errorf("IOVAToPhys(middle) = %v, %v; want %v", got, ok, pa+mem.PhysAddr(mid+7))
			}
			if _, ok := d.IOVAToPhys(mem.DMAAddr(tc.iova + tc.size)); ok {
				t.Error("the page after the mapping translates")
			}
			if n := d.Unmap(mem.DMAAddr(tc.iova), tc.size); n != tc.size {
				t.Errorf("Unmap = %#x, want %#x", n, tc.size)
			}
			if _, ok := d.IOVAToPhys(mem.DMAAddr(tc.iova)); ok {
				t.Error("translates after unmap")
			}
		})
	}
}

func TestDomainLargestPages(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	d := r.domain()
	pa := r.pages(1 << 30)
	// 2 MiB + 4 KiB at a 2 MiB-aligned IOVA: one 2 MiB leaf and one
	// 4 KiB leaf, as iommu_pgsize chooses.
	if err := d.Map(2<<20, pa, 2<<20+4096, ProtRead); err != nil {
		t.Fatal(err)
	}
	if _, _, level, _ := d.leaf(2 << 20); level != 2 {
		t.Errorf("first leaf at level %d, want 2 (2 MiB)", level)
	}
	if _, _, level, _ := d.leaf(4 << 20); level != 3 {
		t.Errorf("second leaf at level %d, want 3 (4 KiB)", level)
	}
	// An unmap smaller than the huge page it starts at removes the
	// whole page; one starting inside it removes nothing.
	if n := d.Unmap(2<<20+4096, 4096); n != 0 {
		t.Errorf("unmap inside a huge page = %#x, want 0", n)
	}
	if n := d.Unmap(2<<20, 4096); n != 2<<20 {
		t.Errorf("unmap of the huge page's first 4 KiB = %#x, want 2 MiB", n)
	}
}

func TestUnmapNotMapped(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	d := r.domain()
	pa := r.pages(1 << 21)
	if err := d.Map(0x100000, pa, 2*4096, ProtRead); err != nil {
		t.Fatal(err)
	}
	if n := d.Unmap(0x200000, 4096); n != 0 {
		t.Errorf("unmap of nothing = %#x, want 0", n)
	}
	if n := d.Unmap(0x100000, 4*4096); n != 2*4096 {
		t.Errorf("unmap past the mapping = %#x, want 0x2000 (stops at the first hole)", n)
	}
	var warned int
	for _, e := range r.events {
		if e.Op == OpUnmap && e.Warn != "" {
			warned++
		}
	}
	if warned != 2 {
		t.Errorf("%d unmaps reported incomplete, want 2", warned)
	}
}

func TestDomainCostsMemory(t *testing.T) {
	r := newRig(t, Strict, DefaultParams())
	free := func() uint64 { lo, hi := r.mem.NodeFree(0); return lo + hi }
	before := free()
	d := r.domain()
	pa := r.pages(2 << 20)
	// Two 4 KiB pages 1 GiB apart need two level-2 and two level-3
	// tables below one level-1 table.
	for _, iova := range []mem.DMAAddr{0x1000, 0x1000 + 1<<30} {
		if err := d.Map(iova, pa, 4096, ProtRead); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.TablePages(); got != 6 {
		t.Errorf("TablePages = %d, want 6", got)
	}
	if err := d.Free(); err != nil {
		t.Fatal(err)
	}
	if got := free(); got != before-2<<20 {
		t.Errorf("free memory after Free = %d, want %d (tables returned)", got, before-2<<20)
	}
}

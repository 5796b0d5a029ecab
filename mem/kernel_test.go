package mem

import (
	"errors"
	"testing"
)

func TestKmalloc(t *testing.T) {
	m := newMem(t, testSpec(1*giB, 1*giB), Options{})
	tests := []struct {
		size  uint64
		align uint64
	}{
		{1, 64}, {8, 64}, {64, 64}, {65, 128}, {200, 256}, {2048, 2048},
		{2049, PageSize}, {PageSize, PageSize}, {3*PageSize + 1, PageSize},
	}
	seen := map[PhysAddr]bool{}
	for _, tc := range tests {
		for node := range 2 {
			va, err := m.Kmalloc(node, tc.size)
			if err != nil {
				t.Fatal(err)
			}
			c, pa, attr := m.Classify(va)
			if c != ClassLinear || attr != Cached {
				t.Errorf("kmalloc(%d): %v %v", tc.size, c, attr)
			}
			if uint64(pa)%tc.align != 0 {
				t.Errorf("kmalloc(%d) = %v, want aligned to %d", tc.size, pa, tc.align)
			}
			if n, _ := m.NodeOf(pa); n != node {
				t.Errorf("kmalloc(%d) on node %d got node %d memory", tc.size, node, n)
			}
			// Physically contiguous: one piece, in the linear map.
			segs, _, _, err := m.Translate(va, tc.size)
			if err != nil || len(segs) != 1 || segs[0].Start != pa {
				t.Errorf("kmalloc(%d): pieces %v %v", tc.size, segs, err)
			}
			if seen[pa] {
				t.Errorf("kmalloc(%d) = %v twice", tc.size, pa)
			}
			seen[pa] = true
		}
	}
	if va, err := m.Kmalloc(0, 0); va != ZeroSizePtr || err != nil {
		t.Errorf("kmalloc(0) = %v %v", va, err)
	}
	if c, _, _ := m.Classify(ZeroSizePtr); c != ClassInvalid {
		t.Errorf("ZERO_SIZE_PTR is %v", c)
	}
	if _, err := m.Kmalloc(2, 8); !errors.Is(err, ErrInvalid) {
		t.Errorf("no node 2: %v", err)
	}
}

func TestKmallocLine128(t *testing.T) {
	spec := testSpec(1 * giB)
	spec.Nodes[0].Cache.LineSize.V = 128
	m := newMem(t, spec, Options{})
	a, _ := m.Kmalloc(0, 8)
	b, _ := m.Kmalloc(0, 8)
	if a%128 != 0 || b%128 != 0 || b-a != 128 {
		t.Errorf("kmalloc(8) twice with 128-byte lines: %v %v", a, b)
	}
}

func TestKfree(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	lowFree, _ := m.NodeFree(0)
	var vas []VirtAddr
	for range 100 {
		va, err := m.Kmalloc(0, 100)
		if err != nil {
			t.Fatal(err)
		}
		vas = append(vas, va)
	}
	big, _ := m.Kmalloc(0, 10000)
	// 100 objects of 128 B: 4 slab pages, plus 3 pages for the large one.
	if f, _ := m.NodeFree(0); lowFree-f != 7*PageSize {
		t.Errorf("used %d bytes, want 7 pages", lowFree-f)
	}
	bad := []struct {
		name string
		va   VirtAddr
	}{
		{"inside an object", vas[3] + 8},
		{"inside a large allocation", big + PageSize},
		{"never allocated", m.PhysToVirt(512 * miB)},
		{"vmalloc space", VmallocStart},
		{"text", TextStart},
	}
	for _, tc := range bad {
		if err := m.Kfree(tc.va); !errors.Is(err, ErrBadAddr) {
			t.Errorf("%s: Kfree = %v, want ErrBadAddr", tc.name, err)
		}
	}
	if err := m.Kfree(vas[5]); err != nil {
		t.Fatal(err)
	}
	if err := m.Kfree(vas[5]); !errors.Is(err, ErrBadAddr) {
		t.Errorf("double kfree: %v", err)
	}
	if va, _ := m.Kmalloc(0, 70); va != vas[5] {
		t.Errorf("freed object not reused: %v, want %v", va, vas[5])
	}
	for _, va := range append(vas, big) {
		if err := m.Kfree(va); err != nil {
			t.Fatal(err)
		}
	}
	if f, _ := m.NodeFree(0); f != lowFree {
		t.Errorf("free memory %d after freeing everything, want %d", f, lowFree)
	}
	if m.Kfree(0) != nil || m.Kfree(ZeroSizePtr) != nil {
		t.Error("kfree(NULL) and kfree(ZERO_SIZE_PTR) must do nothing")
	}
}

func TestVmalloc(t *testing.T) {
	m := newMem(t, testSpec(1*giB, 1*giB), Options{})
	va, err := m.Vmalloc(1, 10*PageSize+1)
	if err != nil {
		t.Fatal(err)
	}
	if va != VmallocStart {
		t.Errorf("first vmalloc at %v", va)
	}
	segs, c, attr, err := m.Translate(va, 11*PageSize)
	if err != nil || c != ClassVmalloc || attr != Cached {
		t.Fatalf("Translate: %v %v %v", c, attr, err)
	}
	if len(segs) != 11 {
		t.Fatalf("%d pieces, want 11 (one per page)", len(segs))
	}
	for i, s := range segs {
		if n, _ := m.NodeOf(s.Start); n != 1 || s.Size != PageSize {
			t.Errorf("page %d: %v on node %d", i, s, n)
		}
		if i > 0 {
			prev := segs[i-1].Start
			if d := int64(s.Start) - int64(prev); d == PageSize || d == -PageSize {
				t.Errorf("pages %d and %d are physically adjacent: %v %v", i-1, i, prev, s.Start)
			}
		}
	}
	// An unaligned range: the first and last pieces are partial.
	segs, _, _, _ = m.Translate(va+100, PageSize)
	if len(segs) != 2 || segs[0].Size != PageSize-100 || segs[1].Size != 100 {
		t.Errorf("unaligned pieces %v", segs)
	}
	// The guard page after the area is not mapped.
	if c, _, _ := m.Classify(va + 11*PageSize); c != ClassInvalid {
		t.Errorf("guard page: %v", c)
	}
	if _, _, _, err := m.Translate(va, 12*PageSize); !errors.Is(err, ErrBadAddr) {
		t.Errorf("range into the guard page: %v", err)
	}
	if _, err := m.VirtToPhys(va); !errors.Is(err, ErrBadAddr) {
		t.Errorf("virt_to_phys of vmalloc: %v", err)
	}
	vb, _ := m.Vmalloc(0, PageSize)
	if vb != va+12*PageSize {
		t.Errorf("second area at %v", vb)
	}
	if err := m.Vfree(va + PageSize); !errors.Is(err, ErrBadAddr) {
		t.Errorf("vfree inside: %v", err)
	}
	if err := m.Vfree(va); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := m.Classify(va); c != ClassInvalid {
		t.Errorf("after vfree: %v", c)
	}
	if err := m.Vfree(va); !errors.Is(err, ErrBadAddr) {
		t.Errorf("double vfree: %v", err)
	}
	if _, err := m.Vmalloc(0, 2*giB); !errors.Is(err, ErrNoMemory) {
		t.Errorf("vmalloc larger than memory: %v", err)
	}
	if f, _ := m.NodeFree(0); f != 1*giB-lowReserved-TextSize-PageSize {
		t.Errorf("failed vmalloc leaked pages: %d free", f)
	}
}

func TestStackTextRemap(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	a, b := m.StackAddr("nic-irq"), m.StackAddr("app")
	if a == 0 || a != m.StackAddr("nic-irq") || a == b {
		t.Fatalf("stacks %v %v", a, b)
	}
	for _, va := range []VirtAddr{a, a - ThreadSize/2, a + ThreadSize/2 - 1} {
		if c, pa, _ := m.Classify(va); c != ClassStack || pa == 0 {
			t.Errorf("%v: %v %v", va, c, pa)
		}
	}
	if segs, _, _, err := m.Translate(a, 256); err != nil || len(segs) != 1 {
		t.Errorf("256 bytes of stack: %v %v", segs, err)
	}
	if c, pa, _ := m.Classify(m.TextAddr() + 100); c != ClassText || pa != textPhys+100 {
		t.Errorf("text: %v %v", c, pa)
	}
	if c, _, _ := m.Classify(TextStart + TextSize); c != ClassInvalid {
		t.Errorf("after text: %v", c)
	}
	pa, _ := m.AllocPages(0, 3*PageSize, ZoneNormal)
	va, err := m.Remap(pa+100, 2*PageSize, Uncached)
	if err != nil {
		t.Fatal(err)
	}
	if va%PageSize != 100 {
		t.Errorf("remap keeps the page offset: %v", va)
	}
	c, got, attr := m.Classify(va + 5)
	if c != ClassRemap || got != pa+105 || attr != Uncached {
		t.Errorf("remap: %v %v %v", c, got, attr)
	}
	if segs, _, _, err := m.Translate(va, 2*PageSize); err != nil || len(segs) != 1 || segs[0].Start != pa+100 {
		t.Errorf("remap is contiguous: %v %v", segs, err)
	}
	if _, err := m.Remap(5*giB, PageSize, Uncached); !errors.Is(err, ErrBadAddr) {
		t.Errorf("remap of no memory: %v", err)
	}
	if err := m.Unremap(va); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := m.Classify(va); c != ClassInvalid {
		t.Errorf("after unremap: %v", c)
	}
	if err := m.Unremap(va); !errors.Is(err, ErrBadAddr) {
		t.Errorf("double unremap: %v", err)
	}
}

func TestClassifyTranslate(t *testing.T) {
	m := newMem(t, testSpec(3*giB, 1*giB), Options{})
	tests := []struct {
		va    VirtAddr
		class Class
		pa    PhysAddr
	}{
		{LinearStart, ClassLinear, 0},
		{LinearStart + 3*giB + 5, ClassLinear, 3*giB + 5},
		{LinearStart + 4*giB, ClassInvalid, 0}, // past the last node
		{LinearStart - 1, ClassInvalid, 0},
		{0x7fff00000000, ClassInvalid, 0}, // user space
		{0, ClassInvalid, 0},
		{VmallocStart, ClassInvalid, 0}, // nothing allocated yet
		{TextStart, ClassText, textPhys},
		{1<<64 - 1, ClassInvalid, 0},
	}
	for _, tc := range tests {
		c, pa, _ := m.Classify(tc.va)
		if c != tc.class || pa != tc.pa {
			t.Errorf("Classify(%v) = %v %v, want %v %v", tc.va, c, pa, tc.class, tc.pa)
		}
	}
	if pa, err := m.VirtToPhys(LinearStart + 12345); err != nil || pa != 12345 {
		t.Errorf("VirtToPhys: %v %v", pa, err)
	}
	if va := m.PhysToVirt(12345); va != LinearStart+12345 {
		t.Errorf("PhysToVirt: %v", va)
	}
	// Nodes 0 and 1 are adjacent: one linear range spans both.
	if segs, _, _, err := m.Translate(LinearStart+3*giB-64, 128); err != nil || len(segs) != 1 {
		t.Errorf("across adjacent nodes: %v %v", segs, err)
	}
	bad := []struct {
		name string
		va   VirtAddr
		size uint64
	}{
		{"past the end of DRAM", LinearStart + 4*giB - 64, 128},
		{"wraps", 1<<64 - 10, 20},
		{"empty", LinearStart, 0},
		{"text overrun", TextStart + TextSize - 1, 2},
		{"unmapped", 0x1000, 1},
	}
	for _, tc := range bad {
		if _, _, _, err := m.Translate(tc.va, tc.size); !errors.Is(err, ErrBadAddr) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

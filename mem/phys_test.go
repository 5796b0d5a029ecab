package mem

import (
	"errors"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/platform"
)

func TestLayout(t *testing.T) {
	spec := testSpec(3*giB, 8*giB+4*kiB+100, 1*giB)
	spec.GPUs = []platform.GPU{
		{Name: "gpu0", VRAM: platform.P[platform.Bytes](80*giB, "test")},
		{Name: "gpu1", VRAM: platform.P[platform.Bytes](80*giB, "test")},
	}
	m := newMem(t, spec, Options{})
	nodes := []struct {
		base PhysAddr
		size uint64
	}{
		{0, 3 * giB},
		{3 * giB, 8*giB + 4*kiB},
		{12 * giB, 1 * giB},
	}
	for i, want := range nodes {
		if b, s := m.NodeRange(i); b != want.base || s != want.size {
			t.Errorf("node %d: [%v +%#x], want [%v +%#x]", i, b, s, want.base, want.size)
		}
	}
	if m.Nodes() != 3 {
		t.Errorf("Nodes() = %d", m.Nodes())
	}
	devs := []struct {
		name string
		base PhysAddr
	}{{"gpu0", 1 << 40}, {"gpu1", 2 << 40}}
	for _, d := range devs {
		if b, s, ok := m.DeviceRange(d.name); !ok || b != d.base || s != 80*giB {
			t.Errorf("%s: [%v +%#x] %v, want [%v +80 GiB]", d.name, b, s, ok, d.base)
		}
	}
	if _, _, ok := m.DeviceRange("nic0"); ok {
		t.Error("nic0 has no device memory")
	}
	where := []struct {
		pa   PhysAddr
		node int
		dram bool
		dev  string
	}{
		{0, 0, true, ""},
		{3*giB - 1, 0, true, ""},
		{3 * giB, 1, true, ""},
		{11*giB + 4*kiB - 1, 1, true, ""},
		{11*giB + 4*kiB, 0, false, ""}, // the hole before node 2
		{12 * giB, 2, true, ""},
		{13 * giB, 0, false, ""},
		{1<<40 + 5, 0, false, "gpu0"},
		{2<<40 + 80*giB, 0, false, ""},
	}
	for _, w := range where {
		n, ok := m.NodeOf(w.pa)
		d, _ := m.DeviceOf(w.pa)
		if n != w.node || ok != w.dram || d != w.dev {
			t.Errorf("%v: node %d %v, device %q; want %d %v %q", w.pa, n, ok, d, w.node, w.dram, w.dev)
		}
	}
	if b, s := m.NodeRange(3); b != 0 || s != 0 {
		t.Errorf("NodeRange(3) = %v %d", b, s)
	}
}

func TestNewRejects(t *testing.T) {
	bad := map[string]func(*platform.Spec){
		"no DRAM":       func(s *platform.Spec) { s.Nodes[0].DRAM.V = 0 },
		"no memcpy":     func(s *platform.Spec) { s.Nodes[0].MemcpyRate.V = 0 },
		"line 48":       func(s *platform.Spec) { s.Nodes[0].Cache.LineSize.V = 48 },
		"line 8 KiB":    func(s *platform.Spec) { s.Nodes[0].Cache.LineSize.V = 8 * kiB },
		"negative size": func(s *platform.Spec) { s.Nodes[0].Cache.Size.V = -1 },
		"beyond 64 TiB": func(s *platform.Spec) { s.Nodes[0].DRAM.V = 65 << 40 },
		"no nodes":      func(s *platform.Spec) { s.Nodes = nil },
	}
	for _, name := range []string{"no DRAM", "no memcpy", "line 48", "line 8 KiB", "negative size", "beyond 64 TiB", "no nodes"} {
		t.Run(name, func(t *testing.T) {
			s := testSpec(1 * giB)
			bad[name](s)
			if _, err := New(s, nil, Options{}); !errors.Is(err, ErrInvalid) {
				t.Errorf("New: %v, want ErrInvalid", err)
			}
		})
	}
	if _, err := New(nil, nil, Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
}

func TestAllocPagesZones(t *testing.T) {
	// Node 0: 3 GiB, all below 4 GiB. Node 1: [3 GiB, 11 GiB), 1 GiB of
	// it below 4 GiB. Node 2: [11 GiB, 12 GiB), none below.
	tests := []struct {
		name   string
		node   int
		size   uint64
		zone   Zone
		lo, hi PhysAddr // want the allocation inside [lo, hi)
		err    error
	}{
		{"normal falls back below 4G", 0, PageSize, ZoneNormal, 0, 3 * giB, nil},
		{"normal prefers above 4G", 1, PageSize, ZoneNormal, 4 * giB, 11 * giB, nil},
		{"dma32 below 4G", 1, PageSize, ZoneDMA32, 3 * giB, 4 * giB, nil},
		{"dma32 on a high node", 2, PageSize, ZoneDMA32, 0, 0, ErrNoMemory},
		{"normal on a high node", 2, 5000, ZoneNormal, 11 * giB, 12 * giB, nil},
		{"larger than the node", 2, 2 * giB, ZoneNormal, 0, 0, ErrNoMemory},
		{"larger than the high zone falls back? no: contiguous", 1, 7*giB + PageSize, ZoneNormal, 0, 0, ErrNoMemory},
		{"whole high zone", 1, 7 * giB, ZoneNormal, 4 * giB, 11 * giB, nil},
		{"size 0", 0, 0, ZoneNormal, 0, 0, ErrInvalid},
		{"no such node", 3, PageSize, ZoneNormal, 0, 0, ErrInvalid},
		{"negative node", -1, PageSize, ZoneNormal, 0, 0, ErrInvalid},
		{"bad zone", 0, PageSize, Zone(7), 0, 0, ErrInvalid},
		{"wrapping size", 0, 1<<64 - 1, ZoneNormal, 0, 0, ErrNoMemory},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMem(t, testSpec(3*giB, 8*giB, 1*giB), Options{})
			pa, err := m.AllocPages(tc.node, tc.size, tc.zone)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("AllocPages: %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			end, _ := pa.Add(tc.size)
			if pa < tc.lo || end > tc.hi || pa%PageSize != 0 {
				t.Errorf("AllocPages = %v, want page-aligned in [%v, %v)", pa, tc.lo, tc.hi)
			}
		})
	}
}

func TestAllocExhaustionFallbackReuse(t *testing.T) {
	// 4 MiB + 5 GiB node: [0, 4G) low, [4G, 5G) high: the high zone is
	// taken first, then ZoneNormal falls back to low memory.
	m := newMem(t, testSpec(5*giB), Options{})
	low0, high0 := m.NodeFree(0)
	if high0 != 1*giB {
		t.Fatalf("free above 4G = %d", high0)
	}
	a, err := m.AllocPages(0, 1*giB, ZoneNormal)
	if err != nil || a != 4*giB {
		t.Fatalf("first GiB: %v %v, want pa:4GiB", a, err)
	}
	b, err := m.AllocPages(0, 1*giB, ZoneNormal)
	if err != nil || b >= 4*giB {
		t.Fatalf("fallback: %v %v, want below 4 GiB", b, err)
	}
	if low, high := m.NodeFree(0); high != 0 || low != low0-1*giB {
		t.Errorf("free after: %d low, %d high", low, high)
	}
	// Exhaust low memory, then every request fails.
	var got, small []PhysAddr
	for {
		pa, err := m.AllocPages(0, 256*miB, ZoneDMA32)
		if errors.Is(err, ErrNoMemory) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pa)
	}
	for {
		pa, err := m.AllocPages(0, PageSize, ZoneNormal)
		if errors.Is(err, ErrNoMemory) {
			break
		}
		small = append(small, pa)
	}
	if len(small) != (256*miB-lowReserved-TextSize)/PageSize {
		t.Errorf("%d pages left after the 256 MiB blocks", len(small))
	}
	if _, err := m.AllocPages(0, PageSize, ZoneNormal); !errors.Is(err, ErrNoMemory) {
		t.Errorf("nothing left, but got %v", err)
	}
	// Free and reuse: first-fit gives the freed range back.
	if err := m.FreePages(got[1], 256*miB); err != nil {
		t.Fatal(err)
	}
	pa, err := m.AllocPages(0, PageSize, ZoneDMA32)
	if err != nil || pa != got[1] {
		t.Errorf("reuse: %v %v, want %v", pa, err, got[1])
	}
	// Frees merge: freeing everything leaves one extent per zone.
	m.FreePages(pa, PageSize)
	for i, g := range got {
		if i != 1 {
			if err := m.FreePages(g, 256*miB); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range small {
		m.FreePages(p, PageSize)
	}
	m.FreePages(a, 1*giB)
	m.FreePages(b, 1*giB)
	n := m.nodes[0]
	if len(n.low.free) > 3 || len(n.high.free) != 1 {
		t.Errorf("free lists after freeing all: %v / %v", n.low.free, n.high.free)
	}
	if low, high := m.NodeFree(0); low != low0 || high != high0 {
		t.Errorf("free %d/%d after freeing all, want %d/%d", low, high, low0, high0)
	}
}

func TestFreePagesErrors(t *testing.T) {
	m := newMem(t, testSpec(1*giB), Options{})
	pa, _ := m.AllocPages(0, 3*PageSize, ZoneNormal)
	tests := []struct {
		name string
		pa   PhysAddr
		size uint64
	}{
		{"wrong size", pa, PageSize},
		{"not the start", pa + PageSize, PageSize},
		{"never allocated", 512 * miB, PageSize},
		{"not DRAM", 5 * giB, PageSize},
		{"kernel text", textPhys, TextSize},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := m.FreePages(tc.pa, tc.size); !errors.Is(err, ErrBadAddr) {
				t.Errorf("FreePages: %v, want ErrBadAddr", err)
			}
		})
	}
	if err := m.FreePages(pa, 3*PageSize-7); err != nil {
		t.Fatalf("size rounds up as it did at allocation: %v", err)
	}
	if err := m.FreePages(pa, 3*PageSize); !errors.Is(err, ErrBadAddr) {
		t.Errorf("double free: %v", err)
	}
}

func TestAllocDeterministicAndAligned(t *testing.T) {
	run := func() []PhysAddr {
		m := newMem(t, testSpec(2*giB, 6*giB), Options{})
		var out []PhysAddr
		var live []PhysAddr
		for i := range 200 {
			node, size := i%2, uint64(1+i%7)*PageSize
			pa, err := m.AllocPages(node, size, Zone(i%3%2))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, pa)
			live = append(live, pa)
			if i%3 == 2 {
				j := (i * 7) % len(live)
				k := slices.Index(out, live[j])
				m.FreePages(live[j], uint64(1+k%7)*PageSize)
				live = slices.Delete(live, j, j+1)
			}
		}
		a, err := m.AllocPagesAligned(1, 3*PageSize, 2*miB, ZoneNormal)
		if err != nil || a%(2*miB) != 0 {
			t.Errorf("aligned: %v %v", a, err)
		}
		return append(out, a)
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Error("two runs allocated differently")
	}
	m := newMem(t, testSpec(1*giB), Options{})
	if _, err := m.AllocPagesAligned(0, PageSize, 3*PageSize, ZoneNormal); !errors.Is(err, ErrInvalid) {
		t.Errorf("alignment not a power of two: %v", err)
	}
}

// TestAllocNoPerPageMemory: a million single pages cost a few extents.
func TestAllocNoPerPageMemory(t *testing.T) {
	m := newMem(t, testSpec(8*giB), Options{})
	for range 1 << 20 {
		if _, _, err := m.allocRaw(0, PageSize, PageSize, ZoneNormal, false); err != nil {
			t.Fatal(err)
		}
	}
	n := m.nodes[0]
	if len(n.high.free) > 1 || len(n.low.free) > 3 {
		t.Errorf("free extents %d + %d after a million page allocations", len(n.high.free), len(n.low.free))
	}
}

func TestDeviceMemory(t *testing.T) {
	spec := testSpec(1 * giB)
	spec.GPUs = []platform.GPU{{Name: "gpu0", VRAM: platform.P[platform.Bytes](1*giB, "test")}}
	m := newMem(t, spec, Options{})
	pa, err := m.AllocDevice("gpu0", 100, 64*kiB)
	if err != nil || pa != 1<<40 {
		t.Fatalf("AllocDevice: %v %v", pa, err)
	}
	pb, err := m.AllocDevice("gpu0", PageSize, 64*kiB)
	if err != nil || pb != 1<<40+64*kiB {
		t.Fatalf("second, 64 KiB aligned: %v %v", pb, err)
	}
	if _, err := m.AllocDevice("gpu0", 2*giB, 0); !errors.Is(err, ErrNoMemory) {
		t.Errorf("too large: %v", err)
	}
	if _, err := m.AllocDevice("gpu9", PageSize, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("no device: %v", err)
	}
	if err := m.FreePages(pa, PageSize); !errors.Is(err, ErrBadAddr) {
		t.Errorf("FreePages of device memory: %v", err)
	}
	if err := m.FreeDevice(pa, PageSize); err != nil {
		t.Error(err)
	}
	if err := m.FreeDevice(pa, PageSize); !errors.Is(err, ErrBadAddr) {
		t.Errorf("double FreeDevice: %v", err)
	}
	// Device memory holds content; the CPU reaches it only uncached.
	if v := m.DeviceWrite("gpu0", true, pb, 64); v == 0 || m.Latest(pb) != v {
		t.Errorf("device write to VRAM: %d", v)
	}
	if _, err := m.Remap(pb, PageSize, Cached); !errors.Is(err, ErrBadAddr) {
		t.Errorf("cached remap of VRAM: %v", err)
	}
	va, err := m.Remap(pb, PageSize, Uncached)
	if err != nil {
		t.Fatal(err)
	}
	if a := m.Read(nil, 0, va, 64); a.Err != nil || a.Stale {
		t.Errorf("uncached read of VRAM: %+v", a)
	}
}

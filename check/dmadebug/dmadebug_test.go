package dmadebug

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
)

// classCase is one class's proof: bad commits the misuse, good is the
// matching correct use.
type classCase struct {
	code      string
	bad, good steps
	// also are the classes debug.c reports together with code for this
	// misuse (sync-cpu-to-device-buffer always comes with a direction
	// mismatch, an overflow with the overlaps that led to it).
	also []string
	// origin must occur in the diagnostic's Origin: the call that made
	// the mapping.
	origin string
}

func classCases() []classCase {
	const (
		from = dma.FromDevice
		to   = dma.ToDevice
		bi   = dma.Bidirectional
	)
	single := "dma_map_single(nic0, va:0xffff888000100000, 1500, "
	good := cat(mapped(from), unmapped(from))

	// 32-byte buffers: two in one cache line, or in two lines.
	small := func(i int, pa mem.PhysAddr) steps {
		a := bufA + mem.DMAAddr(i)*0x1000
		return steps{mapSingle(a, pa, 32, from), checked(a)}
	}
	unsmall := func(i int) steps { return steps{unmapSingle(bufA+mem.DMAAddr(i)*0x1000, 32, from)} }

	var nine, nineSeq steps
	for i := range 9 {
		nine = cat(nine, small(i, physA+mem.PhysAddr(i*4)))
		nineSeq = cat(nineSeq, small(i, physA), unsmall(i))
	}
	for i := range 9 {
		nine = cat(nine, unsmall(i))
	}

	stack := mapSingle(bufA, physA, sizeA, from)
	stack.Class = dma.MemStack

	big := []dma.Segment{{Phys: 0x400000, Addr: 0xa0000, Len: 128 << 10}}
	fits := []dma.Segment{{Phys: 0x400000, Addr: 0xa0000, Len: 64 << 10}, {Phys: 0x410000, Addr: 0xb0000, Len: 64 << 10}}

	coherentVA := vaOf(0x500000)

	return []classCase{
		{code: UnmapUnknown, origin: single,
			bad:  cat(mapped(from), unmapped(from), unmapped(from)),
			good: good},
		{code: UnmapSize, origin: single,
			bad:  cat(mapped(from), steps{unmapSingle(bufA, 1000, from)}),
			good: good},
		{code: UnmapType, origin: single,
			bad: cat(mapped(from), steps{unmapOf(dma.KindPage, bufA, sizeA, from)}),
			good: steps{mapOf(dma.KindPage, bufA, physA, sizeA, from), checked(bufA),
				unmapOf(dma.KindPage, bufA, sizeA, from)}},
		{code: FreeCoherentAddress, origin: "dma_alloc_coherent(nic0, 4096",
			bad:  steps{allocCoherent(0x50000, 0x500000, 4096), freeCoherent(0x50000, coherentVA+64, 4096)},
			good: steps{allocCoherent(0x50000, 0x500000, 4096), freeCoherent(0x50000, coherentVA, 4096)}},
		{code: UnmapSGCount, origin: "dma_map_sg(nic0, sgl, 4, DMA_TO_DEVICE)",
			bad:  steps{mapSG(4, twoSegs, to), unmapSG(2, twoSegs, to)},
			good: steps{mapSG(4, twoSegs, to), unmapSG(4, twoSegs, to)}},
		{code: UnmapDirection, origin: single,
			bad:  cat(mapped(from), unmapped(to)),
			good: good},
		{code: MapErrorUnchecked, origin: single,
			bad:  steps{mapSingle(bufA, physA, sizeA, from), unmapSingle(bufA, sizeA, from)},
			good: good},
		{code: SyncUnknown, origin: single,
			bad:  cat(mapped(from), unmapped(from), steps{syncOf(true, bufA, sizeA, from)}),
			good: cat(mapped(from), steps{syncOf(true, bufA, sizeA, from)}, unmapped(from))},
		{code: SyncRange, origin: single,
			bad:  cat(mapped(from), steps{syncOf(true, bufA+1000, 1000, from)}, unmapped(from)),
			good: cat(mapped(from), steps{syncOf(true, bufA+1000, 500, from)}, unmapped(from))},
		{code: SyncDirection, origin: single,
			bad:  cat(mapped(from), steps{syncOf(true, bufA, sizeA, to)}, unmapped(from)),
			good: cat(mapped(from), steps{syncOf(true, bufA, sizeA, from)}, unmapped(from))},
		{code: SyncCPUToDeviceBuffer, origin: single, also: []string{SyncDirection},
			bad: cat(mapped(to), steps{syncOf(true, bufA, sizeA, from)}, unmapped(to)),
			// debug.c lets a TO_DEVICE mapping be synced for the CPU with
			// DMA_TO_DEVICE (a driver reusing a transmit buffer).
			good: cat(mapped(to), steps{syncOf(true, bufA, sizeA, to), syncOf(false, bufA, sizeA, to)}, unmapped(to))},
		{code: SyncDeviceFromDeviceBuffer, origin: single, also: []string{SyncDirection},
			bad: cat(mapped(from), steps{syncOf(false, bufA, sizeA, to)}, unmapped(from)),
			// The receive-buffer recycle: for the CPU, then back to the
			// device, both DMA_FROM_DEVICE.
			good: cat(mapped(from), steps{syncOf(true, bufA, sizeA, from), syncOf(false, bufA, sizeA, from)}, unmapped(from))},
		{code: SyncSGCount, origin: "dma_map_sg(nic0, sgl, 4, DMA_FROM_DEVICE)",
			bad:  steps{mapSG(4, twoSegs, from), syncSG(true, 2, twoSegs, from), unmapSG(4, twoSegs, from)},
			good: steps{mapSG(4, twoSegs, from), syncSG(true, 4, twoSegs, from), unmapSG(4, twoSegs, from)}},
		{code: MapIllegalMemory, origin: single,
			bad:  steps{stack, checked(bufA), unmapSingle(bufA, sizeA, from)},
			good: good},
		{code: MapResourceRAM, origin: "dma_map_resource(nic0, pa:0x100000",
			bad: steps{mapResource(bufA, physA, 4096, dma.MemLinear), checked(bufA),
				unmapOf(dma.KindResource, bufA, 4096, bi)},
			good: steps{mapResource(bufA, physA, 4096, dma.MemMMIO), checked(bufA),
				unmapOf(dma.KindResource, bufA, 4096, bi)}},
		{code: SGSegment, origin: "dma_map_sg(nic0, sgl, 1, DMA_TO_DEVICE)",
			bad:  steps{mapSG(1, big, to), unmapSG(1, big, to)},
			good: steps{mapSG(2, fits, to), unmapSG(2, fits, to)}},
		{code: CachelineOverlap, origin: "dma_map_single(nic0, va:0xffff888000100020, 32, ",
			bad:  cat(small(0, physA), small(1, physA+32), unsmall(0), unsmall(1)),
			good: cat(small(0, physA), small(1, physA+64), unsmall(0), unsmall(1))},
		{code: CachelineOverflow, origin: "dma_map_single(nic0, va:0xffff888000100020, 32, ", also: []string{CachelineOverlap},
			bad:  nine,
			good: nineSeq},
		{code: UnbindLeak, origin: single,
			bad:  cat(mapped(from), steps{unbind()}),
			good: cat(good, steps{unbind()})},
		{code: CPUAccessDeviceOwned, origin: single,
			bad: cat(mapped(from), steps{cpuRead(physA, 64)}, unmapped(from)),
			good: cat(mapped(from), steps{syncOf(true, bufA, sizeA, from), cpuRead(physA, 64),
				syncOf(false, bufA, sizeA, from)}, unmapped(from), steps{cpuRead(physA, 64)})},
		{code: StaleRead, origin: "dma_map_single(nic0, va:0xffff888000100000, 1500, DMA_TO_DEVICE)",
			// The classic: a receive buffer mapped DMA_TO_DEVICE, so the
			// unmap invalidates nothing and the CPU reads its old lines.
			bad: cat(mapped(to), steps{deviceAccess(bufA, sizeA, true)}, unmapped(to),
				steps{staleCPURead(physA, 64, 3, 7)}),
			good: cat(mapped(from), steps{deviceAccess(bufA, sizeA, true)}, unmapped(from),
				steps{cpuRead(physA, 64)})},
		{code: DeviceAccessUnmapped, origin: single,
			bad:  cat(mapped(from), unmapped(from), steps{deviceAccess(bufA, 64, true)}),
			good: cat(mapped(from), steps{deviceAccess(bufA, 64, true)}, unmapped(from))},
	}
}

// TestClasses proves every class: the misuse is reported (with its
// severity, device and the call that made the mapping) and the correct
// use is not.
func TestClasses(t *testing.T) {
	cases := classCases()
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.code] = true
		t.Run(tc.code, func(t *testing.T) {
			info, ok := check.Lookup(tc.code)
			if !ok {
				t.Fatalf("no class %q", tc.code)
			}
			c := newRig(Options{})
			run(c, tc.bad)
			want := slices.Sorted(slices.Values(append([]string{tc.code}, tc.also...)))
			if got := codes(c); !slices.Equal(got, want) {
				t.Errorf("misuse reported %v, want %v", got, want)
				for _, d := range c.Diagnostics() {
					t.Log(d)
				}
			}
			d, ok := first(c, tc.code)
			if !ok {
				t.Fatalf("misuse not reported")
			}
			if d.Severity != info.Severity || d.Device != nic || d.Time <= 0 || d.Message == "" {
				t.Errorf("got %+v, want severity %s, device %s, a time and a message", d, info.Severity, nic)
			}
			if !strings.Contains(d.Origin, tc.origin) || !strings.Contains(d.Origin, " at ") {
				t.Errorf("origin %q, want the mapping call %q with its time", d.Origin, tc.origin)
			}
			t.Log(d)

			c = newRig(Options{})
			run(c, tc.good)
			for _, d := range c.Diagnostics() {
				t.Errorf("correct use reported: %v", d)
			}
			if n := c.Active(); n != 0 && tc.code != UnbindLeak {
				t.Errorf("%d mappings left active after the correct use", n)
			}
		})
	}
	for _, ci := range Classes() {
		if !seen[ci.Code] {
			t.Errorf("class %s has no case", ci.Code)
		}
	}
}

func TestClassTable(t *testing.T) {
	cl := Classes()
	if len(cl) != 22 {
		t.Fatalf("%d classes, want 22 (19 of debug.c and 3 of dmalab)", len(cl))
	}
	seen := map[string]bool{}
	for i, c := range cl {
		if seen[c.Code] {
			t.Errorf("duplicate code %s", c.Code)
		}
		seen[c.Code] = true
		if c.Summary == "" || c.Source == "" || strings.Contains(c.Summary, "\n") {
			t.Errorf("%s: want a one-line summary and a source: %+v", c.Code, c)
		}
		if c.Severity != check.Error && c.Severity != check.Warning {
			t.Errorf("%s: severity %q", c.Code, c.Severity)
		}
		kernel := strings.HasPrefix(c.Source, "kernel/dma/debug.c: ")
		if kernel != (i < 19) || !kernel && c.Source != "dmalab" {
			t.Errorf("%s (#%d): source %q", c.Code, i+1, c.Source)
		}
		for _, r := range c.Code {
			if !(r >= 'a' && r <= 'z' || r == '-') {
				t.Errorf("%s is not kebab-case", c.Code)
				break
			}
		}
	}
	// The numbering keys scenarios: pin the order.
	order := []string{UnmapUnknown, UnmapSize, UnmapType, FreeCoherentAddress, UnmapSGCount, UnmapDirection,
		MapErrorUnchecked, SyncUnknown, SyncRange, SyncDirection, SyncCPUToDeviceBuffer,
		SyncDeviceFromDeviceBuffer, SyncSGCount, MapIllegalMemory, MapResourceRAM, SGSegment,
		CachelineOverlap, CachelineOverflow, UnbindLeak, CPUAccessDeviceOwned, StaleRead, DeviceAccessUnmapped}
	for i, c := range cl {
		if c.Code != order[i] {
			t.Errorf("class #%d is %s, want %s", i+1, c.Code, order[i])
		}
	}
	if _, ok := check.Lookup("no-such-class"); ok {
		t.Error("Lookup found an unknown code")
	}
}

func TestUnmapUnknown(t *testing.T) {
	t.Run("never mapped", func(t *testing.T) {
		c := newRig(Options{})
		run(c, unmapped(dma.FromDevice))
		d, ok := first(c, UnmapUnknown)
		if !ok || d.Origin != "" || !strings.Contains(d.Message, "never mapped") {
			t.Errorf("got %+v", d)
		}
	})
	t.Run("DMA_MAPPING_ERROR", func(t *testing.T) {
		c := newRig(Options{})
		m := mapSingle(mappingError, physA, sizeA, dma.FromDevice)
		m.Failed = true
		run(c, steps{m, unmapSingle(mappingError, sizeA, dma.FromDevice)})
		d, ok := first(c, UnmapUnknown)
		if !ok || !strings.Contains(d.Message, "DMA_MAPPING_ERROR") || len(c.Diagnostics()) != 1 {
			t.Errorf("got %v", c.Diagnostics())
		}
	})
}

// Every illegal area of check_for_stack, check_for_illegal_area and
// debug_dma_map_single.
func TestMapIllegalMemory(t *testing.T) {
	for _, tc := range []struct {
		class  dma.MemClass
		kind   dma.Kind
		failed bool
		want   bool
	}{
		{dma.MemStack, dma.KindSingle, false, true},
		{dma.MemStack, dma.KindPage, false, true},
		{dma.MemStack, dma.KindSingle, true, true}, // refused by dma_map_single: still reported
		{dma.MemText, dma.KindSingle, false, true},
		{dma.MemVmalloc, dma.KindSingle, false, true},
		{dma.MemVmalloc, dma.KindSingle, true, true}, // checked before the map
		{dma.MemInvalid, dma.KindSingle, false, true},
		{dma.MemMMIO, dma.KindSingle, false, true},
		{dma.MemVmalloc, dma.KindPage, false, false}, // a vmalloc page is a page
		{dma.MemLinear, dma.KindSingle, false, false},
	} {
		c := newRig(Options{})
		m := mapOf(tc.kind, bufA, physA, sizeA, dma.FromDevice)
		m.Class, m.Failed = tc.class, tc.failed
		c.observe(m)
		if got := c.Count(MapIllegalMemory) == 1; got != tc.want {
			t.Errorf("%+v: reported %v, want %v", tc, got, tc.want)
		}
	}
	c := newRig(Options{})
	sg := mapSG(2, twoSegs, dma.ToDevice)
	sg.Class = dma.MemText
	c.observe(sg)
	if c.Count(MapIllegalMemory) != 1 {
		t.Errorf("sg list of kernel text: %v", c.Diagnostics())
	}
}

func TestMapResourceRAMFailed(t *testing.T) {
	c := newRig(Options{})
	m := mapResource(mappingError, physA, 4096, dma.MemLinear)
	m.Failed = true
	c.observe(m)
	if c.Count(MapResourceRAM) != 1 || c.Active() != 0 {
		t.Errorf("failed dma_map_resource of RAM: %v, %d active", c.Diagnostics(), c.Active())
	}
}

func TestSGSegmentBoundary(t *testing.T) {
	var asked []string
	c := newRig(Options{Limits: func(dev string) (SegLimits, bool) {
		asked = append(asked, dev)
		return SegLimits{MaxSegSize: 1 << 20, SegBoundaryMask: 0xffff}, dev == nic
	}})
	across := []dma.Segment{{Phys: 0x400000, Addr: 0xf000, Len: 0x2000}} // 0xf000..0x10fff crosses 64 KiB
	inside := []dma.Segment{{Phys: 0x400000, Addr: 0x10000, Len: 0x10000}}
	run(c, steps{mapSG(1, across, dma.ToDevice), mapSG(1, inside, dma.ToDevice)})
	if c.Count(SGSegment) != 1 || !strings.Contains(c.Diagnostics()[0].Message, "boundary") {
		t.Errorf("got %v", c.Diagnostics())
	}
	if !slices.Equal(asked, []string{nic, nic}) {
		t.Errorf("limits asked for %v, want once per dma_map_sg", asked)
	}
	// A device Limits knows nothing of has Options.Seg (PCI's 64 KiB).
	other := mapSG(1, inside, dma.ToDevice)
	other.Device = "nvme0"
	other.SG = []dma.Segment{{Phys: 0x400000, Addr: 0x20000, Len: 0x20000}}
	c.observe(other)
	if c.Count(SGSegment) != 2 {
		t.Errorf("default limits: %v", c.Diagnostics())
	}
}

func TestSyncBidirectionalExempt(t *testing.T) {
	c := newRig(Options{})
	run(c, cat(mapped(dma.Bidirectional), steps{
		syncOf(true, bufA, sizeA, dma.ToDevice),
		syncOf(false, bufA, sizeA, dma.FromDevice),
		syncOf(true, bufA, sizeA, dma.Bidirectional),
	}, unmapped(dma.Bidirectional)))
	if d := c.Diagnostics(); len(d) != 0 {
		t.Errorf("syncs of a DMA_BIDIRECTIONAL mapping reported: %v", d)
	}
	// The direction still has to match at unmap.
	c = newRig(Options{})
	run(c, cat(mapped(dma.Bidirectional), unmapped(dma.ToDevice)))
	if !slices.Equal(codes(c), []string{UnmapDirection}) {
		t.Errorf("got %v", c.Diagnostics())
	}
}

func TestCachelineToDeviceExempt(t *testing.T) {
	c := newRig(Options{})
	run(c, steps{
		mapSingle(bufA, physA, 32, dma.ToDevice), checked(bufA),
		mapSingle(bufA+0x1000, physA+32, 32, dma.ToDevice), checked(bufA + 0x1000),
		// A device-writable mapping next to device-read-only ones: only
		// mappings the device may write are tracked.
		mapSingle(bufA+0x2000, physA, 16, dma.FromDevice), checked(bufA + 0x2000),
	})
	if d := c.Diagnostics(); len(d) != 0 {
		t.Errorf("TO_DEVICE overlaps reported: %v", d)
	}
	c.observe(mapSingle(bufA+0x3000, physA+48, 16, dma.Bidirectional))
	if !slices.Equal(codes(c), []string{CachelineOverlap}) {
		t.Errorf("BIDIRECTIONAL overlap: %v", c.Diagnostics())
	}
}

func TestCachelineOverflow(t *testing.T) {
	c := newRig(Options{})
	mapN := func(i int) {
		a := bufA + mem.DMAAddr(i)*0x1000
		run(c, steps{mapSingle(a, physA+mem.PhysAddr(i*4), 4, dma.FromDevice), checked(a)})
	}
	for i := range 8 { // 1 mapping and 7 overlaps: the counter is full
		mapN(i)
	}
	if c.Count(CachelineOverlap) != 7 || c.Count(CachelineOverflow) != 0 {
		t.Fatalf("8 mappings: %d overlaps, %d overflows", c.Count(CachelineOverlap), c.Count(CachelineOverflow))
	}
	mapN(8)
	if c.Count(CachelineOverlap) != 8 || c.Count(CachelineOverflow) != 1 {
		t.Fatalf("9 mappings: %d overlaps, %d overflows", c.Count(CachelineOverlap), c.Count(CachelineOverflow))
	}
	d, _ := first(c, CachelineOverflow)
	if d.Severity != check.Warning || !strings.Contains(d.Message, "9 mappings") {
		t.Errorf("got %v", d)
	}
	// The overlap names the oldest mapping still there.
	d, _ = first(c, CachelineOverlap)
	if !strings.Contains(d.Message, "va:0xffff888000100000, 4,") {
		t.Errorf("overlap does not name the first mapping: %s", d.Message)
	}
	for i := range 9 {
		c.observe(unmapSingle(bufA+mem.DMAAddr(i)*0x1000, 4, dma.FromDevice))
	}
	if c.phys.n != 0 || len(c.phys.buckets) != 0 || c.Active() != 0 {
		t.Errorf("after unmapping all: %d indexed, %d active", c.phys.n, c.Active())
	}
	before := len(c.Diagnostics())
	mapN(0)
	if len(c.Diagnostics()) != before {
		t.Errorf("a fresh mapping of the line reported: %v", c.Diagnostics()[before:])
	}
}

func TestUnbind(t *testing.T) {
	c := newRig(Options{})
	run(c, steps{unbind()})
	if len(c.Diagnostics()) != 0 {
		t.Fatalf("unbind with nothing mapped: %v", c.Diagnostics())
	}
	run(c, cat(steps{allocCoherent(0x50000, 0x500000, 4096)}, mapped(dma.FromDevice), steps{unbind()}))
	d, ok := first(c, UnbindLeak)
	if !ok || !strings.Contains(d.Message, "2 mappings") || !strings.Contains(d.Origin, "dma_alloc_coherent") {
		t.Fatalf("got %v", c.Diagnostics())
	}
	// Another device's mappings are not this one's leak.
	other := unbind()
	other.Device = "nvme0"
	c.observe(other)
	if c.Count(UnbindLeak) != 1 {
		t.Errorf("unbind of nvme0 reported nic0's mappings: %v", c.Diagnostics())
	}
}

func TestOwnershipPartialSync(t *testing.T) {
	c := newRig(Options{})
	run(c, cat(mapped(dma.FromDevice), steps{
		syncOf(true, bufA, 64, dma.FromDevice), // the header only
		cpuRead(physA, 64),
		cpuRead(physA+100, 8), // past the synced header
	}))
	if c.Count(CPUAccessDeviceOwned) != 1 {
		t.Fatalf("got %v", c.Diagnostics())
	}
	d, _ := first(c, CPUAccessDeviceOwned)
	if d.Buffer != "pa:0x100064 +8" || !strings.Contains(d.Message, "bytes 0..64") {
		t.Errorf("got %v", d)
	}
	// Back to the device: the header is the device's again.
	run(c, steps{syncOf(false, bufA, 64, dma.FromDevice), cpuWrite(physA, 4)})
	if c.Count(CPUAccessDeviceOwned) != 2 {
		t.Errorf("write after sync_for_device: %v", c.Diagnostics())
	}
	// Memory beside the mapping is the CPU's.
	run(c, steps{cpuRead(physA-64, 64), cpuRead(physA+sizeA, 64)})
	if c.Count(CPUAccessDeviceOwned) != 2 {
		t.Errorf("access beside the mapping: %v", c.Diagnostics())
	}
}

func TestOwnershipCoherentAndResource(t *testing.T) {
	c := newRig(Options{})
	run(c, steps{
		allocCoherent(0x50000, 0x500000, 4096), cpuWrite(0x500000, 64),
		mapResource(0x60000, 0xf0000000, 4096, dma.MemMMIO), checked(0x60000), cpuRead(0xf0000000, 8),
	})
	if len(c.Diagnostics()) != 0 {
		t.Errorf("CPU access to coherent or resource memory reported: %v", c.Diagnostics())
	}
}

func TestFailedAccessIgnored(t *testing.T) {
	c := newRig(Options{})
	a := staleCPURead(physA, 64, 1, 2)
	a.Err = mem.ErrBadAddr
	run(c, cat(mapped(dma.FromDevice), steps{a}))
	if len(c.Diagnostics()) != 0 {
		t.Errorf("an access that did not happen was reported: %v", c.Diagnostics())
	}
}

func TestStaleReadWithoutMapping(t *testing.T) {
	c := newRig(Options{})
	a := staleCPURead(physA, 64, 1, 2)
	a.Kind = mem.DeviceRead
	a.Proc = "nvme0"
	c.access(a)
	d, ok := first(c, StaleRead)
	if !ok || d.Device != "nvme0" || d.Origin != "" || !strings.Contains(d.Message, "version 1") || !strings.Contains(d.Message, "version 2") {
		t.Errorf("got %+v", d)
	}
}

func TestDeviceAccessAcrossMappings(t *testing.T) {
	c := newRig(Options{})
	run(c, steps{
		mapSingle(0x10000, 0x100000, 0x1000, dma.FromDevice), checked(0x10000),
		mapSingle(0x11000, 0x200000, 0x1000, dma.FromDevice), checked(0x11000),
		deviceAccess(0x10800, 0x1000, true), // across both
	})
	if len(c.Diagnostics()) != 0 {
		t.Fatalf("access across adjacent mappings: %v", c.Diagnostics())
	}
	run(c, steps{deviceAccess(0x11800, 0x1000, false)}) // runs off the end
	d, ok := first(c, DeviceAccessUnmapped)
	if !ok || !strings.Contains(d.Message, "dma:0x12000 is not mapped") || !strings.Contains(d.Message, "never mapped") {
		t.Errorf("got %v", c.Diagnostics())
	}
	// Another device's mapping does not cover this one's access.
	other := deviceAccess(0x10000, 64, false)
	other.Device, other.Proc = "nvme0", "nvme0"
	c.observe(other)
	if c.Count(DeviceAccessUnmapped) != 2 {
		t.Errorf("nvme0 used nic0's mapping: %v", c.Diagnostics())
	}
}

func TestSameAddressBestFit(t *testing.T) {
	// Without an IOMMU, mapping one buffer twice gives one bus address
	// twice; each unmap must find its own mapping.
	c := newRig(Options{})
	run(c, steps{
		mapSingle(bufA, physA, sizeA, dma.ToDevice), checked(bufA),
		mapSingle(bufA, physA, 64, dma.ToDevice), checked(bufA),
		unmapSingle(bufA, 64, dma.ToDevice),
		unmapSingle(bufA, sizeA, dma.ToDevice),
	})
	if len(c.Diagnostics()) != 0 || c.Active() != 0 {
		t.Errorf("got %v, %d active", c.Diagnostics(), c.Active())
	}
	// dma_mapping_error marks the oldest unchecked one.
	c = newRig(Options{})
	run(c, steps{
		mapSingle(bufA, physA, sizeA, dma.ToDevice), checked(bufA),
		mapSingle(bufA, physA, 64, dma.ToDevice),
		unmapSingle(bufA, sizeA, dma.ToDevice),
		unmapSingle(bufA, 64, dma.ToDevice),
	})
	if !slices.Equal(codes(c), []string{MapErrorUnchecked}) || c.Count(MapErrorUnchecked) != 1 {
		t.Errorf("got %v", c.Diagnostics())
	}
}

func TestSGAggregatesPerCall(t *testing.T) {
	segs := make([]dma.Segment, 8)
	for i := range segs {
		segs[i] = dma.Segment{Phys: mem.PhysAddr(0x200000 + i*0x10000), Addr: mem.DMAAddr(0x80000 + i*0x1000), Len: 4096}
	}
	c := newRig(Options{})
	run(c, steps{mapSG(8, segs, dma.ToDevice), unmapSG(8, segs, dma.FromDevice)})
	if c.Count(UnmapDirection) != 1 || c.Active() != 0 {
		t.Fatalf("got %v, %d active", c.Diagnostics(), c.Active())
	}
	if d, _ := first(c, UnmapDirection); !strings.Contains(d.Message, "and 7 more segments") {
		t.Errorf("got %v", d)
	}
}

func TestBounded(t *testing.T) {
	var notified int
	chk := check.New(check.Options{MaxDiagnostics: 5, Notify: func(check.Diagnostic) { notified++ }})
	c := &rig{chk, New(chk, Options{})}
	for range 8 {
		run(c, unmapped(dma.FromDevice))
	}
	if len(c.Diagnostics()) != 5 || c.Dropped() != 3 || c.Count(UnmapUnknown) != 8 || notified != 8 {
		t.Errorf("kept %d, dropped %d, counted %d, notified %d", len(c.Diagnostics()), c.Dropped(), c.Count(UnmapUnknown), notified)
	}
	if r := c.Report(); r.Dropped != 3 || len(r.Diagnostics) != 5 {
		t.Errorf("report: %+v", r)
	}
}

func TestJSON(t *testing.T) {
	c := newRig(Options{})
	b, err := json.Marshal(c.Report())
	if err != nil || string(b) != `{"diagnostics":[]}` {
		t.Errorf("empty report: %s, %v", b, err)
	}
	run(c, cat(mapped(dma.FromDevice), unmapped(dma.ToDevice)))
	b, err = json.Marshal(c.Report())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Diagnostics []map[string]any `json:"diagnostics"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Diagnostics) != 1 {
		t.Fatalf("%s: %v", b, err)
	}
	d := doc.Diagnostics[0]
	for _, k := range []string{"class", "severity", "time_ps", "device", "message", "origin", "proc", "buffer"} {
		if _, ok := d[k]; !ok {
			t.Errorf("no %q in %s", k, b)
		}
	}
	if d["class"] != UnmapDirection || d["severity"] != check.Error || d["time_ps"] != float64(3*us) || d["device"] != nic {
		t.Errorf("got %s", b)
	}
}

func TestString(t *testing.T) {
	c := newRig(Options{})
	run(c, cat(mapped(dma.FromDevice), unmapped(dma.ToDevice)))
	want := "3us error unmap-direction nic0 (rx) [dma:0x10000 +1500]: unmapped with DMA_TO_DEVICE, mapped with DMA_FROM_DEVICE; " +
		"made by dma_map_single(nic0, va:0xffff888000100000, 1500, DMA_FROM_DEVICE) at 1us by rx"
	if got := c.Diagnostics()[0].String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestDeterministic(t *testing.T) {
	var all steps
	for _, tc := range classCases() {
		all = cat(all, tc.bad, tc.good)
	}
	a, b := newRig(Options{}), newRig(Options{})
	run(a, all)
	run(b, all)
	if !slices.Equal(a.Diagnostics(), b.Diagnostics()) || len(a.Diagnostics()) == 0 {
		t.Error("two runs of the same events differ")
	}
}

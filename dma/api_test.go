package dma

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

func TestDeviceLookup(t *testing.T) {
	r := newRig(t, server(t, "nic1"), false)
	for _, tc := range []struct {
		name     string
		node     int
		coherent bool
		mask     uint64
	}{
		{"nic0", 0, true, ^uint64(0)},
		{"nic1", 1, false, ^uint64(0)},
		{"nic2", 0, true, 1<<32 - 1},
		{"gpu3", 1, true, ^uint64(0)},
	} {
		d := r.dev(tc.name)
		if d.Name() != tc.name || d.Node() != tc.node || d.Coherent() != tc.coherent || d.Mask() != tc.mask {
			t.Errorf("%s: node %d coherent %v mask %#x", tc.name, d.Node(), d.Coherent(), d.Mask())
		}
		if d.MaxSegmentSize() != 64<<10 || d.SegmentBoundary() != 1<<32-1 {
			t.Errorf("%s: segment limits %d, %#x", tc.name, d.MaxSegmentSize(), d.SegmentBoundary())
		}
		if again := r.dev(tc.name); again != d {
			t.Errorf("%s: a second Device", tc.name)
		}
	}
	d := r.dev("nic0")
	d.SetMaxSegmentSize(1 << 20)
	d.SetSegmentBoundary(1<<16 - 1)
	if d.MaxSegmentSize() != 1<<20 || d.SegmentBoundary() != 1<<16-1 {
		t.Errorf("after dma_set_max_seg_size / dma_set_seg_boundary: %d, %#x", d.MaxSegmentSize(), d.SegmentBoundary())
	}
	if _, err := r.dma.Device("sw0"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("Device(sw0): %v", err)
	}
	z := newRig(t, zynq(t), false)
	if d := z.dev("axidma0"); d.Coherent() || d.Mask() != 1<<32-1 {
		t.Errorf("zynq axidma0: coherent %v mask %#x", d.Coherent(), d.Mask())
	}
}

func TestSetMask(t *testing.T) {
	r := newRig(t, server(t), false)
	d := r.dev("nic0")
	for _, bits := range []int{0, 24, 65} {
		if err := d.SetMask(bits); !errors.Is(err, syscall.EIO) {
			t.Errorf("SetMask(%d): %v, want EIO", bits, err)
		}
	}
	if err := d.SetMask(32); err != nil || d.Mask() != 1<<32-1 {
		t.Errorf("SetMask(32): %v, mask %#x", err, d.Mask())
	}
	_, va := r.highPage(mem.PageSize)
	r.run(func(p *sim.Proc) {
		if h := d.MapSingle(p, va, 100, ToDevice); h >= 1<<32 || !r.last().Bounced {
			t.Errorf("32-bit mask mapped high memory at %v", h)
		}
	})
}

func TestMapSingleMemoryClasses(t *testing.T) {
	r := newRig(t, server(t), false)
	d := r.dev("nic0")
	vm, err := r.mem.Vmalloc(0, 8192)
	if err != nil {
		t.Fatal(err)
	}
	remapPA, _ := r.mem.AllocPages(0, mem.PageSize, mem.ZoneNormal)
	remap, err := r.mem.Remap(remapPA, mem.PageSize, mem.Uncached)
	if err != nil {
		t.Fatal(err)
	}
	linPA, lin := r.kmalloc(512)
	_, textPA, _ := r.mem.Classify(r.mem.TextAddr())
	for _, tc := range []struct {
		name     string
		va       func() mem.VirtAddr
		class    MemClass
		wantAddr mem.DMAAddr // MappingErrorAddr for a failure
		warn     string
	}{
		{"linear", func() mem.VirtAddr { return lin }, MemLinear, mem.DMAAddr(linPA), ""},
		{"text", r.mem.TextAddr, MemText, mem.DMAAddr(textPA), ""},
		{"vmalloc", func() mem.VirtAddr { return vm }, MemVmalloc, MappingErrorAddr, "rejecting DMA map of vmalloc memory"},
		{"remap", func() mem.VirtAddr { return remap }, MemVmalloc, MappingErrorAddr, "rejecting DMA map of vmalloc memory"},
		{"stack", func() mem.VirtAddr { return r.mem.StackAddr("drv") }, MemStack, MappingErrorAddr, "rejecting DMA map of vmalloc memory"},
		{"invalid", func() mem.VirtAddr { return 0x1234 }, MemInvalid, MappingErrorAddr, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.events = nil
			va := tc.va()
			r.run(func(p *sim.Proc) {
				h := d.MapSingle(p, va, 64, ToDevice)
				if h != tc.wantAddr {
					t.Errorf("handle %v, want %v", h, tc.wantAddr)
				}
				e := r.last()
				if e.Class != tc.class || e.Warn != tc.warn || e.Failed != (h == MappingErrorAddr) || e.CPUAddr != va {
					t.Errorf("event %+v", e)
				}
			})
		})
	}
}

func TestMapPageResourceAndDirections(t *testing.T) {
	r := newRig(t, server(t), false)
	d, d32 := r.dev("nic0"), r.dev("nic2")
	pa, va := r.kmalloc(4096)
	const mmio = mem.PhysAddr(0x3f00_0000_0000) // no RAM there: a BAR
	r.run(func(p *sim.Proc) {
		if h := d.MapPage(p, pa&^(mem.PageSize-1), uint64(pa)&(mem.PageSize-1), 100, FromDevice); h != mem.DMAAddr(pa) {
			t.Errorf("map_page: %v", h)
		}
		if e := r.last(); e.Kind != KindPage || e.Phys != pa || e.Class != MemLinear {
			t.Errorf("map_page event %+v", e)
		}
		if h := d.MapPage(p, mmio, 0, 100, FromDevice); h != MappingErrorAddr || r.last().Class != MemInvalid {
			t.Errorf("map_page of MMIO: %v %v", h, r.last().Class)
		}
		if h := d.MapResource(p, mmio, 4096, Bidirectional); h != mem.DMAAddr(mmio) || r.last().Class != MemMMIO {
			t.Errorf("map_resource: %v class %v", h, r.last().Class)
		}
		if h := d32.MapResource(p, mmio, 4096, Bidirectional); h != MappingErrorAddr || !strings.Contains(r.last().Warn, "overflow") || r.last().Bounced {
			t.Errorf("map_resource beyond a 32-bit mask: %v %+v", h, r.last())
		}
		if h := d.MapResource(p, pa, 4096, Bidirectional); h != mem.DMAAddr(pa) || r.last().Class != MemLinear {
			t.Errorf("map_resource of RAM: %v class %v", h, r.last().Class)
		}
		d.UnmapResource(p, mem.DMAAddr(mmio), 4096, Bidirectional)
		if e := r.last(); e.Op != OpUnmap || e.Kind != KindResource {
			t.Errorf("unmap_resource event %+v", e)
		}
		for _, dir := range []Direction{None, 9} {
			if h := d.MapSingle(p, va, 100, dir); h != MappingErrorAddr {
				t.Errorf("map with %v: %v", dir, h)
			}
		}
	})
}

// TestUnmapTrustsItsArguments: an unmap of an address never mapped is
// the for_cpu cache operation at the address it names, as dma-direct
// does; a wrong size acts over the size passed; an address that is not
// RAM does nothing. None panics.
func TestUnmapTrustsItsArguments(t *testing.T) {
	r := newRig(t, server(t, "nic0"), false)
	d := r.dev("nic0")
	pa, va := r.kmalloc(1024)
	r.run(func(p *sim.Proc) {
		v := r.mem.Write(p, 0, va, 1024)
		d.UnmapSingle(p, mem.DMAAddr(pa), 128, FromDevice)
		if got := observedOp(r.mem, pa, v); got != "invalidate" {
			t.Errorf("first line after unmap of an unknown address: %s", got)
		}
		if got := observedOp(r.mem, pa+512, v); got != "none" {
			t.Errorf("beyond the size passed: %s", got)
		}
		if e := r.last(); e.Op != OpUnmap || e.Addr != mem.DMAAddr(pa) || e.Size != 128 {
			t.Errorf("event %+v", e)
		}
		d.UnmapSingle(p, 0x3f00_0000_0000, 4096, FromDevice)
		d.UnmapSingle(p, MappingErrorAddr, 4096, FromDevice)
		d.SyncSingleForCPU(p, 0x3f00_0000_0000, 4096, FromDevice)
		d.UnmapSG(p, nil, 3, FromDevice)
	})
}

func TestCoherentAlloc(t *testing.T) {
	t.Run("coherent device: cached linear map", func(t *testing.T) {
		r := newRig(t, server(t), true)
		d := r.dev("nic0")
		r.run(func(p *sim.Proc) {
			va, h, err := d.AllocCoherent(p, 3000)
			if err != nil {
				t.Fatal(err)
			}
			cls, pa, attr := r.mem.Classify(va)
			if cls != mem.ClassLinear || attr != mem.Cached || h != mem.DMAAddr(pa) {
				t.Errorf("va %v: %v %v pa %v, handle %v", va, cls, attr, pa, h)
			}
			if e := r.last(); e.Op != OpAllocCoherent || e.Kind != KindCoherent || e.Addr != h || e.CPUAddr != va || e.Phys != pa || e.Size != 3000 {
				t.Errorf("event %+v", e)
			}
			r.mem.WriteBytes(p, 0, va, fill("ring", 4096))
			d.FreeCoherent(p, 3000, va, h)
			if e := r.last(); e.Op != OpFreeCoherent || e.Warn != "" {
				t.Errorf("free event %+v", e)
			}
			va2, h2, err := d.AllocCoherent(p, 4096)
			if err != nil || h2 != h {
				t.Fatalf("realloc: %v %v (want the freed pages %v)", h2, err, h)
			}
			got := make([]byte, 4096)
			r.mem.ReadBytes(p, 0, va2, got)
			if !bytes.Equal(got, make([]byte, 4096)) {
				t.Error("coherent buffer not zeroed")
			}
		})
	})
	t.Run("non-coherent device: flushed, uncached remap", func(t *testing.T) {
		spec := zynq(t)
		r := newRig(t, spec, false)
		d := r.dev("gem0")
		n := spec.Nodes[0]
		r.run(func(p *sim.Proc) {
			va, h, err := d.AllocCoherent(p, 4096)
			if err != nil {
				t.Fatal(err)
			}
			cls, pa, attr := r.mem.Classify(va)
			if cls != mem.ClassRemap || attr != mem.Uncached || h != mem.DMAAddr(pa) {
				t.Errorf("va %v: %v %v pa %v, handle %v", va, cls, attr, pa, h)
			}
			want := 4096/sim.Time(n.Cache.LineSize.V)*n.Cache.WritebackCost.V + sim.TransferTime(4096, float64(n.Cache.UncachedRate.V))
			if p.Now() != want {
				t.Errorf("cost %v, want flush + uncached memset %v", p.Now(), want)
			}
			v := r.mem.Write(p, 0, va, 64)
			if _, present, _ := r.mem.CacheLine(0, pa); present || r.mem.DRAMVersion(pa) != v {
				t.Error("a CPU write to the coherent buffer did not go straight to DRAM")
			}
			d.FreeCoherent(p, 4096, va, h)
			if c, _, _ := r.mem.Classify(va); c != mem.ClassInvalid {
				t.Errorf("remap left after free: %v", c)
			}
			if e := r.last(); e.Class != MemVmalloc || e.Warn != "" {
				t.Errorf("free event %+v", e)
			}
			d.FreeCoherent(p, 4096, va, h)
			if r.last().Warn == "" {
				t.Error("double free: no warning in the event")
			}
		})
	})
	t.Run("32-bit mask: pages below 4 GiB", func(t *testing.T) {
		r := newRig(t, server(t), false)
		d := r.dev("nic2")
		r.run(func(p *sim.Proc) {
			_, h, err := d.AllocCoherent(p, 1<<20)
			if err != nil || h >= 1<<32 {
				t.Errorf("handle %v, %v", h, err)
			}
			if _, _, err := d.AllocCoherent(p, 0); !errors.Is(err, syscall.EINVAL) || !r.last().Failed {
				t.Errorf("size 0: %v", err)
			}
			if _, _, err := d.AllocCoherent(p, 8<<30); !errors.Is(err, mem.ErrNoMemory) {
				t.Errorf("8 GiB below 4 GiB: %v", err)
			}
		})
	})
}

func TestScatterGather(t *testing.T) {
	r := swiotlbRig(t, 1<<20, false)
	d, d32 := r.dev("nic0"), r.dev("nic2")
	base, _ := r.highPage(2 << 20)
	sgt := SGAllocTable(3)
	for i := range sgt.SGL {
		sgt.SGL[i].SetPage(base+mem.PhysAddr(i)*2*mem.PageSize, 3000, 100)
	}
	r.run(func(p *sim.Proc) {
		if n := d.MapSG(p, sgt.SGL, 3, ToDevice); n != 3 {
			t.Fatalf("map_sg = %d", n)
		}
		e := r.last()
		if e.Kind != KindSG || e.NEnts != 3 || e.Mapped != 3 || len(e.SG) != 3 || e.Call != "dma_map_sg(nic0, sgl[3], 3, DMA_TO_DEVICE)" {
			t.Errorf("event %+v", e)
		}
		for i, sg := range sgt.SGL {
			if sg.DMAAddress != mem.DMAAddr(sg.Phys()) || sg.DMALength != 3000 || e.SG[i] != (Segment{sg.Phys(), sg.DMAAddress, 3000, 3000}) {
				t.Errorf("entry %d: %+v / %+v", i, sg, e.SG[i])
			}
		}
		d.UnmapSG(p, sgt.SGL, 3, ToDevice)
		if e := r.last(); e.Op != OpUnmap || e.NEnts != 3 || len(e.SG) != 3 {
			t.Errorf("unmap event %+v", e)
		}

		// Through a 32-bit mask every entry bounces.
		if err := d32.MapSGTable(p, sgt, FromDevice); err != nil || sgt.Nents != 3 {
			t.Fatalf("map_sgtable: %v, nents %d", err, sgt.Nents)
		}
		for i, sg := range sgt.SGL {
			if sg.DMAAddress >= 1<<32 {
				t.Errorf("entry %d at %v", i, sg.DMAAddress)
			}
		}
		if !r.last().Bounced || r.dma.Swiotlb().Used != 3*2 {
			t.Errorf("bounced %v, slots used %d", r.last().Bounced, r.dma.Swiotlb().Used)
		}
		d32.SyncSGTableForCPU(p, sgt, FromDevice)
		d32.SyncSGTableForDevice(p, sgt, FromDevice)
		d32.UnmapSGTable(p, sgt, FromDevice)
		if r.dma.Swiotlb().Used != 0 {
			t.Error("slots left after unmap_sgtable")
		}

		// A failure part-way leaves nothing mapped.
		big := make([]Scatterlist, 5)
		for i := range big {
			big[i].SetPage(base+mem.PhysAddr(i*MaxBounceSize), MaxBounceSize, 0)
		}
		if n := d32.MapSG(p, big, 5, ToDevice); n != 0 {
			t.Errorf("map_sg over a full pool = %d", n)
		}
		if e := r.last(); !e.Failed || e.Mapped != 0 || !strings.Contains(e.Warn, "swiotlb buffer is full") {
			t.Errorf("failed map_sg event %+v", e)
		}
		if r.dma.Swiotlb().Used != 0 {
			t.Errorf("%d slots left after a failed map_sg", r.dma.Swiotlb().Used)
		}
		if err := d32.MapSGTable(p, &SGTable{SGL: big, OrigNents: 5}, ToDevice); !errors.Is(err, syscall.EIO) {
			t.Errorf("map_sgtable over a full pool: %v", err)
		}
		if err := d.MapSGTable(p, &SGTable{SGL: big, OrigNents: 6}, ToDevice); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("map_sgtable with nents beyond the list: %v", err)
		}
	})
}

func TestScatterlistHelpers(t *testing.T) {
	r := newRig(t, server(t), false)
	pa, va := r.kmalloc(100)
	var sg Scatterlist
	if err := sg.SetBuf(r.mem, va, 100); err != nil {
		t.Fatal(err)
	}
	if sg.Phys() != pa || sg.Page%mem.PageSize != 0 || sg.Length != 100 {
		t.Errorf("sg_set_buf: %+v", sg)
	}
	vm, _ := r.mem.Vmalloc(0, 4096)
	if err := sg.SetBuf(r.mem, vm, 100); !errors.Is(err, mem.ErrBadAddr) {
		t.Errorf("sg_set_buf of vmalloc memory: %v", err)
	}
	sgl := []Scatterlist{sg, sg}
	SGInitTable(sgl)
	if sgl[0] != (Scatterlist{}) {
		t.Error("sg_init_table left an entry")
	}
}

func TestDeviceAccess(t *testing.T) {
	r := newRig(t, server(t), false)
	d, d32 := r.dev("nic0"), r.dev("nic2")
	pa, _ := r.highPage(mem.PageSize)
	if _, err := d.Write(mem.DMAAddr(pa), 64); err != nil {
		t.Fatal(err)
	}
	if e := r.last(); e.Op != OpDeviceAccess || !e.Write || e.Phys != pa || e.Device != "nic0" || e.Call != "device_write(nic0, dma:0x"+strings.TrimPrefix(pa.String(), "pa:0x")+", 64)" {
		t.Errorf("event %+v", e)
	}
	if a, err := d.Read(mem.DMAAddr(pa), 64); err != nil || a.Stale {
		t.Errorf("read back: %+v %v", a, err)
	}
	if _, err := d32.Read(mem.DMAAddr(pa), 64); !errors.Is(err, mem.ErrBadAddr) {
		t.Errorf("32-bit device reading above 4 GiB: %v", err)
	}
	if _, err := d.Read(0x3f00_0000_0000, 64); !errors.Is(err, mem.ErrBadAddr) || !r.last().Failed {
		t.Errorf("read of MMIO: %v", err)
	}
	if _, err := d.WriteBytes(0x3f00_0000_0000, []byte("x")); err == nil {
		t.Error("write of MMIO succeeded")
	}
}

// TestEvents pins the fields and the C rendering of each call's event.
func TestEvents(t *testing.T) {
	r := newRig(t, server(t), false)
	d := r.dev("nic0")
	pa, va := r.kmalloc(1500)
	h := mem.DMAAddr(pa)
	hex := strings.TrimPrefix
	r.run(func(p *sim.Proc) {
		p.Sleep(5 * sim.Microsecond)
		d.MapSingle(p, va, 1500, FromDevice)
		d.MappingError(h)
		d.SyncSingleForCPU(p, h+100, 200, FromDevice)
		d.SyncSingleForDevice(p, h+100, 200, FromDevice)
		d.UnmapSingle(p, h, 1500, FromDevice)
		d.Unbind(p)
	})
	want := []Event{
		{Op: OpMap, Kind: KindSingle, Addr: h, Size: 1500, Dir: FromDevice, CPUAddr: va, Phys: pa, Class: MemLinear,
			Call: "dma_map_single(nic0, va:0x" + hex(va.String(), "va:0x") + ", 1500, DMA_FROM_DEVICE)"},
		{Op: OpMappingError, Addr: h, Call: "dma_mapping_error(nic0, dma:0x" + hex(h.String(), "dma:0x") + ")"},
		{Op: OpSyncForCPU, Kind: KindSingle, Addr: h + 100, Size: 200, Dir: FromDevice,
			Call: "dma_sync_single_for_cpu(nic0, dma:0x" + hex((h+100).String(), "dma:0x") + ", 200, DMA_FROM_DEVICE)"},
		{Op: OpSyncForDevice, Kind: KindSingle, Addr: h + 100, Size: 200, Dir: FromDevice,
			Call: "dma_sync_single_for_device(nic0, dma:0x" + hex((h+100).String(), "dma:0x") + ", 200, DMA_FROM_DEVICE)"},
		{Op: OpUnmap, Kind: KindSingle, Addr: h, Size: 1500, Dir: FromDevice,
			Call: "dma_unmap_single(nic0, dma:0x" + hex(h.String(), "dma:0x") + ", 1500, DMA_FROM_DEVICE)"},
		{Op: OpUnbind, Call: "device_release_driver(nic0)"},
	}
	if len(r.events) != len(want) {
		t.Fatalf("%d events, want %d", len(r.events), len(want))
	}
	for i, w := range want {
		w.Time, w.Device = 5*sim.Microsecond, "nic0"
		if w.Op != OpMappingError {
			w.Proc = "drv"
		}
		if got := r.events[i]; got.Call != w.Call || got.Op != w.Op || got.Kind != w.Kind || got.Addr != w.Addr ||
			got.Size != w.Size || got.Dir != w.Dir || got.CPUAddr != w.CPUAddr || got.Phys != w.Phys ||
			got.Class != w.Class || got.Proc != w.Proc || got.Device != w.Device || got.Time != w.Time || got.Failed {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, got, w)
		}
	}
}

// TestEventOrder: a map reports after its bounce copy, an unmap before
// its copy back, so the CPU's copies inside the DMA layer fall where the
// CPU owns the buffer.
func TestEventOrder(t *testing.T) {
	r := newRig(t, server(t), false)
	d := r.dev("nic2")
	var log []string
	r.dma.Hooks.Hook(func(e *Event) { log = append(log, e.Op.String()) })
	r.mem.Hooks.Hook(func(a *mem.Access) { log = append(log, a.Kind.String()) })
	_, va := r.highPage(mem.PageSize)
	r.run(func(p *sim.Proc) {
		h := d.MapSingle(p, va, 100, FromDevice)
		d.Write(h, 100)
		d.UnmapSingle(p, h, 100, FromDevice)
	})
	want := "cpu-read cpu-write map device_access device-write unmap cpu-read cpu-write"
	if got := strings.Join(log, " "); got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
}

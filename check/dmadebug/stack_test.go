package dmadebug_test

import (
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// stack is a machine with the DMA layer and the checker attached, as
// `dmalab check` wires them.
type stack struct {
	m      *machine.Machine
	memory *mem.Memory
	dma    *dma.DMA
	chk    *check.Checker
	pack   *dmadebug.Pack
}

func newStack(t *testing.T, preset string) *stack {
	t.Helper()
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.New(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	memory := m.Mem
	x, err := dma.New(m, memory)
	if err != nil {
		t.Fatal(err)
	}
	chk := check.New(check.Options{})
	pack := dmadebug.Attach(chk, x, memory, dmadebug.Options{})
	return &stack{m, memory, x, chk, pack}
}

// TestRealStackCorrectUse runs correct driver code through package dma
// and package mem, on a non-coherent SoC and a coherent PCIe host: the
// events they really emit give no diagnostic.
func TestRealStackCorrectUse(t *testing.T) {
	for _, tc := range []struct{ preset, device string }{
		{"zynq-7000", "gem0"},
		{"h200-pcie", "gpu0"},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			s := newStack(t, tc.preset)
			d, err := s.dma.Device(tc.device)
			if err != nil {
				t.Fatal(err)
			}
			mm := s.memory
			s.m.Engine.Spawn("driver", func(p *sim.Proc) {
				// Receive, with the buffer recycled once.
				rx, _ := mm.Kmalloc(0, 2048)
				h := d.MapSingle(p, rx, 1500, dma.FromDevice)
				if d.MappingError(h) {
					t.Error("rx map failed")
					return
				}
				d.Write(h, 1500)
				d.SyncSingleForCPU(p, h, 64, dma.FromDevice)
				mm.Read(p, 0, rx, 64)
				d.SyncSingleForDevice(p, h, 64, dma.FromDevice)
				d.Write(h, 1500)
				d.UnmapSingle(p, h, 1500, dma.FromDevice)
				mm.Read(p, 0, rx, 1500)

				// Transmit.
				tx, _ := mm.Kmalloc(0, 4096)
				mm.Write(p, 0, tx, 4096)
				h = d.MapSingle(p, tx, 4096, dma.ToDevice)
				if d.MappingError(h) {
					t.Error("tx map failed")
					return
				}
				d.Read(h, 4096)
				d.UnmapSingle(p, h, 4096, dma.ToDevice)

				// A descriptor ring in coherent memory.
				ring, rh, err := d.AllocCoherent(p, 4096)
				if err != nil {
					t.Error(err)
					return
				}
				mm.Write(p, 0, ring, 64)
				d.Read(rh, 64)
				d.Write(rh+64, 64)
				mm.Read(p, 0, ring+64, 64)

				// A scatter-gather read of three pages.
				sgl := make([]dma.Scatterlist, 3)
				for i := range sgl {
					pg, _ := mm.Kmalloc(0, mem.PageSize)
					if err := sgl[i].SetBuf(mm, pg, mem.PageSize); err != nil {
						t.Error(err)
						return
					}
				}
				n := d.MapSG(p, sgl, 3, dma.FromDevice)
				if n == 0 {
					t.Error("map_sg failed")
					return
				}
				for i := range n {
					d.Write(sgl[i].DMAAddress, sgl[i].DMALength)
				}
				d.SyncSGForCPU(p, sgl, 3, dma.FromDevice)
				d.SyncSGForDevice(p, sgl, 3, dma.FromDevice)
				d.UnmapSG(p, sgl, 3, dma.FromDevice)

				d.FreeCoherent(p, 4096, ring, rh)
				d.Unbind(p)
			})
			s.m.Engine.Run()
			for _, diag := range s.chk.Diagnostics() {
				t.Errorf("correct use reported: %v", diag)
			}
			if n := s.pack.Active(); n != 0 {
				t.Errorf("%d mappings left", n)
			}
		})
	}
}

// TestRealStackMisuse: misuse through the real layers is reported.
func TestRealStackMisuse(t *testing.T) {
	s := newStack(t, "zynq-7000")
	d, _ := s.dma.Device("gem0")
	mm := s.memory
	s.m.Engine.Spawn("driver", func(p *sim.Proc) {
		buf, _ := mm.Kmalloc(0, 2048)
		h := d.MapSingle(p, buf, 1500, dma.FromDevice)
		d.MappingError(h)
		d.UnmapSingle(p, h, 1000, dma.FromDevice) // wrong size
		d.Write(h, 64)                            // after unmap
		d.MapSingle(p, mm.StackAddr("driver"), 64, dma.FromDevice)
		sgl := make([]dma.Scatterlist, 1)
		pg, _ := mm.Kmalloc(0, mem.PageSize)
		_ = sgl[0].SetBuf(mm, pg, mem.PageSize)
		d.SetMaxSegmentSize(1024)
		d.MapSG(p, sgl, 1, dma.ToDevice)
		d.Unbind(p)
	})
	s.m.Engine.Run()
	for _, code := range []string{dmadebug.UnmapSize, dmadebug.DeviceAccessUnmapped, dmadebug.MapIllegalMemory, dmadebug.SGSegment, dmadebug.UnbindLeak} {
		if s.chk.Count(code) != 1 {
			t.Errorf("%s reported %d times", code, s.chk.Count(code))
		}
	}
	if t.Failed() {
		for _, diag := range s.chk.Diagnostics() {
			t.Log(diag)
		}
	}
}

// TestAttachTakesPlatformValues: attached with zero options, the pack
// tracks the memory's cache line (the Zynq's is 32 bytes: two receive
// buffers 32 bytes apart share no line there) and asks the device for
// its segment limits; options given win.
func TestAttachTakesPlatformValues(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opt      dmadebug.Options
		overlaps int
	}{
		{"from the platform", dmadebug.Options{}, 0},
		{"given", dmadebug.Options{LineSize: 64}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := platform.Preset("zynq-7000")
			if err != nil {
				t.Fatal(err)
			}
			m, err := machine.New(spec, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			x, err := dma.New(m, m.Mem)
			if err != nil {
				t.Fatal(err)
			}
			chk := check.New(check.Options{})
			dmadebug.Attach(chk, x, m.Mem, tc.opt)
			d, err := x.Device("gem0")
			if err != nil {
				t.Fatal(err)
			}
			m.Engine.Spawn("driver", func(p *sim.Proc) {
				buf, _ := m.Mem.Kmalloc(0, 128)
				buf += 64 - buf%64 // two 32-byte buffers in one 64-byte block
				for _, b := range []mem.VirtAddr{buf, buf + 32} {
					if d.MappingError(d.MapSingle(p, b, 32, dma.FromDevice)) {
						t.Error("map failed")
					}
				}
			})
			m.Engine.Run()
			if n := chk.Count(dmadebug.CachelineOverlap); n != tc.overlaps {
				t.Errorf("%d cache-line overlaps, want %d: %v", n, tc.overlaps, chk.Diagnostics())
			}
		})
	}
}

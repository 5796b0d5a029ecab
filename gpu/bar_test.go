package gpu

import (
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestBAR1Accounting: the H200's aperture is the spec's 256 GiB with
// the driver's 5056 KiB counted as used from the start, as nvidia-smi
// showed on the measured machine; with resizable BAR it covers VRAM.
func TestBAR1Accounting(t *testing.T) {
	r := h200(t)
	ap := r.d.BAR1()
	got := ap.Info()
	want := BAR1MemoryInfo{Total: 256 << 30, Used: 5056 << 10, Free: 256<<30 - 5056<<10}
	if got != want {
		t.Errorf("BAR1 info %+v, want %+v", got, want)
	}
	if !ap.CoversVRAM() {
		t.Error("a 256 GiB BAR1 does not cover 141 GiB of VRAM")
	}
	if ap.Base()%(256<<30) != 0 {
		t.Errorf("BAR1 at %v is not aligned to its size", ap.Base())
	}
	if _, ok := r.m.Mem.NodeOf(ap.Base()); ok {
		t.Errorf("BAR1 at %v overlaps DRAM", ap.Base())
	}
}

// TestBAR1Rounding: a mapping covers whole 64 KiB pages; an unaligned
// byte costs a page, and its BAR address translates back to its VRAM.
func TestBAR1Rounding(t *testing.T) {
	r := h200(t)
	ap := r.d.BAR1()
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, r.d, 4<<20)
		m, err := ap.Map(a+100000, 1)
		must(t, err)
		if m.Addr != a+65536 || m.Size != BARPageSize || len(m.Pages) != 1 {
			t.Errorf("mapping of one byte at +100000: %v +%#x, %d pages; want +65536, one page", m.Addr, m.Size, len(m.Pages))
		}
		if used := ap.Info().Used; used != ap.Reserved()+BARPageSize {
			t.Errorf("used %d, want reserved + one page", used)
		}
		_, phys, _ := r.sys.Resolve(a+65536, 1)
		pg := m.Pages[0]
		if pg.VRAM != phys[0].Start {
			t.Errorf("page VRAM %v, want %v", pg.VRAM, phys[0].Start)
		}
		if v, ok := ap.Translate(pg.BAR + 123); !ok || v != pg.VRAM+123 {
			t.Errorf("Translate(BAR+123) = %v, %v", v, ok)
		}
		if _, ok := ap.Translate(ap.Base()); ok {
			t.Error("the driver's reserve translates")
		}
		two, err := ap.Map(a+65536-1, 2)
		must(t, err)
		if len(two.Pages) != 2 {
			t.Errorf("2 bytes across a page boundary: %d pages", len(two.Pages))
		}
		must(t, ap.Unmap(m))
		must(t, ap.Unmap(two))
		mustErr(t, ap.Unmap(m), ErrInvalidValue)
		if _, ok := ap.Translate(pg.BAR); ok {
			t.Error("unmapped page still translates")
		}
		if used := ap.Info().Used; used != ap.Reserved() {
			t.Errorf("used %d after unmapping all, want the reserve %d", used, ap.Reserved())
		}
	})
}

// TestBAR1OverlapShares: overlapping and duplicate mappings share BAR
// pages (CUDA 7.0+): the space used is the union, and a page is freed
// only when its last mapping goes. Two small buffers in one 64 KiB page
// share it too (NVIDIA's "Developing a Linux Kernel Module using
// GPUDirect RDMA").
func TestBAR1OverlapShares(t *testing.T) {
	r := h200(t)
	ap := r.d.BAR1()
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, r.d, 1<<20)
		first, err := ap.Map(a, 256<<10) // pages 0..3
		must(t, err)
		second, err := ap.Map(a+128<<10, 256<<10) // pages 2..5
		must(t, err)
		dup, err := ap.Map(a, 256<<10)
		must(t, err)
		if used := ap.Info().Used - ap.Reserved(); used != 6*BARPageSize {
			t.Errorf("three overlapping mappings use %d KiB, want 6 pages (384 KiB)", used>>10)
		}
		if first.Pages[2].BAR != second.Pages[0].BAR || first.Pages[0].BAR != dup.Pages[0].BAR {
			t.Error("overlapping pages got different BAR addresses")
		}
		must(t, ap.Unmap(first))
		must(t, ap.Unmap(dup))
		if used := ap.Info().Used - ap.Reserved(); used != 4*BARPageSize {
			t.Errorf("after unmapping the first two, %d KiB used, want the second's 4 pages", used>>10)
		}
		must(t, ap.Unmap(second))

		x := r.alloc(p, r.d, 1000)
		y := r.alloc(p, r.d, 1000)
		mx, err := ap.Map(x, 1000)
		must(t, err)
		my, err := ap.Map(y, 1000)
		must(t, err)
		if mx.Pages[0].BAR != my.Pages[0].BAR || ap.Info().Used != ap.Reserved()+BARPageSize {
			t.Error("two small buffers in one 64 KiB page do not share its BAR page")
		}
	})
}

// TestBAR1Exhaustion: on a small (non-resizable) BAR1 mappings compete:
// one that needs more new pages than are free fails with
// ErrBARExhausted and maps nothing, while one sharing mapped pages still
// succeeds.
func TestBAR1Exhaustion(t *testing.T) {
	spec := preset(t, "h200-pcie")
	spec.GPUs[0].BAR1.V = 16 << 20
	r := newRig(t, spec, false)
	ap := r.d.BAR1()
	if ap.CoversVRAM() {
		t.Error("a 16 MiB BAR1 covers VRAM")
	}
	r.run(func(p *sim.Proc) {
		a := r.alloc(p, r.d, 8<<20)
		b := r.alloc(p, r.d, 8<<20)
		m, err := ap.Map(a, 8<<20)
		must(t, err)
		before := ap.Info()
		_, err = ap.Map(b, 8<<20)
		mustErr(t, err, ErrBARExhausted)
		if ap.Info() != before {
			t.Errorf("a failed mapping changed the accounting: %+v, was %+v", ap.Info(), before)
		}
		if _, err := ap.Map(a+64<<10, 1<<20); err != nil {
			t.Errorf("a mapping within mapped pages needs no new space: %v", err)
		}
		free := ap.Info().Free
		if _, err := ap.Map(b, free); err != nil {
			t.Errorf("mapping exactly the free space: %v", err)
		}
		if ap.Info().Free != 0 {
			t.Errorf("free %d, want 0", ap.Info().Free)
		}
		must(t, ap.Unmap(m))
	})
}

// TestBAR1OnlyDeviceMemory: BAR1 maps this GPU's VRAM, nothing else.
func TestBAR1OnlyDeviceMemory(t *testing.T) {
	r := h200(t)
	host := r.hostBuf(1<<20, 0)
	r.run(func(p *sim.Proc) {
		_, err := r.d.BAR1().Map(host, 4096)
		mustErr(t, err, ErrInvalidValue)
		man, err := r.sys.AllocManaged(p, 1<<20)
		must(t, err)
		_, err = r.d.BAR1().Map(man.Addr, 4096)
		mustErr(t, err, ErrInvalidValue)
		must(t, r.sys.Free(p, man.Addr))
	})
}

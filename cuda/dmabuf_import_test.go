package cuda

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// TestDMABufImport: a dma-buf of GPU memory is a dmabuf.Buffer with the
// GPU driver as exporter. A NIC's driver, in another process, gets it
// from the descriptor it received, attaches and maps it: one segment per
// VRAM range, at the range's address (dma_map_resource under
// dma-direct). The CPU cannot mmap it (nvidia's ENOTSUPP); the last
// reference runs the GPU driver's release once.
func TestDMABufImport(t *testing.T) {
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x, err := dma.New(m, m.Mem)
	must(t, err)
	sys, err := gpu.New(x)
	must(t, err)
	l := dmabuf.New(m.Engine)
	d, err := New(sys, WithDMABuf(l))
	must(t, err)
	if d.DMABufs() != l {
		t.Fatal("the driver exports elsewhere")
	}
	pr, err := d.NewProcess("app", 0)
	must(t, err)
	ctx, err := pr.PrimaryContext(0)
	must(t, err)
	nic, err := x.Device("nic0")
	must(t, err)
	m.Engine.Spawn("app", func(p *sim.Proc) {
		dv, err := ctx.MemAlloc(p, 4<<20)
		must(t, err)
		fd, err := ctx.MemGetHandleForAddressRange(p, dv, 4<<20, MemRangeHandleTypeDMABufFD, 0)
		must(t, err)
		exp, err := pr.DMABuf(fd)
		must(t, err)
		netd, err := d.Kernel().NewProcess("netd", 0)
		must(t, err)
		nfd, err := pr.KernelProcess().SendFD(netd, fd)
		must(t, err)
		b, err := l.Get(p, netd, nfd)
		must(t, err)
		if b != exp.Buffer() || b.ExpName() != ExpName || b.Size() != 4<<20 || b.FileName() != exp.FileName() {
			t.Fatalf("imported %s from %s (%d bytes), want the export %s", b.FileName(), b.ExpName(), b.Size(), exp.FileName())
		}
		a, err := b.Attach(p, nic, dmabuf.AttachOptions{})
		must(t, err)
		sgt, err := a.Map(p, dma.FromDevice)
		must(t, err)
		// The importer gets BAR1 addresses (nv_dma_buf_map, PCIe
		// mapping type): 4 MiB of 64 KiB pages mapped back to back,
		// each the VRAM page at the same offset of the export.
		bar := sys.Devices[0].BAR1()
		var total uint64
		for i, sg := range sgt.SGL[:sgt.Nents] {
			if !bar.Contains(mem.PhysAddr(sg.DMAAddress)) {
				t.Errorf("segment %d at %v: not in BAR1", i, sg.DMAAddress)
			}
			for off := uint64(0); off < sg.DMALength; off += 64 << 10 {
				v, ok := bar.Translate(mem.PhysAddr(sg.DMAAddress) + mem.PhysAddr(off))
				if want := exp.Pages[0].Start + mem.PhysAddr(total+off); !ok || v != want {
					t.Errorf("segment %d +%#x: BAR1 → %v, %v; want VRAM %v", i, off, v, ok, want)
				}
			}
			total += sg.DMALength
		}
		if total != 4<<20 || bar.Info().Used != bar.Reserved()+4<<20 {
			t.Errorf("%d bytes mapped, BAR1 used %d", total, bar.Info().Used)
		}
		// The NIC's DMA through its mapping lands in the GPU's memory.
		v0 := m.Mem.Latest(exp.Pages[0].Start + 8192)
		if _, err := nic.Write(sgt.SGL[0].DMAAddress+8192, 4096); err != nil {
			t.Errorf("the importer's write: %v", err)
		}
		if v1 := m.Mem.Latest(exp.Pages[0].Start + 8192); v1 <= v0 {
			t.Errorf("VRAM version %d after the importer's write, was %d", v1, v0)
		}
		if _, err := b.Mmap(p, netd); !errors.Is(err, syscall.Errno(524)) {
			t.Errorf("mmap: %v, want ENOTSUPP", err)
		}
		if _, err := b.Vmap(p); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("vmap: %v, want EINVAL", err)
		}
		must(t, a.Unmap(p, sgt, dma.FromDevice))
		if bar.Info().Used != bar.Reserved() {
			t.Errorf("BAR1 used %d after the unmap", bar.Info().Used)
		}
		must(t, a.Detach(p))
		must(t, ctx.MemFree(p, dv))
		must(t, pr.KernelProcess().Close(p, fd))
		must(t, netd.Close(p, nfd))
		if b.Released() {
			t.Fatal("released while the importer holds a reference")
		}
		if _, _, err := sys.Resolve(dv, 4<<20); err != nil {
			t.Errorf("memory freed while exported went early: %v", err)
		}
		must(t, b.Put(p))
		if !b.Released() || !exp.Released() {
			t.Fatal("not released at the last reference")
		}
		if _, _, err := sys.Resolve(dv, 4<<20); err == nil {
			t.Error("memory freed while exported still allocated after the release")
		}
	})
	m.Engine.Run()
	if bl := m.Engine.Blocked(); len(bl) > 0 {
		t.Fatalf("blocked: %v", bl)
	}
}

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
		if sgt.Nents != len(exp.Pages) {
			t.Errorf("%d segments, want %d (one per VRAM range)", sgt.Nents, len(exp.Pages))
		}
		for i, r := range exp.Pages {
			if mem.PhysAddr(sgt.SGL[i].DMAAddress) != r.Start || sgt.SGL[i].DMALength != r.Size {
				t.Errorf("segment %d: %v+%d, want %v", i, sgt.SGL[i].DMAAddress, sgt.SGL[i].DMALength, r)
			}
		}
		if _, err := b.Mmap(p, netd); !errors.Is(err, syscall.Errno(524)) {
			t.Errorf("mmap: %v, want ENOTSUPP", err)
		}
		if _, err := b.Vmap(p); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("vmap: %v, want EINVAL", err)
		}
		must(t, a.Unmap(p, sgt, dma.FromDevice))
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

package cuda

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestDMABufExport: cuMemGetHandleForAddressRange gives a file
// descriptor (the lowest free) of a dma-buf covering the range's VRAM;
// dup and SCM_RIGHTS add references; the last close releases it.
func TestDMABufExport(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		dv, err := r.ctx.MemAlloc(p, 4<<20)
		must(t, err)
		fd, err := r.ctx.MemGetHandleForAddressRange(p, dv+64<<10, 1<<20, MemRangeHandleTypeDMABufFD, 0)
		must(t, err)
		if fd != 3 {
			t.Errorf("fd %d, want 3 (0-2 are stdio)", fd)
		}
		b, err := r.pr.DMABuf(fd)
		must(t, err)
		_, phys, err := r.d.System().Resolve(dv+64<<10, 1<<20)
		must(t, err)
		if b.Exporter != "nvidia" || b.Device != "gpu0" || b.Size != 1<<20 || b.Addr != dv+64<<10 || !slices.Equal(b.Pages, phys) {
			t.Errorf("dma-buf %+v, want 1 MiB of gpu0's VRAM %v", b, phys)
		}
		if dev, ok := r.m.Mem.DeviceOf(b.Pages[0].Start); !ok || dev != "gpu0" {
			t.Errorf("pages %v are not gpu0's VRAM", b.Pages)
		}
		fd2, err := r.pr.Dup(fd)
		must(t, err)
		other, err := r.d.NewProcess("importer", 0)
		must(t, err)
		ofd, err := r.pr.SendFD(other, fd)
		must(t, err)
		if fd2 != 4 || ofd != 3 || b.Refs() != 3 {
			t.Errorf("dup %d, sent %d, refs %d; want 4, 3, 3", fd2, ofd, b.Refs())
		}
		must(t, r.pr.Close(p, fd))
		must(t, r.pr.Close(p, fd2))
		if b.Released() {
			t.Error("released while the importer holds it")
		}
		must(t, other.Close(p, ofd))
		if !b.Released() || b.Refs() != 0 {
			t.Error("not released after the last close")
		}
		if err := r.pr.Close(p, fd); !errors.Is(err, syscall.EBADF) {
			t.Errorf("second close: %v, want EBADF", err)
		}

		// Errors.
		h, err := r.ctx.MemAllocHost(p, 1<<20)
		must(t, err)
		for _, c := range []struct {
			addr mem.GPUAddr
			size uint64
			typ  int
		}{
			{dv + 100, 4096, MemRangeHandleTypeDMABufFD},       // unaligned
			{dv, 4096 + 1, MemRangeHandleTypeDMABufFD},         // unaligned size
			{dv, 8 << 20, MemRangeHandleTypeDMABufFD},          // past the allocation
			{mem.GPUAddr(h), 4096, MemRangeHandleTypeDMABufFD}, // host memory
			{dv, 4096, 2}, // another handle type
		} {
			_, err := r.ctx.MemGetHandleForAddressRange(p, c.addr, c.size, c.typ, 0)
			wantResult(t, err, ErrorInvalidValue)
		}
	})
}

// TestDMABufKeepsMemory: memory freed while exported stays allocated
// until the dma-buf is released, as the exporter's reference keeps it;
// for the program it is gone at once.
func TestDMABufKeepsMemory(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		free0, _ := r.ctx.MemGetInfo()
		dv, err := r.ctx.MemAlloc(p, 2<<20)
		must(t, err)
		fd, err := r.ctx.MemGetHandleForAddressRange(p, dv, 2<<20, MemRangeHandleTypeDMABufFD, MemRangeFlagDMABufMappingTypePCIe)
		must(t, err)
		must(t, r.ctx.MemFree(p, dv))
		if free, _ := r.ctx.MemGetInfo(); free != free0-2<<20 {
			t.Errorf("VRAM released while exported")
		}
		wantResult(t, r.ctx.MemFree(p, dv), ErrorInvalidValue)
		if err := r.ctx.CPUAccess(p, dv, 8, false); !errors.Is(err, ErrSegmentationFault) {
			t.Errorf("freed memory still usable: %v", err)
		}
		must(t, r.pr.Close(p, fd))
		if free, _ := r.ctx.MemGetInfo(); free != free0 {
			t.Errorf("VRAM not released with the dma-buf")
		}
	})
}

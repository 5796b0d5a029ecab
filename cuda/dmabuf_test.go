package cuda

import (
	"errors"
	"slices"
	"syscall"
	"testing"

	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestDMABufExport: cuMemGetHandleForAddressRange gives a file
// descriptor (the lowest free) of a dma-buf covering the range's VRAM,
// in the kernel process's table; the kernel's dup and SCM_RIGHTS add
// references; the last close releases it.
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
		if b.FileName() != "dmabuf:1" {
			t.Errorf("file %s, want dmabuf:1", b.FileName())
		}
		kp := r.pr.KernelProcess()
		fd2, err := kp.Dup(fd)
		must(t, err)
		// The importer is a process that does not use CUDA.
		other, err := r.d.Kernel().NewProcess("importer", 0)
		must(t, err)
		ofd, err := kp.SendFD(other, fd)
		must(t, err)
		if fd2 != 4 || ofd != 3 || b.Refs() != 3 {
			t.Errorf("dup %d, sent %d, refs %d; want 4, 3, 3", fd2, ofd, b.Refs())
		}
		if ob, err := DMABufOf(other, ofd); err != nil || ob != b {
			t.Errorf("dma_buf_get in the importer: %v, %v", ob, err)
		}
		must(t, kp.Close(p, fd))
		must(t, kp.Close(p, fd2))
		if b.Released() {
			t.Error("released while the importer holds it")
		}
		must(t, other.Close(p, ofd))
		if !b.Released() || b.Refs() != 0 {
			t.Error("not released after the last close")
		}
		if err := kp.Close(p, fd); !errors.Is(err, syscall.EBADF) {
			t.Errorf("second close: %v, want EBADF", err)
		}
		if _, err := r.pr.DMABuf(fd); !errors.Is(err, syscall.EBADF) {
			t.Errorf("dma_buf_get of a closed fd: %v, want EBADF", err)
		}
		nfd, err := kp.Install(notDMABuf{})
		must(t, err)
		if _, err := r.pr.DMABuf(nfd); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("dma_buf_get of another file: %v, want EINVAL", err)
		}
		must(t, kp.Close(p, nfd))

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
		must(t, r.pr.KernelProcess().Close(p, fd))
		if free, _ := r.ctx.MemGetInfo(); free != free0 {
			t.Errorf("VRAM not released with the dma-buf")
		}
	})
}

// notDMABuf is an open file of another kind (a device node).
type notDMABuf struct{}

func (notDMABuf) FileName() string          { return "/dev/null" }
func (notDMABuf) Release(t *sim.Proc) error { return nil }

// TestProcessExitReclaims: a process that exits with device, pinned and
// managed memory allocated in two contexts, malloc'd memory (one buffer
// registered), and a dma-buf exported (its descriptor passed to another
// process) gives back all the memory but the exported allocation at
// once; that one goes when the importer closes the last descriptor.
// The exited process's contexts are destroyed and it can make no new
// ones.
func TestProcessExitReclaims(t *testing.T) {
	r := h200(t)
	hostFree := func() uint64 { lo, hi := r.m.Mem.NodeFree(0); return lo + hi }
	r.run(func(p *sim.Proc) {
		free0, _ := r.ctx.MemGetInfo()
		host0 := hostFree()
		live0 := len(r.d.System().Allocations())
		pr, err := r.d.NewProcess("exporter", 0)
		must(t, err)
		ctx, err := pr.PrimaryContext(0)
		must(t, err)
		ctx2, err := pr.CtxCreate(0)
		must(t, err)
		if got := pr.Contexts(); len(got) != 2 || got[0] != ctx || got[1] != ctx2 {
			t.Fatalf("contexts %v, want the primary and the created one", got)
		}
		dv, err := ctx.MemAlloc(p, 4<<20)
		must(t, err)
		_, err = ctx2.MemAlloc(p, 2<<20)
		must(t, err)
		_, err = ctx.MemAllocHost(p, 1<<20)
		must(t, err)
		_, err = ctx2.MemAllocManaged(p, 2<<20, MemAttachGlobal)
		must(t, err)
		big, err := pr.Malloc(4 << 20)
		must(t, err)
		must(t, ctx.MemHostRegister(p, big, 4<<20, 0))
		_, err = pr.Malloc(8 << 10)
		must(t, err)
		freed, err := pr.Malloc(8 << 10)
		must(t, err)
		must(t, pr.FreePageable(freed))
		if err := pr.FreePageable(freed); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("double free: %v, want EINVAL", err)
		}
		if vmas := pr.KernelProcess().MM.VMAs(); len(vmas) != 2 {
			t.Errorf("address space %v, want the two live malloc'd buffers", vmas)
		}
		if hostFree() >= host0 {
			t.Fatal("the process's host memory is not taken from node 0")
		}
		fd, err := ctx.MemGetHandleForAddressRange(p, dv, 2<<20, MemRangeHandleTypeDMABufFD, 0)
		must(t, err)
		b, err := pr.DMABuf(fd)
		must(t, err)
		importer, err := r.d.Kernel().NewProcess("importer", 0)
		must(t, err)
		ifd, err := pr.KernelProcess().SendFD(importer, fd)
		must(t, err)

		must(t, pr.KernelProcess().Exit(p))
		if b.Released() || b.Refs() != 1 {
			t.Errorf("dma-buf released %v, refs %d after the exporter's exit; want false, 1", b.Released(), b.Refs())
		}
		if free, _ := r.ctx.MemGetInfo(); free != free0-4<<20 {
			t.Errorf("free VRAM %d after exit, want %d (all but the exported allocation)", free, free0-4<<20)
		}
		if n := len(r.d.System().Allocations()); n != live0+1 {
			t.Errorf("%d allocations live after exit, want %d (the exported one)", n, live0+1)
		}
		if got := hostFree(); got != host0 {
			t.Errorf("node 0 free %d after exit, want %d", got, host0)
		}
		if len(pr.Contexts()) != 0 {
			t.Errorf("contexts %v live after exit", pr.Contexts())
		}
		wantResult(t, ctx.Synchronize(p), ErrorInvalidContext)
		_, err = ctx2.MemAlloc(p, 4096)
		wantResult(t, err, ErrorInvalidContext)
		_, err = pr.PrimaryContext(0)
		wantResult(t, err, ErrorDeinitialized)
		if _, err := pr.Malloc(4096); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("malloc after exit: %v, want ESRCH", err)
		}
		if _, err := r.d.Attach(importer); err != nil {
			t.Errorf("attach to the importer: %v", err)
		}

		must(t, importer.Close(p, ifd))
		if !b.Released() {
			t.Error("dma-buf not released by the importer's last close")
		}
		if free, _ := r.ctx.MemGetInfo(); free != free0 {
			t.Errorf("free VRAM %d after the release, want %d", free, free0)
		}
		if n := len(r.d.System().Allocations()); n != live0 {
			t.Errorf("%d allocations live after the release, want %d", n, live0)
		}
		// The program's pointer is gone: a use of it is a use after free
		// of the exporter's allocation.
		if err := r.ctx.CPUAccess(p, dv, 8, false); !errors.Is(err, ErrSegmentationFault) {
			t.Errorf("reclaimed memory still usable: %v", err)
		}
	})
}

// TestAttach: the driver's state of a kernel process is made once;
// processes of another kernel and exited ones are refused; a process
// made by NewProcess is the kernel's.
func TestAttach(t *testing.T) {
	r := h200(t)
	k := r.d.Kernel()
	if kp, ok := k.Process("app"); !ok || kp != r.pr.KernelProcess() || kp.Node() != r.pr.Node() {
		t.Fatalf("the rig's process is not the kernel's: %v %v", kp, ok)
	}
	if _, err := r.d.NewProcess("app", 0); err == nil {
		t.Error("a second process called app was made")
	}
	kp, err := k.NewProcess("worker", 0)
	must(t, err)
	a, err := r.d.Attach(kp)
	must(t, err)
	if b, err := r.d.Attach(kp); err != nil || b != a || a.Name() != "worker" || a.KernelProcess() != kp {
		t.Errorf("second attach: %v, %v (first %v)", b, err, a)
	}
	foreign, _ := kern.New(r.m.Engine, 2).NewProcess("stranger", 0)
	if _, err := r.d.Attach(foreign); err == nil {
		t.Error("attached a process of another kernel")
	}
	gone, _ := k.NewProcess("gone", 0)
	r.run(func(p *sim.Proc) { must(t, gone.Exit(p)) })
	if _, err := r.d.Attach(gone); !errors.Is(err, kern.ErrExited) {
		t.Errorf("attach to an exited process: %v", err)
	}
	if _, err := New(r.d.System(), WithKernel(kern.New(r.m.Engine, 2))); err == nil {
		t.Error("New took a kernel of another machine (2 nodes, the GPU's has 1)")
	}
}

// TestDMABufFDLimit: an export into a full descriptor table fails with
// CUDA_ERROR_OPERATING_SYSTEM and leaves nothing exported: the memory
// is freed at once by cuMemFree.
func TestDMABufFDLimit(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		free0, _ := r.ctx.MemGetInfo()
		kp := r.pr.KernelProcess()
		must(t, kp.SetFDLimit(4))
		dv, err := r.ctx.MemAlloc(p, 2<<20)
		must(t, err)
		fd, err := r.ctx.MemGetHandleForAddressRange(p, dv, 2<<20, MemRangeHandleTypeDMABufFD, 0)
		must(t, err)
		_, err = r.ctx.MemGetHandleForAddressRange(p, dv, 2<<20, MemRangeHandleTypeDMABufFD, 0)
		wantResult(t, err, ErrorOperatingSystem)
		if !errors.Is(err, syscall.EMFILE) {
			t.Errorf("%v does not say EMFILE", err)
		}
		must(t, kp.Close(p, fd))
		must(t, r.ctx.MemFree(p, dv))
		if free, _ := r.ctx.MemGetInfo(); free != free0 {
			t.Errorf("free VRAM %d after the free, want %d: the failed export kept it", free, free0)
		}
	})
}

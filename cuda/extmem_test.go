package cuda

import (
	"bytes"
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

// extRig is a machine with the DMA-BUF layer and its system heap, the
// driver exporting into it, a process "app" with its primary context
// on GPU 0, and every transfer of the DMA layer recorded (kernels'
// included).
type extRig struct {
	t    *testing.T
	m    *machine.Machine
	l    *dmabuf.Layer
	heap *dmabuf.Heap
	d    *Driver
	pr   *Process
	ctx  *Context
	tr   []dma.TransferInfo
}

func newExtRig(t *testing.T, preset string, payload bool) *extRig {
	t.Helper()
	spec, err := platform.Preset(preset)
	must(t, err)
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: payload})
	must(t, err)
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	must(t, err)
	sys, err := gpu.New(x)
	must(t, err)
	r := &extRig{t: t, m: m, l: dmabuf.New(m.Engine)}
	if r.heap, err = r.l.AddSystemHeap(m.Mem); err != nil {
		t.Fatal(err)
	}
	r.d, err = New(sys, WithDMABuf(r.l))
	must(t, err)
	x.Hooks.Hook(func(e *dma.Event) {
		if e.Op == dma.OpTransfer {
			r.tr = append(r.tr, *e.Transfer)
		}
	})
	r.pr, err = r.d.NewProcess("app", 0)
	must(t, err)
	r.ctx, err = r.pr.PrimaryContext(0)
	must(t, err)
	return r
}

func (r *extRig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("main", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked at the end: %v", b)
	}
}

// frame is a recognisable payload.
func frame(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// TestImportDMABufTegra: on Jetson Orin a dma-buf of the system heap,
// which the CPU filled, imports as OPAQUE_FD (the descriptor then
// belongs to the driver: closed in the process), the GPU attached to
// it and mapped; the mapped buffer is device memory whose pages are the
// buffer's own: a kernel reading it is a transfer of the DMA layer
// over those pages, reading the CPU's bytes, and a copy out gives them
// too. Freeing the pointer and destroying the object detach the GPU
// and drop the last reference, which releases the buffer.
func TestImportDMABufTegra(t *testing.T) {
	r := newExtRig(t, "jetson-orin", true)
	const size = 64 << 10
	want := frame(size)
	r.run(func(p *sim.Proc) {
		kp := r.pr.KernelProcess()
		fd, err := r.heap.Allocate(p, kp, size, 0)
		must(t, err)
		b, err := r.l.Get(p, kp, fd)
		must(t, err)
		va, err := b.Vmap(p)
		must(t, err)
		r.m.Mem.WriteBytes(p, 0, va, want)
		must(t, b.Vunmap(p, va))

		em, err := r.ctx.ImportExternalMemory(p, ExternalMemoryHandleDesc{Type: ExternalMemoryHandleTypeOpaqueFD, FD: fd, Size: size})
		must(t, err)
		if _, err := kp.File("read", fd); !errors.Is(err, syscall.EBADF) {
			t.Errorf("the imported descriptor is still the program's: %v", err)
		}
		if as := b.Attachments(); len(as) != 1 || as[0] != em.Attachment() || as[0].Device() != r.ctx.GPU().DMA() {
			t.Fatalf("attachments %v, want the GPU's", as)
		}
		ptr, err := r.ctx.ExternalMemoryGetMappedBuffer(p, em, ExternalMemoryBufferDesc{Size: size})
		must(t, err)
		typ, err := r.ctx.PointerGetAttribute(PointerAttributeMemoryType, ptr)
		if err != nil || typ != MemoryTypeDevice {
			t.Errorf("mapped buffer is memory type %d (%v), want device", typ, err)
		}

		n := len(r.tr)
		must(t, r.ctx.LaunchKernel(p, kernel("infer", ptr, size, false), nil))
		must(t, r.ctx.Synchronize(p))
		var k *dma.TransferInfo
		for i := range r.tr[n:] {
			if r.tr[n+i].Name == "gpu0 infer" {
				k = &r.tr[n+i]
			}
		}
		if k == nil {
			t.Fatalf("no DMA transfer for the kernel among %d", len(r.tr)-n)
		}
		if !bytes.Equal(k.Data, want) {
			t.Errorf("the kernel read %d bytes unlike the frame the CPU wrote", len(k.Data))
		}
		if k.Move <= 0 {
			t.Errorf("the kernel's reads cost nothing: %+v", k)
		}

		host, err := r.ctx.MemAllocHost(p, size)
		must(t, err)
		must(t, r.ctx.Memcpy(p, mem.GPUAddr(host), ptr, size))
		got := make([]byte, size)
		r.m.Mem.ReadBytes(p, 0, host, got)
		if !bytes.Equal(got, want) {
			t.Error("a copy out of the mapped buffer did not give the frame")
		}

		must(t, r.ctx.MemFree(p, ptr))
		must(t, b.Put(p))
		if b.Released() {
			t.Fatal("released while the driver holds the import")
		}
		must(t, r.ctx.DestroyExternalMemory(p, em))
		if len(b.Attachments()) != 0 || !b.Released() {
			t.Errorf("after destroy: %d attachments, released %v", len(b.Attachments()), b.Released())
		}
		wantResult(t, r.ctx.DestroyExternalMemory(p, em), ErrorInvalidHandle)
	})
}

// TestImportOpaqueFD: on a discrete GPU, memory another process exported
// as an opaque fd (Vulkan's OPAQUE_FD), passed by SCM_RIGHTS, imports
// and maps: a copy out of the mapped buffer gives what the exporter
// wrote into its VRAM. The exporter's free leaves the memory to the
// export until the importer destroys the object.
func TestImportOpaqueFD(t *testing.T) {
	r := newExtRig(t, "h200-pcie", true)
	const size = 4 << 20
	want := frame(size)
	r.run(func(p *sim.Proc) {
		host, err := r.ctx.MemAllocHost(p, size)
		must(t, err)
		r.m.Mem.WriteBytes(p, 0, host, want)
		dv, err := r.ctx.MemAlloc(p, size)
		must(t, err)
		must(t, r.ctx.Memcpy(p, dv, mem.GPUAddr(host), size))
		if _, err := r.ctx.ExportOpaqueFD(p, dv, size/2); ResultOf(err) != ErrorInvalidValue {
			t.Errorf("export of part of an allocation: %v", err)
		}
		fd, err := r.ctx.ExportOpaqueFD(p, dv, size)
		must(t, err)

		other, err := r.d.NewProcess("infer", 0)
		must(t, err)
		octx, err := other.PrimaryContext(0)
		must(t, err)
		ofd, err := r.pr.KernelProcess().SendFD(other.KernelProcess(), fd)
		must(t, err)
		must(t, r.pr.KernelProcess().Close(p, fd))
		em, err := octx.ImportExternalMemory(p, ExternalMemoryHandleDesc{Type: ExternalMemoryHandleTypeOpaqueFD, FD: ofd, Size: size, Flags: ExternalMemoryDedicated})
		must(t, err)
		ptr, err := octx.ExternalMemoryGetMappedBuffer(p, em, ExternalMemoryBufferDesc{Offset: 1 << 20, Size: 1 << 20})
		must(t, err)
		must(t, r.ctx.MemFree(p, dv))
		if _, _, err := r.d.System().Resolve(dv, size); err != nil {
			t.Fatalf("memory freed while exported went early: %v", err)
		}
		ohost, err := octx.MemAllocHost(p, 1<<20)
		must(t, err)
		must(t, octx.Memcpy(p, mem.GPUAddr(ohost), ptr, 1<<20))
		got := make([]byte, 1<<20)
		r.m.Mem.ReadBytes(p, 0, ohost, got)
		if !bytes.Equal(got, want[1<<20:2<<20]) {
			t.Error("the importer's copy is not the exporter's bytes at the offset")
		}
		must(t, octx.MemFree(p, ptr))
		must(t, octx.DestroyExternalMemory(p, em))
		if _, _, err := r.d.System().Resolve(dv, size); err == nil {
			t.Error("exported memory the program freed outlived the last reference")
		}
	})
}

// TestImportExternalMemoryErrors: what each platform refuses, with the
// result the real driver gives: a dma-buf on a discrete GPU, Windows
// handles, NvSciBuf (not modelled), unknown types, bad descriptors,
// sizes and flags; mapping past the object or with flags.
func TestImportExternalMemoryErrors(t *testing.T) {
	type tc struct {
		name string
		desc func(fd int) ExternalMemoryHandleDesc
		orin Result
		h200 Result
	}
	opaque := func(fd int) ExternalMemoryHandleDesc {
		return ExternalMemoryHandleDesc{Type: ExternalMemoryHandleTypeOpaqueFD, FD: fd, Size: 1 << 20}
	}
	tests := []tc{
		{"dma-buf as opaque fd", opaque, Success, ErrorInvalidValue},
		{"win32", func(fd int) ExternalMemoryHandleDesc {
			return ExternalMemoryHandleDesc{Type: ExternalMemoryHandleTypeOpaqueWin32, Size: 1 << 20}
		}, ErrorNotSupported, ErrorNotSupported},
		{"d3d12 resource", func(fd int) ExternalMemoryHandleDesc {
			return ExternalMemoryHandleDesc{Type: ExternalMemoryHandleTypeD3D12Resource, Size: 1 << 20}
		}, ErrorNotSupported, ErrorNotSupported},
		{"nvscibuf", func(fd int) ExternalMemoryHandleDesc {
			return ExternalMemoryHandleDesc{Type: ExternalMemoryHandleTypeNvSciBuf, Size: 1 << 20}
		}, ErrorNotSupported, ErrorNotSupported},
		{"unknown type", func(fd int) ExternalMemoryHandleDesc {
			return ExternalMemoryHandleDesc{Type: 99, FD: fd, Size: 1 << 20}
		}, ErrorInvalidValue, ErrorInvalidValue},
		{"closed descriptor", func(fd int) ExternalMemoryHandleDesc { return opaque(fd + 10) }, ErrorInvalidValue, ErrorInvalidValue},
		{"size 0", func(fd int) ExternalMemoryHandleDesc {
			d := opaque(fd)
			d.Size = 0
			return d
		}, ErrorInvalidValue, ErrorInvalidValue},
		{"size past the buffer", func(fd int) ExternalMemoryHandleDesc {
			d := opaque(fd)
			d.Size = 2 << 20
			return d
		}, ErrorInvalidValue, ErrorInvalidValue},
		{"unknown flag", func(fd int) ExternalMemoryHandleDesc {
			d := opaque(fd)
			d.Flags = 0x2
			return d
		}, ErrorInvalidValue, ErrorInvalidValue},
	}
	for _, preset := range []string{"jetson-orin", "h200-pcie"} {
		for _, tt := range tests {
			t.Run(preset+"/"+tt.name, func(t *testing.T) {
				r := newExtRig(t, preset, false)
				want := tt.h200
				if preset == "jetson-orin" {
					want = tt.orin
				}
				r.run(func(p *sim.Proc) {
					fd, err := r.heap.Allocate(p, r.pr.KernelProcess(), 1<<20, 0)
					must(t, err)
					em, err := r.ctx.ImportExternalMemory(p, tt.desc(fd))
					wantResult(t, err, want)
					if err != nil {
						// A refused import leaves the descriptor to the program.
						if _, ferr := r.pr.KernelProcess().File("read", fd); ferr != nil {
							t.Errorf("descriptor gone after a failed import: %v", ferr)
						}
						return
					}
					for _, bd := range []ExternalMemoryBufferDesc{{Size: 0}, {Offset: 1 << 19, Size: 1 << 20}, {Size: 4096, Flags: 1}} {
						_, err := r.ctx.ExternalMemoryGetMappedBuffer(p, em, bd)
						wantResult(t, err, ErrorInvalidValue)
					}
					must(t, r.ctx.DestroyExternalMemory(p, em))
					_, err = r.ctx.ExternalMemoryGetMappedBuffer(p, em, ExternalMemoryBufferDesc{Size: 4096})
					wantResult(t, err, ErrorInvalidHandle)
				})
			})
		}
	}
}

// TestImportReleasedAtExit: a process that exits without destroying its
// imports (nor freeing their mapped buffers) leaves nothing behind: the
// driver frees the mapping and drops its reference with the context, so
// the dma-buf it alone held is released and the GPU detached.
func TestImportReleasedAtExit(t *testing.T) {
	r := newExtRig(t, "jetson-orin", false)
	r.run(func(p *sim.Proc) {
		kp := r.pr.KernelProcess()
		fd, err := r.heap.Allocate(p, kp, 1<<20, 0)
		must(t, err)
		b, err := r.l.Get(p, kp, fd)
		must(t, err)
		em, err := r.ctx.ImportExternalMemory(p, ExternalMemoryHandleDesc{Type: ExternalMemoryHandleTypeOpaqueFD, FD: fd, Size: 1 << 20})
		must(t, err)
		ptr, err := r.ctx.ExternalMemoryGetMappedBuffer(p, em, ExternalMemoryBufferDesc{Size: 1 << 20})
		must(t, err)
		must(t, b.Put(p))
		must(t, kp.Exit(p))
		if !b.Released() || len(b.Attachments()) != 0 {
			t.Errorf("after exit: released %v, %d attachments", b.Released(), len(b.Attachments()))
		}
		if _, _, err := r.d.System().Resolve(ptr, 1); err == nil {
			t.Error("the mapped buffer outlived its process")
		}
	})
}

package cuda

import (
	"testing"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestLaunchKernelErrors: accesses a kernel may not make are refused at
// launch with the CUresult CUDA reports for them, and observed.
func TestLaunchKernelErrors(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", rigOpt{})
	r.run(func(p *sim.Proc) {
		dv, err := r.ctx.MemAlloc(p, 4096)
		must(t, err)
		pg, err := r.pr.Malloc(4096)
		must(t, err)
		reg, err := r.pr.Malloc(4096)
		must(t, err)
		must(t, r.ctx.MemHostRegister(p, reg, 4096, 0))
		zc, err := r.ctx.MemHostAlloc(p, 4096, HostAllocDeviceMap)
		must(t, err)
		other, err := r.pr.CtxCreate(0)
		must(t, err)
		c1, err := r.pr.PrimaryContext(1)
		must(t, err)
		peer, err := c1.MemAlloc(p, 4096)
		must(t, err)

		must(t, r.ctx.LaunchKernel(p, kernel("device", dv, 4096, true), nil))
		must(t, r.ctx.LaunchKernel(p, kernel("zero-copy", mem.GPUAddr(zc), 4096, false), nil))
		wantResult(t, r.ctx.LaunchKernel(p, kernel("pageable", mem.GPUAddr(pg), 4096, false), nil), ErrorIllegalAddress)
		wantResult(t, r.ctx.LaunchKernel(p, kernel("unmapped", mem.GPUAddr(reg), 4096, false), nil), ErrorIllegalAddress)
		wantResult(t, other.LaunchKernel(p, kernel("other context", dv, 4096, false), nil), ErrorIllegalAddress)
		wantResult(t, r.ctx.LaunchKernel(p, kernel("nothing", 0x1000, 4096, false), nil), ErrorIllegalAddress)
		wantResult(t, r.ctx.LaunchKernel(p, kernel("peer", peer, 4096, false), nil), ErrorPeerAccessNotEnabled)
		must(t, r.ctx.EnablePeerAccess(c1))
		must(t, r.ctx.LaunchKernel(p, kernel("peer", peer, 4096, false), nil))
		wantResult(t, r.ctx.EnablePeerAccess(c1), ErrorPeerAccessAlreadyEnabled)
		s1, err := c1.StreamCreate(0)
		must(t, err)
		wantResult(t, r.ctx.LaunchKernel(p, kernel("device", dv, 4096, true), s1), ErrorInvalidHandle)
		must(t, r.ctx.Synchronize(p))
	})
	for _, o := range r.ops(OpKernel) {
		if o.Process != "app" || o.DeviceName == "" || o.Proc != "main" {
			t.Errorf("observation without its caller: %+v", o)
		}
	}
	if len(r.ops(OpKernel)) != 8 {
		t.Errorf("%d kernel accesses observed, want 8 (the launch on another GPU's stream is refused first): %v", len(r.ops(OpKernel)), r.ops(OpKernel))
	}
}

// TestContextDestroy: cuCtxDestroy frees the context's memory; the
// context can no longer be used; its pointers become use after free.
func TestContextDestroy(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		c, err := r.pr.CtxCreate(0)
		must(t, err)
		free0, _ := c.MemGetInfo()
		dv, err := c.MemAlloc(p, 4<<20)
		must(t, err)
		h, err := c.MemAllocHost(p, 4096)
		must(t, err)
		pg, err := r.pr.Malloc(4096)
		must(t, err)
		must(t, c.MemHostRegister(p, pg, 4096, 0))
		_, err = c.MemAllocManaged(p, 4096, MemAttachGlobal)
		must(t, err)
		must(t, c.Destroy(p))
		if free, _ := r.ctx.MemGetInfo(); free != free0 {
			t.Errorf("VRAM of the destroyed context not freed")
		}
		_, err = c.MemAlloc(p, 4096)
		wantResult(t, err, ErrorInvalidContext)
		wantResult(t, c.Destroy(p), ErrorInvalidContext)
		wantResult(t, r.ctx.Memcpy(p, dv, mem.GPUAddr(h), 8), ErrorInvalidValue)
		// The registration went with the context: pinning again works.
		must(t, r.ctx.MemHostRegister(p, pg, 4096, 0))
	})
	last := r.ops(OpCopyWrite)
	if len(last) == 0 || last[len(last)-1].Target.Kind != MemFreed {
		t.Errorf("copy to the destroyed context's memory not observed as freed: %v", last)
	}
}

// TestStreamsAndEvents: the pass-through of streams and events, with
// CUDA's float milliseconds.
func TestStreamsAndEvents(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		s, err := r.ctx.StreamCreate(StreamNonBlocking)
		must(t, err)
		start, err := r.ctx.EventCreate(0)
		must(t, err)
		end, err := r.ctx.EventCreate(EventBlockingSync)
		must(t, err)
		must(t, start.Record(p, s))
		must(t, r.ctx.LaunchKernel(p, gpu.Kernel{Name: "spin", Launch: 2 * sim.Millisecond}, s))
		must(t, end.Record(p, s))
		wantResult(t, end.Query(), ErrorNotReady)
		_, err = EventElapsedTime(start, end)
		wantResult(t, err, ErrorNotReady)
		must(t, end.Synchronize(p))
		ms, err := EventElapsedTime(start, end)
		must(t, err)
		if !near(float64(ms), 2, 1e-3) {
			t.Errorf("elapsed %v ms, want 2", ms)
		}
		_, err = r.ctx.StreamCreate(0x8)
		wantResult(t, err, ErrorInvalidValue)
		must(t, s.Destroy())
		wantResult(t, s.Destroy(), ErrorInvalidHandle)
		wantResult(t, r.ctx.DefaultStream().Destroy(), ErrorInvalidHandle)
	})
}

// TestMallocReusesFreedHostMemory: malloc at an address cuMemFreeHost gave
// back is live memory, not a use after free.
func TestMallocReusesFreedHostMemory(t *testing.T) {
	r := newRig(t, "h200-pcie", rigOpt{})
	r.run(func(p *sim.Proc) {
		va, err := r.ctx.MemAllocHost(p, 4<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.ctx.MemFreeHost(p, va); err != nil {
			t.Fatal(err)
		}
		pa, err := r.pr.Malloc(4 << 20)
		if err != nil {
			t.Fatal(err)
		}
		if pa != va {
			t.Skipf("malloc did not reuse the address (%v, freed %v): nothing to test", pa, va)
		}
		if err := r.ctx.CPUAccess(p, mem.GPUAddr(pa), 4<<20, true); err != nil {
			t.Errorf("CPU store to reused memory: %v", err)
		}
	})
}

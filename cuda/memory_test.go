package cuda

import (
	"testing"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestMemAllocFree: cuMemAlloc and cuMemFree cost the GPU model's
// AllocCost and FreeCost (57 µs the pair, measured on the H200 machine
// 2026-11-21) and fail as the
// driver does.
func TestMemAllocFree(t *testing.T) {
	r := h200(t)
	r.run(func(p *sim.Proc) {
		var a mem.GPUAddr
		if d := timed(p, func() {
			var err error
			a, err = r.ctx.MemAlloc(p, 2<<20)
			must(t, err)
		}); d != gpu.AllocCost {
			t.Errorf("cuMemAlloc took %v, want %v", d, gpu.AllocCost)
		}
		free, total := r.ctx.MemGetInfo()
		if total-free != 2<<20 {
			t.Errorf("%d B in use, want 2 MiB", total-free)
		}
		if d := timed(p, func() { must(t, r.ctx.MemFree(p, a)) }); d != gpu.FreeCost {
			t.Errorf("cuMemFree took %v, want %v", d, gpu.FreeCost)
		}
		_, err := r.ctx.MemAlloc(p, 0)
		wantResult(t, err, ErrorInvalidValue)
		_, err = r.ctx.MemAlloc(p, total+1)
		wantResult(t, err, ErrorOutOfMemory)
		wantResult(t, r.ctx.MemFree(p, a), ErrorInvalidValue) // twice
		h, err := r.ctx.MemAllocHost(p, 4096)
		must(t, err)
		wantResult(t, r.ctx.MemFree(p, mem.GPUAddr(h)), ErrorInvalidValue) // host memory
		must(t, r.ctx.MemFreeHost(p, h))
	})
}

// TestMemHostRegisterCost: pinning costs the platform's PinCall and its
// Pin per 4 KiB page, unpinning its UnpinCall and Unpin; the errors are
// the driver's.
func TestMemHostRegisterCost(t *testing.T) {
	r := h200(t)
	g := r.m.GPUs[0].Spec
	const size = 64 << 20
	r.run(func(p *sim.Proc) {
		va, err := r.pr.Malloc(size)
		must(t, err)
		pages := sim.Time(size / mem.PageSize)
		if d := timed(p, func() { must(t, r.ctx.MemHostRegister(p, va, size, HostRegisterDeviceMap)) }); d != g.PinCall()+pages*g.Pin() {
			t.Errorf("register 64 MiB: %v, want %v", d, g.PinCall()+pages*g.Pin())
		}
		// The H200 machine's probe runs measured 1.43 to 2.04 ms per
		// 64 MiB and 91.6 to 171 us per 2 MiB (2026-11-21).
		if ms := (g.PinCall() + pages*g.Pin()).Seconds() * 1e3; ms < 1.3 || ms > 2.4 {
			t.Errorf("register 64 MiB: %.2f ms", ms)
		}
		if us := (g.PinCall() + 512*g.Pin()).Seconds() * 1e6; us < 90 || us > 180 {
			t.Errorf("register 2 MiB: %.1f us", us)
		}
		wantResult(t, r.ctx.MemHostRegister(p, va+4096, 4096, 0), ErrorHostMemoryAlreadyRegistered)
		dp, err := r.ctx.MemHostGetDevicePointer(va, 0)
		if err != nil || dp != mem.GPUAddr(va) {
			t.Errorf("device pointer %v, %v; want the host address (UVA)", dp, err)
		}
		if d := timed(p, func() { must(t, r.ctx.MemHostUnregister(p, va)) }); d != g.UnpinCall()+pages*g.Unpin() {
			t.Errorf("unregister 64 MiB: %v, want %v", d, g.UnpinCall()+pages*g.Unpin())
		}
		wantResult(t, r.ctx.MemHostUnregister(p, va), ErrorHostMemoryNotRegistered)
		// Unregistered memory is the program's pageable memory again.
		must(t, r.ctx.CPUAccess(p, mem.GPUAddr(va), 8, true))
		wantResult(t, r.ctx.LaunchKernel(p, kernel("k", mem.GPUAddr(va), 8, false), nil), ErrorIllegalAddress)
		if o := r.ops(OpKernel); len(o) != 1 || o[0].Target.Kind != MemPageable {
			t.Errorf("kernel on unregistered memory observed as %v", o)
		}
		wantResult(t, r.ctx.MemHostRegister(p, va, size, HostRegisterIOMemory), ErrorNotSupported)
		wantResult(t, r.ctx.MemHostRegister(p, va, size, 0x100), ErrorInvalidValue)
		wantResult(t, r.ctx.MemHostRegister(p, 0x1000, 4096, 0), ErrorInvalidValue) // nothing mapped

		// Without DEVICEMAP the memory is pinned but not mapped for kernels.
		must(t, r.ctx.MemHostRegister(p, va, size, 0))
		_, err = r.ctx.MemHostGetDevicePointer(va, 0)
		wantResult(t, err, ErrorInvalidValue)
		must(t, r.ctx.MemHostUnregister(p, va))
		must(t, r.pr.FreePageable(va))
	})
}

// TestMemHostAllocFlags: cuMemHostAlloc memory is portable and mapped
// under UVA; write-combined memory is slow for CPU reads and fast for CPU
// writes (on bare metal: 2s-4gpu-pcie; the measured H200 VM does not
// honour write-combining, docs/measurements/2026-11-21-h200-writecombined.md);
// unknown flags fail.
func TestMemHostAllocFlags(t *testing.T) {
	r := newRig(t, "2s-4gpu-pcie", rigOpt{})
	node := r.m.Spec.Nodes[0]
	const size = 1 << 20
	r.run(func(p *sim.Proc) {
		wc, err := r.ctx.MemHostAlloc(p, size, HostAllocWriteCombined)
		must(t, err)
		plain, err := r.ctx.MemHostAlloc(p, size, 0)
		must(t, err)
		_, err = r.ctx.MemHostAlloc(p, size, 0x8)
		wantResult(t, err, ErrorInvalidValue)

		for _, va := range []mem.VirtAddr{wc, plain} {
			if v, err := r.ctx.PointerGetAttribute(PointerAttributeMapped, mem.GPUAddr(va)); err != nil || v != 1 {
				t.Errorf("%v mapped = %d, %v", va, v, err)
			}
			if dp, err := r.ctx.MemHostGetDevicePointer(va, 0); err != nil || dp != mem.GPUAddr(va) {
				t.Errorf("%v device pointer %v, %v", va, dp, err)
			}
		}
		memcpy := sim.TransferTime(size, float64(node.MemcpyRate.V))
		uncached := sim.TransferTime(size, float64(node.Cache.UncachedRate.V))
		read := timed(p, func() { must(t, r.ctx.CPUAccess(p, mem.GPUAddr(wc), size, false)) })
		write := timed(p, func() { must(t, r.ctx.CPUAccess(p, mem.GPUAddr(wc), size, true)) })
		cached := timed(p, func() { must(t, r.ctx.CPUAccess(p, mem.GPUAddr(plain), size, false)) })
		if read != uncached || write != memcpy || cached != memcpy {
			t.Errorf("write-combined read %v (want %v), write %v (want %v); cached read %v (want %v)",
				read, uncached, write, memcpy, cached, memcpy)
		}
		if read < 50*cached {
			t.Errorf("write-combined reads (%v) are not much slower than cached ones (%v)", read, cached)
		}
		must(t, r.ctx.MemFreeHost(p, wc))
		must(t, r.ctx.MemFreeHost(p, plain))
		wantResult(t, r.ctx.MemFreeHost(p, plain), ErrorInvalidValue)
	})
}

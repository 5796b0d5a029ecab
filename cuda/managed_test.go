package cuda

import (
	"errors"
	"testing"

	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

const blockSize = uvm.BlockSize

// managedOnCPU allocates size bytes of managed memory and writes them
// from the CPU, so that they are resident in system memory.
func (r *rig) managedOnCPU(p *sim.Proc, size uint64) mem.GPUAddr {
	r.t.Helper()
	a, err := r.ctx.MemAllocManaged(p, size, MemAttachGlobal)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.ctx.CPUAccess(p, a, size, true); err != nil {
		r.t.Fatal(err)
	}
	return a
}

// TestManagedKernelFaults: a kernel touching managed memory resident on
// the CPU faults, and the pages migrate to the GPU over PCIe; a second
// kernel finds them there.
func TestManagedKernelFaults(t *testing.T) {
	r := h200(t)
	um := r.d.UVM()
	const size = 8 * blockSize
	r.run(func(p *sim.Proc) {
		a := r.managedOnCPU(p, size)
		if v, err := r.ctx.PointerGetAttribute(PointerAttributeIsManaged, a); err != nil || v != 1 {
			t.Errorf("IS_MANAGED %d, %v", v, err)
		}
		before := um.Stats()
		first := timed(p, func() {
			must(t, r.ctx.LaunchKernel(p, kernel("touch", a, size, false), nil))
			must(t, r.ctx.Synchronize(p))
		})
		after := um.Stats()
		if after.GPUFaults == before.GPUFaults {
			t.Error("a kernel on CPU-resident managed memory raised no fault")
		}
		moved := int64(0)
		for _, b := range after.MigratedBytes {
			moved += b
		}
		if moved < size {
			t.Errorf("%d B migrated, want the %d touched", moved, size)
		}
		if got := um.Residency(uvmAddrOf(t, r, a)); !got.Has(uvm.GPU(0)) {
			t.Errorf("page 0 resident on %v after the kernel, want gpu0", got)
		}
		second := timed(p, func() {
			must(t, r.ctx.LaunchKernel(p, kernel("touch", a, size, false), nil))
			must(t, r.ctx.Synchronize(p))
		})
		if um.Stats().GPUFaults != after.GPUFaults {
			t.Error("the second kernel faulted")
		}
		if second*5 > first {
			t.Errorf("faulting kernel %v, resident %v: want faults to dominate", first, second)
		}
		// The CPU touches them again: CPU faults bring them back.
		cpu := um.Stats().CPUFaults
		must(t, r.ctx.CPUAccess(p, a, 4096, false))
		if um.Stats().CPUFaults == cpu {
			t.Error("a CPU read of GPU-resident managed memory did not fault")
		}
		must(t, r.ctx.MemFree(p, a))
	})
}

func uvmAddrOf(t testing.TB, r *rig, a mem.GPUAddr) uvm.Addr {
	t.Helper()
	ua, err := r.d.uvmAddr(a)
	if err != nil {
		t.Fatal(err)
	}
	return ua
}

// TestPrefetchThenKernel: after cuMemPrefetchAsync to the GPU, a kernel
// raises no fault; the prefetch itself moves the bytes at link speed in
// stream order.
func TestPrefetchThenKernel(t *testing.T) {
	r := h200(t)
	um := r.d.UVM()
	const size = 64 * blockSize
	r.run(func(p *sim.Proc) {
		a := r.managedOnCPU(p, size)
		faults := um.Stats().GPUFaults
		t0 := p.Now()
		must(t, r.ctx.MemPrefetchAsync(p, a, size, 0, nil))
		must(t, r.ctx.LaunchKernel(p, kernel("touch", a, size, false), nil))
		must(t, r.ctx.Synchronize(p))
		if got := um.Stats().GPUFaults - faults; got != 0 {
			t.Errorf("%d faults after a prefetch", got)
		}
		if g := gbps(size, p.Now()-t0); g < 30 || g > 55.5 {
			t.Errorf("prefetch + kernel of 128 MiB at %.1f GB/s, want most of the PCIe link", g)
		}
		// Back to the CPU: no CPU faults afterwards.
		must(t, r.ctx.MemPrefetchAsync(p, a, size, DeviceCPU, nil))
		must(t, r.ctx.Synchronize(p))
		cpu := um.Stats().CPUFaults
		must(t, r.ctx.CPUAccess(p, a, size, false))
		if um.Stats().CPUFaults != cpu {
			t.Error("CPU faults after a prefetch to the CPU")
		}
		// Errors.
		dv, err := r.ctx.MemAlloc(p, 4096)
		must(t, err)
		wantResult(t, r.ctx.MemPrefetchAsync(p, dv, 4096, 0, nil), ErrorInvalidValue)
		wantResult(t, r.ctx.MemPrefetchAsync(p, a, size, 7, nil), ErrorInvalidDevice)
	})
}

// TestAdvice: with the CPU as preferred location and GPU 0 in
// AccessedBy, a kernel reads the pages where they are, over PCIe,
// without faults or migration; read-mostly pages are duplicated.
func TestAdvice(t *testing.T) {
	r := h200(t)
	um := r.d.UVM()
	const size = 4 * blockSize
	r.run(func(p *sim.Proc) {
		a := r.managedOnCPU(p, size)
		must(t, r.ctx.MemAdvise(p, a, size, AdviseSetPreferredLocation, DeviceCPU))
		must(t, r.ctx.MemAdvise(p, a, size, AdviseSetAccessedBy, 0))
		before := um.Stats()
		must(t, r.ctx.LaunchKernel(p, kernel("read", a, size, false), nil))
		must(t, r.ctx.Synchronize(p))
		after := um.Stats()
		if after.GPUFaults != before.GPUFaults || after.MigratedBytes != before.MigratedBytes {
			t.Errorf("faults %d → %d, migrated %v → %v: want none with AccessedBy",
				before.GPUFaults, after.GPUFaults, before.MigratedBytes, after.MigratedBytes)
		}
		if !um.MapsRemotely(uvm.GPU(0), uvmAddrOf(t, r, a)) {
			t.Error("gpu0 does not map the CPU's pages remotely")
		}

		b := r.managedOnCPU(p, size)
		must(t, r.ctx.MemAdvise(p, b, size, AdviseSetReadMostly, 0))
		must(t, r.ctx.LaunchKernel(p, kernel("read", b, size, false), nil))
		must(t, r.ctx.Synchronize(p))
		if got := um.Residency(uvmAddrOf(t, r, b)); !got.Has(uvm.CPU) || !got.Has(uvm.GPU(0)) {
			t.Errorf("read-mostly page held by %v, want the CPU and gpu0", got)
		}
		wantResult(t, r.ctx.MemAdvise(p, b, size, Advice(9), 0), ErrorInvalidValue)
		wantResult(t, r.ctx.MemAdvise(p, b, size, AdviseSetAccessedBy, 5), ErrorInvalidDevice)
	})
}

// TestPrePascalRule: on a GPU without concurrent managed access, the CPU
// may not touch managed memory between a launch and the synchronisation
// that follows (even once the kernel is done), and prefetch is not
// supported.
func TestPrePascalRule(t *testing.T) {
	r := newRig(t, "h200-pcie", rigOpt{edit: arch("maxwell")})
	if r.d.ConcurrentManagedAccess() {
		t.Fatal("maxwell has concurrent managed access")
	}
	r.run(func(p *sim.Proc) {
		a := r.managedOnCPU(p, blockSize)
		must(t, r.ctx.LaunchKernel(p, kernel("k", a, blockSize, true), nil))
		p.Sleep(sim.Millisecond) // the kernel is long done
		if err := r.ctx.CPUAccess(p, a, 8, false); !errors.Is(err, ErrSegmentationFault) {
			t.Errorf("CPU access before synchronising: %v, want a segmentation fault", err)
		}
		must(t, r.ctx.Synchronize(p))
		must(t, r.ctx.CPUAccess(p, a, 8, false))
		wantResult(t, r.ctx.MemPrefetchAsync(p, a, blockSize, 0, nil), ErrorInvalidDevice)
	})
}

// TestManagedCopy: cuMemcpy with managed memory migrates it to the
// other end first.
func TestManagedCopy(t *testing.T) {
	r := h200(t)
	um := r.d.UVM()
	const size = 2 * blockSize
	r.run(func(p *sim.Proc) {
		a := r.managedOnCPU(p, size)
		dv, err := r.ctx.MemAlloc(p, size)
		must(t, err)
		must(t, r.ctx.Memcpy(p, dv, a, size))
		if got := um.Residency(uvmAddrOf(t, r, a)); !got.Has(uvm.GPU(0)) {
			t.Errorf("managed source held by %v after a copy to the GPU", got)
		}
	})
}

// TestIsolatedFault: one GPU access to host-resident managed memory
// costs the platform's measured isolated-fault round trip (21.92 µs on
// the H200), the calibration target, on top of an empty kernel.
func TestIsolatedFault(t *testing.T) {
	r := h200(t)
	// The fault's service plus what the model's migration adds as its
	// copy's read round trip (hub + link and root complex both ways)
	// and the kernel's read of VRAM after it.
	g := r.m.GPUs[0]
	route, err := r.m.Route(r.host(), g.Memory())
	must(t, err)
	lead, _ := r.m.ReadLimit(route, g.CE())
	want := g.Spec.UVM.Fault() + lead + g.Spec.VRAMLatency.V
	r.run(func(p *sim.Proc) {
		a := r.managedOnCPU(p, blockSize)
		empty := timed(p, func() {
			must(t, r.ctx.LaunchKernel(p, gpu.Kernel{Name: "empty"}, nil))
			must(t, r.ctx.Synchronize(p))
		})
		d := timed(p, func() {
			must(t, r.ctx.LaunchKernel(p, kernel("one", a, 4, false), nil))
			must(t, r.ctx.Synchronize(p))
		})
		if fault := d - empty; !near(float64(fault), float64(want), 0.001) {
			t.Errorf("isolated fault %v, want %v", fault, want)
		}
	})
}

package cuda_test

import (
	"errors"
	"github.com/dmalab/dmalab/dma"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/check/gpumem"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// TestTegraChecker: a program on each Jetson with the checker on the
// façade and on memory. Used correctly, pinned, device and managed
// memory give no diagnostic and no stale read, on the non-coherent TX2
// too; touching managed memory while a kernel may run is
// managed-access-rule (the access fails as the CPU's would), and a CPU
// load of device memory cpu-deref-device-pointer.
func TestTegraChecker(t *testing.T) {
	for _, name := range []string{"jetson-orin", "jetson-tx2"} {
		t.Run(name, func(t *testing.T) {
			spec, err := platform.Preset(name)
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
			sys, err := gpu.New(x)
			if err != nil {
				t.Fatal(err)
			}
			d, err := cuda.New(sys)
			if err != nil {
				t.Fatal(err)
			}
			c := check.New(check.Options{})
			gpumem.Attach(c, d)
			dmadebug.Attach(c, nil, m.Mem, dmadebug.Options{})
			pr, err := d.NewProcess("app", 0)
			if err != nil {
				t.Fatal(err)
			}
			ctx, err := pr.PrimaryContext(0)
			if err != nil {
				t.Fatal(err)
			}
			ok := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			const n = 1 << 20
			m.Engine.Spawn("main", func(p *sim.Proc) {
				host, err := ctx.MemAllocHost(p, n)
				ok(err)
				dv, err := ctx.MemAlloc(p, n)
				ok(err)
				um, err := ctx.MemAllocManaged(p, n, cuda.MemAttachGlobal)
				ok(err)
				h := mem.GPUAddr(host)
				// Correct use: the CPU fills pinned and managed memory, a
				// kernel reads both into device memory and writes managed
				// memory back, the CPU reads the results after synchronising.
				ok(ctx.CPUAccess(p, h, n, true))
				ok(ctx.CPUAccess(p, um, n, true))
				ok(ctx.LaunchKernel(p, gpu.Kernel{Name: "mix", Accesses: []gpu.Access{
					{Addr: h, Size: n}, {Addr: um, Size: n}, {Addr: dv, Size: n, Write: true},
				}}, nil))
				ok(ctx.Synchronize(p))
				ok(ctx.LaunchKernel(p, gpu.Kernel{Name: "out", Accesses: []gpu.Access{
					{Addr: dv, Size: n}, {Addr: um, Size: n, Write: true}, {Addr: h, Size: n, Write: true},
				}}, nil))
				ok(ctx.Synchronize(p))
				ok(ctx.CPUAccess(p, um, n, false))
				ok(ctx.CPUAccess(p, h, n, false))
				ok(ctx.Memcpy(p, h, dv, n))
				ok(ctx.CPUAccess(p, h, n, false))
				if got := c.Diagnostics(); len(got) != 0 {
					t.Errorf("correct use: %v", got)
				}
				// Misuse.
				ok(ctx.LaunchKernel(p, gpu.Kernel{Name: "busy", Accesses: []gpu.Access{{Addr: um, Size: n}}, Compute: sim.Millisecond}, nil))
				if err := ctx.CPUAccess(p, um, 8, false); !errors.Is(err, cuda.ErrSegmentationFault) {
					t.Errorf("CPU load of managed memory during a kernel: %v", err)
				}
				ok(ctx.Synchronize(p))
				if err := ctx.CPUAccess(p, dv, 8, false); !errors.Is(err, cuda.ErrSegmentationFault) {
					t.Errorf("CPU load of device memory: %v", err)
				}
				ok(ctx.MemFree(p, um))
				ok(ctx.MemFree(p, dv))
				ok(ctx.MemFreeHost(p, host))
			})
			m.Engine.Run()
			if b := m.Engine.Blocked(); len(b) > 0 {
				t.Fatalf("blocked: %v", b)
			}
			for code, want := range map[string]int{gpumem.ManagedAccessRule: 1, gpumem.CPUDerefDevicePointer: 1, dmadebug.StaleRead: 0} {
				if got := c.Count(code); got != want {
					t.Errorf("%s: %d, want %d (%v)", code, got, want, c.Diagnostics())
				}
			}
			if got := len(c.Diagnostics()); got != 2 {
				t.Errorf("%d diagnostics, want 2: %v", got, c.Diagnostics())
			}
		})
	}
}

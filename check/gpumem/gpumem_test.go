package gpumem

import (
	"github.com/dmalab/dmalab/dma"
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// gpuRig is a machine with the cuda driver and a checker on its
// observations, a process "app" with its primary context on GPU 0.
type gpuRig struct {
	t   *testing.T
	m   *machine.Machine
	c   *check.Checker
	pr  *cuda.Process
	ctx *cuda.Context
}

func newGPURig(t *testing.T, arch string) *gpuRig {
	t.Helper()
	spec, err := platform.Preset("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if arch != "" {
		spec.GPUs[0].Arch = arch
	}
	m, err := machine.New(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
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
	r := &gpuRig{t: t, m: m, c: check.New(check.Options{})}
	Attach(r.c, d)
	if r.pr, err = d.NewProcess("app", 0); err != nil {
		t.Fatal(err)
	}
	if r.ctx, err = r.pr.PrimaryContext(0); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *gpuRig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("main", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked at the end: %v", b)
	}
}

func kernelOn(addr mem.GPUAddr, size uint64) gpu.Kernel {
	return gpu.Kernel{Name: "k", Accesses: []gpu.Access{{Addr: addr, Size: size}}}
}

// ok fails on an error; the misuse steps ignore theirs (the façade
// returns what CUDA returns, the checker records).
func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// gpuCase is one class: a misuse and the correct use next to it.
type gpuCase struct {
	code string
	// arch overrides GPU 0's generation.
	arch string
	// origin is the allocation call the diagnostic must name.
	origin    string
	bad, good func(t *testing.T, r *gpuRig, p *sim.Proc)
}

func gpuCases() []gpuCase {
	return []gpuCase{
		{code: CPUDerefDevicePointer, origin: "cuMemAlloc",
			bad: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				a, err := r.ctx.MemAlloc(p, 4096)
				ok(t, err)
				r.ctx.CPUAccess(p, a, 8, false)
			},
			good: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				h, err := r.ctx.MemAllocHost(p, 4096)
				ok(t, err)
				ok(t, r.ctx.CPUAccess(p, mem.GPUAddr(h), 8, false))
			}},
		{code: ManagedAccessRule, arch: "kepler", origin: "cuMemAllocManaged",
			bad: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				a, err := r.ctx.MemAllocManaged(p, 2<<20, cuda.MemAttachGlobal)
				ok(t, err)
				ok(t, r.ctx.LaunchKernel(p, kernelOn(a, 2<<20), nil))
				r.ctx.CPUAccess(p, a, 8, true)
				ok(t, r.ctx.Synchronize(p))
			},
			good: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				a, err := r.ctx.MemAllocManaged(p, 2<<20, cuda.MemAttachGlobal)
				ok(t, err)
				ok(t, r.ctx.LaunchKernel(p, kernelOn(a, 2<<20), nil))
				ok(t, r.ctx.Synchronize(p))
				ok(t, r.ctx.CPUAccess(p, a, 8, true))
			}},
		{code: UseAfterFree, origin: "cuMemAlloc",
			bad: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				h, err := r.ctx.MemAllocHost(p, 4096)
				ok(t, err)
				a, err := r.ctx.MemAlloc(p, 4096)
				ok(t, err)
				ok(t, r.ctx.MemFree(p, a))
				r.ctx.Memcpy(p, a, mem.GPUAddr(h), 4096)
			},
			good: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				h, err := r.ctx.MemAllocHost(p, 4096)
				ok(t, err)
				a, err := r.ctx.MemAlloc(p, 4096)
				ok(t, err)
				ok(t, r.ctx.Memcpy(p, a, mem.GPUAddr(h), 4096))
				ok(t, r.ctx.MemFree(p, a))
			}},
		{code: KernelUnpinnedHostMemory, origin: "",
			bad: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				va, err := r.pr.Malloc(4096)
				ok(t, err)
				p.Sleep(sim.Microsecond) // the diagnostic's time is not 0
				r.ctx.LaunchKernel(p, kernelOn(mem.GPUAddr(va), 4096), nil)
			},
			good: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				va, err := r.pr.Malloc(4096)
				ok(t, err)
				ok(t, r.ctx.MemHostRegister(p, va, 4096, cuda.HostRegisterDeviceMap))
				ok(t, r.ctx.LaunchKernel(p, kernelOn(mem.GPUAddr(va), 4096), nil))
				ok(t, r.ctx.Synchronize(p))
			}},
		{code: ForeignContextPointer, origin: "cuMemAlloc",
			bad: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				a, err := r.ctx.MemAlloc(p, 4096)
				ok(t, err)
				other, err := r.pr.CtxCreate(0)
				ok(t, err)
				other.LaunchKernel(p, kernelOn(a, 4096), nil)
			},
			good: func(t *testing.T, r *gpuRig, p *sim.Proc) {
				a, err := r.ctx.MemAlloc(p, 4096)
				ok(t, err)
				ok(t, r.ctx.LaunchKernel(p, kernelOn(a, 4096), nil))
				ok(t, r.ctx.Synchronize(p))
			}},
	}
}

// TestGPUClasses proves every GPU-memory class: the misuse is reported
// (severity, device, the allocation call as origin) and the correct use
// is not.
func TestGPUClasses(t *testing.T) {
	seen := map[string]bool{}
	for _, tc := range gpuCases() {
		seen[tc.code] = true
		t.Run(tc.code, func(t *testing.T) {
			info, found := check.Lookup(tc.code)
			if !found {
				t.Fatalf("no class %q", tc.code)
			}
			r := newGPURig(t, tc.arch)
			r.run(func(p *sim.Proc) { tc.bad(t, r, p) })
			var got []string
			for _, d := range r.c.Diagnostics() {
				got = append(got, d.Class)
			}
			if !slices.Equal(got, []string{tc.code}) {
				t.Fatalf("misuse reported %v, want [%s]", r.c.Diagnostics(), tc.code)
			}
			d := r.c.Diagnostics()[0]
			if d.Severity != info.Severity || d.Device != "gpu0" || d.Time <= 0 || d.Proc != "main" || d.Message == "" {
				t.Errorf("got %+v, want severity %s, device gpu0, a time, the thread and a message", d, info.Severity)
			}
			if !strings.Contains(d.Origin, tc.origin) || tc.origin != "" && !strings.Contains(d.Origin, " at ") {
				t.Errorf("origin %q, want the allocation call %q with its time", d.Origin, tc.origin)
			}
			if r.c.Count(tc.code) != 1 {
				t.Errorf("Count(%s) = %d", tc.code, r.c.Count(tc.code))
			}
			t.Log(d)

			r = newGPURig(t, tc.arch)
			r.run(func(p *sim.Proc) { tc.good(t, r, p) })
			for _, d := range r.c.Diagnostics() {
				t.Errorf("correct use reported: %v", d)
			}
		})
	}
	for _, ci := range Classes() {
		if !seen[ci.Code] {
			t.Errorf("class %s has no case", ci.Code)
		}
		if ci.Severity != check.Error || ci.Source != "dmalab" || ci.Summary == "" {
			t.Errorf("class %+v", ci)
		}
	}
}

// TestGPUClassesMore: the other shapes of each misuse.
func TestGPUClassesMore(t *testing.T) {
	for _, c := range []struct {
		name, code string
		body       func(t *testing.T, r *gpuRig, p *sim.Proc)
	}{
		{"kernel on host memory registered without DEVICEMAP", KernelUnpinnedHostMemory, func(t *testing.T, r *gpuRig, p *sim.Proc) {
			va, err := r.pr.Malloc(4096)
			ok(t, err)
			ok(t, r.ctx.MemHostRegister(p, va, 4096, 0))
			r.ctx.LaunchKernel(p, kernelOn(mem.GPUAddr(va), 4096), nil)
		}},
		{"kernel after cuMemFreeHost", UseAfterFree, func(t *testing.T, r *gpuRig, p *sim.Proc) {
			h, err := r.ctx.MemAllocHost(p, 4096)
			ok(t, err)
			ok(t, r.ctx.MemFreeHost(p, h))
			r.ctx.LaunchKernel(p, kernelOn(mem.GPUAddr(h), 4096), nil)
		}},
		{"double free", UseAfterFree, func(t *testing.T, r *gpuRig, p *sim.Proc) {
			a, err := r.ctx.MemAlloc(p, 4096)
			ok(t, err)
			ok(t, r.ctx.MemFree(p, a))
			r.ctx.MemFree(p, a)
		}},
		{"another process's pointer in a copy", ForeignContextPointer, func(t *testing.T, r *gpuRig, p *sim.Proc) {
			a, err := r.ctx.MemAlloc(p, 4096)
			ok(t, err)
			other, err := r.pr.Driver().NewProcess("other", 0)
			ok(t, err)
			octx, err := other.PrimaryContext(0)
			ok(t, err)
			h, err := octx.MemAllocHost(p, 4096)
			ok(t, err)
			octx.Memcpy(p, a, mem.GPUAddr(h), 4096)
		}},
		{"managed memory on Pascal+ while a kernel runs is fine", "", func(t *testing.T, r *gpuRig, p *sim.Proc) {
			a, err := r.ctx.MemAllocManaged(p, 2<<20, cuda.MemAttachGlobal)
			ok(t, err)
			ok(t, r.ctx.LaunchKernel(p, gpu.Kernel{Name: "long", Launch: sim.Millisecond}, nil))
			ok(t, r.ctx.CPUAccess(p, a, 8, true))
			ok(t, r.ctx.Synchronize(p))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newGPURig(t, "")
			r.run(func(p *sim.Proc) { c.body(t, r, p) })
			var got []string
			for _, d := range r.c.Diagnostics() {
				got = append(got, d.Class)
			}
			want := []string{c.code}
			if c.code == "" {
				want = nil
			}
			if !slices.Equal(got, want) {
				t.Errorf("reported %v, want %v", r.c.Diagnostics(), want)
			}
		})
	}
}

// TestGPUClassTable: the pack's five classes keep their order, are
// registered (Lookup finds them) and rank after the DMA API's.
func TestGPUClassTable(t *testing.T) {
	want := []string{CPUDerefDevicePointer, ManagedAccessRule, UseAfterFree, KernelUnpinnedHostMemory, ForeignContextPointer}
	cl := Classes()
	if len(cl) != len(want) {
		t.Fatalf("%d classes, want %d", len(cl), len(want))
	}
	for i, c := range cl {
		if c.Code != want[i] {
			t.Errorf("GPU class #%d is %s, want %s", i+1, c.Code, want[i])
		}
		if _, found := check.Lookup(c.Code); !found {
			t.Errorf("Lookup(%s) failed", c.Code)
		}
	}
	for i, k := range classes {
		if k.Pack() != "gpu-memory" || k.Info() != cl[i] {
			t.Errorf("handle %d: pack %q, %+v", i, k.Pack(), k.Info())
		}
	}
}

package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/xfer"
)

// hostTypes are the host-memory types compared, with the probe's path
// names; managed-fault is managed memory used on demand.
var hostTypes = xfer.Names(xfer.HostMemory())

func init() {
	register(&Scenario{
		Name:     "host-memory",
		Summary:  "one workload (CPU writes, GPU kernel, CPU reads) with every host-memory type, end to end",
		Platform: "h200-pcie",
		Doc: `One workload, once per host-memory type: the CPU writes an input buffer, a GPU
kernel reads it and writes a result of the same size, the CPU reads the
result. Each row is the time of the whole round trip, allocation excluded,
and what the unified-memory driver did.

  pageable          malloc'd buffers; cuMemcpy both ways (staged through
                    pinned buffers by the driver) around the kernel
  pinned            cuMemAllocHost buffers; cuMemcpy on the copy engines
  writecombined     cuMemHostAlloc(WRITECOMBINED): fast for the CPU to write
                    and the GPU to read, slow for the CPU to read back where
                    write-combining is in effect (not on the measured VM)
  registered        malloc'd buffers pinned with cuMemHostRegister (the
                    pinning and unpinning are in the time)
  mapped            cuMemHostAlloc(DEVICEMAP): the kernel reads and writes
                    host memory over the link, no copies (zero-copy)
  managed-fault     cuMemAllocManaged used on demand: the kernel faults the
                    input over, the CPU faults the result back
  managed-prefetch  the same with cuMemPrefetchAsync of both buffers to the
                    GPU before the kernel, and of the result back after it

Types a platform's GPU lacks (prefetch without concurrent managed access,
host registration on a Tegra without I/O coherence) are left out, or are
bad input when asked for with --set types=.`,
		Params: []Param{
			{Name: "size", Kind: dmalab.ParamSize, Default: "256MiB", Help: "size of the input and of the result"},
			{Name: "types", Kind: dmalab.ParamList, Item: "type", Values: hostTypes, Default: strings.Join(hostTypes, ","), Help: "host-memory types to compare: " + strings.Join(hostTypes, ", ")},
			{Name: "gpu", Kind: dmalab.ParamInt, Default: "0", Help: "index of the GPU"},
		},
		Run: runHostMemory,
	})
}

func runHostMemory(c *Context) error {
	size := c.Size("size")
	types := pathsOf(c.List("types"))
	gi := c.Int("gpu")
	g, err := c.Machine.GPU(gi)
	if err != nil {
		return noGPU(c, gi)
	}
	drv, err := c.CUDA()
	if err != nil {
		return err
	}
	n := uint64(size)
	limit := uint64(c.Machine.Spec.Nodes[g.Node].DRAM.V) / 4
	if !g.Spec.Integrated {
		limit = min(limit, uint64(g.Spec.VRAM.V)/4)
	}
	if n > limit {
		return usagef("--set size=%s: the workload holds four buffers of it; at most %s fits here", c.Text("size"), report.FormatBytes(int64(limit)))
	}
	proc, err := drv.NewProcess("app", g.Node)
	if err != nil {
		return err
	}
	var runErr error
	c.Machine.Engine.Spawn("app", func(p *sim.Proc) {
		ctx, err := proc.PrimaryContext(g.Index)
		if err != nil {
			runErr = err
			return
		}
		for i, t := range types {
			c.Progressf("host-memory: %d/%d %s", i+1, len(types), t)
			before := umNow(drv.UVM())
			took, err := roundTrip(p, proc, ctx, t, n)
			if unsupported(err) {
				if c.Explicit("types") {
					runErr = usagef("type %s on %s: %v", t, c.Machine.Spec.Name, err)
					return
				}
				continue
			}
			if err != nil {
				runErr = fmt.Errorf("%s: %w", t, err)
				return
			}
			um := umNow(drv.UVM()).minus(before)
			c.Result.Results = append(c.Result.Results, report.Row{
				Name: fmt.Sprintf("%s round trip of %s", t, report.FormatBytes(int64(n))),
				Path: string(t), Direction: string(xfer.RoundTrip), Bytes: int64(n),
				Seconds: took.Seconds(), GBps: float64(n) / took.Seconds() / 1e9,
				Faults: um.faults, MigratedBytes: um.migrated, Evictions: um.evictions,
			})
		}
	})
	guardErr := c.RunEngine("size")
	if runErr != nil {
		return runErr
	}
	return guardErr
}

// unsupported says whether err is the driver refusing a memory type this
// GPU does not have.
func unsupported(err error) bool {
	return errors.Is(err, cuda.ErrorNotSupported) || errors.Is(err, cuda.ErrorInvalidDevice)
}

// roundTrip runs the workload with host memory of type t and returns its
// time, from the CPU's first write to its last read.
func roundTrip(p *sim.Proc, proc *cuda.Process, c *cuda.Context, t xfer.Path, n uint64) (sim.Time, error) {
	var in, out mem.GPUAddr // the buffers the CPU writes and reads
	var din, dout mem.GPUAddr
	var cleanup []func() error
	defer func() {
		for _, f := range slices.Backward(cleanup) {
			f()
		}
	}()
	host := func(flags uint32) (mem.GPUAddr, error) {
		va, err := c.MemHostAlloc(p, n, flags)
		if err != nil {
			return 0, err
		}
		cleanup = append(cleanup, func() error { return c.MemFreeHost(p, va) })
		if flags&cuda.HostAllocDeviceMap != 0 {
			return c.MemHostGetDevicePointer(va, 0)
		}
		return mem.GPUAddr(va), nil
	}
	pageable := func() (mem.GPUAddr, error) {
		va, err := proc.Malloc(n)
		if err != nil {
			return 0, err
		}
		cleanup = append(cleanup, func() error { return proc.FreePageable(va) })
		return mem.GPUAddr(va), nil
	}
	device := func() (mem.GPUAddr, error) {
		a, err := c.MemAlloc(p, n)
		if err == nil {
			cleanup = append(cleanup, func() error { return c.MemFree(p, a) })
		}
		return a, err
	}
	managed := func() (mem.GPUAddr, error) {
		a, err := c.MemAllocManaged(p, n, cuda.MemAttachGlobal)
		if err == nil {
			cleanup = append(cleanup, func() error { return c.MemFree(p, a) })
		}
		return a, err
	}
	var err error
	two := func(f func() (mem.GPUAddr, error)) (mem.GPUAddr, mem.GPUAddr) {
		var a, b mem.GPUAddr
		if a, err = f(); err == nil {
			b, err = f()
		}
		return a, b
	}
	copies := true
	switch t {
	case xfer.Pageable, xfer.Registered:
		in, out = two(pageable)
	case xfer.Pinned:
		in, out = two(func() (mem.GPUAddr, error) { return host(cuda.HostAllocPortable) })
	case xfer.WriteCombined:
		in, out = two(func() (mem.GPUAddr, error) { return host(cuda.HostAllocPortable | cuda.HostAllocWriteCombined) })
	case xfer.Mapped:
		in, out = two(func() (mem.GPUAddr, error) { return host(cuda.HostAllocPortable | cuda.HostAllocDeviceMap) })
		copies = false
	default: // managed
		in, out = two(managed)
		copies = false
	}
	if err == nil && copies {
		din, dout = two(device)
	}
	if err != nil {
		return 0, err
	}

	t0 := p.Now()
	steps := []func() error{
		func() error { return c.CPUAccess(p, in, n, true) },
	}
	if t == xfer.Registered {
		steps = append(steps,
			func() error { return c.MemHostRegister(p, mem.VirtAddr(in), n, cuda.HostRegisterPortable) },
			func() error { return c.MemHostRegister(p, mem.VirtAddr(out), n, cuda.HostRegisterPortable) })
	}
	kin, kout := in, out
	if copies {
		kin, kout = din, dout
		steps = append(steps, func() error { return c.Memcpy(p, din, in, n) })
	}
	if t == xfer.ManagedPrefetch {
		// Both buffers: the result's pages would otherwise fault in on
		// the kernel's first writes.
		steps = append(steps,
			func() error { return c.MemPrefetchAsync(p, in, n, c.Device(), nil) },
			func() error { return c.MemPrefetchAsync(p, out, n, c.Device(), nil) })
	}
	steps = append(steps, func() error {
		k := gpu.Kernel{Name: string(t) + " kernel", Accesses: []gpu.Access{
			{Addr: kin, Size: n, Bytes: n, Pattern: gpu.Streaming{}},
			{Addr: kout, Size: n, Bytes: n, Pattern: gpu.Streaming{}, Write: true},
		}}
		if err := c.LaunchKernel(p, k, nil); err != nil {
			return err
		}
		return c.Synchronize(p)
	})
	if copies {
		steps = append(steps, func() error { return c.Memcpy(p, out, dout, n) })
	}
	if t == xfer.ManagedPrefetch {
		steps = append(steps, func() error {
			if err := c.MemPrefetchAsync(p, out, n, cuda.DeviceCPU, nil); err != nil {
				return err
			}
			return c.Synchronize(p)
		})
	}
	if t == xfer.Registered {
		steps = append(steps,
			func() error { return c.MemHostUnregister(p, mem.VirtAddr(in)) },
			func() error { return c.MemHostUnregister(p, mem.VirtAddr(out)) })
	}
	steps = append(steps, func() error { return c.CPUAccess(p, out, n, false) })
	for _, step := range steps {
		if err := step(); err != nil {
			return 0, err
		}
	}
	return p.Now() - t0, nil
}

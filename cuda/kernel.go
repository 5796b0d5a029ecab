package cuda

import (
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/sim"
)

// LaunchKernel is cuLaunchKernel of k on stream s (nil: the legacy
// default stream): the GPU model's kernel (gpu.Stream.Launch: its
// accesses as flows over their routes, its compute through the SMs,
// managed accesses through the unified-memory driver). The host pays
// gpu.EnqueueCost.
//
// Each access is resolved first, as the GPU's MMU would translate it,
// and reported to the observers. CUDA reports a bad access
// asynchronously (CUDA_ERROR_ILLEGAL_ADDRESS from a later call, and the
// context is lost); the model refuses the launch with that result and
// enqueues nothing, which is deterministic and names the access:
// memory freed, host memory not pinned and mapped (pageable memory,
// memory registered without HostRegisterDeviceMap), another process's
// pointer, device memory of another context on this GPU, non-portable
// registered memory of another context. A peer GPU's memory without
// peer access is CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, as gpu says.
func (c *Context) LaunchKernel(p *sim.Proc, k gpu.Kernel, s *Stream) error {
	const call = "cuLaunchKernel"
	st, err := c.stream(call, s)
	if err != nil {
		return err
	}
	for _, a := range k.Accesses {
		pl := c.d.resolve(a.Addr, a.Size)
		var err error
		switch {
		case pl.t.Kind == MemFreed:
			err = failf(call, ErrorIllegalAddress, "%s: access at %v: memory freed by %s", k.Name, a.Addr, pl.t.Freed)
		case pl.t.Kind == MemPageable:
			err = failf(call, ErrorIllegalAddress, "%s: access at %v: pageable host memory (not pinned and mapped)", k.Name, a.Addr)
		case pl.t.Kind == MemPinned && !pl.t.Mapped:
			err = failf(call, ErrorIllegalAddress, "%s: access at %v: host memory registered without CU_MEMHOSTREGISTER_DEVICEMAP", k.Name, a.Addr)
		case c.foreignToKernel(pl):
			err = failf(call, ErrorIllegalAddress, "%s: access at %v: memory of context %d of process %s", k.Name, a.Addr, pl.t.Context, pl.t.Process)
		case pl.t.Kind == MemInvalid:
			err = failf(call, ErrorIllegalAddress, "%s: access at %v: nothing mapped", k.Name, a.Addr)
		case !pl.inside:
			err = failf(call, ErrorIllegalAddress, "%s: access [%v +%#x] runs past its allocation", k.Name, a.Addr, a.Size)
		}
		c.observe(p, OpKernel, call, a.Addr, a.Size, a.Write, pl, err)
		if err != nil {
			p.Sleep(gpu.EnqueueCost)
			return err
		}
	}
	// A kernel may read what a pageable copy that returned once staged
	// is still moving: the model's host waits for it to land (the
	// driver orders it in the stream instead).
	c.d.waitStaged(p, c.dev.Index)
	if err := st.s.Launch(p, k); err != nil {
		return wrap(call, err)
	}
	c.d.active[c.dev.Index] = true
	return nil
}

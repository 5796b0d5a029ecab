package cuda

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// CPUAccess is a thread of the process loading (write false) or storing
// size bytes at addr: how programs on the model touch memory, so that
// the driver and the checker see it. What it costs and does depends on
// the memory:
//
//   - pageable and pinned host memory: a CPU access through mem by the
//     calling thread's node (caches, content versions; the memcpy rate
//     locally, a remote access's cost on another node's pages);
//   - write-combined pinned memory, and pinned memory of an integrated
//     GPU without I/O coherence (uncached on the CPU, tegra.go): loads
//     are uncached (the node's uncached rate: slow); stores stream
//     through the write-combining buffers at the memcpy rate (mem has no
//     write-combining attribute, so the store is made uncached at no
//     cost and charged here);
//   - managed memory: the unified-memory driver's CPU fault path
//     (uvm.Driver.CPUAccess: pages not accessible fault and migrate to
//     system memory), then the bytes at the memcpy rate. Its content is
//     not followed by versions, except on an integrated GPU, where it is
//     one range of DRAM that the CPU reaches through its cached mapping
//     (mem: caches, versions, cost).
//
// Where a real program would die of SIGSEGV it returns
// ErrSegmentationFault and the checker is told: a device pointer (the
// CPU cannot dereference VRAM on a PCIe GPU), memory freed, another
// process's pointer, nothing mapped, or managed memory while a GPU
// without concurrent managed access is active (a kernel launched and
// not synchronised: the CUDA Programming Guide's unified-memory
// chapter; NVIDIA's "How does NVIDIA implement unified memory on PCIe
// GPUs and Tegra platforms?").
func (c *Context) CPUAccess(p *sim.Proc, addr mem.GPUAddr, size uint64, write bool) error {
	const call = "cpu access"
	if err := c.check(call); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	pl := c.d.resolve(addr, size)
	var why string
	switch {
	case pl.t.Kind == MemFreed:
		why = "memory freed by " + pl.t.Freed
	case pl.t.Kind == MemDevice:
		why = fmt.Sprintf("device memory of gpu%d is not mapped on the CPU", pl.t.Device)
	case c.foreign(pl):
		why = "memory of process " + pl.t.Process
	case pl.t.Kind == MemInvalid || !pl.inside:
		why = "nothing mapped"
	case pl.t.Kind == MemManaged && !pl.t.ConcurrentManaged && pl.t.GPUActive:
		why = fmt.Sprintf("managed memory while the GPU is active (%v: no concurrent access)", c.d.gen)
	}
	var err error
	if why != "" {
		err = segv(addr, size, write, why)
	}
	c.observe(p, OpCPUAccess, call, addr, size, write, pl, err)
	if err != nil {
		return err
	}
	m := c.d.m.Mem
	node := c.threadNode(p)
	va := mem.VirtAddr(addr)
	switch {
	case pl.t.Kind == MemManaged:
		ua, err := c.d.uvmAddr(addr)
		if err != nil {
			return segv(addr, size, write, err.Error())
		}
		if _, err := c.d.um.CPUAccess(p, ua, int64(size), write); err != nil {
			if errors.Is(err, uvm.ErrConcurrentAccess) || errors.Is(err, uvm.ErrInvalidAddress) {
				return segv(addr, size, write, err.Error())
			}
			return fail(call, resultOf(err), err)
		}
		if phys := c.d.managedPhys(addr, size); phys != nil {
			// Tegra: the one copy in DRAM, through the CPU's cached
			// mapping (the linear map), at mem's cost.
			for _, r := range phys {
				va := m.PhysToVirt(r.Start)
				if write {
					m.Write(p, node, va, r.Size)
				} else if a := m.Read(p, node, va, r.Size); a.Err != nil {
					return segv(addr, size, write, a.Err.Error())
				}
			}
			if write {
				c.d.markDirty(phys, false)
			}
			return nil
		}
		p.Sleep(sim.TransferTime(float64(size), memcpyRate(c.d.m.Spec, node)))
		return nil
	case write && pl.a != nil && pl.a.remap != 0:
		if m.Write(nil, node, va, size) == 0 {
			return segv(addr, size, write, "mem refused the store")
		}
		p.Sleep(sim.TransferTime(float64(size), memcpyRate(c.d.m.Spec, node)))
		return nil
	case write:
		if m.Write(p, node, va, size) == 0 {
			return segv(addr, size, write, "mem refused the store")
		}
		return nil
	}
	if a := m.Read(p, node, va, size); a.Err != nil {
		return segv(addr, size, write, a.Err.Error())
	}
	return nil
}

func segv(addr mem.GPUAddr, size uint64, write bool, why string) error {
	rw := "load"
	if write {
		rw = "store"
	}
	return fmt.Errorf("cuda: CPU %s of [%v +%#x]: %w: %s", rw, addr, size, ErrSegmentationFault, why)
}

package cuda

import (
	"fmt"

	"github.com/dmalab/dmalab/gpu"
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// P2PRange is what the resource manager knows of device memory that
// nvidia_p2p_get_pages is asked to pin (rm_p2p_get_pages): the
// allocation, the kernel process whose context allocated it (the
// address space a token-0 pin must be made from), and whether
// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS is set on it.
type P2PRange struct {
	Alloc      gpu.Allocation
	Owner      *kern.Process
	SyncMemops bool
}

// P2PRange looks up [addr, addr+size) for the GPUDirect RDMA driver
// (package nvp2p): it must lie in one live device allocation made
// through the façade; anything else is an error wrapping
// gpu.ErrInvalidValue.
func (d *Driver) P2PRange(addr mem.GPUAddr, size uint64) (P2PRange, error) {
	pl := d.resolve(addr, size)
	switch {
	case pl.a == nil || pl.a.ctx == nil:
		return P2PRange{}, fmt.Errorf("cuda: p2p %v+%#x: %v memory: %w", addr, size, pl.t.Kind, gpu.ErrInvalidValue)
	case pl.a.kind != MemDevice:
		return P2PRange{}, fmt.Errorf("cuda: p2p %v+%#x: %v memory, not device memory: %w", addr, size, pl.t.Kind, gpu.ErrInvalidValue)
	case !pl.inside:
		return P2PRange{}, fmt.Errorf("cuda: p2p %v+%#x: beyond the allocation [%v +%#x]: %w", addr, size, pl.a.a.Addr, pl.a.a.Size, gpu.ErrInvalidValue)
	}
	return P2PRange{Alloc: pl.a.a, Owner: pl.a.ctx.proc.kp, SyncMemops: pl.a.syncMemops}, nil
}

// HostRange is P2PRange for pinned host memory (the Tegra flavour of
// nvidia_p2p pins cudaHostAlloc memory in the SoC's shared DRAM): the
// allocation, its owner and its physical pages.
func (d *Driver) HostRange(addr mem.GPUAddr, size uint64) (P2PRange, []mem.PhysRange, error) {
	pl := d.resolve(addr, size)
	switch {
	case pl.a == nil || pl.a.ctx == nil:
		return P2PRange{}, nil, fmt.Errorf("cuda: p2p %v+%#x: %v memory: %w", addr, size, pl.t.Kind, gpu.ErrInvalidValue)
	case pl.a.kind != MemPinned:
		return P2PRange{}, nil, fmt.Errorf("cuda: p2p %v+%#x: %v memory, not pinned host memory: %w", addr, size, pl.t.Kind, gpu.ErrInvalidValue)
	case !pl.inside:
		return P2PRange{}, nil, fmt.Errorf("cuda: p2p %v+%#x: beyond the allocation: %w", addr, size, gpu.ErrInvalidValue)
	}
	_, phys, err := d.sys.Resolve(addr, size)
	if err != nil {
		return P2PRange{}, nil, fmt.Errorf("cuda: p2p %v+%#x: %w", addr, size, err)
	}
	return P2PRange{Alloc: pl.a.a, Owner: pl.a.ctx.proc.kp}, phys, nil
}

// SetMemopsWindow installs the GPUDirect RDMA driver's view of
// synchronous copies: fn gives, for device memory without
// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, how long after a synchronous
// cuMemcpy into it returns its data may still be invisible to a
// third-party reader (0: visible at once). Package nvp2p gives its
// window for memory it has pinned, 0 for the rest, so that copies into
// memory no peer reads keep their behaviour.
func (d *Driver) SetMemopsWindow(fn func(a gpu.Allocation) sim.Time) { d.memopsWindow = fn }

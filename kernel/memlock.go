package kernel

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/mem"
)

// DefaultMemlockLimit is RLIMIT_MEMLOCK's default, 8 MiB: MLOCK_LIMIT in
// include/uapi/linux/resource.h since Linux 5.16 (it was 64 KiB
// before). Every process starts with it.
const DefaultMemlockLimit = 8 << 20

// MemlockLimit is the process's RLIMIT_MEMLOCK in bytes: how much
// memory it may lock (mlock) or have pinned for devices (VFIO, iommufd)
// at once.
func (p *Process) MemlockLimit() uint64 { return p.memlock }

// SetMemlockLimit is setrlimit(RLIMIT_MEMLOCK, n): pages locked from
// then on count against n; what is already locked stays, even above it,
// as in Linux.
func (p *Process) SetMemlockLimit(n uint64) error {
	if p.exited {
		return fmt.Errorf("setrlimit(RLIMIT_MEMLOCK, %#x) in %s: %w", n, p.name, ErrExited)
	}
	p.memlock = n
	return nil
}

// LockedVM is mm->locked_vm in bytes: the memory locked or pinned
// against the process's limit now.
func (p *Process) LockedVM() uint64 { return p.locked * mem.PageSize }

// AccountLockedVM is account_locked_vm (mm/util.c) for npages 4 KiB
// pages: inc charges them, refused with ENOMEM when locked_vm would pass
// RLIMIT_MEMLOCK (the caller has no CAP_IPC_LOCK: the model's processes
// have no capabilities); !inc gives them back. who names the caller
// for the message ("VFIO_IOMMU_MAP_DMA").
func (p *Process) AccountLockedVM(who string, npages uint64, inc bool) error {
	if npages == 0 {
		return nil
	}
	if !inc {
		p.locked -= min(npages, p.locked)
		return nil
	}
	limit := p.memlock / mem.PageSize
	if p.locked+npages > limit || p.locked+npages < p.locked {
		return fmt.Errorf("%s in %s: %d pages locked + %d > RLIMIT_MEMLOCK %d pages (%d bytes): %w",
			who, p.name, p.locked, npages, limit, p.memlock, syscall.ENOMEM)
	}
	p.locked += npages
	return nil
}

package rdma

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

var errInval = syscall.EINVAL

// MR is a memory region (ibv_mr): a range of the process's address
// space (or of a peer's memory) pinned and mapped for the HCA, with its
// keys.
type MR struct {
	pd *PD
	// Addr and Length are the registered range; LKey and RKey its keys
	// (equal, as mlx5's mkeys are: index << 8 | variant).
	Addr, Length uint64
	LKey, RKey   uint32
	access       Access
	// segs are the bus addresses the HCA drives, in address order.
	segs []seg
	// memory is where the pages are, for routes.
	memory machine.Endpoint
	// pinned is the pages counted against RLIMIT_MEMLOCK (host memory).
	pinned uint64
	// pin keeps the anonymous pages from migrating while the HCA holds
	// their bus addresses (ib_umem_get's pin_user_pages).
	pin *mem.PagePin
	// mapped are the page-granular mappings of host memory (unmapped
	// at dereg).
	mapped []seg
	// peer memory
	peer    *peerClient
	peerCtx any
	core    CoreContext
	// pageSize is the pages' size: 4 KiB for host memory, the peer
	// client's get_page_size for peer memory.
	pageSize uint64
	// invalid: the peer invalidated the memory; dead: deregistered.
	invalid, dead bool
}

type seg struct {
	bus mem.DMAAddr
	len uint64
}

// PageSize is the size of the MR's pages: 4 KiB for host memory, what
// the peer client's get_page_size says for peer memory (64 KiB for
// NVIDIA GPU memory).
func (mr *MR) PageSize() uint64 { return mr.pageSize }

// Access is the MR's access flags.
func (mr *MR) Access() Access { return mr.access }

// Peer reports whether the MR is peer memory (GPU memory through a
// peer-memory client), and whether that memory was invalidated.
func (mr *MR) Peer() (peer, invalidated bool) { return mr.peer != nil, mr.invalid }

// RegMR is ibv_reg_mr(pd, addr, length, access) from thread t of the
// domain's process. A peer-memory client that acquires the range pins
// and maps it; otherwise every page must be in a mapping of the process
// (EFAULT), counts against RLIMIT_MEMLOCK (ENOMEM past it, nothing
// pinned), costs PinCost, and is mapped DMA_BIDIRECTIONAL for the HCA
// (ib_umem_get, then ib_dma_map_sgtable_attrs). Remote write or atomic
// access without local write is EINVAL (ib_check_mr_access), as is an
// empty range.
func (pd *PD) RegMR(t *sim.Proc, addr, length uint64, access Access) (*MR, error) {
	d := pd.d
	call := fmt.Sprintf("ibv_reg_mr(%#x, %#x, %v)", addr, length, access)
	switch {
	case pd.dead:
		return nil, fmt.Errorf("%s: deallocated PD: %w", call, syscall.EINVAL)
	case length == 0 || addr+length < addr:
		return nil, fmt.Errorf("%s: %w", call, syscall.EINVAL)
	case access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0:
		return nil, fmt.Errorf("%s: remote write without local write: %w", call, syscall.EINVAL)
	case access&^(AccessLocalWrite|AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic) != 0:
		return nil, fmt.Errorf("%s: unknown access flags: %w", call, syscall.EINVAL)
	}
	mr := &MR{pd: pd, Addr: addr, Length: length, access: access, pageSize: mem.PageSize}
	peer, err := mr.regPeer(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	if !peer {
		if err := mr.regHost(t); err != nil {
			return nil, fmt.Errorf("%s: %w", call, err)
		}
	}
	key := d.nextMkey<<8 | (d.nextMkey*0x3b)&0xff
	d.nextMkey++
	mr.LKey, mr.RKey = key, key
	d.mrs[key] = mr
	pd.users++
	d.emit(t, sim.CauseCall, func(e *Event) {
		e.Op, e.PID, e.Addr, e.Len, e.Key, e.Access, e.Peer = OpRegMR, pd.proc.PID(), addr, length, key, access, mr.peer != nil
	})
	return mr, nil
}

// regHost pins and maps the process's pages.
func (mr *MR) regHost(t *sim.Proc) error {
	d, proc := mr.pd.d, mr.pd.proc
	first := mr.Addr &^ (mem.PageSize - 1)
	end := (mr.Addr + mr.Length + mem.PageSize - 1) &^ (mem.PageSize - 1)
	for va := mr.Addr; va < mr.Addr+mr.Length; {
		vma, ok := proc.MM.Find(mem.VirtAddr(va))
		if !ok {
			return fmt.Errorf("%#x is not mapped in %s: %w", va, proc.Name(), syscall.EFAULT)
		}
		va = uint64(vma.End())
	}
	// ib_umem_get's pin_user_pages faults in anonymous pages nothing
	// has touched yet, for t's node by the process's policy.
	if proc.Kernel().Memory() != nil {
		if err := proc.Populate(t, mem.VirtAddr(mr.Addr), mr.Length); errors.Is(err, syscall.ENOMEM) {
			return err
		}
	}
	ranges, _, _, err := d.env.Mem.Translate(mem.VirtAddr(mr.Addr), mr.Length)
	if err != nil {
		return fmt.Errorf("%v: %w", err, syscall.EFAULT)
	}
	npages := (end - first) / mem.PageSize
	if err := proc.AccountLockedVM("ibv_reg_mr", npages, true); err != nil {
		return err
	}
	t.Sleep(sim.Time(npages) * d.prm.PinCost)
	mr.pinned = npages
	if proc.Kernel().Memory() != nil {
		mr.pin, _ = proc.PinPages(mem.VirtAddr(mr.Addr), mr.Length)
	}
	node := -1
	mp, _ := d.dev.Translator().(dma.Mapper)
	for _, r := range ranges {
		// The core's own mapping, page-granular, as ib_umem maps its
		// scatterlist of whole pages.
		pa := r.Start &^ (mem.PageSize - 1)
		size := (uint64(r.Start)+r.Size+mem.PageSize-1)&^(mem.PageSize-1) - uint64(pa)
		var bus mem.DMAAddr
		var err error
		if mp != nil {
			bus, err = mp.Map(t, pa, size, dma.Bidirectional)
		} else {
			bus, err = d.dev.Translator().ToBus(pa, size)
			if err == nil && uint64(bus)+size-1 > d.dev.Mask() {
				err = fmt.Errorf("bus address %v+%#x beyond the mask %#x", bus, size, d.dev.Mask())
			}
		}
		if err != nil {
			mr.unmapHost(t)
			_ = proc.AccountLockedVM("ibv_reg_mr", npages, false)
			mr.pinned = 0
			mr.pin.Release()
			mr.pin = nil
			return fmt.Errorf("mapping %v+%#x for %s: %v: %w", pa, size, d.name, err, syscall.ENOMEM)
		}
		mr.mapped = append(mr.mapped, seg{bus: bus, len: size})
		mr.segs = append(mr.segs, seg{bus: bus + mem.DMAAddr(r.Start-pa), len: r.Size})
		if n, ok := d.env.Mem.NodeOf(r.Start); ok && node < 0 {
			node = n
		}
	}
	if node < 0 {
		node = d.dev.Node()
	}
	mr.memory, err = d.env.Machine.HostMemory(node)
	return err
}

func (mr *MR) unmapHost(t *sim.Proc) {
	if mp, ok := mr.pd.d.dev.Translator().(dma.Mapper); ok {
		for _, s := range mr.mapped {
			mp.Unmap(t, s.bus, s.len, dma.Bidirectional)
		}
	}
	mr.mapped, mr.segs = nil, nil
}

// Dereg is ibv_dereg_mr: the key stops resolving, host pages are
// unmapped and unpinned (locked_vm falls), peer memory is unmapped and
// put back through its client (unless the client invalidated it
// first: then only released).
func (mr *MR) Dereg(t *sim.Proc) error {
	if mr.dead {
		return fmt.Errorf("ibv_dereg_mr: %w", syscall.EINVAL)
	}
	d := mr.pd.d
	mr.dead = true
	delete(d.mrs, mr.LKey)
	mr.pd.users--
	d.emit(t, sim.CauseCall, func(e *Event) {
		e.Op, e.PID, e.Addr, e.Len, e.Key, e.Access, e.Peer = OpDeregMR, mr.pd.proc.PID(), mr.Addr, mr.Length, mr.LKey, mr.access, mr.peer != nil
	})
	if mr.peer != nil {
		if !mr.invalid {
			_ = mr.peer.c.DMAUnmap(t, mr.peerCtx, d.dev)
			mr.peer.c.PutPages(t, mr.peerCtx)
		}
		mr.peer.c.Release(mr.peerCtx)
		return nil
	}
	mr.unmapHost(t)
	_ = mr.pd.proc.AccountLockedVM("ibv_dereg_mr", mr.pinned, false)
	mr.pin.Release()
	mr.pin = nil
	t.Sleep(sim.Time(mr.pinned) * d.prm.UnpinCost)
	mr.pinned = 0
	return nil
}

// invalidate is the core's side of a peer's invalidation.
func (mr *MR) invalidate(t *sim.Proc) {
	mr.invalid = true
	mr.pd.d.emit(t, sim.CauseLifecycle, func(e *Event) {
		e.Op, e.PID, e.Addr, e.Len, e.Key, e.Peer = OpInvalidate, mr.pd.proc.PID(), mr.Addr, mr.Length, mr.LKey, true
	})
	_ = mr.peer.c.DMAUnmap(t, mr.peerCtx, mr.pd.d.dev)
	mr.peer.c.PutPages(t, mr.peerCtx)
}

// spans are the bus spans of [addr, addr+n) inside the MR.
func (mr *MR) spans(addr, n uint64) []dma.Span {
	off := addr - mr.Addr
	var out []dma.Span
	for _, s := range mr.segs {
		if n == 0 {
			break
		}
		if off >= s.len {
			off -= s.len
			continue
		}
		k := min(s.len-off, n)
		// The core's (or the peer client's) own mapping of pinned
		// memory, not a streaming mapping of the DMA API.
		out = append(out, dma.PinnedSpan(s.bus+mem.DMAAddr(off), k))
		n -= k
		off = 0
	}
	return out
}

// lookup resolves key for [addr, addr+n) needing access need in domain
// pd: the MR, or why not.
func (d *Device) lookup(pd *PD, key uint32, addr, n uint64, need Access) (*MR, string) {
	mr := d.mrs[key]
	switch {
	case mr == nil || mr.dead:
		return nil, fmt.Sprintf("key %#x names no MR", key)
	case mr.invalid:
		return nil, fmt.Sprintf("key %#x: peer memory invalidated", key)
	case mr.pd != pd:
		return nil, fmt.Sprintf("key %#x is of another protection domain", key)
	case addr < mr.Addr || addr+n > mr.Addr+mr.Length || addr+n < addr:
		return nil, fmt.Sprintf("[%#x, +%#x) outside MR [%#x, +%#x)", addr, n, mr.Addr, mr.Length)
	case mr.access&need != need:
		return nil, fmt.Sprintf("key %#x lacks %v (has %v)", key, need, mr.access)
	}
	return mr, ""
}

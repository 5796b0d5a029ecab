package vfio

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// IOMMU_IOAS_MAP flags (include/uapi/linux/iommufd.h).
const (
	// IOASMapFixedIOVA maps at the IOVA given; without it the kernel
	// chooses one and returns it.
	IOASMapFixedIOVA = 1 << 0
	// IOASMapWriteable and IOASMapReadable are what the device may do.
	IOASMapWriteable = 1 << 1
	IOASMapReadable  = 1 << 2
)

// iommufdCtx is struct iommufd_ctx: one open /dev/iommu and its objects
// (IOASes and hardware page tables) by id. Bound devices hold a
// reference to its file, so it is released after them.
type iommufdCtx struct {
	v    *VFIO
	name string
	of   *kernel.OpenFile
	objs map[uint32]any // *ioas or *hwpt
	next uint32
}

func (c *iommufdCtx) spaceName() string { return c.name }

func (c *iommufdCtx) newID() uint32 {
	c.next++
	return c.next
}

// ioas is struct iommufd_ioas: an IO address space (its io_pagetable's
// areas) and the domain filled from it while a device is attached.
type ioas struct {
	ctx  *iommufdCtx
	id   uint32
	maps mappings
	hwpt *hwpt
}

func (a *ioas) name() string { return fmt.Sprintf("%s/ioas%d", a.ctx.name, a.id) }

// hwpt is struct iommufd_hwpt_paging made automatically for an IOAS at
// attach: one UNMANAGED domain holding every area of the IOAS, pinned.
// It goes when its last device detaches.
type hwpt struct {
	id   uint32
	ioas *ioas
	dom  *iommu.Domain
	devs []*pdev
}

// iommufdFile is an open /dev/iommu.
type iommufdFile struct{ ctx *iommufdCtx }

func (f *iommufdFile) FileName() string { return f.ctx.name }

// Release is iommufd_fops_release: every object destroyed; areas still
// pinned (none: devices detach before, since they hold the file) are
// unpinned.
func (f *iommufdFile) Release(t *sim.Proc) error {
	for _, o := range f.ctx.objs {
		if a, ok := o.(*ioas); ok {
			for _, m := range a.maps {
				f.ctx.v.unpin(t, "iommufd release", m)
			}
			a.maps = nil
		}
	}
	f.ctx.objs = map[uint32]any{}
	return nil
}

func (v *VFIO) iommufd(call string, p *kernel.Process, fd int) (*iommufdCtx, error) {
	f, err := p.File(call, fd)
	if err != nil {
		return nil, err
	}
	x, ok := f.(*iommufdFile)
	if !ok {
		return nil, fmt.Errorf("%s(%s) in %s: not /dev/iommu: %w", call, f.FileName(), p.Name(), syscall.ENOTTY)
	}
	return x.ctx, nil
}

func (c *iommufdCtx) ioas(id uint32) (*ioas, error) {
	a, ok := c.objs[id].(*ioas)
	if !ok {
		return nil, fmt.Errorf("no IOAS %d in %s: %w", id, c.name, syscall.ENOENT)
	}
	return a, nil
}

// IOASAlloc is IOMMU_IOAS_ALLOC: a new, empty IOAS of the iommufd ifd;
// it returns its id.
func (v *VFIO) IOASAlloc(t *sim.Proc, p *kernel.Process, ifd int) (uint32, error) {
	c, err := v.iommufd("IOMMU_IOAS_ALLOC", p, ifd)
	if err != nil {
		return 0, err
	}
	a := &ioas{ctx: c, id: c.newID()}
	c.objs[a.id] = a
	return a.id, nil
}

// IOASMap is struct iommu_ioas_map.
type IOASMap struct {
	Flags  uint32
	IOASID uint32
	UserVA mem.VirtAddr
	Length uint64
	// IOVA is where to map with IOASMapFixedIOVA.
	IOVA mem.DMAAddr
}

// IOASMapCall is IOMMU_IOAS_MAP (iommufd_ioas_map): the process's
// memory [UserVA, UserVA+Length) mapped in the IOAS at m.IOVA with
// IOASMapFixedIOVA, else at the lowest free IOVA aligned as the user
// address is, up to the length's power of two (iopt_alloc_iova); it
// returns the IOVA. While a device is attached to the IOAS the pages
// are pinned and mapped in its domain now, counted against
// RLIMIT_MEMLOCK (ENOMEM past it); otherwise iommufd pins them only
// when a domain appears (at attach, which then fails with ENOMEM).
// Unknown flags are EOPNOTSUPP, no permission or a length of 0 EINVAL,
// an unknown IOAS ENOENT, a fixed IOVA that is misaligned or beyond the
// aperture EINVAL, one that overlaps an area EEXIST. The model wants
// the user address page-aligned (iommufd accepts any, keeping the
// offset in the IOVA): EINVAL otherwise.
func (v *VFIO) IOASMapCall(t *sim.Proc, p *kernel.Process, ifd int, m IOASMap) (mem.DMAAddr, error) {
	const ioc = "IOMMU_IOAS_MAP"
	c, err := v.iommufd(ioc, p, ifd)
	if err != nil {
		return 0, err
	}
	var prot iommu.Prot
	if m.Flags&IOASMapReadable != 0 {
		prot |= iommu.ProtRead
	}
	if m.Flags&IOASMapWriteable != 0 {
		prot |= iommu.ProtWrite
	}
	fixed := m.Flags&IOASMapFixedIOVA != 0
	call := fmt.Sprintf("%s(%s ioas %d, user_va %v, length %#x, %s", ioc, c.name, m.IOASID, m.UserVA, m.Length, protFlags(prot))
	if fixed {
		call += fmt.Sprintf(", IOMMU_IOAS_MAP_FIXED_IOVA %v)", m.IOVA)
	} else {
		call += ")"
	}
	fail := func(err error) (mem.DMAAddr, error) {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, "", err)
		return 0, err
	}
	switch {
	case m.Flags&^(IOASMapFixedIOVA|IOASMapReadable|IOASMapWriteable) != 0:
		return fail(fmt.Errorf("flags %#x: %w", m.Flags, syscall.EOPNOTSUPP))
	case prot == 0:
		return fail(fmt.Errorf("neither readable nor writeable: %w", syscall.EINVAL))
	}
	a, err := c.ioas(m.IOASID)
	if err != nil {
		return fail(err)
	}
	if err := checkUser(m.UserVA, m.IOVA, m.Length, fixed); err != nil {
		return fail(err)
	}
	iova := m.IOVA
	if fixed {
		if a.maps.overlaps(uint64(iova), uint64(iova)+m.Length) {
			return fail(fmt.Errorf("iova %v+%#x overlaps an area: %w", iova, m.Length, syscall.EEXIST))
		}
	} else if iova, err = a.allocIOVA(m.UserVA, m.Length); err != nil {
		return fail(err)
	}
	mp := &mapping{iova: iova, size: m.Length, vaddr: m.UserVA, prot: prot, proc: p, call: call}
	e := Event{Op: OpMapDMA, Call: call, Process: p.Name(), PID: p.PID(), Space: a.name(), Unit: v.unit.Name(), IOVA: iova, Size: m.Length, VAddr: m.UserVA}
	if h := a.hwpt; h != nil {
		if err := v.pin(t, ioc, mp); err != nil {
			return fail(err)
		}
		if err := mapInto(h.dom, mp); err != nil {
			v.unpin(t, ioc, mp)
			return fail(err)
		}
		e.Domain = h.dom.ID()
	}
	a.maps.insert(mp)
	v.emit(t, e)
	return iova, nil
}

// allocIOVA is iopt_alloc_iova: the lowest free IOVA range from 4 KiB
// up (it never returns IOVA 0, "even if it is valid"), aligned to the
// smaller of the length's power of two and the user address's
// alignment, at most a huge page (HPAGE_SIZE, 2 MiB), so that huge
// pages can map it.
func (a *ioas) allocIOVA(uva mem.VirtAddr, length uint64) (mem.DMAAddr, error) {
	if length >= 1<<63 {
		return 0, fmt.Errorf("length %#x: %w", length, syscall.EOVERFLOW)
	}
	align := uint64(1) << (64 - bits.LeadingZeros64(length-1))
	if uva != 0 {
		align = min(align, uint64(1)<<bits.TrailingZeros64(uint64(uva)))
	}
	align = min(max(align, mem.PageSize), hugePage)
	next := uint64(mem.PageSize)
	fits := func(limit uint64) (uint64, bool) {
		start := (next + align - 1) &^ (align - 1)
		return start, start+length <= limit
	}
	for _, m := range a.maps {
		if start, ok := fits(uint64(m.iova)); ok {
			return mem.DMAAddr(start), nil
		}
		next = max(next, m.end())
	}
	if start, ok := fits(apertureEnd); ok {
		return mem.DMAAddr(start), nil
	}
	return 0, fmt.Errorf("no free IOVA range of %#x: %w", length, syscall.ENOSPC)
}

// hugePage is HPAGE_SIZE on x86-64 (a PMD, 2 MiB).
const hugePage = 2 << 20

// IOASUnmap is struct iommu_ioas_unmap.
type IOASUnmap struct {
	IOASID uint32
	IOVA   mem.DMAAddr
	Length uint64
}

// IOASUnmapCall is IOMMU_IOAS_UNMAP (iopt_unmap_iova): every area inside
// [IOVA, IOVA+Length) removed (IOVA 0 and Length ^0: all of them),
// unmapped from the domain with the IOTLB invalidated before it returns,
// and unpinned; it returns the bytes unmapped. A range that cuts an
// area, or that holds none, is ENOENT, and so is an unknown IOAS; a
// length of 0 is EINVAL.
func (v *VFIO) IOASUnmapCall(t *sim.Proc, p *kernel.Process, ifd int, u IOASUnmap) (uint64, error) {
	const ioc = "IOMMU_IOAS_UNMAP"
	c, err := v.iommufd(ioc, p, ifd)
	if err != nil {
		return 0, err
	}
	call := fmt.Sprintf("%s(%s ioas %d, iova %v, length %#x)", ioc, c.name, u.IOASID, u.IOVA, u.Length)
	fail := func(err error) (uint64, error) {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, "", err)
		return 0, err
	}
	a, err := c.ioas(u.IOASID)
	if err != nil {
		return fail(err)
	}
	if u.Length == 0 {
		return fail(fmt.Errorf("length 0: %w", syscall.EINVAL))
	}
	lo, hi := uint64(u.IOVA), uint64(u.IOVA)+u.Length
	if u.IOVA == 0 && u.Length == ^uint64(0) || hi < lo {
		hi = ^uint64(0)
	}
	in, partial := a.maps.within(lo, hi)
	switch {
	case partial:
		return fail(fmt.Errorf("the range cuts an area: %w", syscall.ENOENT))
	case len(in) == 0:
		return fail(fmt.Errorf("nothing mapped there: %w", syscall.ENOENT))
	}
	var n uint64
	for _, m := range in {
		if h := a.hwpt; h != nil {
			v.unmapFrom(t, h.dom, m)
		}
		v.unpin(t, ioc, m)
		a.maps.remove(m)
		n += m.size
	}
	e := Event{Op: OpUnmapDMA, Call: call, Process: p.Name(), PID: p.PID(), Space: a.name(), Unit: v.unit.Name(), IOVA: u.IOVA, Size: n}
	if a.hwpt != nil {
		e.Domain = a.hwpt.dom.ID()
	}
	v.emit(t, e)
	return n, nil
}

// DeviceBindIOMMUFD is VFIO_DEVICE_BIND_IOMMUFD on a device's cdev file
// dfd: the device joins the iommufd ifd, which takes its DMA ownership
// (iommu_device_claim_dma_owner: its group's devices go into the
// blocking domain, and their DMA faults until an attach); it returns the
// device's object id. A device file opened through a group, or one
// already bound, is EINVAL; ifd not an iommufd EBADFD; a group with a
// device bound to a kernel driver, or owned by someone else, EPERM.
func (v *VFIO) DeviceBindIOMMUFD(t *sim.Proc, p *kernel.Process, dfd, ifd int) (uint32, error) {
	const ioc = "VFIO_DEVICE_BIND_IOMMUFD"
	df, err := v.deviceFile(ioc, p, dfd, true)
	if err != nil {
		return 0, err
	}
	pd := df.pd
	call := fmt.Sprintf("%s(%s, %d)", ioc, df.name, ifd)
	fail := func(err error) (uint32, error) {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, pd.name, err)
		return 0, err
	}
	switch {
	case df.g != nil:
		return fail(fmt.Errorf("opened through group %d, not its cdev: %w", df.g.id, syscall.EINVAL))
	case df.granted:
		return fail(fmt.Errorf("already bound: %w", syscall.EINVAL))
	case pd.bound != nil:
		return fail(fmt.Errorf("%s is bound to %s through another file: %w", pd.name, pd.bound.name, syscall.EBUSY))
	}
	f, err := p.File(ioc, ifd)
	if err != nil {
		return fail(err)
	}
	x, ok := f.(*iommufdFile)
	if !ok {
		return fail(fmt.Errorf("%s is not /dev/iommu: %w", f.FileName(), syscall.EBADFD))
	}
	if err := pd.group.claim(t, p, x.ctx, true); err != nil {
		return fail(err)
	}
	if err := x.ctx.of.Get(); err != nil {
		pd.group.release(t)
		return fail(err)
	}
	df.granted, df.ictx = true, x.ctx
	pd.bound = x.ctx
	id := x.ctx.newID()
	return id, nil
}

// DeviceAttachIOMMUFDPT is VFIO_DEVICE_ATTACH_IOMMUFD_PT: the bound
// device attached to page table ptID, an IOAS (whose automatic domain
// is made on the first attach: a domain on the unit, every area of the
// IOAS pinned and mapped into it, ENOMEM past RLIMIT_MEMLOCK with
// nothing left pinned) or that domain's own id; it returns the domain's
// id. A device already attached elsewhere moves (replace). A device not
// bound is EINVAL, an unknown id ENOENT; devices of one group must
// share one domain: EINVAL otherwise.
func (v *VFIO) DeviceAttachIOMMUFDPT(t *sim.Proc, p *kernel.Process, dfd int, ptID uint32) (uint32, error) {
	const ioc = "VFIO_DEVICE_ATTACH_IOMMUFD_PT"
	df, err := v.deviceFile(ioc, p, dfd, false)
	if err != nil {
		return 0, err
	}
	pd, c := df.pd, df.ictx
	call := fmt.Sprintf("%s(%s, %d)", ioc, df.name, ptID)
	fail := func(err error) (uint32, error) {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, pd.name, err)
		return 0, err
	}
	if c == nil {
		return fail(fmt.Errorf("not bound to an iommufd: %w", syscall.EINVAL))
	}
	var h *hwpt
	switch o := c.objs[ptID].(type) {
	case *hwpt:
		h = o
	case *ioas:
		h = o.hwpt
	default:
		return fail(fmt.Errorf("no IOAS or page table %d in %s: %w", ptID, c.name, syscall.ENOENT))
	}
	for _, other := range pd.group.devs {
		if other != pd && other.hwpt != nil && (h == nil || other.hwpt != h) {
			return fail(fmt.Errorf("%s of group %d is attached to page table %d: %w", other.name, pd.group.id, other.hwpt.id, syscall.EINVAL))
		}
	}
	if h == nil {
		if h, err = v.newHWPT(t, c, c.objs[ptID].(*ioas)); err != nil {
			return fail(err)
		}
	}
	if pd.hwpt == h {
		return h.id, nil
	}
	if err := v.detachHWPT(t, pd); err != nil {
		return fail(err)
	}
	iommu.Attach(pd.dma, h.dom, iommu.AttachOptions{PCI: true})
	h.devs = append(h.devs, pd)
	pd.hwpt = h
	v.emit(t, Event{Op: OpAttach, Call: call, Process: p.Name(), PID: p.PID(), Device: pd.name, Space: h.ioas.name(), Unit: v.unit.Name(), Domain: h.dom.ID()})
	return h.id, nil
}

// newHWPT makes a's automatic domain and fills it: every area pinned
// and mapped (iopt_table_add_domain); on failure, nothing stays.
func (v *VFIO) newHWPT(t *sim.Proc, c *iommufdCtx, a *ioas) (*hwpt, error) {
	dom, err := v.unit.NewDomain()
	if err != nil {
		return nil, err
	}
	for i, m := range a.maps {
		err := v.pin(t, "IOMMU_IOAS_MAP", m)
		if err == nil {
			if err = mapInto(dom, m); err != nil {
				v.unpin(t, "IOMMU_IOAS_MAP", m)
			}
		}
		if err != nil {
			for _, done := range a.maps[:i] {
				dom.Unmap(done.iova, done.size)
				v.unpin(t, "IOMMU_IOAS_MAP", done)
			}
			return nil, errors.Join(fmt.Errorf("filling the domain of %s with %s (%s): %w", a.name(), m, m.call, err), dom.Free())
		}
	}
	h := &hwpt{id: c.newID(), ioas: a, dom: dom}
	c.objs[h.id] = h
	a.hwpt = h
	return h, nil
}

// DeviceDetachIOMMUFDPT is VFIO_DEVICE_DETACH_IOMMUFD_PT: the device
// leaves its domain for its group's blocking domain; the last device
// of an automatic domain destroys it (every area unmapped and
// unpinned).
func (v *VFIO) DeviceDetachIOMMUFDPT(t *sim.Proc, p *kernel.Process, dfd int) error {
	const ioc = "VFIO_DEVICE_DETACH_IOMMUFD_PT"
	df, err := v.deviceFile(ioc, p, dfd, false)
	if err != nil {
		return err
	}
	if df.ictx == nil {
		err := fmt.Errorf("%s(%s) in %s: not bound to an iommufd: %w", ioc, df.name, p.Name(), syscall.EINVAL)
		v.fail(t, p, ioc, df.pd.name, err)
		return err
	}
	return v.detachHWPT(t, df.pd)
}

// detachHWPT moves pd to its group's blocking domain and destroys its
// domain if it was the last device.
func (v *VFIO) detachHWPT(t *sim.Proc, pd *pdev) error {
	h := pd.hwpt
	if h == nil {
		return nil
	}
	pd.group.block([]*pdev{pd})
	pd.hwpt = nil
	h.devs = slices.DeleteFunc(h.devs, func(x *pdev) bool { return x == pd })
	if len(h.devs) > 0 {
		return nil
	}
	for _, m := range h.ioas.maps {
		v.unmapFrom(t, h.dom, m)
		v.unpin(t, "iommufd_hw_pagetable_destroy", m)
	}
	delete(h.ioas.ctx.objs, h.id)
	h.ioas.hwpt = nil
	return h.dom.Free()
}

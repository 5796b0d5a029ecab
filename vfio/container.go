package vfio

import (
	"fmt"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// The container's API (include/uapi/linux/vfio.h).
const (
	// APIVersion is VFIO_API_VERSION.
	APIVersion = 0
	// Type1IOMMU, Type1v2IOMMU and UnmapAllExtension are
	// VFIO_TYPE1_IOMMU, VFIO_TYPE1v2_IOMMU and VFIO_UNMAP_ALL, the
	// arguments of CheckExtension and SetIOMMU.
	Type1IOMMU        = 1
	Type1v2IOMMU      = 3
	UnmapAllExtension = 9
	// DMAMapFlagRead and DMAMapFlagWrite are VFIO_DMA_MAP_FLAG_READ and
	// _WRITE: what the device may do (read memory, write it).
	DMAMapFlagRead  = 1 << 0
	DMAMapFlagWrite = 1 << 1
	// DMAUnmapFlagAll is VFIO_DMA_UNMAP_FLAG_ALL: unmap everything
	// (iova and size 0).
	DMAUnmapFlagAll = 1 << 1
)

// container is struct vfio_container with its type1 IOMMU
// (struct vfio_iommu): the groups set to it and, once SetIOMMU ran, one
// UNMANAGED domain all of them are attached to (the model has one IOMMU
// unit, so type1's list of domains has one) and the user's mappings.
type container struct {
	v      *VFIO
	name   string
	groups []*group
	t1     *type1
}

type type1 struct {
	dom  *iommu.Domain
	dmas mappings
}

func (c *container) spaceName() string { return c.name }

func (c *container) domain() *iommu.Domain {
	if c.t1 == nil {
		return nil
	}
	return c.t1.dom
}

// attached reports devices attached to the container's domain.
func (c *container) attached(t *sim.Proc, p *kernel.Process, devs []*pdev) {
	for _, pd := range devs {
		c.v.emit(t, Event{Op: OpAttach, Process: p.Name(), PID: p.PID(), Device: pd.name, Space: c.name, Unit: c.v.unit.Name(), Domain: c.t1.dom.ID()})
	}
}

// detach is vfio_group_detach_container: the group's devices leave the
// domain and its ownership is released (default domain again); the
// last group's detach releases the IOMMU (vfio_iommu_type1_release:
// every mapping unmapped and unpinned, the domain freed).
func (c *container) detach(t *sim.Proc, g *group) error {
	c.groups = slices.DeleteFunc(c.groups, func(x *group) bool { return x == g })
	g.container = nil
	g.block(g.devs)
	g.release(t)
	if len(c.groups) > 0 || c.t1 == nil {
		return nil
	}
	t1 := c.t1
	c.t1 = nil
	for _, m := range t1.dmas {
		c.v.unmapFrom(t, t1.dom, m)
		c.v.unpin(t, "vfio_iommu_type1_release", m)
	}
	return t1.dom.Free()
}

// containerFile is an open /dev/vfio/vfio. Its release only drops the
// file: the container lives while a group is set to it.
type containerFile struct{ c *container }

func (f *containerFile) FileName() string        { return f.c.name }
func (f *containerFile) Release(*sim.Proc) error { return nil }

func (v *VFIO) container(call string, p *kernel.Process, fd int) (*container, error) {
	f, err := p.File(call, fd)
	if err != nil {
		return nil, err
	}
	cf, ok := f.(*containerFile)
	if !ok {
		return nil, fmt.Errorf("%s(%s) in %s: not a VFIO container: %w", call, f.FileName(), p.Name(), syscall.ENOTTY)
	}
	return cf.c, nil
}

// GetAPIVersion is VFIO_GET_API_VERSION on the container cfd.
func (v *VFIO) GetAPIVersion(p *kernel.Process, cfd int) (int, error) {
	if _, err := v.container("VFIO_GET_API_VERSION", p, cfd); err != nil {
		return -1, err
	}
	return APIVersion, nil
}

// CheckExtension is VFIO_CHECK_EXTENSION: 1 for Type1v2IOMMU and
// UnmapAllExtension, 0 for anything else (the model's type1 is v2
// only: v1's unmaps that split a mapping are not modelled).
func (v *VFIO) CheckExtension(p *kernel.Process, cfd int, ext int) (int, error) {
	if _, err := v.container("VFIO_CHECK_EXTENSION", p, cfd); err != nil {
		return -1, err
	}
	if ext == Type1v2IOMMU || ext == UnmapAllExtension {
		return 1, nil
	}
	return 0, nil
}

// SetIOMMU is VFIO_SET_IOMMU: the container's type1 IOMMU, one
// UNMANAGED domain allocated on the unit (vfio_iommu_type1_attach_group
// → iommu_domain_alloc) and every device of every group set to the
// container attached to it. A container without a group, or whose
// IOMMU is set, is EINVAL; an IOMMU type other than Type1v2IOMMU
// ENODEV (no driver claims it).
func (v *VFIO) SetIOMMU(t *sim.Proc, p *kernel.Process, cfd, typ int) error {
	const ioc = "VFIO_SET_IOMMU"
	c, err := v.container(ioc, p, cfd)
	if err != nil {
		return err
	}
	call := fmt.Sprintf("%s(%s, %d)", ioc, c.name, typ)
	fail := func(err error) error {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, "", err)
		return err
	}
	switch {
	case len(c.groups) == 0:
		return fail(fmt.Errorf("no group set to the container: %w", syscall.EINVAL))
	case c.t1 != nil:
		return fail(fmt.Errorf("IOMMU already set: %w", syscall.EINVAL))
	case typ != Type1v2IOMMU:
		return fail(fmt.Errorf("IOMMU type %d not supported (VFIO_TYPE1v2_IOMMU is %d): %w", typ, Type1v2IOMMU, syscall.ENODEV))
	}
	dom, err := v.unit.NewDomain()
	if err != nil {
		return fail(err)
	}
	c.t1 = &type1{dom: dom}
	for _, g := range c.groups {
		attach(g.devs, dom)
		c.attached(t, p, g.devs)
	}
	return nil
}

// DMAMap is struct vfio_iommu_type1_dma_map.
type DMAMap struct {
	Flags uint32
	VAddr mem.VirtAddr
	IOVA  mem.DMAAddr
	Size  uint64
}

// MapDMA is VFIO_IOMMU_MAP_DMA (vfio_dma_do_map): the process's memory
// [VAddr, VAddr+Size) is pinned and mapped at the IOVA the user chose,
// with the flags' permissions. Errors as vfio_iommu_type1.c returns
// them: no IOMMU set, no permission, a size of 0, or an address or
// size not aligned to 4 KiB is EINVAL; a range that wraps EOVERFLOW;
// an IOVA beyond the domain's aperture EINVAL; one that overlaps a
// mapping EEXIST; more than DMAEntryLimit mappings ENOSPC; memory not
// mapped in the process EFAULT; locked memory past RLIMIT_MEMLOCK
// ENOMEM (vfio_pin_pages_remote). A failure leaves nothing mapped or
// pinned.
func (v *VFIO) MapDMA(t *sim.Proc, p *kernel.Process, cfd int, m DMAMap) error {
	const ioc = "VFIO_IOMMU_MAP_DMA"
	c, err := v.container(ioc, p, cfd)
	if err != nil {
		return err
	}
	var prot iommu.Prot
	if m.Flags&DMAMapFlagRead != 0 {
		prot |= iommu.ProtRead
	}
	if m.Flags&DMAMapFlagWrite != 0 {
		prot |= iommu.ProtWrite
	}
	call := fmt.Sprintf("%s(%s, vaddr %v, iova %v, size %#x, %s)", ioc, c.name, m.VAddr, m.IOVA, m.Size, protFlags(prot))
	fail := func(err error) error {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, "", err)
		return err
	}
	switch {
	case c.t1 == nil:
		return fail(fmt.Errorf("no IOMMU set: %w", syscall.EINVAL))
	case prot == 0 || m.Flags&^(DMAMapFlagRead|DMAMapFlagWrite) != 0:
		return fail(fmt.Errorf("flags %#x: %w", m.Flags, syscall.EINVAL))
	}
	if err := checkUser(m.VAddr, m.IOVA, m.Size, true); err != nil {
		return fail(err)
	}
	t1 := c.t1
	if t1.dmas.overlaps(uint64(m.IOVA), uint64(m.IOVA)+m.Size) {
		return fail(fmt.Errorf("iova %v+%#x overlaps a mapping: %w", m.IOVA, m.Size, syscall.EEXIST))
	}
	if len(t1.dmas) >= v.params.DMAEntryLimit {
		return fail(fmt.Errorf("%d mappings (dma_entry_limit): %w", len(t1.dmas), syscall.ENOSPC))
	}
	mp := &mapping{iova: m.IOVA, size: m.Size, vaddr: m.VAddr, prot: prot, proc: p, call: call}
	if err := v.pin(t, ioc, mp); err != nil {
		return fail(err)
	}
	if err := mapInto(t1.dom, mp); err != nil {
		v.unpin(t, ioc, mp)
		return fail(err)
	}
	t1.dmas.insert(mp)
	v.emit(t, Event{Op: OpMapDMA, Call: call, Process: p.Name(), PID: p.PID(), Space: c.name, Unit: v.unit.Name(), Domain: t1.dom.ID(),
		IOVA: m.IOVA, Size: m.Size, VAddr: m.VAddr})
	return nil
}

// DMAUnmap is struct vfio_iommu_type1_dma_unmap.
type DMAUnmap struct {
	Flags uint32
	IOVA  mem.DMAAddr
	Size  uint64
}

// UnmapDMA is VFIO_IOMMU_UNMAP_DMA (vfio_dma_do_unmap): every mapping
// inside [IOVA, IOVA+Size) (everything with DMAUnmapFlagAll) is
// unmapped, the IOTLB invalidated before it returns, and its pages
// unpinned; it returns the bytes unmapped (0 when nothing was mapped
// there, which is no error). A size of 0 or a misaligned range is
// EINVAL, and so is a range that cuts a mapping in two (type1v2 never
// splits a mapping); DMAUnmapFlagAll with an IOVA or size EINVAL.
func (v *VFIO) UnmapDMA(t *sim.Proc, p *kernel.Process, cfd int, u DMAUnmap) (uint64, error) {
	const ioc = "VFIO_IOMMU_UNMAP_DMA"
	c, err := v.container(ioc, p, cfd)
	if err != nil {
		return 0, err
	}
	all := u.Flags&DMAUnmapFlagAll != 0
	call := fmt.Sprintf("%s(%s, iova %v, size %#x)", ioc, c.name, u.IOVA, u.Size)
	if all {
		call = fmt.Sprintf("%s(%s, VFIO_DMA_UNMAP_FLAG_ALL)", ioc, c.name)
	}
	fail := func(err error) (uint64, error) {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, "", err)
		return 0, err
	}
	lo, hi := uint64(u.IOVA), uint64(u.IOVA)+u.Size
	switch {
	case c.t1 == nil:
		return fail(fmt.Errorf("no IOMMU set: %w", syscall.EINVAL))
	case u.Flags&^DMAUnmapFlagAll != 0:
		return fail(fmt.Errorf("flags %#x: %w", u.Flags, syscall.EINVAL))
	case all && (u.IOVA != 0 || u.Size != 0):
		return fail(fmt.Errorf("VFIO_DMA_UNMAP_FLAG_ALL with a range: %w", syscall.EINVAL))
	case all:
		lo, hi = 0, ^uint64(0)
	case u.Size == 0 || (lo|u.Size)&(mem.PageSize-1) != 0:
		return fail(fmt.Errorf("iova %v size %#x not aligned to 4 KiB: %w", u.IOVA, u.Size, syscall.EINVAL))
	case hi-1 < lo:
		return fail(fmt.Errorf("range wraps: %w", syscall.EOVERFLOW))
	}
	t1 := c.t1
	in, partial := t1.dmas.within(lo, hi)
	if partial {
		return fail(fmt.Errorf("the range cuts a mapping in two (type1v2 does not split mappings): %w", syscall.EINVAL))
	}
	var n uint64
	for _, m := range in {
		v.unmapFrom(t, t1.dom, m)
		v.unpin(t, ioc, m)
		t1.dmas.remove(m)
		n += m.size
	}
	e := Event{Op: OpUnmapDMA, Call: call, Process: p.Name(), PID: p.PID(), Space: c.name, Unit: v.unit.Name(), Domain: t1.dom.ID(), IOVA: u.IOVA, Size: n}
	v.emit(t, e)
	return n, nil
}

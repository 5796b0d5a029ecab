package vfio

import (
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/sim"
)

// space is a user IO address space that can own a group's DMA: a
// container or an iommufd context.
type space interface {
	spaceName() string
}

// group is struct vfio_group with the state of its iommu_group that
// VFIO changes: the DMA owner, its count (owner_cnt), and the blocking
// domain a claimed group sits in until its user domain is attached.
type group struct {
	v    *VFIO
	id   int
	devs []*pdev
	// file is the one open group file (group->opened_file), of its
	// struct file, whose reference device files hold.
	file *groupFile
	of   *kernel.OpenFile
	// container is the container the group is set to.
	container *container
	owner     space
	ownerCnt  int
	blocking  *iommu.Domain
}

func (g *group) path() string { return fmt.Sprintf("/dev/vfio/%d", g.id) }

// kernelDriven lists the devices of the group bound to a kernel driver
// that does DMA through the DMA API: each holds the group's ownership
// count (iommu_device_use_default_domain at probe).
func (g *group) kernelDriven() []string {
	var out []string
	for _, pd := range g.devs {
		if pd.driver != "" && pd.driver != DriverVFIOPCI {
			out = append(out, pd.name+" ("+pd.driver+")")
		}
	}
	return out
}

// viable is VFIO_GROUP_FLAGS_VIABLE without a container set:
// !iommu_group_dma_owner_claimed, every device bound to vfio-pci or to
// nothing, and nobody else owning it.
func (g *group) viable() bool { return g.owner == nil && len(g.kernelDriven()) == 0 }

// claim takes the group's DMA ownership for s (iommu_group_claim_dma_owner,
// or with perDevice iommu_device_claim_dma_owner, which a second claim
// by the same owner shares). Any device bound to a kernel DMA driver,
// or another owner, is EPERM: both functions return -EPERM when
// group->owner_cnt is set by someone else (drivers/iommu/iommu.c). The
// first claim moves every device of the group into its blocking
// domain (__iommu_take_dma_ownership).
func (g *group) claim(t *sim.Proc, p *kernel.Process, s space, perDevice bool) error {
	if k := g.kernelDriven(); len(k) > 0 {
		return fmt.Errorf("group %d is not viable: %s bound to a kernel driver: %w", g.id, strings.Join(k, ", "), syscall.EPERM)
	}
	if g.owner != nil {
		if perDevice && g.owner == s {
			g.ownerCnt++
			return nil
		}
		return fmt.Errorf("group %d is owned by %s: %w", g.id, g.owner.spaceName(), syscall.EPERM)
	}
	if g.blocking == nil {
		d, err := g.v.unit.NewDomain()
		if err != nil {
			return fmt.Errorf("group %d: blocking domain: %w", g.id, err)
		}
		g.blocking = d
	}
	attach(g.devs, g.blocking)
	for _, pd := range g.devs {
		pd.dma.SetUserDMA(true)
	}
	g.owner, g.ownerCnt = s, 1
	for _, pd := range g.devs {
		g.v.emit(t, Event{Op: OpClaim, Process: p.Name(), PID: p.PID(), Device: pd.name, Space: s.spaceName(), Unit: g.v.unit.Name(), Domain: g.blocking.ID()})
	}
	return nil
}

// block puts the group's devices back in its blocking domain (detached
// from a user domain, still owned).
func (g *group) block(devs []*pdev) { attach(devs, g.blocking) }

// release drops one ownership count; the last returns every device to
// its default domain (__iommu_release_dma_ownership).
func (g *group) release(t *sim.Proc) {
	if g.ownerCnt--; g.ownerCnt > 0 {
		return
	}
	s := g.owner
	g.owner, g.ownerCnt = nil, 0
	for _, pd := range g.devs {
		pd.dma.SetTranslator(pd.def)
		pd.dma.SetUserDMA(false)
		g.v.emit(t, Event{Op: OpRelease, Device: pd.name, Space: s.spaceName()})
	}
}

// groupFile is an open /dev/vfio/N.
type groupFile struct{ g *group }

func (f *groupFile) FileName() string { return f.g.path() }

// Release is vfio_group_fops_release: device files hold a reference to
// the group file, so it runs once none is open; a group set to a
// container leaves it (vfio_group_detach_container).
func (f *groupFile) Release(t *sim.Proc) error {
	g := f.g
	var err error
	if g.container != nil {
		err = g.container.detach(t, g)
	}
	g.file, g.of = nil, nil
	return err
}

// Group status flags (struct vfio_group_status).
const (
	GroupFlagsViable       = 1 << 0 // VFIO_GROUP_FLAGS_VIABLE
	GroupFlagsContainerSet = 1 << 1 // VFIO_GROUP_FLAGS_CONTAINER_SET
)

func (v *VFIO) groupFile(call string, p *kernel.Process, fd int) (*groupFile, error) {
	f, err := p.File(call, fd)
	if err != nil {
		return nil, err
	}
	gf, ok := f.(*groupFile)
	if !ok {
		return nil, fmt.Errorf("%s(%s) in %s: not a VFIO group: %w", call, f.FileName(), p.Name(), syscall.ENOTTY)
	}
	return gf, nil
}

// GroupGetStatus is VFIO_GROUP_GET_STATUS on the group file gfd of p:
// GroupFlagsViable when every device of the group is bound to vfio-pci
// or to nothing (or the group is set to a container), with
// GroupFlagsContainerSet once it is.
func (v *VFIO) GroupGetStatus(p *kernel.Process, gfd int) (uint32, error) {
	gf, err := v.groupFile("VFIO_GROUP_GET_STATUS", p, gfd)
	if err != nil {
		return 0, err
	}
	g := gf.g
	switch {
	case g.container != nil:
		return GroupFlagsViable | GroupFlagsContainerSet, nil
	case g.viable():
		return GroupFlagsViable, nil
	}
	return 0, nil
}

// GroupSetContainer is VFIO_GROUP_SET_CONTAINER: the group file gfd of
// p joins the container cfd, taking the group's DMA ownership (every
// device into the blocking domain, or the container's domain if it has
// one). A group already set is EINVAL, a cfd that is not a container
// EBADFD; a group that is not viable is EPERM
// (iommu_group_claim_dma_owner).
func (v *VFIO) GroupSetContainer(t *sim.Proc, p *kernel.Process, gfd, cfd int) error {
	const ioc = "VFIO_GROUP_SET_CONTAINER"
	gf, err := v.groupFile(ioc, p, gfd)
	if err != nil {
		return err
	}
	g := gf.g
	call := fmt.Sprintf("%s(%s, %d)", ioc, g.path(), cfd)
	fail := func(err error) error {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, names(g.devs), err)
		return err
	}
	if g.container != nil {
		return fail(fmt.Errorf("group %d already set to %s: %w", g.id, g.container.name, syscall.EINVAL))
	}
	f, err := p.File(ioc, cfd)
	if err != nil {
		return fail(err)
	}
	c, ok := f.(*containerFile)
	if !ok {
		return fail(fmt.Errorf("%s is not a container: %w", f.FileName(), syscall.EBADFD))
	}
	if err := g.claim(t, p, c.c, false); err != nil {
		return fail(err)
	}
	c.c.groups = append(c.c.groups, g)
	g.container = c.c
	if d := c.c.domain(); d != nil {
		attach(g.devs, d)
		c.c.attached(t, p, g.devs)
	}
	return nil
}

// GroupGetDeviceFD is VFIO_GROUP_GET_DEVICE_FD: a device file for the
// group's device name, in p's descriptor table. A device of another
// group, or not bound to vfio-pci, is ENODEV; a group without a
// container, or whose container has no IOMMU set, EINVAL
// (vfio_group_use_container).
func (v *VFIO) GroupGetDeviceFD(t *sim.Proc, p *kernel.Process, gfd int, name string) (int, error) {
	const ioc = "VFIO_GROUP_GET_DEVICE_FD"
	gf, err := v.groupFile(ioc, p, gfd)
	if err != nil {
		return -1, err
	}
	g := gf.g
	call := fmt.Sprintf("%s(%s, %q)", ioc, g.path(), name)
	fail := func(err error) (int, error) {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, name, err)
		return -1, err
	}
	i := slices.IndexFunc(g.devs, func(pd *pdev) bool { return pd.name == name })
	if i < 0 || g.devs[i].driver != DriverVFIOPCI {
		return fail(fmt.Errorf("no vfio-pci device %s in group %d: %w", name, g.id, syscall.ENODEV))
	}
	if g.container == nil || g.container.t1 == nil {
		return fail(fmt.Errorf("group %d has no container with an IOMMU set: %w", g.id, syscall.EINVAL))
	}
	pd := g.devs[i]
	df := &deviceFile{v: v, pd: pd, g: g, granted: true, name: fmt.Sprintf("anon_inode:[vfio-device] %s", pd.name)}
	fd, err := p.Install(df)
	if err != nil {
		return fail(err)
	}
	if err := g.of.Get(); err != nil {
		return fail(err)
	}
	pd.open++
	v.emit(t, Event{Op: OpOpen, Call: call, Process: p.Name(), PID: p.PID(), Device: pd.name, File: df.name, Space: g.container.name})
	return fd, nil
}

package vfio

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/sim"
)

// Paths of the VFIO and iommufd character devices.
const (
	// ContainerPath is the legacy container (a new container per open).
	ContainerPath = "/dev/vfio/vfio"
	// IOMMUFDPath is iommufd (a new context per open).
	IOMMUFDPath = "/dev/iommu"
)

// Open is open(2) of a VFIO or iommufd node by process p, from thread
// t: ContainerPath, IOMMUFDPath, a group "/dev/vfio/N", or a device's
// cdev "/dev/vfio/devices/vfioN" (DeviceCdev). It returns the
// descriptor. A group exists only while one of its devices is bound to
// vfio-pci, a cdev while its device is: otherwise, and for any other
// path, ENOENT. A group is open at most once (vfio_group_fops_open:
// EBUSY).
func (v *VFIO) Open(t *sim.Proc, p *kernel.Process, path string) (int, error) {
	call := fmt.Sprintf("open(%q)", path)
	var f kernel.File
	var g *group
	switch {
	case path == ContainerPath:
		v.containers++
		f = &containerFile{c: &container{v: v, name: fmt.Sprintf("container%d", v.containers)}}
	case path == IOMMUFDPath:
		v.ictxs++
		f = &iommufdFile{ctx: &iommufdCtx{v: v, name: fmt.Sprintf("iommufd%d", v.ictxs), objs: map[uint32]any{}}}
	case strings.HasPrefix(path, "/dev/vfio/devices/vfio"):
		n, err := strconv.Atoi(strings.TrimPrefix(path, "/dev/vfio/devices/vfio"))
		pd := v.cdevs[n]
		if err != nil || pd == nil {
			return v.openFail(t, p, call, fmt.Errorf("no such device: %w", syscall.ENOENT))
		}
		f = &deviceFile{v: v, pd: pd, name: path + " (" + pd.name + ")"}
	default:
		var ok bool
		if g, ok = v.groupByPath(path); !ok || !g.hasVFIO() {
			return v.openFail(t, p, call, fmt.Errorf("no such group: %w", syscall.ENOENT))
		}
		if g.file != nil {
			return v.openFail(t, p, call, fmt.Errorf("group %d is open: %w", g.id, syscall.EBUSY))
		}
		f = &groupFile{g: g}
	}
	fd, err := p.Install(f)
	if err != nil {
		return v.openFail(t, p, call, err)
	}
	e := Event{Op: OpOpen, Call: call, Process: p.Name(), PID: p.PID(), File: f.FileName()}
	switch x := f.(type) {
	case *groupFile:
		g.file = x
		if g.of, err = p.OpenFile("open", fd); err != nil {
			return -1, err
		}
	case *deviceFile:
		x.pd.open++
		e.Device = x.pd.name
	case *iommufdFile:
		if x.ctx.of, err = p.OpenFile("open", fd); err != nil {
			return -1, err
		}
	}
	v.emit(t, e)
	return fd, nil
}

func (v *VFIO) openFail(t *sim.Proc, p *kernel.Process, call string, err error) (int, error) {
	err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
	v.fail(t, p, call, "", err)
	return -1, err
}

// hasVFIO reports whether a device of the group is bound to vfio-pci:
// only then does /dev/vfio/N exist (vfio_group_find_or_alloc at the
// driver's probe).
func (g *group) hasVFIO() bool {
	for _, pd := range g.devs {
		if pd.driver == DriverVFIOPCI {
			return true
		}
	}
	return false
}

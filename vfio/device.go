package vfio

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/pci"
	"github.com/dmalab/dmalab/sim"
)

// Device file API (include/uapi/linux/vfio.h).
const (
	// DeviceFlagsReset and DeviceFlagsPCI are VFIO_DEVICE_FLAGS_RESET
	// and VFIO_DEVICE_FLAGS_PCI.
	DeviceFlagsReset = 1 << 0
	DeviceFlagsPCI   = 1 << 1
	// Region indexes of a PCI device: VFIO_PCI_BAR0_REGION_INDEX to
	// _BAR5_, then ROM, config space and VGA.
	PCIBAR0RegionIndex   = 0
	PCIBAR5RegionIndex   = 5
	PCIROMRegionIndex    = 6
	PCIConfigRegionIndex = 7
	PCIVGARegionIndex    = 8
	PCINumRegions        = 9
	// IRQ indexes: VFIO_PCI_INTX_IRQ_INDEX, _MSI_, _MSIX_, _ERR_, _REQ_.
	PCIINTxIRQIndex = 0
	PCIMSIIRQIndex  = 1
	PCIMSIXIRQIndex = 2
	PCINumIRQs      = 5
	// Region flags: VFIO_REGION_INFO_FLAG_READ, _WRITE, _MMAP.
	RegionInfoFlagRead  = 1 << 0
	RegionInfoFlagWrite = 1 << 1
	RegionInfoFlagMmap  = 1 << 2
	// IRQ set flags: VFIO_IRQ_SET_DATA_NONE, _DATA_BOOL, _DATA_EVENTFD,
	// _ACTION_MASK, _ACTION_UNMASK, _ACTION_TRIGGER.
	IRQSetDataNone      = 1 << 0
	IRQSetDataBool      = 1 << 1
	IRQSetDataEventFD   = 1 << 2
	IRQSetActionMask    = 1 << 3
	IRQSetActionUnmask  = 1 << 4
	IRQSetActionTrigger = 1 << 5
	// pciConfigSize is a PCIe function's configuration space
	// (PCI_CFG_SPACE_EXP_SIZE).
	pciConfigSize = 4096
)

// RegionOffset is VFIO_PCI_INDEX_TO_OFFSET: where region index starts in
// the device file (what mmap's offset names).
func RegionOffset(index int) uint64 { return uint64(index) << 40 }

// deviceFile is struct vfio_device_file: a device opened through its
// group (g set, access granted at once) or its cdev (access granted at
// VFIO_DEVICE_BIND_IOMMUFD).
type deviceFile struct {
	v       *VFIO
	pd      *pdev
	g       *group
	name    string
	granted bool
	ictx    *iommufdCtx
}

func (f *deviceFile) FileName() string { return f.name }

// Release is vfio_device_fops_release: on the last close of the device,
// vfio-pci masks its vectors and resets it (vfio_pci_core_disable, the
// FLR when it has one); a cdev file bound to an iommufd detaches and
// gives its DMA ownership back; a group's file drops its reference to
// the group file.
func (f *deviceFile) Release(t *sim.Proc) error {
	pd, v := f.pd, f.v
	pd.open--
	var errs []error
	if pd.open == 0 {
		for vec := range pd.irqs {
			errs = append(errs, pd.fn.SetIRQ(vec, nil))
		}
		pd.irqs = nil
		if pd.fn != nil {
			errs = append(errs, pd.fn.Reset(t))
			v.emit(t, Event{Op: OpReset, Call: "vfio_pci_core_disable(" + pd.name + ")", Device: pd.name})
		}
	}
	if f.ictx != nil {
		errs = append(errs, v.detachHWPT(t, pd))
		pd.bound = nil
		pd.group.release(t)
		errs = append(errs, f.ictx.of.Put(t))
	}
	if f.g != nil && f.g.of != nil {
		errs = append(errs, f.g.of.Put(t))
	}
	return errors.Join(errs...)
}

// deviceFile is the device file fd of p; unless bind, one whose access
// is not granted yet (a cdev before VFIO_DEVICE_BIND_IOMMUFD) is EINVAL,
// as vfio_device_fops_unl_ioctl refuses it.
func (v *VFIO) deviceFile(call string, p *kernel.Process, fd int, bind bool) (*deviceFile, error) {
	f, err := p.File(call, fd)
	if err != nil {
		return nil, err
	}
	df, ok := f.(*deviceFile)
	if !ok {
		return nil, fmt.Errorf("%s(%s) in %s: not a VFIO device: %w", call, f.FileName(), p.Name(), syscall.ENOTTY)
	}
	if !bind && !df.granted {
		return nil, fmt.Errorf("%s(%s) in %s: not bound to an iommufd yet: %w", call, df.name, p.Name(), syscall.EINVAL)
	}
	return df, nil
}

func (df *deviceFile) function(call string) (pci.Function, error) {
	if df.pd.fn == nil {
		return nil, fmt.Errorf("%s(%s): %w: %w", call, df.name, ErrNoFunction, syscall.ENODEV)
	}
	return df.pd.fn, nil
}

// DeviceInfo is struct vfio_device_info.
type DeviceInfo struct {
	Flags      uint32
	NumRegions int
	NumIRQs    int
}

// DeviceGetInfo is VFIO_DEVICE_GET_INFO: a PCI device with reset, its
// 9 regions and 5 interrupt indexes.
func (v *VFIO) DeviceGetInfo(p *kernel.Process, dfd int) (DeviceInfo, error) {
	if _, err := v.deviceFile("VFIO_DEVICE_GET_INFO", p, dfd, false); err != nil {
		return DeviceInfo{}, err
	}
	return DeviceInfo{Flags: DeviceFlagsPCI | DeviceFlagsReset, NumRegions: PCINumRegions, NumIRQs: PCINumIRQs}, nil
}

// RegionInfo is struct vfio_region_info.
type RegionInfo struct {
	Index  int
	Flags  uint32
	Size   uint64
	Offset uint64
}

// DeviceGetRegionInfo is VFIO_DEVICE_GET_REGION_INFO of region index: a
// BAR's size and flags (read, write, and mmap for a BAR of at least a
// page: vfio_pci_core's bar_mmap_supported), config space's 4 KiB, and
// size 0 for a BAR the function does not implement, the ROM and VGA.
// An index past the regions is EINVAL; a device with no function model
// ENODEV (ErrNoFunction).
func (v *VFIO) DeviceGetRegionInfo(p *kernel.Process, dfd, index int) (RegionInfo, error) {
	const ioc = "VFIO_DEVICE_GET_REGION_INFO"
	df, err := v.deviceFile(ioc, p, dfd, false)
	if err != nil {
		return RegionInfo{}, err
	}
	if index < 0 || index >= PCINumRegions {
		return RegionInfo{}, fmt.Errorf("%s(%s, %d) in %s: %w", ioc, df.name, index, p.Name(), syscall.EINVAL)
	}
	fn, err := df.function(ioc)
	if err != nil {
		return RegionInfo{}, err
	}
	ri := RegionInfo{Index: index, Offset: RegionOffset(index)}
	switch {
	case index <= PCIBAR5RegionIndex:
		if bar, ok := barOf(fn, index); ok {
			ri.Size, ri.Flags = bar.Size, RegionInfoFlagRead|RegionInfoFlagWrite
			if bar.Size >= mem.PageSize {
				ri.Flags |= RegionInfoFlagMmap
			}
		}
	case index == PCIConfigRegionIndex:
		ri.Size, ri.Flags = pciConfigSize, RegionInfoFlagRead|RegionInfoFlagWrite
	}
	return ri, nil
}

func barOf(fn pci.Function, index int) (pci.BAR, bool) {
	for _, b := range fn.BARs() {
		if b.Index == index {
			return b, true
		}
	}
	return pci.BAR{}, false
}

// mmapBase is where the model puts the BAR mappings of a process: user
// space, far below the kernel addresses the model's user memory has
// (mem's), so that no two mappings meet.
const mmapBase mem.VirtAddr = 0x7f0000000000

// BARMapping is a BAR mmapped into a process: loads and stores through
// it are the function's register accesses (MMIO: a posted write, a read
// that waits for its completion), which the function charges to the
// accessing thread. It is the process's VMA at Addr until Munmap.
type BARMapping struct {
	v    *VFIO
	p    *kernel.Process
	df   *deviceFile
	bar  pci.BAR
	addr mem.VirtAddr
	off  uint64 // into the BAR
	size uint64
	gone bool
}

// Addr is where the mapping starts in the process.
func (m *BARMapping) Addr() mem.VirtAddr { return m.addr }

// Size is the mapping's length.
func (m *BARMapping) Size() uint64 { return m.size }

func (m *BARMapping) check(op string, off uint64, size int) error {
	switch {
	case m.gone:
		return fmt.Errorf("%s %v+%#x: unmapped: %w", op, m.addr, off, syscall.EFAULT)
	case size <= 0 || off+uint64(size) > m.size:
		return fmt.Errorf("%s %v+%#x (%d bytes): outside the %#x-byte mapping of %s BAR%d: %w", op, m.addr, off, size, m.size, m.df.pd.name, m.bar.Index, syscall.EFAULT)
	case m.bar.Regs == nil:
		return fmt.Errorf("%s %s BAR%d: no registers modelled: %w", op, m.df.pd.name, m.bar.Index, syscall.EIO)
	}
	return nil
}

// ReadReg is a load of size bytes at off into the mapping by thread t.
func (m *BARMapping) ReadReg(t *sim.Proc, off uint64, size int) (uint64, error) {
	if err := m.check("load", off, size); err != nil {
		return 0, err
	}
	return m.bar.Regs.ReadReg(t, m.off+off, size)
}

// WriteReg is a store of size bytes of val at off into the mapping by
// thread t.
func (m *BARMapping) WriteReg(t *sim.Proc, off uint64, size int, val uint64) error {
	if err := m.check("store", off, size); err != nil {
		return err
	}
	return m.bar.Regs.WriteReg(t, m.off+off, size, val)
}

// Mmap is mmap(2) of the device file dfd at offset (RegionOffset of a
// BAR, plus a page-aligned offset into it) for length bytes
// (vfio_pci_core_mmap): a mapping of the BAR in the process. A region
// that is not a BAR, a BAR too small to map (under a page), or a range
// past its end or misaligned is EINVAL. The mapping holds a reference
// to the device file until Munmap or exit.
func (v *VFIO) Mmap(t *sim.Proc, p *kernel.Process, dfd int, offset, length uint64) (*BARMapping, error) {
	const ioc = "mmap"
	df, err := v.deviceFile(ioc, p, dfd, false)
	if err != nil {
		return nil, err
	}
	call := fmt.Sprintf("mmap(%s, offset %#x, length %#x)", df.name, offset, length)
	fail := func(err error) (*BARMapping, error) {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, df.pd.name, err)
		return nil, err
	}
	fn, err := df.function(ioc)
	if err != nil {
		return fail(err)
	}
	index, off := int(offset>>40), offset&(1<<40-1)
	bar, ok := barOf(fn, index)
	switch {
	case index > PCIBAR5RegionIndex || !ok:
		return fail(fmt.Errorf("region %d is not an implemented BAR: %w", index, syscall.EINVAL))
	case bar.Size < mem.PageSize:
		return fail(fmt.Errorf("BAR%d of %#x bytes is smaller than a page: %w", index, bar.Size, syscall.EINVAL))
	case length == 0 || (off|length)&(mem.PageSize-1) != 0 || off+length > bar.Size:
		return fail(fmt.Errorf("offset %#x length %#x in a BAR of %#x: %w", off, length, bar.Size, syscall.EINVAL))
	}
	of, err := p.OpenFile(ioc, dfd)
	if err != nil {
		return fail(err)
	}
	at := v.mmapNext[p]
	if at == 0 {
		at = mmapBase
	}
	m := &BARMapping{v: v, p: p, df: df, bar: bar, addr: at, off: off, size: length}
	vma := kernel.VMA{Start: at, Size: length, Name: fmt.Sprintf("%s BAR%d", df.name, index), File: df,
		Close: func(t *sim.Proc) error {
			m.gone = true
			return of.Put(t)
		}}
	if err := p.MM.Map(vma); err != nil {
		return fail(err)
	}
	if err := of.Get(); err != nil {
		return fail(err)
	}
	v.mmapNext[p] = at + mem.VirtAddr(length)
	v.emit(t, Event{Op: OpMmap, Call: call, Process: p.Name(), PID: p.PID(), Device: df.pd.name, VAddr: at, Size: length})
	return m, nil
}

// Munmap is munmap(2) of the mapping that starts at va in p: a BAR
// mapping's accesses fail from then on (EFAULT, SIGBUS in Linux) and its
// reference to the device file goes.
func (v *VFIO) Munmap(t *sim.Proc, p *kernel.Process, va mem.VirtAddr) error {
	vma, err := p.MM.Unmap(va)
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name(), err)
	}
	if vma.Close != nil {
		return vma.Close(t)
	}
	return nil
}

// IRQSet is struct vfio_irq_set: FDs are the eventfds of vectors
// Start..Start+Count-1 (-1 disables one) with IRQSetDataEventFD.
type IRQSet struct {
	Flags        uint32
	Index        int
	Start, Count int
	FDs          []int
}

// DeviceSetIRQs is VFIO_DEVICE_SET_IRQS for MSI-X (the model's
// functions have no INTx or MSI): with IRQSetDataEventFD |
// IRQSetActionTrigger, each vector's interrupt signals its eventfd
// (vfio_msihandler → eventfd_signal), -1 unrouting it; with
// IRQSetDataNone and Count 0 every vector is disabled; with
// IRQSetDataNone and a range, those vectors' eventfds are signalled
// now (a loopback trigger). Another index, action or data type, a
// range past the function's vectors, or a file that is not an eventfd
// is EINVAL; a bad descriptor EBADF.
func (v *VFIO) DeviceSetIRQs(t *sim.Proc, p *kernel.Process, dfd int, s IRQSet) error {
	const ioc = "VFIO_DEVICE_SET_IRQS"
	df, err := v.deviceFile(ioc, p, dfd, false)
	if err != nil {
		return err
	}
	pd := df.pd
	call := fmt.Sprintf("%s(%s, index %d, start %d, count %d, flags %#x)", ioc, df.name, s.Index, s.Start, s.Count, s.Flags)
	fail := func(err error) error {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, pd.name, err)
		return err
	}
	fn, err := df.function(ioc)
	if err != nil {
		return fail(err)
	}
	data := s.Flags & (IRQSetDataNone | IRQSetDataBool | IRQSetDataEventFD)
	switch {
	case s.Index != PCIMSIXIRQIndex:
		return fail(fmt.Errorf("index %d: only MSI-X (%d) is modelled: %w", s.Index, PCIMSIXIRQIndex, syscall.EINVAL))
	case s.Flags&^(data|IRQSetActionTrigger) != 0 || s.Flags&IRQSetActionTrigger == 0 || data != IRQSetDataNone && data != IRQSetDataEventFD:
		return fail(fmt.Errorf("flags %#x: %w", s.Flags, syscall.EINVAL))
	case data == IRQSetDataNone && s.Count == 0:
		for vec := range pd.irqs {
			if err := fn.SetIRQ(vec, nil); err != nil {
				return fail(err)
			}
		}
		pd.irqs = nil
		return nil
	case s.Start < 0 || s.Count < 0 || s.Start+s.Count > fn.Vectors():
		return fail(fmt.Errorf("vectors %d-%d of %d: %w", s.Start, s.Start+s.Count-1, fn.Vectors(), syscall.EINVAL))
	case data == IRQSetDataNone:
		for vec := s.Start; vec < s.Start+s.Count; vec++ {
			if e := pd.irqs[vec]; e != nil {
				e.Signal(1)
			}
		}
		return nil
	case len(s.FDs) != s.Count:
		return fail(fmt.Errorf("%d eventfds for %d vectors: %w", len(s.FDs), s.Count, syscall.EINVAL))
	}
	efs := make([]*kernel.EventFD, s.Count)
	for i, fd := range s.FDs {
		if fd == -1 {
			continue
		}
		if efs[i], err = p.EventFDOf(ioc, fd); err != nil {
			return fail(err)
		}
	}
	if pd.irqs == nil {
		pd.irqs = map[int]*kernel.EventFD{}
	}
	for i, e := range efs {
		vec := s.Start + i
		if e == nil {
			delete(pd.irqs, vec)
			if err := fn.SetIRQ(vec, nil); err != nil {
				return fail(err)
			}
			continue
		}
		pd.irqs[vec] = e
		if err := fn.SetIRQ(vec, v.msiHandler(pd, vec, e)); err != nil {
			return fail(err)
		}
	}
	return nil
}

// msiHandler is vfio_msihandler: the interrupt signals the vector's
// eventfd, from the device's (hard-IRQ) context.
func (v *VFIO) msiHandler(pd *pdev, vec int, e *kernel.EventFD) pci.IRQHandler {
	return func(*sim.Proc) {
		e.Signal(1)
		v.emit(nil, Event{Op: OpIRQ, Device: pd.name, Vector: vec})
	}
}

// DeviceReset is VFIO_DEVICE_RESET: function-level reset, which costs
// t the function's reset time.
func (v *VFIO) DeviceReset(t *sim.Proc, p *kernel.Process, dfd int) error {
	const ioc = "VFIO_DEVICE_RESET"
	df, err := v.deviceFile(ioc, p, dfd, false)
	if err != nil {
		return err
	}
	call := fmt.Sprintf("%s(%s)", ioc, df.name)
	fn, err := df.function(ioc)
	if err == nil {
		err = fn.Reset(t)
	}
	if err != nil {
		err = fmt.Errorf("%s in %s: %w", call, p.Name(), err)
		v.fail(t, p, call, df.pd.name, err)
		return err
	}
	v.emit(t, Event{Op: OpReset, Call: call, Process: p.Name(), PID: p.PID(), Device: df.pd.name})
	return nil
}

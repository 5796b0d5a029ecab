package vfio

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/pci"
	"github.com/dmalab/dmalab/sim"
)

// Driver names.
const (
	// DriverVFIOPCI is vfio-pci (drivers/vfio/pci/vfio_pci.c): the
	// driver that hands a device to user space.
	DriverVFIOPCI = "vfio-pci"
)

// Errors a caller matches with errors.Is, beside the syscall errnos
// every call wraps.
var (
	// ErrNoFunction: the device has no PCI function model (AddFunction),
	// so it has no BARs, vectors or reset to hand out.
	ErrNoFunction = errors.New("vfio: no PCI function model for the device")
	// ErrNoIOMMU: the machine has no translating IOMMU to give user
	// space domains of (its IOMMU is off or in passthrough).
	ErrNoIOMMU = errors.New("vfio: no translating IOMMU")
)

// Device describes one device of the platform for New.
type Device struct {
	// Name is the device's name in the platform.
	Name string
	// Driver is the kernel driver bound to it at boot ("nvme",
	// "nvidia", ...).
	Driver string
	// DMA is its bus-master view; its Translator now is its default
	// domain's (or dma-direct), which it goes back to when user space
	// lets it go.
	DMA *dma.Device
}

// Config is what the VFIO layer of a machine is built from.
type Config struct {
	Kernel *kernel.Kernel
	Mem    *mem.Memory
	// Unit is the IOMMU whose domains user space gets.
	Unit *iommu.Unit
	// Groups are the IOMMU groups (iommu.Groups of the platform); a
	// name in a group that is not among Devices is ignored.
	Groups []iommu.Group
	// Devices are the devices, in the platform's order.
	Devices []Device
	// Params are the costs; zero fields take the defaults.
	Params Params
}

// Params are the VFIO layer's costs.
type Params struct {
	// PinCost is pinning one 4 KiB page of user memory
	// (pin_user_pages_remote, with its accounting), paid by the
	// caller of a map; UnpinCost giving one back (unpin_user_pages).
	PinCost, UnpinCost sim.Time
	// DMAEntryLimit is type1's dma_entry_limit: the mappings one
	// container may hold (65535, the module parameter's default).
	DMAEntryLimit int
}

// Default costs.
const (
	// DefaultPinCost and DefaultUnpinCost are assumed equal to what the
	// CUDA driver's cuMemHostRegister and cuMemHostUnregister cost per
	// page, measured on the H200 machine (platform.DefaultPinCost,
	// 35 and 14 ms per GiB): both walk the user pages with
	// pin_user_pages and map them for the device, which is what
	// vfio_pin_pages_remote and iopt_fill_domains_pages do.
	DefaultPinCost   = 133500 * sim.Picosecond
	DefaultUnpinCost = 53400 * sim.Picosecond
	// DefaultDMAEntryLimit is vfio_iommu_type1's dma_entry_limit.
	DefaultDMAEntryLimit = 65535
)

func (p Params) withDefaults() Params {
	if p.PinCost == 0 {
		p.PinCost = DefaultPinCost
	}
	if p.UnpinCost == 0 {
		p.UnpinCost = DefaultUnpinCost
	}
	if p.DMAEntryLimit == 0 {
		p.DMAEntryLimit = DefaultDMAEntryLimit
	}
	return p
}

// VFIO is the VFIO subsystem of one machine (drivers/vfio) with the
// part of the PCI core it leans on: which driver each device is bound
// to (sysfs bind, unbind and driver_override), the groups, the legacy
// container and iommufd interfaces, and the device files.
type VFIO struct {
	// Hooks receives every Event.
	Hooks sim.Hooks[Event]

	k      *kernel.Kernel
	mem    *mem.Memory
	unit   *iommu.Unit
	params Params
	devs   []*pdev
	byName map[string]*pdev
	groups []*group
	// containers and ictxs number the containers and iommufd contexts
	// opened, for the names of their address spaces.
	containers, ictxs int
	// cdevs are the vfioN device numbers in use.
	cdevs map[int]*pdev
	// mmapNext is, per process, where its next BAR mapping goes.
	mmapNext map[*kernel.Process]mem.VirtAddr
	ev       Event
}

// pdev is one device as the PCI core and VFIO see it.
type pdev struct {
	name string
	dma  *dma.Device
	// fn is its function model (AddFunction), nil until given.
	fn pci.Function
	// def is its default domain's translation, which it returns to
	// when user space lets it go.
	def      dma.Translator
	native   string // the kernel driver it binds to by its IDs
	driver   string // bound now; "" none
	override string // driver_override
	group    *group
	// cdev is the N of /dev/vfio/devices/vfioN while bound to
	// vfio-pci, else -1.
	cdev int
	// open counts the device's open files; bound is the iommufd that
	// claimed it through its cdev (nil on the legacy path, whose claim
	// is the group's), hwpt the iommufd domain it is attached to.
	open  int
	bound *iommufdCtx
	hwpt  *hwpt
	// irqs are the eventfds of its MSI-X vectors.
	irqs map[int]*kernel.EventFD
}

// New builds the VFIO layer: every device bound to its kernel driver,
// none to vfio-pci.
func New(cfg Config) (*VFIO, error) {
	if cfg.Kernel == nil || cfg.Mem == nil || cfg.Unit == nil {
		return nil, errors.New("vfio: a kernel, memory and an IOMMU unit are needed")
	}
	v := &VFIO{k: cfg.Kernel, mem: cfg.Mem, unit: cfg.Unit, params: cfg.Params.withDefaults(),
		byName: map[string]*pdev{}, cdevs: map[int]*pdev{}, mmapNext: map[*kernel.Process]mem.VirtAddr{}}
	for _, d := range cfg.Devices {
		if d.DMA == nil || d.Name == "" {
			return nil, fmt.Errorf("vfio: device %q without a DMA device", d.Name)
		}
		if _, dup := v.byName[d.Name]; dup {
			return nil, fmt.Errorf("vfio: device %s given twice", d.Name)
		}
		pd := &pdev{name: d.Name, dma: d.DMA, def: d.DMA.Translator(), native: d.Driver, driver: d.Driver, cdev: -1}
		v.devs = append(v.devs, pd)
		v.byName[d.Name] = pd
	}
	for _, g := range cfg.Groups {
		gr := &group{v: v, id: g.ID}
		for _, name := range g.Devices {
			if pd := v.byName[name]; pd != nil {
				pd.group = gr
				gr.devs = append(gr.devs, pd)
			}
		}
		if len(gr.devs) > 0 {
			v.groups = append(v.groups, gr)
		}
	}
	for _, pd := range v.devs {
		if pd.group == nil {
			return nil, fmt.Errorf("vfio: device %s is in no IOMMU group", pd.name)
		}
	}
	return v, nil
}

// Unit is the IOMMU the layer's domains live on.
func (v *VFIO) Unit() *iommu.Unit { return v.unit }

// AddFunction gives the layer the PCI function model of a device (its
// BARs, vectors and reset), which a device file hands to user space.
// The function's DMA device must be the one the layer knows by that
// name.
func (v *VFIO) AddFunction(f pci.Function) error {
	pd := v.byName[f.Name()]
	if pd == nil {
		return fmt.Errorf("vfio: add function %s: no such device: %w", f.Name(), syscall.ENODEV)
	}
	if f.DMA() != pd.dma {
		return fmt.Errorf("vfio: add function %s: its DMA device is not the platform's", f.Name())
	}
	pd.fn = f
	return nil
}

func (v *VFIO) device(call, name string) (*pdev, error) {
	pd := v.byName[name]
	if pd == nil {
		return nil, fmt.Errorf("%s: no device %q: %w", call, name, syscall.ENODEV)
	}
	return pd, nil
}

// Driver is the driver bound to the device
// (/sys/bus/pci/devices/NAME/driver), "" for none.
func (v *VFIO) Driver(name string) (string, error) {
	pd, err := v.device("driver", name)
	if err != nil {
		return "", err
	}
	return pd.driver, nil
}

// IOMMUGroup is the device's IOMMU group number
// (/sys/bus/pci/devices/NAME/iommu_group), the N of /dev/vfio/N.
func (v *VFIO) IOMMUGroup(name string) (int, error) {
	pd, err := v.device("iommu_group", name)
	if err != nil {
		return -1, err
	}
	return pd.group.id, nil
}

// GroupDevices lists the devices of IOMMU group n
// (/sys/kernel/iommu_groups/N/devices): all of them must go to
// vfio-pci (or to no driver) before user space can have the group.
func (v *VFIO) GroupDevices(n int) ([]string, error) {
	for _, g := range v.groups {
		if g.id == n {
			out := make([]string, len(g.devs))
			for i, pd := range g.devs {
				out[i] = pd.name
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("iommu group %d: %w", n, syscall.ENOENT)
}

// DeviceCdev is the device's VFIO character device
// (/sys/bus/pci/devices/NAME/vfio-dev/vfioN): "/dev/vfio/devices/vfioN"
// while it is bound to vfio-pci, ENODEV otherwise.
func (v *VFIO) DeviceCdev(name string) (string, error) {
	pd, err := v.device("vfio-dev", name)
	if err != nil {
		return "", err
	}
	if pd.cdev < 0 {
		return "", fmt.Errorf("vfio-dev of %s: bound to %q, not vfio-pci: %w", name, pd.driver, syscall.ENODEV)
	}
	return cdevPath(pd.cdev), nil
}

func cdevPath(n int) string { return "/dev/vfio/devices/vfio" + strconv.Itoa(n) }

// SetDriverOverride is `echo DRIVER > /sys/bus/pci/devices/NAME/
// driver_override`: from now on only that driver binds to the device
// ("" clears it). It does not unbind or bind anything.
func (v *VFIO) SetDriverOverride(name, driver string) error {
	pd, err := v.device("driver_override", name)
	if err != nil {
		return err
	}
	pd.override = driver
	return nil
}

// Unbind is `echo NAME > /sys/bus/pci/devices/NAME/driver/unbind`
// (device_release_driver), in thread t. A DMA-API driver's unbind is the
// DMA layer's too (dma.Device.Unbind): IOVA mappings its driver left in
// the default domain are what the checker reports as leaks. A vfio-pci
// device that user space has open is EBUSY (Linux blocks the unbind in
// vfio_unregister_group_dev until user space lets go; the model does
// not wait). A device bound to nothing is ENODEV.
func (v *VFIO) Unbind(t *sim.Proc, name string) error {
	call := "unbind " + name
	pd, err := v.device(call, name)
	if err != nil {
		return err
	}
	switch {
	case pd.driver == "":
		err = fmt.Errorf("%s: no driver bound: %w", call, syscall.ENODEV)
	case pd.driver == DriverVFIOPCI && (pd.open > 0 || pd.bound != nil):
		err = fmt.Errorf("%s: open by user space: %w", call, syscall.EBUSY)
	}
	if err != nil {
		v.fail(t, nil, call, pd.name, err)
		return err
	}
	old := pd.driver
	if old == DriverVFIOPCI {
		delete(v.cdevs, pd.cdev)
		pd.cdev = -1
	} else {
		pd.dma.Unbind(t)
	}
	pd.driver = ""
	v.emit(t, Event{Op: OpUnbind, Call: call, Device: pd.name, Driver: old})
	return nil
}

// Bind is `echo NAME > /sys/bus/pci/drivers/DRIVER/bind`, in thread t.
// As bind_store and pci_match_device: a device already bound, or that
// the driver does not match, is ENODEV; with a driver_override only
// that driver matches, without one only the device's own kernel driver
// (vfio-pci has no IDs of its own); an unknown driver is ENOENT (no such
// sysfs directory). A kernel driver that does DMA through the DMA API
// cannot bind while user space owns the device's group: EBUSY
// (iommu_device_use_default_domain, drivers/iommu/iommu.c).
func (v *VFIO) Bind(t *sim.Proc, name, driver string) error {
	call := fmt.Sprintf("bind %s to %s", name, driver)
	pd, err := v.device(call, name)
	if err != nil {
		return err
	}
	switch {
	case driver != DriverVFIOPCI && !v.isDriver(driver):
		err = fmt.Errorf("%s: no driver %q: %w", call, driver, syscall.ENOENT)
	case pd.driver != "":
		err = fmt.Errorf("%s: bound to %s: %w", call, pd.driver, syscall.ENODEV)
	case pd.override != "" && pd.override != driver:
		err = fmt.Errorf("%s: driver_override is %s: %w", call, pd.override, syscall.ENODEV)
	case pd.override == "" && driver != pd.native:
		err = fmt.Errorf("%s: the driver does not match the device (set driver_override): %w", call, syscall.ENODEV)
	case driver != DriverVFIOPCI && pd.group.owner != nil:
		err = fmt.Errorf("%s: group %d is owned by user space (%s): %w", call, pd.group.id, pd.group.owner.spaceName(), syscall.EBUSY)
	}
	if err != nil {
		v.fail(t, nil, call, pd.name, err)
		return err
	}
	pd.driver = driver
	if driver == DriverVFIOPCI {
		pd.cdev = 0
		for v.cdevs[pd.cdev] != nil {
			pd.cdev++
		}
		v.cdevs[pd.cdev] = pd
	}
	v.emit(t, Event{Op: OpBind, Call: call, Device: pd.name, Driver: driver})
	return nil
}

// DriversProbe is `echo NAME > /sys/bus/pci/drivers_probe`: the device
// binds to its driver_override if set, else to its own kernel driver.
func (v *VFIO) DriversProbe(t *sim.Proc, name string) error {
	pd, err := v.device("drivers_probe", name)
	if err != nil {
		return err
	}
	drv := pd.override
	if drv == "" {
		drv = pd.native
	}
	return v.Bind(t, name, drv)
}

func (v *VFIO) isDriver(name string) bool {
	for _, pd := range v.devs {
		if pd.native == name {
			return true
		}
	}
	return false
}

// emit delivers e with its header filled.
func (v *VFIO) emit(t *sim.Proc, e Event) {
	if !v.Hooks.Active() {
		return
	}
	v.ev = e
	v.ev.Header = sim.Header{Time: v.k.Engine().Now(), Component: "vfio", Cause: sim.CauseCall}
	if t != nil {
		v.ev.Proc = t.Name()
	}
	v.Hooks.Emit(&v.ev)
}

// fail reports a failed call of process p (nil: a sysfs write).
func (v *VFIO) fail(t *sim.Proc, p *kernel.Process, call, dev string, err error) {
	e := Event{Op: OpFail, Call: call, Device: dev, Err: err}
	if p != nil {
		e.Process, e.PID = p.Name(), p.PID()
	}
	v.emit(t, e)
}

// attach puts every device of devs behind dom (iommu_attach_group).
func attach(devs []*pdev, dom *iommu.Domain) {
	for _, pd := range devs {
		iommu.Attach(pd.dma, dom, iommu.AttachOptions{PCI: true})
	}
}

// names lists the devices' names.
func names(devs []*pdev) string {
	s := make([]string, len(devs))
	for i, pd := range devs {
		s[i] = pd.name
	}
	return strings.Join(s, ",")
}

// groupByPath is the group /dev/vfio/N names.
func (v *VFIO) groupByPath(path string) (*group, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(path, "/dev/vfio/"))
	if err != nil || !strings.HasPrefix(path, "/dev/vfio/") {
		return nil, false
	}
	i := slices.IndexFunc(v.groups, func(g *group) bool { return g.id == n })
	if i < 0 {
		return nil, false
	}
	return v.groups[i], true
}

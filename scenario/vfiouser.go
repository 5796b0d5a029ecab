package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvme"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/spdk"
	"github.com/dmalab/dmalab/vfio"
)

func init() {
	register(&Scenario{
		Name:     "vfio-user-driver",
		Summary:  "a user-space NVMe driver (SPDK-style) through VFIO: bind vfio-pci, map its memory, mmap BAR0, queues in its own pages; legacy container and iommufd",
		Platform: "2s-4gpu-pcie",
		Payload:  true,
		Doc: `A process takes the platform's NVMe drive from the kernel and drives it
itself, as SPDK does:

  1. the drive's IOMMU group is unbound from its kernel drivers and bound
     to vfio-pci (driver_override); the group is viable once every device
     in it is;
  2. "legacy": /dev/vfio/vfio and /dev/vfio/N, VFIO_GROUP_SET_CONTAINER,
     VFIO_SET_IOMMU(TYPE1v2), VFIO_IOMMU_MAP_DMA of the process's buffer
     at IOVA 0 (its pages pinned, counted against RLIMIT_MEMLOCK);
     "iommufd": /dev/iommu, IOMMU_IOAS_ALLOC, IOMMU_IOAS_MAP, the device's
     cdev bound (VFIO_DEVICE_BIND_IOMMUFD) and attached to the IOAS, which
     pins the pages;
  3. BAR0 mmapped through the device file; the driver enables the
     controller, identifies it, and creates an I/O queue pair in its own
     memory (PRPs are IOVAs);
  4. "ios" writes of "io_size" at queue depth "qd", then as many reads,
     each verified against what was written (verify=false skips the
     filling and the checking, whose CPU time a single driver thread
     pays: at 128 KiB it, not the drive, bounds the reads); completions
     are polled
     (irq=poll, SPDK's default: the core spins) or signalled by MSI-X
     through an eventfd (irq=eventfd: the thread sleeps in read(2));
  5. the controller shut down, the process exits: VFIO unmaps, unpins and
     gives the device back to its group's default domain (still bound to
     vfio-pci).

Rows per interface: "map" (the pinning and mapping of the buffer),
"probe" (controller enable, Identify, queue creation), "write" and "read"
(ops, time, GB/s, latency percentiles, CPU time per op: the whole run when
polling, the time outside read(2) with an eventfd).

"bugs" adds what a user-space driver gets wrong, each a row with its note:
  unmapped-iova  one read whose PRP is an IOVA never mapped: the drive
                 completes it with Data Transfer Error, the IOMMU records
                 a fault, and "dmalab check" reports vfio-dma-unmapped;
  memlock        a mapping larger than RLIMIT_MEMLOCK ("memlock"): ENOMEM
                 (at IOMMU_IOAS_MAP's first attach with iommufd);
  group          the first NIC taken alone while its group's other
                 devices keep their kernel drivers: the group is not
                 viable, EPERM.

The platform's IOMMU must translate for VFIO: a platform whose iommu mode
is off or passthrough is run in strict mode, and the params say so.`,
		Params: []Param{
			{Name: "interfaces", Kind: dmalab.ParamList, Values: []string{"legacy", "iommufd"}, Item: "interface", Default: "legacy,iommufd", Help: "VFIO interfaces to run, in order"},
			{Name: "ios", Kind: dmalab.ParamInt, Min: 1, Max: maxUserIOs, Default: "2000", Help: "writes, then reads, per interface"},
			{Name: "io_size", Kind: dmalab.ParamSize, Max: 128 << 10, Default: "4KiB", Help: "bytes per I/O (a multiple of the block size, at most MDTS)"},
			{Name: "qd", Kind: dmalab.ParamInt, Min: 1, Max: 1023, Default: "32", Help: "commands in flight"},
			{Name: "verify", Kind: dmalab.ParamBool, Default: "true", Help: "fill each write with a pattern and check each read against it (CPU work per I/O)"},
			{Name: "irq", Kind: dmalab.ParamEnum, Values: []string{"poll", "eventfd"}, Default: "poll", Help: "how completions are learnt"},
			{Name: "memlock", Kind: dmalab.ParamSize, Max: 1 << 40, Default: "64MiB", Help: "the process's RLIMIT_MEMLOCK"},
			{Name: "bugs", Kind: dmalab.ParamList, Values: []string{"none", "unmapped-iova", "memlock", "group"}, Item: "bug", Default: "none", Help: "misuses to show"},
			{Name: "device", Default: "", Help: "the NVMe drive (default: the platform's first)"},
		},
		Adjust: adjustVFIOUser,
		Run:    runVFIOUser,
	})
}

const (
	// maxUserIOs bounds the I/Os per phase (a few events each).
	maxUserIOs = 1_000_000
	// userIOVA is where the legacy interface maps the buffer (SPDK maps
	// hugepages at IOVA = VA; the model's VAs are kernel addresses, so
	// it picks a fixed base, as a driver using VFIO_IOVA_PA would not).
	userIOVA = 1 << 30
	// userPoll is the spacing of completion polls in virtual time.
	userPoll = sim.Microsecond
	// userModeParam records the IOMMU mode the run used in its params.
	userModeParam = "iommu_mode"
)

// adjustVFIOUser makes the platform's IOMMU translate (VFIO needs
// domains to give out).
func adjustVFIOUser(spec *platform.Spec, _ *dmalab.Values) (*platform.Spec, error) {
	if spec.IOMMU.Translated() {
		return spec, nil
	}
	if spec.IOMMU.Profile == "" {
		return nil, usagef("platform %s has no IOMMU profile: VFIO needs an IOMMU (set platform.iommu.profile)", spec.Name)
	}
	s, err := platform.Set(spec, "iommu.mode", platform.IOMMUStrict)
	if err != nil {
		return nil, usagef("platform %s: %v", spec.Name, err)
	}
	return s, nil
}

// userRun is one interface's run: its rows, filled by the driver thread.
type userRun struct {
	iface string
	rows  []report.Row
	err   error
}

func runVFIOUser(c *Context) error {
	v, err := c.VFIO()
	if err != nil {
		return usagef("platform %s: %v", c.Machine.Spec.Name, err)
	}
	// The mode the run used: Adjust turns off and passthrough into
	// strict.
	c.Result.Params[userModeParam] = c.Machine.Spec.IOMMU.Mode
	name, err := pickNVMe(c, c.Value("device"))
	if err != nil {
		return err
	}
	ctrl, err := nvme.New(c.Machine, c.Mem, c.DMA, name, nvme.Options{})
	if err != nil {
		return fmt.Errorf("vfio-user-driver: %w", err)
	}
	if err := v.AddFunction(ctrl); err != nil {
		return fmt.Errorf("vfio-user-driver: %w", err)
	}
	bugs := c.List("bugs")
	has := func(b string) bool { return slices.Contains(bugs, b) }
	ioSize := uint64(c.Size("io_size"))
	if ioSize == 0 || ioSize%512 != 0 {
		return usagef("--set io_size=%s: want a multiple of 512 B", c.Text("io_size"))
	}
	qd := c.Int("qd")
	d := &userDriver{c: c, v: v, ctrl: ctrl, name: name, ios: c.Int("ios"), ioSize: ioSize, qd: qd,
		eventfd: c.Value("irq") == "eventfd", memlock: uint64(c.Size("memlock")), verify: c.Bool("verify")}
	// The buffer: the queues, a PRP list page per entry, qd data buffers,
	// rounded up to 2 MiB hugepages.
	entries := qd + 1
	need := uint64(qd)*((ioSize+mem.PageSize-1)&^(mem.PageSize-1)) + uint64(entries)*(mem.PageSize+nvme.SQESize+nvme.CQESize) + 16*mem.PageSize
	d.region = (need + 2<<20 - 1) &^ (2<<20 - 1)
	if d.region > d.memlock && !has("memlock") {
		return usagef("--set memlock=%s: the driver's buffer of %s does not fit it", c.Text("memlock"), report.FormatBytes(int64(d.region)))
	}

	var runs []*userRun
	for _, iface := range c.List("interfaces") {
		runs = append(runs, &userRun{iface: iface})
	}
	admin, err := c.Kernel.NewProcess("admin", 0)
	if err != nil {
		return err
	}
	var setupErr error
	var groupRow *report.Row
	admin.Spawn("bind", func(t *sim.Proc) {
		if has("group") {
			row := d.groupBug(t)
			groupRow = &row
		}
		setupErr = d.bindGroup(t)
		if setupErr != nil {
			return
		}
		d.chain(t, runs, 0, has)
	})
	if err := c.RunEngine("ios"); err != nil {
		return err
	}
	if setupErr != nil {
		return fmt.Errorf("vfio-user-driver: %w", setupErr)
	}
	if groupRow != nil {
		c.Result.Results = append(c.Result.Results, *groupRow)
	}
	for _, r := range runs {
		if r.err != nil {
			return fmt.Errorf("vfio-user-driver: %s: %w", r.iface, r.err)
		}
		c.Result.Results = append(c.Result.Results, r.rows...)
	}
	return nil
}

// pickNVMe is the named device, or the platform's first NVMe drive.
func pickNVMe(c *Context, name string) (string, error) {
	var nvmes []string
	for _, d := range c.Machine.Spec.Devices {
		if d.Kind == platform.DeviceNVMe {
			nvmes = append(nvmes, d.Name)
		}
	}
	if name == "" {
		if len(nvmes) == 0 {
			return "", usagef("platform %s has no NVMe drive (a device of kind nvme)", c.Machine.Spec.Name)
		}
		return nvmes[0], nil
	}
	if !slices.Contains(nvmes, name) {
		return "", usagef("--set device=%s: not an NVMe drive of platform %s (drives: %s)", name, c.Machine.Spec.Name, strings.Join(nvmes, ", "))
	}
	return name, nil
}

// userDriver is the scenario's state: the VFIO layer, the drive, and
// the shape of the runs.
type userDriver struct {
	c       *Context
	v       *vfio.VFIO
	ctrl    *nvme.Controller
	name    string
	ios     int
	ioSize  uint64
	qd      int
	eventfd bool
	memlock uint64
	region  uint64
	verify  bool
}

// bindGroup hands every device of the drive's group to vfio-pci, as
// `echo vfio-pci > .../driver_override; echo DEV > .../unbind; echo DEV
// > /sys/bus/pci/drivers_probe` does for each.
func (d *userDriver) bindGroup(t *sim.Proc) error {
	g, err := d.v.IOMMUGroup(d.name)
	if err != nil {
		return err
	}
	members, err := d.v.GroupDevices(g)
	if err != nil {
		return err
	}
	for _, n := range members {
		if err := errors.Join(d.v.Unbind(t, n), d.v.SetDriverOverride(n, vfio.DriverVFIOPCI), d.v.Bind(t, n, vfio.DriverVFIOPCI)); err != nil {
			return err
		}
	}
	return nil
}

// groupBug takes the first NIC that shares its group with other devices
// alone: the group is not viable while they keep their kernel drivers,
// and a container refuses it. The NIC then goes back to its driver.
func (d *userDriver) groupBug(t *sim.Proc) report.Row {
	row := report.Row{Name: "bug group", Path: "legacy", Direction: "bug", Mode: "group"}
	var nic string
	for _, dev := range d.c.Machine.Spec.Devices {
		if dev.Kind != platform.DeviceNIC {
			continue
		}
		if g, err := d.v.IOMMUGroup(dev.Name); err == nil {
			if m, _ := d.v.GroupDevices(g); len(m) > 1 {
				nic = dev.Name
				break
			}
		}
	}
	if nic == "" {
		row.Note = "every NIC is alone in its group: nothing to refuse"
		return row
	}
	drv, _ := d.v.Driver(nic)
	p, err := d.c.Kernel.NewProcess("group-bug", 0)
	if err != nil {
		row.Note = err.Error()
		return row
	}
	g, _ := d.v.IOMMUGroup(nic)
	members, _ := d.v.GroupDevices(g)
	err = errors.Join(d.v.Unbind(t, nic), d.v.SetDriverOverride(nic, vfio.DriverVFIOPCI), d.v.Bind(t, nic, vfio.DriverVFIOPCI))
	if err == nil {
		var cfd, gfd int
		var st uint32
		cfd, err = d.v.Open(t, p, vfio.ContainerPath)
		if err == nil {
			gfd, err = d.v.Open(t, p, fmt.Sprintf("/dev/vfio/%d", g))
		}
		if err == nil {
			st, _ = d.v.GroupGetStatus(p, gfd)
			err = d.v.GroupSetContainer(t, p, gfd, cfd)
		}
		viable := st&vfio.GroupFlagsViable != 0
		row.Note = fmt.Sprintf("%s alone of group %d (%s): viable %v; %v", nic, g, strings.Join(members, ", "), viable, errText(err))
	} else {
		row.Note = fmt.Sprintf("binding %s to vfio-pci: %v", nic, err)
	}
	if err := p.Exit(t); err != nil {
		row.Note += "; exit: " + err.Error()
	}
	// Back to its kernel driver, so that the rest of the run sees the
	// machine as it was.
	_ = errors.Join(d.v.Unbind(t, nic), d.v.SetDriverOverride(nic, ""), d.v.Bind(t, nic, drv))
	return row
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// chain runs the interfaces one after another, each in a process of its
// own, started when the previous one has exited.
func (d *userDriver) chain(t *sim.Proc, runs []*userRun, i int, has func(string) bool) {
	if i == len(runs) {
		return
	}
	r := runs[i]
	p, err := d.c.Kernel.NewProcess("spdk-"+r.iface, d.ctrl.Node())
	if err == nil {
		err = p.SetMemlockLimit(d.memlock)
	}
	if err != nil {
		r.err = err
		return
	}
	p.Spawn("", func(t *sim.Proc) {
		r.err = d.run(t, p, r, has)
		if err := p.Exit(t); err != nil && r.err == nil {
			r.err = err
		}
		d.chain(t, runs, i+1, has)
	})
}

// userSession is what one interface's process holds: its descriptors,
// the mapped buffer, BAR0 and the driver.
type userSession struct {
	p     *kernel.Process
	dfd   int
	bar   *vfio.BARMapping
	dm    *spdk.Memory
	efd   *kernel.EventFD
	unmap func() error
}

// run is one interface end to end in process p.
func (d *userDriver) run(t *sim.Proc, p *kernel.Process, r *userRun, has func(string) bool) error {
	iface := r.iface
	if has("memlock") {
		r.rows = append(r.rows, d.memlockBug(t, p, iface))
	}
	va, err := d.c.Mem.Vmalloc(d.ctrl.Node(), d.region)
	if err != nil {
		return fmt.Errorf("the driver's buffer: %w", err)
	}
	if err := p.MM.Map(kernel.VMA{Start: va, Size: d.region, Name: "hugepages"}); err != nil {
		return err
	}
	start := t.Now()
	s, err := d.open(t, p, iface, va, d.region)
	if err != nil {
		return err
	}
	r.rows = append(r.rows, report.Row{Name: d.name + " " + iface + " map", Path: iface, Direction: "map",
		Bytes: int64(d.region), Seconds: (t.Now() - start).Seconds(), GBps: gbps(d.region, t.Now()-start),
		Note: fmt.Sprintf("%s pinned and mapped at IOVA %#x; locked %s of RLIMIT_MEMLOCK %s", report.FormatBytes(int64(d.region)), uint64(s.dm.IOVA), report.FormatBytes(int64(p.LockedVM())), report.FormatBytes(int64(p.MemlockLimit())))})

	start = t.Now()
	ctrl, err := spdk.Probe(t, s.bar, s.dm, spdk.Options{})
	if err != nil {
		return err
	}
	if d.ioSize%ctrl.BlockSize() != 0 || ctrl.MaxTransfer() != 0 && d.ioSize > ctrl.MaxTransfer() {
		return usagef("--set io_size=%s: want a multiple of the drive's %d-byte blocks, at most its %s MDTS", report.FormatBytes(int64(d.ioSize)), ctrl.BlockSize(), report.FormatBytes(int64(ctrl.MaxTransfer())))
	}
	if uint64(d.ios)*d.ioSize/ctrl.BlockSize() > ctrl.Blocks() {
		return usagef("--set ios=%d: %d I/Os of %s overrun the drive's %d blocks", d.ios, d.ios, report.FormatBytes(int64(d.ioSize)), ctrl.Blocks())
	}
	vector := -1
	if d.eventfd {
		vector = 1
		efd, e, err := p.Eventfd(0)
		if err != nil {
			return err
		}
		if err := d.v.DeviceSetIRQs(t, p, s.dfd, vfio.IRQSet{Flags: vfio.IRQSetDataEventFD | vfio.IRQSetActionTrigger, Index: vfio.PCIMSIXIRQIndex, Start: vector, Count: 1, FDs: []int{efd}}); err != nil {
			return err
		}
		s.efd = e
	}
	q, err := ctrl.AllocIOQPair(t, d.qd+1, vector)
	if err != nil {
		return err
	}
	r.rows = append(r.rows, report.Row{Name: d.name + " " + iface + " probe", Path: iface, Direction: "probe",
		Seconds: (t.Now() - start).Seconds(), Note: fmt.Sprintf("%q: %d blocks of %d B, MDTS %s, I/O queue of %d entries", ctrl.Model(), ctrl.Blocks(), ctrl.BlockSize(), report.FormatBytes(int64(ctrl.MaxTransfer())), d.qd+1)})

	bufs := make([]spdk.Buf, d.qd)
	for i := range bufs {
		if bufs[i], err = s.dm.Alloc(d.ioSize, mem.PageSize); err != nil {
			return err
		}
	}
	for _, write := range []bool{true, false} {
		row, err := d.phase(t, s, ctrl, q, bufs, write)
		if err != nil {
			return err
		}
		row.Name, row.Path = d.name+" "+iface+" "+row.Direction, iface
		r.rows = append(r.rows, row)
	}
	if has("unmapped-iova") {
		r.rows = append(r.rows, d.unmappedBug(t, s, q, iface))
	}
	if err := ctrl.Shutdown(t); err != nil {
		return err
	}
	return s.unmap()
}

func gbps(n uint64, d sim.Time) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds() / 1e9
}

// open takes the device through iface and maps [va, va+size) for it.
func (d *userDriver) open(t *sim.Proc, p *kernel.Process, iface string, va mem.VirtAddr, size uint64) (*userSession, error) {
	s := &userSession{p: p}
	var iova mem.DMAAddr
	if iface == "legacy" {
		g, err := d.v.IOMMUGroup(d.name)
		if err != nil {
			return nil, err
		}
		cfd, err := d.v.Open(t, p, vfio.ContainerPath)
		if err != nil {
			return nil, err
		}
		gfd, err := d.v.Open(t, p, fmt.Sprintf("/dev/vfio/%d", g))
		if err != nil {
			return nil, err
		}
		if err := d.v.GroupSetContainer(t, p, gfd, cfd); err != nil {
			return nil, err
		}
		if err := d.v.SetIOMMU(t, p, cfd, vfio.Type1v2IOMMU); err != nil {
			return nil, err
		}
		iova = userIOVA
		if err := d.v.MapDMA(t, p, cfd, vfio.DMAMap{Flags: vfio.DMAMapFlagRead | vfio.DMAMapFlagWrite, VAddr: va, IOVA: iova, Size: size}); err != nil {
			return nil, err
		}
		if s.dfd, err = d.v.GroupGetDeviceFD(t, p, gfd, d.name); err != nil {
			return nil, err
		}
		s.unmap = func() error {
			_, err := d.v.UnmapDMA(t, p, cfd, vfio.DMAUnmap{IOVA: iova, Size: size})
			return err
		}
	} else {
		ifd, err := d.v.Open(t, p, vfio.IOMMUFDPath)
		if err != nil {
			return nil, err
		}
		ioas, err := d.v.IOASAlloc(t, p, ifd)
		if err != nil {
			return nil, err
		}
		cdev, err := d.v.DeviceCdev(d.name)
		if err != nil {
			return nil, err
		}
		if s.dfd, err = d.v.Open(t, p, cdev); err != nil {
			return nil, err
		}
		if _, err := d.v.DeviceBindIOMMUFD(t, p, s.dfd, ifd); err != nil {
			return nil, err
		}
		if _, err := d.v.DeviceAttachIOMMUFDPT(t, p, s.dfd, ioas); err != nil {
			return nil, err
		}
		if iova, err = d.v.IOASMapCall(t, p, ifd, vfio.IOASMap{Flags: vfio.IOASMapReadable | vfio.IOASMapWriteable, IOASID: ioas, UserVA: va, Length: size}); err != nil {
			return nil, err
		}
		s.unmap = func() error {
			_, err := d.v.IOASUnmapCall(t, p, ifd, vfio.IOASUnmap{IOASID: ioas, IOVA: iova, Length: size})
			return err
		}
	}
	ri, err := d.v.DeviceGetRegionInfo(p, s.dfd, vfio.PCIBAR0RegionIndex)
	if err != nil {
		return nil, err
	}
	if s.bar, err = d.v.Mmap(t, p, s.dfd, ri.Offset, ri.Size); err != nil {
		return nil, err
	}
	s.dm = &spdk.Memory{Mem: d.c.Mem, Node: d.ctrl.Node(), VA: va, IOVA: iova, Size: size}
	return s, nil
}

// phase runs d.ios writes (or reads, each verified) at depth d.qd and
// measures them.
func (d *userDriver) phase(t *sim.Proc, s *userSession, ctrl *spdk.Ctrlr, q *spdk.QPair, bufs []spdk.Buf, write bool) (report.Row, error) {
	nlb := int(d.ioSize / ctrl.BlockSize())
	free := make([]int, 0, len(bufs))
	for i := len(bufs) - 1; i >= 0; i-- {
		free = append(free, i)
	}
	lat := make([]sim.Time, 0, d.ios)
	var failed error
	issued, done := 0, 0
	start := t.Now()
	var sleeping sim.Time
	for done < d.ios {
		for issued < d.ios && len(free) > 0 && failed == nil {
			b := free[len(free)-1]
			free = free[:len(free)-1]
			i, at := issued, t.Now()
			lba := uint64(i * nlb)
			cb := func(e nvme.Completion) {
				done++
				lat = append(lat, t.Now()-at)
				if !e.Status.OK() && failed == nil {
					failed = fmt.Errorf("I/O %d: %v", i, e.Status)
				}
				if !write && d.verify && failed == nil {
					got, _ := s.dm.Read(t, bufs[b], 0, d.ioSize)
					if want := userPattern(i, int(d.ioSize)); string(got) != string(want) {
						failed = fmt.Errorf("I/O %d at LBA %d: read back differs from what was written", i, lba)
					}
				}
				free = append(free, b)
			}
			var err error
			if write {
				if d.verify {
					err = s.dm.Write(t, bufs[b], 0, userPattern(i, int(d.ioSize)))
				}
				if err == nil {
					err = q.Write(t, lba, nlb, bufs[b], cb)
				}
			} else {
				err = q.Read(t, lba, nlb, bufs[b], cb)
			}
			if err != nil {
				return report.Row{}, err
			}
			issued++
		}
		if failed != nil && done == issued {
			break
		}
		if q.Process(t, 0) > 0 {
			continue
		}
		if s.efd != nil {
			at := t.Now()
			s.efd.Read(t)
			sleeping += t.Now() - at
		} else {
			t.Sleep(userPoll)
		}
	}
	if failed != nil {
		return report.Row{}, failed
	}
	took := t.Now() - start
	slices.Sort(lat)
	dir, mode := "read", "poll"
	if write {
		dir = "write"
	}
	if s.efd != nil {
		mode = "eventfd"
	}
	return report.Row{Direction: dir, Mode: mode, Bytes: int64(d.ioSize), Ops: int64(d.ios), Seconds: took.Seconds(),
		GBps: gbps(uint64(d.ios)*d.ioSize, took), CPUSeconds: (took - sleeping).Seconds() / float64(d.ios),
		P50Seconds: lat[len(lat)/2].Seconds(), P99Seconds: lat[len(lat)*99/100].Seconds()}, nil
}

// userPattern is the content of I/O i: different for every I/O, so a
// read that returns another block's bytes is caught.
func userPattern(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*131 + j*7 + j>>9 + i>>8)
	}
	return b
}

// unmappedBug submits one read whose PRP is an IOVA past the mapped
// buffer.
func (d *userDriver) unmappedBug(t *sim.Proc, s *userSession, q *spdk.QPair, iface string) report.Row {
	bad := uint64(s.dm.IOVA) + s.dm.Size + 1<<20
	faults := d.v.Unit().Stats().Faults
	var st *nvme.Status
	cmd := nvme.Command{Opcode: nvme.CmdRead, NSID: 1, PRP1: bad}
	row := report.Row{Name: "bug unmapped-iova " + iface, Path: iface, Direction: "bug", Mode: "unmapped-iova", Bytes: 512}
	if err := q.Submit(t, cmd, func(e nvme.Completion) { st = &e.Status }); err != nil {
		row.Note = err.Error()
		return row
	}
	deadline := t.Now() + sim.Second
	for st == nil && t.Now() < deadline {
		if q.Process(t, 0) == 0 {
			t.Sleep(userPoll)
		}
	}
	if st == nil {
		row.Note = "no completion within a second"
		return row
	}
	row.Note = fmt.Sprintf("read into IOVA %#x, never mapped: %v; IOMMU faults %d", bad, *st, d.v.Unit().Stats().Faults-faults)
	return row
}

// memlockBug maps twice RLIMIT_MEMLOCK for the device, then undoes what
// it set up.
func (d *userDriver) memlockBug(t *sim.Proc, p *kernel.Process, iface string) report.Row {
	size := (p.MemlockLimit()*2 + 2<<20 - 1) &^ (2<<20 - 1)
	row := report.Row{Name: "bug memlock " + iface, Path: iface, Direction: "bug", Mode: "memlock", Bytes: int64(size)}
	va, err := d.c.Mem.Vmalloc(d.ctrl.Node(), size)
	if err != nil {
		row.Note = "allocating the buffer: " + err.Error()
		return row
	}
	bp, err := d.c.Kernel.NewProcess("memlock-"+iface, d.ctrl.Node())
	if err != nil {
		row.Note = err.Error()
		return row
	}
	err = errors.Join(bp.SetMemlockLimit(p.MemlockLimit()), bp.MM.Map(kernel.VMA{Start: va, Size: size, Name: "hugepages"}))
	if err == nil {
		_, err = d.open(t, bp, iface, va, size)
	}
	row.Note = fmt.Sprintf("%s against RLIMIT_MEMLOCK %s: %v", report.FormatBytes(int64(size)), report.FormatBytes(int64(p.MemlockLimit())), errText(err))
	if err := bp.Exit(t); err != nil {
		row.Note += "; exit: " + err.Error()
	}
	return row
}

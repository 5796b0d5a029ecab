package dmalab

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmabufcheck"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/check/gpudirect"
	"github.com/dmalab/dmalab/check/gpumem"
	"github.com/dmalab/dmalab/check/iommucheck"
	// The registration-cache pack has no subject in a System (a cache is
	// the caller's); imported so its classes are registered and listed.
	_ "github.com/dmalab/dmalab/check/rcachecheck"
	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/drm"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/v4l2"
	"github.com/dmalab/dmalab/vfio"
)

// Options are how a system boots.
type Options struct {
	// Name names the run in the trace's title and the result's
	// "scenario" field; empty means "program".
	Name string
	// Seed seeds the engine's random source; zero means 1, the seed the
	// CLI uses unless told otherwise.
	Seed uint64
	// Payload keeps the real bytes of every write (mem.Options.Payload),
	// so that a program can compare what it reads with what was written.
	Payload bool
	// Check attaches the checker to the DMA API, to memory and to the
	// CUDA façade.
	Check bool
	// Trace collects a Chrome trace of links, engines and CPU threads.
	Trace bool
	// TraceTo, when Trace is set, is where the trace streams as the run
	// goes (a file the caller opened before the run, so that a path
	// that cannot be written fails before it); nil keeps the trace in
	// memory for Trace.Write. Close ends the document.
	TraceTo io.Writer
	// TraceInto, when Trace is not set, draws the system into another
	// system's trace instead of a trace of its own, every process of it
	// named with TraceName first: a scenario that boots a system per
	// platform and mode draws each beside the others in the run's trace.
	// The trace stays the other system's to end.
	TraceInto *report.Trace
	// TraceName names the system's processes in TraceInto ("jetson-orin
	// zero-copy").
	TraceName string
	// TraceTimeline, when Trace is set, keeps what report.Trace.Timeline
	// draws (for an HTML report), growing with the run.
	TraceTimeline bool
	// Progress, when set, receives a line per step of a long program
	// (System.Progressf).
	Progress io.Writer
	// EventBudget bounds the events of a run (RunEngine); zero means
	// DefaultEventBudget.
	EventBudget uint64
	// Attribution fills Result.Time: where the run's transfer time went,
	// by cause (call, queueing, translation, transfer, fault service).
	Attribution bool
	// NUMACtl is numactl(8)'s placement options ("--cpunodebind=1
	// --membind=0"): every process the system creates inherits their
	// policy and CPU binding, as a program numactl starts does
	// (kernel.Launcher). Memory a model allocates on an explicit node
	// (Vmalloc, the DMA scenarios' buffers) stays where it is put;
	// anonymous memory (MmapAnon, libnuma) and the CUDA driver's host
	// allocations (placed by the calling thread's policy) follow it.
	// Bad options are a usage error naming the word. Empty means none.
	NUMACtl string
	// Engine, when set, is an engine another system runs on: the new
	// system shares its virtual time (two hosts joined by a wire,
	// package rdma). Seed then seeds nothing; the engine keeps its own.
	Engine *sim.Engine
}

// System is one booted machine with everything on it. The parts are
// built once, by Boot, and stay the same for the system's life.
type System struct {
	// Spec is the platform the system was built from.
	Spec *platform.Spec
	// Machine is the running machine: its engine, memory, fabric, GPUs
	// and devices.
	Machine *machine.Machine
	// Engine is the machine's engine (Machine.Engine): virtual time.
	Engine *sim.Engine
	// Mem is the machine's memory (Machine.Mem).
	Mem *mem.Memory
	// Kernel is the operating system: processes and their files.
	Kernel *kernel.Kernel
	// DMA is the Linux DMA API over every device of the platform.
	DMA *dma.DMA
	// Checker sees every DMA call, memory access and CUDA call when the
	// system booted with Options.Check; nil otherwise.
	Checker *check.Checker
	// Trace is the trace when the system booted with Options.Trace;
	// nil otherwise. Close ends it.
	Trace *report.Trace
	// Result is the result document programs and scenarios fill.
	Result *report.Result

	opt     Options
	tracer  *tracer
	cuda    *cuda.Driver
	cudaErr error
	// bufs is the DMA-BUF layer (heaps, buffers, fences).
	bufs *dmabuf.Layer
	// video is the V4L2 core (cameras and ISPs a program registers).
	video *v4l2.Layer
	// iommus are the IOMMU units attached (AttachIOMMU); iommuCheck is
	// the IOMMU pack watching them, made with the first.
	iommus     []*iommu.Unit
	iommuCheck *iommucheck.Pack
	// vfio is the VFIO layer over the platform's unit; vfioErr why
	// there is none.
	vfio    *vfio.VFIO
	vfioErr error
	// displays are the display controllers made by Display.
	displays []*drm.Device
	// p2p is nvidia_p2p, loaded by the first NVP2P.
	p2p *nvp2p.Driver
}

// Boot builds a system from a platform preset name or a YAML file.
func Boot(plat string, opt Options) (*System, error) {
	spec, err := platform.Resolve(plat)
	if err != nil {
		return nil, fmt.Errorf("%w: boot: %v", ErrUsage, err)
	}
	return BootSpec(spec, opt)
}

// BootSpec builds a system from a platform spec.
func BootSpec(spec *platform.Spec, opt Options) (*System, error) {
	if opt.Seed == 0 {
		opt.Seed = 1
	}
	return boot(spec, opt)
}

// boot builds the system with opt.Seed as it is: a scenario run with
// --set seed=0 gets seed 0.
func boot(spec *platform.Spec, opt Options) (*System, error) {
	if spec == nil {
		return nil, errors.New("boot: no platform spec")
	}
	if opt.Name == "" {
		opt.Name = "program"
	}
	m, err := machine.NewWithOptions(spec, opt.Seed, machine.Options{Payload: opt.Payload, Engine: opt.Engine})
	if err != nil {
		return nil, fmt.Errorf("%w: platform %s: %v", ErrUsage, spec.Name, err)
	}
	d, err := dma.New(m, m.Mem)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%w: platform %s: %v", ErrUsage, spec.Name, err)
	}
	s := &System{
		Spec: spec, Machine: m, Engine: m.Engine, Mem: m.Mem,
		Kernel: kernel.New(m.Engine, m.Mem.Nodes()),
		DMA:    d,
		Result: &report.Result{
			Scenario: opt.Name,
			Platform: spec.Name,
			Params:   map[string]string{"seed": strconv.FormatUint(opt.Seed, 10)},
			Results:  []report.Row{},
			Factors:  factors(spec),
		},
		opt: opt,
	}
	// The kernel places anonymous memory (MmapAnon) in the machine's
	// memory, by the platform's distances.
	s.Kernel.SetMemory(m.Mem)
	// numa_balancing=1 runs automatic NUMA balancing with Linux's
	// default tuning; 0, every preset's, leaves it off.
	s.Kernel.SetNUMABalancing(spec.NUMABalancing.V == 1, kernel.AutoNUMA{})
	if err := s.launcher(opt.NUMACtl); err != nil {
		m.Close()
		return nil, err
	}
	if opt.Trace {
		title := fmt.Sprintf("dmalab %s on %s", opt.Name, spec.Name)
		if opt.TraceTo != nil {
			s.Trace = report.NewTraceTo(opt.TraceTo, title)
		} else {
			s.Trace = report.NewTrace(title)
		}
		s.Trace.SetMeta(report.TraceMeta{Version: buildVersion()})
		if opt.TraceTimeline {
			s.Trace.RecordTimeline()
		}
		s.tracer = newTracer(s, s.Trace, "")
	} else if opt.TraceInto != nil {
		s.tracer = newTracer(s, opt.TraceInto, opt.TraceName)
	}
	if opt.Check {
		// The DMA-API pack judges cache-line sharing and sg segments with
		// the memory's own line size and each device's limits, not
		// defaults: a 32-byte-line Zynq and a 64-byte-line x86 differ.
		s.Checker = check.New(check.Options{})
		dmadebug.Attach(s.Checker, d, m.Mem, dmadebug.Options{})
	}
	if err := s.bootIOMMU(); err != nil {
		m.Close()
		return nil, err
	}
	if err := s.bootDMABuf(); err != nil {
		m.Close()
		return nil, err
	}
	s.video = v4l2.New(v4l2.Env{Machine: m, Mem: m.Mem, DMA: d, Kernel: s.Kernel, Bufs: s.bufs})
	s.cuda, s.cudaErr = s.bootCUDA()
	if s.tracer != nil && s.cuda != nil {
		s.tracer.hookGPU(s.cuda.System())
	}
	if s.cuda != nil && s.Checker != nil {
		gpumem.Attach(s.Checker, s.cuda)
	}
	if opt.Attribution {
		s.attribute()
	}
	return s, nil
}

// iommuUnitNames are the names Linux gives a profile's first unit
// (/sys/class/iommu): dmar0 for VT-d, ivhd0 for AMD-Vi, and a name for
// the SMMU, whose Linux name is its MMIO address.
var iommuUnitNames = map[string]string{platform.IOMMUVTd: "dmar0", platform.IOMMUAMDVi: "ivhd0", platform.IOMMUSMMUv3: "smmu0"}

// bootIOMMU puts the platform's DMA devices and GPUs behind its IOMMU
// when the platform's mode translates (strict or lazy): one unit with the
// profile's parameters, one default DMA domain per IOMMU group
// (iommu_group_alloc_default_domain), every NIC, NVMe drive, DMA engine
// and discrete GPU attached to its group's domain (GPUs below one switch
// without ACS share it), and the unit given to AttachIOMMU. A GPU's
// pinned host memory is then mapped in its domain as the NVIDIA driver
// maps it (package gpu, RegisterHost: nv_dma_map_sgt per GPU), so its
// copy engines and SMs reach host memory by IOVAs that its IOTLB
// translates. An integrated GPU stays on dma-direct: the model's Tegra
// GPU reaches DRAM through its own MMU, not through the DMA layer's
// translation. In passthrough every device keeps dma-direct, as Linux's
// identity domains do (iommu=pt: dma-iommu is not used), and no unit is
// built since no access reaches an IOTLB; off builds nothing.
func (s *System) bootIOMMU() error {
	cfg := s.Spec.IOMMU
	if !cfg.Translated() {
		mode := cfg.Mode
		if mode == "" {
			mode = platform.IOMMUOff
		}
		s.vfioErr = fmt.Errorf("platform %s: iommu.mode %s (VFIO needs strict or lazy): %w", s.Spec.Name, mode, vfio.ErrNoIOMMU)
		return nil
	}
	prof, err := iommu.LookupProfile(cfg.Profile)
	if err != nil {
		return fmt.Errorf("%w: platform %s: %v", ErrUsage, s.Spec.Name, err)
	}
	mode := iommu.Strict
	if cfg.Mode == platform.IOMMULazy {
		mode = iommu.Lazy
	}
	node := 0
	if len(s.Spec.RootComplexes) > 0 {
		node = s.Spec.RootComplexes[0].Node
	}
	unit, err := iommu.NewUnit(iommuUnitNames[cfg.Profile], s.Mem, s.Engine, node, mode, prof.Params)
	if err != nil {
		return fmt.Errorf("boot iommu: %w", err)
	}
	if len(s.Spec.RootComplexes) > 0 {
		// Walks read the tables from the first root complex's place.
		if err := unit.Place(s.Machine, s.Spec.RootComplexes[0].Name); err != nil {
			return fmt.Errorf("boot iommu: %w", err)
		}
	}
	// pcie says, of each device and discrete GPU to attach, whether it
	// is a PCI device (its IOVAs then come from below 4 GiB first); ats
	// whether a device has ATS.
	pcie, ats := map[string]bool{}, map[string]bool{}
	for _, d := range s.Spec.Devices {
		pcie[d.Name] = d.Link != (platform.PCIeLink{})
		ats[d.Name] = d.ATS
	}
	for _, g := range s.Spec.GPUs {
		if !g.Integrated {
			pcie[g.Name] = true
		}
	}
	groups := iommu.Groups(s.Spec)
	for _, g := range groups {
		var dom *iommu.Domain
		for _, name := range g.Devices {
			isPCI, attach := pcie[name]
			if !attach {
				continue // an integrated GPU
			}
			if dom == nil {
				if dom, err = unit.NewDomain(); err != nil {
					return fmt.Errorf("boot iommu: group %d: %w", g.ID, err)
				}
			}
			dev, err := s.DMA.Device(name)
			if err != nil {
				return fmt.Errorf("boot iommu: %w", err)
			}
			iommu.Attach(dev, dom, iommu.AttachOptions{PCI: isPCI, ATS: ats[name]})
		}
	}
	s.AttachIOMMU(unit)
	return s.bootVFIO(unit, groups)
}

// kernelDrivers name the kernel driver each kind of device is bound to
// at boot: the model's NIC driver (package nic), nvme, the DMA-engine
// framework's; GPUs are bound to nvidia.
var kernelDrivers = map[string]string{"nic": "nic", "nvme": "nvme", "dma": "dmaengine", "camera": "v4l2", "isp": "v4l2", "display": "drm"}

// bootVFIO builds the VFIO layer over the platform's unit: every GPU and
// device bound to its kernel driver, none to vfio-pci yet.
func (s *System) bootVFIO(unit *iommu.Unit, groups []iommu.Group) error {
	var devs []vfio.Device
	add := func(name, driver string) error {
		dev, err := s.DMA.Device(name)
		if err != nil {
			return fmt.Errorf("boot vfio: %w", err)
		}
		devs = append(devs, vfio.Device{Name: name, Driver: driver, DMA: dev})
		return nil
	}
	for _, g := range s.Spec.GPUs {
		if err := add(g.Name, "nvidia"); err != nil {
			return err
		}
	}
	for _, d := range s.Spec.Devices {
		if err := add(d.Name, kernelDrivers[d.Kind]); err != nil {
			return err
		}
	}
	v, err := vfio.New(vfio.Config{Kernel: s.Kernel, Mem: s.Mem, Unit: unit, Groups: groups, Devices: devs})
	if err != nil {
		return fmt.Errorf("boot vfio: %w", err)
	}
	s.vfio = v
	if s.iommuCheck != nil {
		s.iommuCheck.WatchVFIO(v)
	}
	return nil
}

// VFIO is the VFIO layer (driver binding, groups, the legacy container
// and iommufd interfaces, device files) over the platform's IOMMU unit,
// when its mode is strict or lazy. In passthrough or off it is an
// error wrapping vfio.ErrNoIOMMU: Linux's VFIO works with iommu=pt (a
// VFIO domain is translated whatever the default domains are), but the
// model builds no unit in passthrough, so there is nothing to give user
// space domains of.
func (s *System) VFIO() (*vfio.VFIO, error) { return s.vfio, s.vfioErr }

// IOMMUs are the IOMMU units of the system: the platform's, built at
// boot when its mode translates, then those given to AttachIOMMU.
func (s *System) IOMMUs() []*iommu.Unit { return slices.Clone(s.iommus) }

// bootCUDA builds the GPUs and the CUDA façade over them, its processes
// those of the system's kernel. A platform whose GPUs the façade cannot
// drive still boots (its DMA devices work); the error is kept for
// System.CUDA.
func (s *System) bootCUDA() (*cuda.Driver, error) {
	sys, err := gpu.New(s.DMA)
	if err != nil {
		return nil, fmt.Errorf("%w: platform %s: %v", ErrUsage, s.Spec.Name, err)
	}
	d, err := cuda.New(sys, cuda.WithKernel(s.Kernel), cuda.WithDMABuf(s.bufs))
	if err != nil {
		return nil, fmt.Errorf("%w: platform %s: %v", ErrUsage, s.Spec.Name, err)
	}
	return d, nil
}

// bootDMABuf builds the DMA-BUF layer with its heaps:
// /dev/dma_heap/system and the default CMA area's heap, "reserved"
// (dmabuf.DefaultCMASize on the first node, taken from memory at its
// first allocation, so that a run that never uses it keeps its memory
// layout).
func (s *System) bootDMABuf() error {
	s.bufs = dmabuf.New(s.Engine)
	if _, err := s.bufs.AddSystemHeap(s.Mem); err != nil {
		return fmt.Errorf("boot dma-buf: %w", err)
	}
	if _, err := s.bufs.AddCMAHeap(s.Mem, "reserved", 0, 0); err != nil {
		return fmt.Errorf("boot dma-buf: %w", err)
	}
	if s.Checker != nil {
		// The DMA-BUF pack: fences against accesses (memory), descriptors
		// (kernel), importers' coherency (DMA layer).
		x := dmabufcheck.Attach(s.Checker, s.bufs)
		x.WatchMemory(s.Mem)
		x.WatchKernel(s.Kernel)
		x.WatchDMA(s.DMA)
	}
	return nil
}

// DMABuf is the DMA-BUF layer: the heaps of /dev/dma_heap (system,
// reserved), dma_buf_get for importing drivers, fences and sync files;
// the CUDA façade's dma-buf exports are its buffers too.
func (s *System) DMABuf() *dmabuf.Layer { return s.bufs }

// V4L2 is the V4L2 core: NewCapture and NewISP register the platform's
// camera and ISP devices as video nodes whose DMA goes through the
// system's DMA layer (and its IOMMU when the platform translates).
func (s *System) V4L2() *v4l2.Layer { return s.video }

// AttachIOMMU makes u one of the system's IOMMU units: when the system
// checks, the IOMMU pack watches it (faults, permission faults, stale
// IOTLB hits, IOVA mappings left at a driver's unbind, with the DMA
// API's calls as origins), and HookAll subscribes to its events. A
// program or scenario that puts devices
// behind a unit of its own (iommu.NewUnit on the system's memory and
// engine, iommu.Attach) attaches it here, before it runs; the platform's
// own unit, when its iommu mode is strict or lazy, is attached at boot.
func (s *System) AttachIOMMU(u *iommu.Unit) {
	s.iommus = append(s.iommus, u)
	if s.Checker == nil {
		return
	}
	if s.iommuCheck == nil {
		s.iommuCheck = iommucheck.New(s.Checker)
		s.iommuCheck.WatchDMA(s.DMA)
	}
	s.iommuCheck.AttachUnit(u)
}

// Options are the options the system booted with (the seed filled in).
func (s *System) Options() Options { return s.opt }

// CUDA is the CUDA driver API façade over the system's GPUs, with the
// checker attached when the system checks; an error wrapping ErrUsage
// when the platform's GPUs cannot be driven.
func (s *System) CUDA() (*cuda.Driver, error) { return s.cuda, s.cudaErr }

// NVP2P is nvidia.ko's GPUDirect RDMA interface (nvidia_p2p), loaded
// at the first call: from then on every discrete GPU's BAR1 is a peer
// window of the DMA layer, so a device's DMA to a pinned BAR1 page
// lands in VRAM. When the system checks, the GPUDirect rule pack
// (check/gpudirect) watches it from then on. An error when the system
// has no CUDA driver.
func (s *System) NVP2P() (*nvp2p.Driver, error) {
	if s.p2p != nil {
		return s.p2p, nil
	}
	if s.cuda == nil {
		return nil, fmt.Errorf("nvidia_p2p: %w", s.cudaErr)
	}
	d, err := nvp2p.New(s.cuda, s.DMA)
	if err != nil {
		return nil, err
	}
	s.p2p = d
	if s.Checker != nil {
		// The GPUDirect pack: nvidia_p2p's calls, peers' accesses to
		// BAR1 (DMA layer), copies and kernels (CUDA), versions (memory),
		// process exits (kernel).
		x := gpudirect.Attach(s.Checker, d)
		x.WatchDMA(s.DMA)
		x.WatchCUDA(s.cuda)
		x.WatchMemory(s.Mem)
		x.WatchKernel(s.Kernel)
	}
	return d, nil
}

// LineSize is the CPU cache-line size of node 0, in bytes: what a driver
// aligns DMA buffers to (ARCH_DMA_MINALIGN).
func (s *System) LineSize() uint64 { return s.Mem.LineSize(0) }

// Device returns the DMA API's view of a device of the platform (the
// struct device a driver passes to dma_map_single), by name.
func (s *System) Device(name string) (*dma.Device, error) {
	dev, err := s.DMA.Device(name)
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", name, err)
	}
	return dev, nil
}

// Diagnostics lists what the checker reported, in order; nil when the
// system does not check.
func (s *System) Diagnostics() []check.Diagnostic {
	if s.Checker == nil {
		return nil
	}
	return s.Checker.Diagnostics()
}

// Report is the checker's report (diagnostics and the count of those not
// kept); nil when the system does not check.
func (s *System) Report() *check.Report {
	if s.Checker == nil {
		return nil
	}
	r := s.Checker.Report()
	return &r
}

// Progressf reports a step of a long run to Options.Progress, if any, on
// one line that the next step overwrites.
func (s *System) Progressf(format string, a ...any) {
	if s.opt.Progress == nil {
		return
	}
	fmt.Fprintf(s.opt.Progress, "\r\033[K"+format, a...)
}

// progressDone clears the progress line.
func (s *System) progressDone() {
	if s.opt.Progress != nil {
		fmt.Fprint(s.opt.Progress, "\r\033[K")
	}
}

// Close ends the system: the trace is closed (its document ended and
// flushed), then threads still blocked are unwound.
func (s *System) Close() {
	s.closeTrace(nil)
	s.Machine.Close()
}

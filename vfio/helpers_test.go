package vfio_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/pci"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/vfio"
)

// testPlatform has two NVMe drives behind a switch without ACS (one
// IOMMU group, 0) and one directly below the root complex (group 1).
const testPlatform = `name: vfio-test
nodes:
  - id: 0
    cores: 4
    dram: 16 GiB
    dram_bandwidth: 50 GB/s
    memcpy_rate: 10 GB/s
root_complexes:
  - name: rc0
    node: 0
switches:
  - {name: sw0, parent: rc0, link: {gen: 4, width: 16, efficiency: 0.9}, acs: false}
devices:
  - {name: nvme0, kind: nvme, parent: sw0, link: {gen: 4, width: 4, efficiency: 0.9}, dma_engines: 1}
  - {name: nvme1, kind: nvme, parent: sw0, link: {gen: 4, width: 4, efficiency: 0.9}, dma_engines: 1}
  - {name: nvme2, kind: nvme, parent: rc0, link: {gen: 4, width: 4, efficiency: 0.9}, dma_engines: 1}
iommu: {profile: vtd, mode: strict}
`

// Costs of the fake function's registers: a posted write, a read's
// round trip.
const (
	regWrite = 150 * sim.Nanosecond
	regRead  = 900 * sim.Nanosecond
	flrTime  = 100 * sim.Millisecond
)

// fakeFn is a PCI function with a 16 KiB BAR0 of registers, a 256-byte
// BAR2 and 4 MSI-X vectors.
type fakeFn struct {
	name   string
	dev    *dma.Device
	regs   map[uint64]uint64
	irq    map[int]pci.IRQHandler
	resets int
}

func (f *fakeFn) Name() string     { return f.name }
func (f *fakeFn) DMA() *dma.Device { return f.dev }
func (f *fakeFn) Vectors() int     { return 4 }
func (f *fakeFn) BARs() []pci.BAR {
	return []pci.BAR{{Index: 0, Size: 16 << 10, Flags: pci.BAR64, Regs: f}, {Index: 2, Size: 256, Regs: f}}
}
func (f *fakeFn) SetIRQ(v int, h pci.IRQHandler) error {
	if v < 0 || v >= f.Vectors() {
		return fmt.Errorf("%s: vector %d", f.name, v)
	}
	if h == nil {
		delete(f.irq, v)
	} else {
		f.irq[v] = h
	}
	return nil
}
func (f *fakeFn) Reset(t *sim.Proc) error {
	t.Sleep(flrTime)
	f.resets++
	clear(f.regs)
	return nil
}
func (f *fakeFn) ReadReg(t *sim.Proc, off uint64, size int) (uint64, error) {
	t.Sleep(regRead)
	return f.regs[off], nil
}
func (f *fakeFn) WriteReg(t *sim.Proc, off uint64, size int, v uint64) error {
	t.Sleep(regWrite)
	f.regs[off] = v
	return nil
}

// raise is the device raising vector v's interrupt from its own thread.
func (f *fakeFn) raise(t *sim.Proc, v int) {
	if h := f.irq[v]; h != nil {
		h(t)
	}
}

// write is the device writing data at bus address a.
func (f *fakeFn) write(t *sim.Proc, a mem.DMAAddr, data []byte) error {
	_, err := f.dev.Transfer(t, &dma.Transfer{Name: f.name + " write", Route: &fabric.Route{}, Bytes: int64(len(data)),
		Write: []dma.Span{dma.BusSpan(a, uint64(len(data)))}, Data: data})
	return err
}

type rig struct {
	t   *testing.T
	sys *dmalab.System
	v   *vfio.VFIO
	p   *kernel.Process
	fns map[string]*fakeFn
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigMode(t, platform.IOMMUStrict)
}

// newRigMode is newRig with the platform's IOMMU in mode.
func newRigMode(t *testing.T, mode string) *rig {
	t.Helper()
	spec, err := platform.Parse("vfio-test.yaml", []byte(testPlatform))
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = platform.Set(spec, "iommu.mode", mode); err != nil {
		t.Fatal(err)
	}
	sys, err := dmalab.BootSpec(spec, dmalab.Options{Check: true, Payload: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	v, err := sys.VFIO()
	if err != nil {
		t.Fatal(err)
	}
	p, err := sys.Kernel.NewProcess("udrv", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, sys: sys, v: v, p: p, fns: map[string]*fakeFn{}}
	for _, d := range spec.Devices {
		dev, err := sys.Device(d.Name)
		if err != nil {
			t.Fatal(err)
		}
		f := &fakeFn{name: d.Name, dev: dev, regs: map[uint64]uint64{}, irq: map[int]pci.IRQHandler{}}
		if err := v.AddFunction(f); err != nil {
			t.Fatal(err)
		}
		r.fns[d.Name] = f
	}
	return r
}

// run runs body as the user driver's thread to the end of the run.
func (r *rig) run(body func(t *sim.Proc)) {
	r.t.Helper()
	r.p.Spawn("", body)
	r.sys.Engine.Run()
	if b := r.sys.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked: %v", b)
	}
}

// assign binds the devices to vfio-pci as a user does through sysfs.
func (r *rig) assign(t *sim.Proc, names ...string) {
	r.t.Helper()
	for _, n := range names {
		if err := r.v.Unbind(t, n); err != nil {
			r.t.Fatal(err)
		}
		if err := r.v.SetDriverOverride(n, vfio.DriverVFIOPCI); err != nil {
			r.t.Fatal(err)
		}
		if err := r.v.Bind(t, n, vfio.DriverVFIOPCI); err != nil {
			r.t.Fatal(err)
		}
	}
}

// legacy opens a container and group gid, sets the container and its
// type1 IOMMU.
func (r *rig) legacy(t *sim.Proc, gid int) (cfd, gfd int) {
	r.t.Helper()
	cfd = r.must(r.v.Open(t, r.p, vfio.ContainerPath))
	gfd = r.must(r.v.Open(t, r.p, fmt.Sprintf("/dev/vfio/%d", gid)))
	if err := r.v.GroupSetContainer(t, r.p, gfd, cfd); err != nil {
		r.t.Fatal(err)
	}
	if err := r.v.SetIOMMU(t, r.p, cfd, vfio.Type1v2IOMMU); err != nil {
		r.t.Fatal(err)
	}
	return cfd, gfd
}

func (r *rig) must(fd int, err error) int {
	r.t.Helper()
	if err != nil {
		r.t.Fatal(err)
	}
	return fd
}

// malloc is user memory of the process: pages of its node, recorded as
// an anonymous mapping that its exit frees.
func (r *rig) malloc(size uint64) mem.VirtAddr {
	r.t.Helper()
	va, err := r.sys.Mem.Vmalloc(r.p.Node(), size)
	if err != nil {
		r.t.Fatal(err)
	}
	err = r.p.MM.Map(kernel.VMA{Start: va, Size: size, Name: "anon", Close: func(*sim.Proc) error { return r.sys.Mem.Vfree(va) }})
	if err != nil {
		r.t.Fatal(err)
	}
	return va
}

// classes counts the diagnostics by class.
func (r *rig) classes() map[string]int {
	out := map[string]int{}
	for _, d := range r.sys.Diagnostics() {
		out[d.Class]++
	}
	return out
}

// wantErrno fails unless err wraps want (nil: no error).
func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	switch {
	case want == 0 && err != nil:
		t.Errorf("%s: %v, want success", what, err)
	case want != 0 && !errors.Is(err, want):
		t.Errorf("%s: %v, want %v (%d)", what, err, want, int(want))
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

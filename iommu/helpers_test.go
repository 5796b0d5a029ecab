package iommu

import (
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is 2s-4gpu-pcie (nic0: 64-bit mask, nic2: 32-bit) with one IOMMU
// unit, recording its events.
type rig struct {
	t      testing.TB
	m      *machine.Machine
	mem    *mem.Memory
	dma    *dma.DMA
	unit   *Unit
	events []Event
}

func newRig(t testing.TB, mode Mode, p Params) *rig {
	t.Helper()
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewUnit("dmar0", m.Mem, m.Engine, 0, mode, p)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, mem: m.Mem, dma: x, unit: u}
	u.Hooks.Hook(func(e *Event) { r.events = append(r.events, *e) })
	return r
}

func (r *rig) domain() *Domain {
	r.t.Helper()
	d, err := r.unit.NewDomain()
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// attach puts device name behind a new domain, as a PCI device.
func (r *rig) attach(name string, opt AttachOptions) (*dma.Device, *Translator) {
	r.t.Helper()
	dev, err := r.dma.Device(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return dev, Attach(dev, r.domain(), opt)
}

func (r *rig) pages(size uint64) mem.PhysAddr {
	r.t.Helper()
	pa, err := r.mem.AllocPagesAligned(0, size, size, mem.ZoneNormal)
	if err != nil {
		r.t.Fatal(err)
	}
	return pa
}

// run runs body as process "drv" to the end of virtual time.
func (r *rig) run(body func(p *sim.Proc)) {
	r.m.Engine.Spawn("drv", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked: %v", b)
	}
}

func (r *rig) count(op Op) int {
	n := 0
	for _, e := range r.events {
		if e.Op == op {
			n++
		}
	}
	return n
}

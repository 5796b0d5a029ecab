package dma

import (
	"testing"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a machine with its memory and DMA layer, recording every DMA
// event.
type rig struct {
	t      testing.TB
	m      *machine.Machine
	mem    *mem.Memory
	dma    *DMA
	events []Event
}

func newRig(t testing.TB, spec *platform.Spec, payload bool) *rig {
	t.Helper()
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	mm := m.Mem
	x, err := New(m, mm)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, mem: mm, dma: x}
	x.Hooks.Hook(func(e *Event) { r.events = append(r.events, *e) })
	return r
}

func (r *rig) dev(name string) *Device {
	r.t.Helper()
	d, err := r.dma.Device(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// run runs body as a process named "drv" to the end of the simulation.
func (r *rig) run(body func(p *sim.Proc)) {
	r.m.Engine.Spawn("drv", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked: %v", b)
	}
}

// last is the most recent event.
func (r *rig) last() Event {
	r.t.Helper()
	if len(r.events) == 0 {
		r.t.Fatal("no events")
	}
	return r.events[len(r.events)-1]
}

func preset(t testing.TB, name string) *platform.Spec {
	t.Helper()
	s, err := platform.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// server is 2s-4gpu-pcie: x86, coherent; nic0 has a 64-bit mask, nic2 a
// 32-bit one. With nonCoherent, the named devices do not snoop (PCIe No
// Snoop), so the cache rules of an Arm SoC apply to them on x86 costs.
func server(t testing.TB, nonCoherent ...string) *platform.Spec {
	s := preset(t, "2s-4gpu-pcie")
	for _, n := range nonCoherent {
		for i := range s.Devices {
			if s.Devices[i].Name == n {
				s.Devices[i].NonCoherentDMA = true
			}
		}
	}
	return s
}

// zynq is zynq-7000: gem0 and axidma0 are non-coherent, 32-byte lines.
func zynq(t testing.TB) *platform.Spec { return preset(t, "zynq-7000") }

// highPage is a page of node 0 above 4 GiB, with its linear address.
func (r *rig) highPage(size uint64) (mem.PhysAddr, mem.VirtAddr) {
	r.t.Helper()
	pa, err := r.mem.AllocPages(0, size, mem.ZoneNormal)
	if err != nil {
		r.t.Fatal(err)
	}
	if pa < 4<<30 {
		r.t.Fatalf("ZoneNormal gave %v, want memory above 4 GiB", pa)
	}
	return pa, r.mem.PhysToVirt(pa)
}

// kmalloc is a linear buffer on node 0.
func (r *rig) kmalloc(size uint64) (mem.PhysAddr, mem.VirtAddr) {
	r.t.Helper()
	va, err := r.mem.Kmalloc(0, size)
	if err != nil {
		r.t.Fatal(err)
	}
	pa, err := r.mem.VirtToPhys(va)
	if err != nil {
		r.t.Fatal(err)
	}
	return pa, va
}

func fill(s string, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = s[i%len(s)]
	}
	return b
}

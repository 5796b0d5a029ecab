package dmabuf

import (
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a machine with its DMA layer, kernel and DMA-BUF layer (the
// system heap and a 4 MiB CMA heap called "reserved"), recording every
// DMA-BUF event.
type rig struct {
	t      testing.TB
	m      *machine.Machine
	mem    *mem.Memory
	dma    *dma.DMA
	k      *kernel.Kernel
	l      *Layer
	system *Heap
	cma    *Heap
	events []Event
}

func newRig(t testing.TB, preset string, payload bool) *rig {
	t.Helper()
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, mem: m.Mem, dma: x, k: kernel.New(m.Engine, m.Mem.Nodes()), l: New(m.Engine)}
	if r.system, err = r.l.AddSystemHeap(m.Mem); err != nil {
		t.Fatal(err)
	}
	if r.cma, err = r.l.AddCMAHeap(m.Mem, "reserved", 0, 4<<20); err != nil {
		t.Fatal(err)
	}
	r.l.Hooks.Hook(func(e *Event) { r.events = append(r.events, *e) })
	return r
}

func (r *rig) dev(name string) *dma.Device {
	r.t.Helper()
	d, err := r.dma.Device(name)
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

func (r *rig) proc(name string) *kernel.Process {
	r.t.Helper()
	p, err := r.k.NewProcess(name, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// behindIOMMU puts dev behind a new domain of a new strict unit, as a
// PCI device, and returns its translator.
func (r *rig) behindIOMMU(dev *dma.Device) *iommu.Translator {
	r.t.Helper()
	u, err := iommu.NewUnit("dmar0", r.mem, r.m.Engine, 0, iommu.Strict, iommu.DefaultParams())
	if err != nil {
		r.t.Fatal(err)
	}
	dom, err := u.NewDomain()
	if err != nil {
		r.t.Fatal(err)
	}
	return iommu.Attach(dev, dom, iommu.AttachOptions{PCI: true})
}

// run runs body as a thread named "drv" to the end of virtual time.
func (r *rig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("drv", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked: %v", b)
	}
}

// count is the number of events of op.
func (r *rig) count(op Op) int {
	n := 0
	for _, e := range r.events {
		if e.Op == op {
			n++
		}
	}
	return n
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// fakeExporter exports nothing but counts its calls: the operations
// the layer owes an exporter, whatever its memory.
type fakeExporter struct {
	attaches, detaches, releases int
	refuse                       error
}

func (f *fakeExporter) Attach(*sim.Proc, *Attachment) error { f.attaches++; return f.refuse }
func (f *fakeExporter) Detach(*sim.Proc, *Attachment)       { f.detaches++ }
func (f *fakeExporter) MapDMABuf(*sim.Proc, *Attachment, dma.Direction) (*dma.SGTable, error) {
	return nil, ErrNoOp
}
func (f *fakeExporter) UnmapDMABuf(*sim.Proc, *Attachment, *dma.SGTable, dma.Direction) {}
func (f *fakeExporter) BeginCPUAccess(*sim.Proc, *Buffer, dma.Direction) error          { return nil }
func (f *fakeExporter) EndCPUAccess(*sim.Proc, *Buffer, dma.Direction) error            { return nil }
func (f *fakeExporter) Mmap(*sim.Proc, *Buffer) (mem.VirtAddr, error)                   { return 0, ErrNoOp }
func (f *fakeExporter) Vmap(*sim.Proc, *Buffer) (mem.VirtAddr, error)                   { return 0, ErrNoOp }
func (f *fakeExporter) Vunmap(*sim.Proc, *Buffer, mem.VirtAddr)                         {}
func (f *fakeExporter) Release(*sim.Proc, *Buffer) error                                { f.releases++; return nil }

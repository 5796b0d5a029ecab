package drm

import (
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a zynq-7000 with its DMA layer, kernel and DMA-BUF layer (the
// system heap and a 64 MiB CMA heap), a display controller on axidma0
// and a compositor process with the device open; it records every DRM
// and DMA event.
type rig struct {
	t      testing.TB
	m      *machine.Machine
	dma    *dma.DMA
	k      *kernel.Kernel
	l      *dmabuf.Layer
	system *dmabuf.Heap
	cma    *dmabuf.Heap
	d      *Device
	proc   *kernel.Process
	f      *File
	events []Event
	dmaEvs []dma.Event
}

func newRig(t testing.TB, mode Mode, cfg Config, behindIOMMU bool) *rig {
	t.Helper()
	spec, err := platform.Preset("zynq-7000")
	must(t, err)
	m, err := machine.NewWithOptions(spec, 1, machine.Options{})
	must(t, err)
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	must(t, err)
	r := &rig{t: t, m: m, dma: x, k: kernel.New(m.Engine, m.Mem.Nodes()), l: dmabuf.New(m.Engine)}
	r.system, err = r.l.AddSystemHeap(m.Mem)
	must(t, err)
	r.cma, err = r.l.AddCMAHeap(m.Mem, "reserved", 0, 64<<20)
	must(t, err)
	if behindIOMMU {
		dev, err := x.Device("axidma0")
		must(t, err)
		u, err := iommu.NewUnit("smmu0", m.Mem, m.Engine, 0, iommu.Strict, iommu.DefaultParams())
		must(t, err)
		dom, err := u.NewDomain()
		must(t, err)
		iommu.Attach(dev, dom, iommu.AttachOptions{})
	}
	cfg.Mode = mode
	r.d, err = New(m, x, r.l, "axidma0", cfg)
	must(t, err)
	r.proc, err = r.k.NewProcess("compositor", 0)
	must(t, err)
	r.f = r.d.Open(r.proc)
	r.d.Hooks.Hook(func(e *Event) { r.events = append(r.events, *e) })
	x.Hooks.Hook(func(e *dma.Event) {
		if e.Device == "axidma0" {
			r.dmaEvs = append(r.dmaEvs, *e)
		}
	})
	return r
}

// run runs body as the compositor's thread to the end of virtual time.
func (r *rig) run(body func(p *sim.Proc)) {
	r.t.Helper()
	r.m.Engine.Spawn("compositor", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		r.t.Fatalf("blocked: %v", b)
	}
}

// frame allocates a width × height XRGB8888 frame from heap in the
// compositor and imports it: its descriptor and GEM handle.
func (r *rig) frame(p *sim.Proc, heap *dmabuf.Heap, w, h int) (int, uint32) {
	r.t.Helper()
	fd, err := heap.Allocate(p, r.proc, uint64(w*h*4), 0)
	must(r.t, err)
	hd, err := r.f.PrimeFDToHandle(p, fd)
	must(r.t, err)
	return fd, hd
}

// fb makes a framebuffer of the mode's size over a new CMA frame.
func (r *rig) fb(p *sim.Proc) uint32 {
	r.t.Helper()
	w, h := r.d.Mode().HDisplay, r.d.Mode().VDisplay
	_, hd := r.frame(p, r.cma, w, h)
	id, err := r.f.AddFB2(p, xrgb(w, h, hd))
	must(r.t, err)
	return id
}

func xrgb(w, h int, handle uint32) FBCmd {
	return FBCmd{Width: w, Height: h, Format: FormatXRGB8888, Handles: [4]uint32{handle}, Pitches: [4]uint32{uint32(w * 4)}}
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

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mode(t testing.TB, w, h, hz int) Mode {
	t.Helper()
	m, err := CVTRB(w, h, hz)
	must(t, err)
	return m
}

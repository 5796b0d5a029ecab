package dmabufcheck

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a machine with its DMA layer, kernel and DMA-BUF layer (the
// system heap), a checker and the pack watching all of them.
type rig struct {
	t      testing.TB
	m      *machine.Machine
	mem    *mem.Memory
	dma    *dma.DMA
	k      *kernel.Kernel
	l      *dmabuf.Layer
	system *dmabuf.Heap
	chk    *check.Checker
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
	d, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, m: m, mem: m.Mem, dma: d, k: kernel.New(m.Engine, m.Mem.Nodes()), l: dmabuf.New(m.Engine), chk: check.New(check.Options{})}
	if r.system, err = r.l.AddSystemHeap(m.Mem); err != nil {
		t.Fatal(err)
	}
	x := Attach(r.chk, r.l)
	x.WatchMemory(r.mem)
	x.WatchKernel(r.k)
	x.WatchDMA(d)
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

// run runs the threads bodies names to the end of virtual time, then
// finishes the checker, as the system does at the end of a run.
func (r *rig) run(bodies map[string]func(p *sim.Proc)) {
	r.t.Helper()
	for _, name := range slices.Sorted(maps.Keys(bodies)) {
		r.m.Engine.Spawn(name, bodies[name])
	}
	r.m.Engine.Run()
	r.chk.Finish(r.m.Engine.Now())
}

func (r *rig) run1(body func(p *sim.Proc)) { r.run(map[string]func(*sim.Proc){"drv": body}) }

// expect checks that the checker reported class code n times (0: not at
// all), each message containing every one of words.
func (r *rig) expect(code string, n int, words ...string) {
	r.t.Helper()
	var got []check.Diagnostic
	for _, d := range r.chk.Diagnostics() {
		if d.Class == code {
			got = append(got, d)
		}
	}
	if len(got) != n {
		r.t.Fatalf("%s reported %d times, want %d; all diagnostics:\n%s", code, len(got), n, r.dump())
	}
	for _, d := range got {
		r.t.Log(d)
		for _, w := range words {
			if !strings.Contains(d.String(), w) {
				r.t.Errorf("%s diagnostic lacks %q:\n%s", code, w, d)
			}
		}
	}
}

// clean checks that the pack reported nothing.
func (r *rig) clean() {
	r.t.Helper()
	for _, d := range r.chk.Diagnostics() {
		if _, ok := codes[d.Class]; ok {
			r.t.Fatalf("correct use reported:\n%s", r.dump())
		}
	}
}

var codes = map[string]bool{}

func init() {
	for _, c := range Classes() {
		codes[c.Code] = true
	}
}

func (r *rig) dump() string {
	var b strings.Builder
	for _, d := range r.chk.Diagnostics() {
		b.WriteString(d.String() + "\n")
	}
	return b.String()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// alloc allocates a page of the system heap in proc, takes a reference
// and attaches and maps dev.
func (r *rig) alloc(p *sim.Proc, proc *kernel.Process) (int, *dmabuf.Buffer) {
	r.t.Helper()
	fd, err := r.system.Allocate(p, proc, 4096, 0)
	must(r.t, err)
	b, err := r.l.Get(p, proc, fd)
	must(r.t, err)
	return fd, b
}

func (r *rig) attachMap(p *sim.Proc, b *dmabuf.Buffer, dev *dma.Device) (*dmabuf.Attachment, mem.DMAAddr) {
	r.t.Helper()
	a, err := b.Attach(p, dev, dmabuf.AttachOptions{})
	must(r.t, err)
	sgt, err := a.Map(p, dma.Bidirectional)
	must(r.t, err)
	return a, sgt.SGL[0].DMAAddress
}

package dmaengine_test

import (
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmadebug"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// rig is a machine with memory, the DMA layer, a checker watching both,
// and the DMA engine of one device.
type rig struct {
	spec *platform.Spec
	m    *machine.Machine
	mem  *mem.Memory
	d    *dma.DMA
	ck   *check.Checker
	pack *dmadebug.Pack
	ctl  *dmaengine.Controller
	node int
}

func newRig(t testing.TB, preset, device string, payload bool) *rig {
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
	memory := m.Mem
	d, err := dma.New(m, memory)
	if err != nil {
		t.Fatal(err)
	}
	ck := check.New(check.Options{})
	pack := dmadebug.Attach(ck, d, memory, dmadebug.Options{})
	ctl, err := dmaengine.New(m, memory, d, device)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{spec: spec, m: m, mem: memory, d: d, ck: ck, pack: pack, ctl: ctl, node: ctl.Node()}
}

// run runs body as the driver's process to the end of the simulation,
// and fails the test on a deadlock or a checker diagnostic.
func (r *rig) run(t *testing.T, body func(p *sim.Proc)) {
	t.Helper()
	r.m.Engine.Spawn("driver", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		t.Errorf("deadlocked processes: %v", b)
	}
	r.noDiagnostics(t)
}

func (r *rig) noDiagnostics(t *testing.T) {
	t.Helper()
	for _, dg := range r.ck.Diagnostics() {
		t.Errorf("checker: %v", dg)
	}
	if n := r.pack.Active(); n != 0 {
		t.Errorf("%d mappings still active at the end", n)
	}
}

// buffer is a kmalloc'd buffer mapped for the device.
type buffer struct {
	va   mem.VirtAddr
	addr mem.DMAAddr
	size uint64
	dir  dma.Direction
}

func (r *rig) mapBuffer(t *testing.T, p *sim.Proc, size uint64, dir dma.Direction, fill []byte) buffer {
	t.Helper()
	va, err := r.mem.Kmalloc(r.node, size)
	if err != nil {
		t.Fatal(err)
	}
	if fill != nil {
		r.mem.WriteBytes(p, r.node, va, fill)
	}
	dev := r.ctl.Device()
	addr := dev.MapSingle(p, va, size, dir)
	if dev.MappingError(addr) {
		t.Fatalf("dma_map_single(%v, %d) failed", va, size)
	}
	return buffer{va: va, addr: addr, size: size, dir: dir}
}

// unmap gives b back to the CPU and returns its bytes (zeros without
// payload mode).
func (r *rig) unmap(t *testing.T, p *sim.Proc, b buffer) []byte {
	t.Helper()
	r.ctl.Device().UnmapSingle(p, b.addr, b.size, b.dir)
	got := make([]byte, b.size)
	if a := r.mem.ReadBytes(p, r.node, b.va, got); a.Stale {
		t.Errorf("stale read of %v: %+v", b.va, a)
	}
	if err := r.mem.Kfree(b.va); err != nil {
		t.Error(err)
	}
	return got
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

package peermem

import (
	"testing"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// The deregistration path: acquire, get_pages, dma_map (one segment for
// a contiguous pin, the offset of an unaligned start), dma_unmap and
// put_pages give BAR1 back; host memory is not acquired.
func TestClientDereg(t *testing.T) {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	m, err := machine.New(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	cu, _ := cuda.New(sys)
	p2p, _ := nvp2p.New(cu, x)
	var ops []string
	p2p.Hooks.Hook(func(e *nvp2p.Event) { ops = append(ops, e.Op.String()) })
	app, _ := cu.NewProcess("app", 0)
	ctx, _ := app.PrimaryContext(0)
	nic, _ := x.Device("nic0")
	c := New(p2p, nil)
	m.Engine.Spawn("app", func(p *sim.Proc) {
		buf, err := ctx.MemAlloc(p, 2<<20)
		if err != nil {
			t.Fatal(err)
		}
		host, _ := ctx.MemAllocHost(p, 1<<20)
		if _, ok := c.Acquire(p, uint64(host), 4096); ok {
			t.Error("host memory acquired")
		}
		bar := sys.Devices[0].BAR1()
		free0 := bar.Info().Free
		addr, size := uint64(buf)+0x1000, uint64(1<<20)
		cc, ok := c.Acquire(p, addr, size)
		if !ok {
			t.Fatal("device memory not acquired")
		}
		if err := c.GetPages(p, cc, addr, size, true, 7); err != nil {
			t.Fatal(err)
		}
		pm, err := c.DMAMap(p, cc, nic)
		if err != nil {
			t.Fatal(err)
		}
		// 0x1000 + 1 MiB spans 17 pages of 64 KiB, contiguous in BAR1.
		if len(pm.Segments) != 1 || pm.Segments[0].Len != 17<<16 || pm.Offset != 0x1000 || pm.Memory != m.GPUs[0].Memory() {
			t.Errorf("mapping %+v", pm)
		}
		if c.PageSize(cc) != 64<<10 || c.Name() != "nv_mem" {
			t.Error("page size or name")
		}
		if err := c.DMAUnmap(p, cc, nic); err != nil {
			t.Fatal(err)
		}
		c.PutPages(p, cc)
		c.Release(cc)
		if bar.Info().Free != free0 {
			t.Errorf("BAR1 free %d after dereg, want %d", bar.Info().Free, free0)
		}
	})
	m.Engine.Run()
	want := []string{"get_pages", "dma_map_pages", "dma_unmap_pages", "put_pages"}
	if len(ops) != len(want) {
		t.Fatalf("ops %v, want %v", ops, want)
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("ops %v, want %v", ops, want)
		}
	}
}

package dma

import (
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// wantTable is the direction table written out row by row from the
// rule each cell serves (see cacheOps), independently of cacheOps.
var wantTable = []struct {
	dir               Direction
	forDevice, forCPU cacheOp
	why               string
}{
	{ToDevice, flush, noCacheOp, "DMA_TO_DEVICE: the device reads; write back and invalidate before, nothing after"},
	{FromDevice, invalidate, invalidate, "DMA_FROM_DEVICE: the device writes; invalidate before, and again after"},
	{Bidirectional, flush, invalidate, "DMA_BIDIRECTIONAL: both; write back and invalidate before, invalidate after"},
}

func TestDirectionTable(t *testing.T) {
	for _, row := range wantTable {
		t.Run(row.dir.String(), func(t *testing.T) {
			if got := opForDevice(row.dir); got != row.forDevice {
				t.Errorf("for_device = %v, want %v (%s)", got, row.forDevice, row.why)
			}
			if got := opForCPU(row.dir); got != row.forCPU {
				t.Errorf("for_cpu = %v, want %v (%s)", got, row.forCPU, row.why)
			}
		})
	}
	for _, dir := range []Direction{None, 7, -1} {
		if opForDevice(dir) != noCacheOp || opForCPU(dir) != noCacheOp {
			t.Errorf("%v: a cache operation for an invalid direction", dir)
		}
	}
}

// observedOp says which cache operation was applied to a line that was
// dirty before: still there dirty (none), gone with DRAM holding its
// data (flush), gone with the data lost (invalidate), there and clean
// with DRAM holding it (clean, which the model's table never uses).
func observedOp(m *mem.Memory, pa mem.PhysAddr, written mem.Version) string {
	_, present, dirty := m.CacheLine(0, pa)
	inDRAM := m.DRAMVersion(pa) == written
	switch {
	case present && dirty && !inDRAM:
		return "none"
	case !present && inDRAM:
		return "flush"
	case !present && !inDRAM:
		return "invalidate"
	case present && !dirty && inDRAM:
		return "clean"
	}
	return fmt.Sprintf("unexpected (present %v, dirty %v, in DRAM %v)", present, dirty, inDRAM)
}

// TestDirectionTableThroughAPI checks every line of the table through
// each call that implies it, on a non-coherent device, by what happens to
// a dirty cache line; and that a coherent device gets no cache operation
// at all.
func TestDirectionTableThroughAPI(t *testing.T) {
	const size = 256
	calls := []struct {
		name      string
		forDevice bool
		call      func(d *Device, p *sim.Proc, va mem.VirtAddr, dir Direction, write func())
	}{
		{"dma_map_single", true, func(d *Device, p *sim.Proc, va mem.VirtAddr, dir Direction, write func()) {
			write()
			d.MapSingle(p, va, size, dir)
		}},
		{"dma_sync_single_for_device", true, func(d *Device, p *sim.Proc, va mem.VirtAddr, dir Direction, write func()) {
			h := d.MapSingle(p, va, size, dir)
			write()
			d.SyncSingleForDevice(p, h, size, dir)
		}},
		{"dma_unmap_single", false, func(d *Device, p *sim.Proc, va mem.VirtAddr, dir Direction, write func()) {
			h := d.MapSingle(p, va, size, dir)
			write()
			d.UnmapSingle(p, h, size, dir)
		}},
		{"dma_sync_single_for_cpu", false, func(d *Device, p *sim.Proc, va mem.VirtAddr, dir Direction, write func()) {
			h := d.MapSingle(p, va, size, dir)
			write()
			d.SyncSingleForCPU(p, h, size, dir)
		}},
	}
	for _, coherent := range []bool{false, true} {
		for _, c := range calls {
			for _, row := range wantTable {
				want := row.forCPU
				if c.forDevice {
					want = row.forDevice
				}
				wantName := want.String()
				if coherent {
					wantName = "none"
				}
				name := fmt.Sprintf("coherent=%v/%s/%v", coherent, c.name, row.dir)
				t.Run(name, func(t *testing.T) {
					spec := server(t, "nic0")
					if coherent {
						spec = server(t)
					}
					r := newRig(t, spec, false)
					d := r.dev("nic0")
					pa, va := r.kmalloc(size)
					var v mem.Version
					r.run(func(p *sim.Proc) {
						c.call(d, p, va, row.dir, func() { v = r.mem.Write(p, 0, va, size) })
					})
					for off := uint64(0); off < size; off += 64 {
						if got := observedOp(r.mem, pa+mem.PhysAddr(off), v); got != wantName {
							t.Fatalf("line +%d: %s, want %s (%s)", off, got, wantName, row.why)
						}
					}
				})
			}
		}
	}
}

// TestCacheMaintenanceCost: a non-coherent map costs what mem charges
// per line (writeback cost for a flush, invalidate cost for an
// invalidate); a coherent one costs nothing.
func TestCacheMaintenanceCost(t *testing.T) {
	spec := zynq(t)
	c := spec.Nodes[0].Cache
	lines := sim.Time(256 / c.LineSize.V)
	for _, tc := range []struct {
		dir  Direction
		want sim.Time
	}{
		{ToDevice, lines * c.WritebackCost.V},
		{FromDevice, lines * c.InvalidateCost.V},
		{Bidirectional, lines * c.WritebackCost.V},
	} {
		t.Run(tc.dir.String(), func(t *testing.T) {
			r := newRig(t, zynq(t), false)
			d := r.dev("gem0")
			_, va := r.kmalloc(256)
			r.run(func(p *sim.Proc) {
				t0 := p.Now()
				h := d.MapSingle(p, va, 256, tc.dir)
				if got := p.Now() - t0; got != tc.want {
					t.Errorf("map cost %v, want %v", got, tc.want)
				}
				t0 = p.Now()
				d.UnmapSingle(p, h, 256, tc.dir)
				want := lines * c.InvalidateCost.V
				if tc.dir == ToDevice {
					want = 0
				}
				if got := p.Now() - t0; got != want {
					t.Errorf("unmap cost %v, want %v", got, want)
				}
			})
		})
	}
	t.Run("coherent", func(t *testing.T) {
		r := newRig(t, server(t), false)
		d := r.dev("nic0")
		_, va := r.kmalloc(1500)
		r.run(func(p *sim.Proc) {
			h := d.MapSingle(p, va, 1500, Bidirectional)
			d.SyncSingleForCPU(p, h, 1500, Bidirectional)
			d.SyncSingleForDevice(p, h, 1500, Bidirectional)
			d.UnmapSingle(p, h, 1500, Bidirectional)
			if p.Now() != 0 {
				t.Errorf("coherent calls cost %v, want 0", p.Now())
			}
		})
	})
}

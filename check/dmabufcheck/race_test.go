package dmabufcheck

import (
	"testing"

	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/sim"
)

// TestFenceRace: on coherent x86 (no stale bytes to confuse the
// finding), an access to a buffer while a fence of its reservation
// object that the access must wait for is pending is a race naming both
// parties, the fence's creation as origin; the same access after the
// signal, by the fence's own device, or against a fence the access need
// not wait for, is not.
func TestFenceRace(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fence is the pending fence's timeline and usage.
		timeline string
		usage    dmabuf.Usage
		// access is who touches the buffer: a device's read or write,
		// or the CPU's read.
		access string
		signal bool // the fence signals before the access
		want   int
	}{
		{"reader before the writer's fence", "nic0", dmabuf.UsageWrite, "nic1 read", false, 1},
		{"reader after the writer's fence", "nic0", dmabuf.UsageWrite, "nic1 read", true, 0},
		{"writer before a reader's fence", "nic1", dmabuf.UsageRead, "nic0 write", false, 1},
		{"writer after the readers' fence", "nic1", dmabuf.UsageRead, "nic0 write", true, 0},
		{"reader before a kernel fence", "ttm", dmabuf.UsageKernel, "nic1 read", false, 1},
		{"CPU reader before the writer's fence", "nic0", dmabuf.UsageWrite, "cpu read", false, 1},
		{"CPU reader after the writer's fence", "nic0", dmabuf.UsageWrite, "cpu read", true, 0},
		{"reader and another reader", "nic0", dmabuf.UsageRead, "nic1 read", false, 0},
		{"the producer's own write", "nic0", dmabuf.UsageWrite, "nic0 write", false, 0},
		{"the producer's own write, a timeline of its own", "nic0-rx", dmabuf.UsageWrite, "nic0 write", false, 0},
		{"another device's timeline with a longer name", "nic01", dmabuf.UsageWrite, "nic0 write", false, 1},
		{"a bookkeeping fence", "nic0", dmabuf.UsageBookkeep, "nic1 write", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "2s-4gpu-pcie", false)
			app := r.proc("app")
			nic0, nic1 := r.dev("nic0"), r.dev("nic1")
			r.run1(func(p *sim.Proc) {
				_, b := r.alloc(p, app)
				_, at0 := r.attachMap(p, b, nic0)
				_, at1 := r.attachMap(p, b, nic1)
				va, err := b.Vmap(p)
				must(t, err)
				f := r.l.NewFence("nic", tc.timeline, r.l.ContextAlloc(1), 1)
				b.Resv().AddFence(p, f, tc.usage)
				if tc.signal {
					must(t, f.Signal(nil))
				}
				switch tc.access {
				case "nic1 read":
					_, err = nic1.Read(at1, 4096)
				case "nic1 write":
					_, err = nic1.Write(at1, 4096)
				case "nic0 write":
					_, err = nic0.Write(at0, 4096)
				case "cpu read":
					r.mem.Read(p, 0, va, 4096)
				}
				must(t, err)
				if !tc.signal {
					must(t, f.Signal(nil))
				}
			})
			if tc.want == 0 {
				r.clean()
				return
			}
			who := tc.access[:4]
			if who == "cpu " {
				who = "CPU (drv)"
			}
			r.expect(FenceRace, tc.want, who, "nic:"+tc.timeline, "dmabuf:1", "racing with the work of "+tc.timeline, "made by dma_fence_init(nic:"+tc.timeline)
		})
	}
}

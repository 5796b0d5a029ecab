package spdk_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/nvme"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/spdk"
)

// rig is nvme0 of 2s-4gpu-pcie reached directly (its registers, and a
// coherent DMA region as the driver's memory): the driver without VFIO.
type rig struct {
	m *machine.Machine
	c *nvme.Controller
}

func newRig(t testing.TB) *rig {
	t.Helper()
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	c, err := nvme.New(m, m.Mem, x, "nvme0", nvme.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{m: m, c: c}
}

func (r *rig) memory(t *testing.T, p *sim.Proc, size uint64) *spdk.Memory {
	t.Helper()
	va, addr, err := r.c.DMA().AllocCoherent(p, size)
	if err != nil {
		t.Fatal(err)
	}
	return &spdk.Memory{Mem: r.m.Mem, Node: r.c.Node(), VA: va, IOVA: addr, Size: size}
}

func (r *rig) run(t *testing.T, body func(p *sim.Proc)) {
	t.Helper()
	r.m.Engine.Spawn("spdk", body)
	r.m.Engine.Run()
	if b := r.m.Engine.Blocked(); len(b) > 0 {
		t.Errorf("blocked: %v", b)
	}
}

func pattern(n int, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13 + i>>11 + seed*29)
	}
	return b
}

// TestWriteReadBack brings the controller up, writes buffers of one
// page, two pages and a PRP list's worth, reads them back into other
// buffers and compares the bytes.
func TestWriteReadBack(t *testing.T) {
	r := newRig(t)
	r.run(t, func(p *sim.Proc) {
		dm := r.memory(t, p, 4<<20)
		c, err := spdk.Probe(p, r.c.BARs()[0].Regs, dm, spdk.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Blocks() == 0 || c.BlockSize() != 512 && c.BlockSize() != 4096 {
			t.Fatalf("namespace of %d blocks of %d bytes", c.Blocks(), c.BlockSize())
		}
		if c.MaxTransfer() != 128<<10 {
			t.Errorf("MDTS gives %d bytes, want the controller's default 128 KiB", c.MaxTransfer())
		}
		q, err := c.AllocIOQPair(p, 64, -1)
		if err != nil {
			t.Fatal(err)
		}
		bs := c.BlockSize()
		for i, size := range []uint64{bs, 8192, 128 << 10} {
			src, _ := dm.Alloc(size, 4096)
			dst, _ := dm.Alloc(size, 4096)
			want := pattern(int(size), i)
			if err := dm.Write(p, src, 0, want); err != nil {
				t.Fatal(err)
			}
			lba := uint64(i) * 1024
			var st []nvme.Status
			cb := func(e nvme.Completion) { st = append(st, e.Status) }
			if err := q.Write(p, lba, int(size/bs), src, cb); err != nil {
				t.Fatal(err)
			}
			for len(st) < 1 {
				if q.Process(p, 0) == 0 {
					p.Sleep(sim.Microsecond)
				}
			}
			if err := q.Read(p, lba, int(size/bs), dst, cb); err != nil {
				t.Fatal(err)
			}
			for len(st) < 2 {
				if q.Process(p, 0) == 0 {
					p.Sleep(sim.Microsecond)
				}
			}
			for _, s := range st {
				if !s.OK() {
					t.Errorf("%d bytes: %v", size, s)
				}
			}
			got, _ := dm.Read(p, dst, 0, size)
			if !bytes.Equal(got, want) {
				t.Errorf("%d bytes: read back differs", size)
			}
		}
		if err := c.Shutdown(p); err != nil {
			t.Error(err)
		}
	})
}

// TestDepth keeps 32 reads of 128 KiB in flight: the rate is the
// drive's (its Gen4 x4 link and 7 GB/s media), far above what one
// command at a time gives.
func TestDepth(t *testing.T) {
	rate := func(depth int) float64 {
		r := newRig(t)
		var gbps float64
		r.run(t, func(p *sim.Proc) {
			dm := r.memory(t, p, 8<<20)
			c, err := spdk.Probe(p, r.c.BARs()[0].Regs, dm, spdk.Options{})
			if err != nil {
				t.Fatal(err)
			}
			q, err := c.AllocIOQPair(p, 128, -1)
			if err != nil {
				t.Fatal(err)
			}
			const size, total = 128 << 10, 256
			bufs := make([]spdk.Buf, depth)
			for i := range bufs {
				bufs[i], _ = dm.Alloc(size, 4096)
			}
			nlb := int(size / c.BlockSize())
			issued, done := 0, 0
			start := p.Now()
			for done < total {
				for issued < total && q.Outstanding() < depth {
					b := bufs[issued%depth]
					if err := q.Read(p, uint64(issued*nlb), nlb, b, func(nvme.Completion) { done++ }); err != nil {
						t.Fatal(err)
					}
					issued++
				}
				if q.Process(p, 0) == 0 {
					p.Sleep(sim.Microsecond)
				}
			}
			gbps = float64(total*size) / (p.Now() - start).Seconds() / 1e9
		})
		return gbps
	}
	one, deep := rate(1), rate(32)
	t.Logf("queue depth 1: %.2f GB/s, 32: %.2f GB/s", one, deep)
	if deep < 5 || deep > 7.1 {
		t.Errorf("queue depth 32: %.2f GB/s, want between 5 and the 7 GB/s media rate", deep)
	}
	if one > deep/4 {
		t.Errorf("queue depth 1: %.2f GB/s against %.2f at 32: latency should bound it", one, deep)
	}
}

// TestErrors: a transfer above MDTS, a full queue pair, a region too
// small, and a command whose PRP points where nothing is mapped for the
// device (no IOMMU: past the end of memory) completing with an error.
func TestErrors(t *testing.T) {
	r := newRig(t)
	r.run(t, func(p *sim.Proc) {
		dm := r.memory(t, p, 1<<20)
		c, err := spdk.Probe(p, r.c.BARs()[0].Regs, dm, spdk.Options{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := c.AllocIOQPair(p, 4, -1)
		if err != nil {
			t.Fatal(err)
		}
		big, _ := dm.Alloc(256<<10, 4096)
		if err := q.Read(p, 0, int(256<<10/c.BlockSize()), big, nil); !errors.Is(err, mem.ErrInvalid) {
			t.Errorf("read above MDTS: %v, want EINVAL", err)
		}
		small, _ := dm.Alloc(4096, 4096)
		for i := range 3 {
			if err := q.Read(p, uint64(i*8), 1, small, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Read(p, 0, 1, small, nil); !errors.Is(err, spdk.ErrQueueFull) {
			t.Errorf("fourth read on a 4-entry queue: %v, want ErrQueueFull", err)
		}
		if _, err := dm.Alloc(2<<20, 4096); !errors.Is(err, spdk.ErrNoMemory) {
			t.Errorf("alloc beyond the region: %v", err)
		}
		for q.Outstanding() > 0 {
			if q.Process(p, 0) == 0 {
				p.Sleep(sim.Microsecond)
			}
		}
		var st nvme.Status
		cmd := nvme.Command{Opcode: nvme.CmdRead, NSID: 1, PRP1: 1 << 60}
		if err := q.Submit(p, cmd, func(e nvme.Completion) { st = e.Status }); err != nil {
			t.Fatal(err)
		}
		for q.Outstanding() > 0 {
			if q.Process(p, 0) == 0 {
				p.Sleep(sim.Microsecond)
			}
		}
		if st != nvme.StatusDataTransferError {
			t.Errorf("read into a bus address that is not memory: %v, want Data Transfer Error", st)
		}
		if q.Stats().Errors != 1 {
			t.Errorf("stats %+v: want one error", q.Stats())
		}
	})
}

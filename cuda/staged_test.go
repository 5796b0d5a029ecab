package cuda_test

import (
	"github.com/dmalab/dmalab/dma"
	"math"
	"testing"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/scenario"
	"github.com/dmalab/dmalab/sim"
)

// TestStagedCopyMatchesTransfers: StagedCopy is the pipeline of the
// transfers scenario's pageable path, moved here: with the scenario's
// arguments (memcpy on the GPU's node, the buffer's node as the DMA's
// end, the GPU's CopyOverhead once) it takes the scenario's time, in
// both directions and both at once.
func TestStagedCopyMatchesTransfers(t *testing.T) {
	const size = 64 << 20
	s, err := scenario.Lookup("transfers")
	if err != nil {
		t.Fatal(err)
	}
	out, err := scenario.Run(s, scenario.Options{Platform: "h200-pcie", Sets: []string{"paths=pageable", "sizes=64MiB"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]float64{}
	for _, r := range out.Result.Results {
		rows[r.Direction] = r.Seconds
	}
	for _, dir := range []string{"h2d", "d2h", "bidir"} {
		spec, err := platform.Preset("h200-pcie")
		if err != nil {
			t.Fatal(err)
		}
		m, err := machine.New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		g := m.GPUs[0]
		host, err := m.HostMemory(g.Node)
		if err != nil {
			t.Fatal(err)
		}
		gd := gpuDMA(t, m)
		var took sim.Time
		m.Engine.Spawn("copy", func(p *sim.Proc) {
			legs := []bool{dir == "h2d"}
			if dir == "bidir" {
				legs = []bool{true, false}
			}
			var kids []*sim.Proc
			for _, toDevice := range legs {
				kids = append(kids, p.Spawn("leg", func(q *sim.Proc) {
					err := cuda.StagedCopy(q, m, cuda.Staging{
						Name: "pageable", GPU: g, DMA: gd, Host: host, Node: g.Node, ToDevice: toDevice,
						Bytes: size, Overhead: g.Spec.CopyOverhead.V, Completion: g.Spec.CopyCompletion.V,
					})
					if err != nil {
						t.Error(err)
					}
				}))
			}
			for _, k := range kids {
				p.Join(k)
			}
			took = p.Now()
		})
		m.Engine.Run()
		m.Close()
		want, ok := rows[dir]
		if !ok {
			t.Fatalf("no %s row in %+v", dir, out.Result.Results)
		}
		if got := took.Seconds(); math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: StagedCopy %.9f s, transfers %.9f s", dir, got, want)
		}
	}
}

// TestStagedCopyOutAtStreamRate: a device-to-host staged copy's CPU
// stage copies out of a cache-resident staging buffer at the node's
// stream rate, a host-to-device one copies in at the memcpy rate; each
// direction's time follows its own rate and not the other's.
func TestStagedCopyOutAtStreamRate(t *testing.T) {
	const size = 256 << 20
	took := func(toDevice bool, memcpy, stream float64) sim.Time {
		spec, err := platform.Preset("h200-pcie")
		if err != nil {
			t.Fatal(err)
		}
		spec.Nodes[0].MemcpyRate.V = platform.Rate(memcpy)
		spec.Nodes[0].StreamRate = platform.Param[platform.Rate]{V: platform.Rate(stream)}
		if stream == 0 {
			spec.Nodes[0].StreamRate = platform.Param[platform.Rate]{}
		}
		m, err := machine.New(spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		g := m.GPUs[0]
		host, _ := m.HostMemory(g.Node)
		gd := gpuDMA(t, m)
		var d sim.Time
		m.Engine.Spawn("copy", func(p *sim.Proc) {
			t0 := p.Now()
			if err := cuda.StagedCopy(p, m, cuda.Staging{Name: "pageable", GPU: g, DMA: gd, Host: host, Node: g.Node,
				ToDevice: toDevice, Bytes: size}); err != nil {
				t.Error(err)
			}
			d = p.Now() - t0
		})
		m.Engine.Run()
		return d
	}
	rate := func(d sim.Time) float64 { return size / d.Seconds() / 1e9 }
	// d2h: the copy-out at 20 GB/s, whatever the memcpy rate.
	if a, b := took(false, 10e9, 20e9), took(false, 5e9, 20e9); a != b || math.Abs(rate(a)-20)/20 > 0.02 {
		t.Errorf("d2h at stream rate 20 GB/s: %.2f and %.2f GB/s with memcpy 10 and 5 GB/s, want both ~20", rate(a), rate(b))
	}
	// h2d: the copy-in at 10 GB/s, whatever the stream rate.
	if a, b := took(true, 10e9, 20e9), took(true, 10e9, 40e9); a != b || math.Abs(rate(a)-10)/10 > 0.02 {
		t.Errorf("h2d at memcpy rate 10 GB/s: %.2f and %.2f GB/s with stream 20 and 40 GB/s, want both ~10", rate(a), rate(b))
	}
	// Unset, the stream rate is the memcpy rate.
	if a, b := took(false, 10e9, 0), took(false, 10e9, 10e9); a != b {
		t.Errorf("d2h with the stream rate unset took %v, with it equal to the memcpy rate %v", a, b)
	}
}

// gpuDMA is the machine's first GPU as a device of a new DMA layer.
func gpuDMA(t *testing.T, m *machine.Machine) *dma.Device {
	t.Helper()
	x, err := dma.New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	d, err := x.Device(m.GPUs[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStagedCopyReturnsOnceStaged: to the device the call returns once
// its data is staged, before its DMA lands and without the completion
// wait (CUDA's API synchronization behavior); from the device it
// returns after the last byte landed and pays one completion wait per
// chunk, the first included in its overhead.
func TestStagedCopyReturnsOnceStaged(t *testing.T) {
	const (
		overhead   = 6 * sim.Microsecond
		completion = 1 * sim.Microsecond
		chunk      = 2 << 20
	)
	for _, c := range []struct {
		name     string
		toDevice bool
		bytes    int64
	}{
		{"h2d 8 B", true, 8},
		{"h2d 3 chunks", true, 3 * chunk},
		{"d2h 8 B", false, 8},
		{"d2h 3 chunks", false, 3 * chunk},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(completion sim.Time) (ret, landed sim.Time) {
				spec, err := platform.Preset("h200-pcie")
				if err != nil {
					t.Fatal(err)
				}
				m, err := machine.New(spec, 1)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				g := m.GPUs[0]
				host, _ := m.HostMemory(g.Node)
				gd := gpuDMA(t, m)
				m.Engine.Spawn("copy", func(p *sim.Proc) {
					done := p.Engine().NewCompletion()
					var dmaErr error
					if err := cuda.StagedCopy(p, m, cuda.Staging{Name: "pageable", GPU: g, DMA: gd, Host: host, Node: g.Node,
						ToDevice: c.toDevice, Bytes: c.bytes, Chunk: chunk, Overhead: overhead, Completion: completion,
						Landed: done, LandedErr: &dmaErr}); err != nil {
						t.Error(err)
					}
					ret = p.Now()
					p.Wait(done)
					landed = done.At()
					if dmaErr != nil {
						t.Error(dmaErr)
					}
				})
				m.Engine.Run()
				return ret, landed
			}
			ret, landed := run(completion)
			ret0, _ := run(0)
			if c.toDevice {
				if ret >= landed {
					t.Errorf("returned at %v, landed at %v: want the return first", ret, landed)
				}
				if ret0-ret != completion {
					t.Errorf("return %v with the completion, %v without: want the completion less", ret, ret0)
				}
				return
			}
			if ret != landed {
				t.Errorf("returned at %v, landed at %v: want both at once", ret, landed)
			}
			chunks := (c.bytes + chunk - 1) / chunk
			if want := sim.Time(chunks-1) * completion; ret-ret0 != want {
				t.Errorf("%d chunks: %v with the completion, %v without: want %v more (a wait per chunk after the first)", chunks, ret, ret0, want)
			}
		})
	}
}

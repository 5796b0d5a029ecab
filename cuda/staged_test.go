package cuda_test

import (
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
						Name: "pageable", GPU: g, Host: host, Node: g.Node, ToDevice: toDevice,
						Bytes: size, Overhead: g.Spec.CopyOverhead.V,
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

package nic

import (
	"reflect"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
)

// TestReuseChangesNothing: with nothing observing, the wire's flows and
// the engine's transfers are given back and reused (Fabric.Release,
// dma.Transfer.Transient); with hooks on the fabric and the DMA layer
// nothing is. Both runs give the same result and the same number of
// events, in both directions, with and without payload.
func TestReuseChangesNothing(t *testing.T) {
	run := func(payload, hooked bool) (Result, uint64) {
		m, err := machine.NewWithOptions(platformFor(t, "2s-4gpu-pcie/noncoherent"), 1, machine.Options{Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		d, err := dma.New(m, m.Mem)
		if err != nil {
			t.Fatal(err)
		}
		if hooked {
			m.Fabric.Hooks.Hook(func(*fabric.Event) {})
			d.Hooks.Hook(func(*dma.Event) {})
		}
		r, err := Run(m, m.Mem, d, Options{Dir: Both, Packets: 300, Ring: 32})
		if err != nil {
			t.Fatal(err)
		}
		return r, m.Engine.Fired()
	}
	for _, payload := range []bool{false, true} {
		a, na := run(payload, false)
		b, nb := run(payload, true)
		if !reflect.DeepEqual(a, b) || na != nb {
			t.Errorf("payload %v: reused and observed runs differ:\n%+v (%d events)\n%+v (%d events)", payload, a, na, b, nb)
		}
	}
}

package dmaengine_test

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestPhasesReused: a channel's data phases are shared by its entries,
// at most Inflight of them made, each given back when its data has
// landed; with several under way at once on a ring of 8 that wraps many
// times, every entry still moves its own bytes, both ways (the device
// reading packets, the device writing them).
func TestPhasesReused(t *testing.T) {
	const entries, n, size, inflight = 8, 40, 1024, 3
	for _, kind := range []dmaengine.Kind{dmaengine.MemToDev, dmaengine.DevToMem} {
		r := newRig(t, "2s-4gpu-pcie", "nic0", true)
		var got [][]byte
		r.run(t, func(p *sim.Proc) {
			ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: kind, Entries: entries, Inflight: inflight,
				OnData: func(_ dmaengine.Completed, b []byte) { got = append(got, bytes.Clone(b)) }})
			if err != nil {
				t.Fatal(err)
			}
			dir := dma.ToDevice
			if kind == dmaengine.DevToMem {
				dir = dma.FromDevice
			}
			buf := r.mapBuffer(t, p, size*n, dir, pattern(size*n, 5))
			if kind == dmaengine.DevToMem {
				// The device's packets, all waiting before the driver
				// posts buffers, so that several land at once.
				for i := range n {
					if !ch.Deliver(size, p.Now(), pattern(size*n, 5)[i*size:(i+1)*size]) {
						t.Fatalf("packet %d not taken", i)
					}
				}
			}
			for i := range n {
				ch.WaitSpace(p, dmaengine.Polling, func(dmaengine.Completed) {})
				d := dmaengine.Descriptor{Len: size}
				if kind == dmaengine.MemToDev {
					d.Src = buf.addr + mem.DMAAddr(i*size)
				} else {
					d.Dst = buf.addr + mem.DMAAddr(i*size)
				}
				if _, err := ch.Submit(p, d); err != nil {
					t.Fatal(err)
				}
				ch.IssuePending(p)
			}
			ch.Poll(p, n, func(dmaengine.Completed) {})
			if made, free := dmaengine.Phases(ch); made < 2 || made > inflight || free != made {
				t.Errorf("%v: %d phases made, %d free at the end; want 2 to %d, all free", kind, made, free, inflight)
			}
			if b := r.unmap(t, p, buf); kind == dmaengine.DevToMem {
				got = [][]byte{b}
			}
			if err := ch.Close(p); err != nil {
				t.Error(err)
			}
		})
		if all := bytes.Join(got, nil); !bytes.Equal(all, pattern(size*n, 5)) {
			t.Errorf("%v: the bytes moved differ from the packets' (%d B)", kind, len(all))
		}
	}
}

package dmaengine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestReapInPlace: ReapInPlace hands its callback the records Reap
// hands its own, in the same order and at the same times, on a small
// ring that random batches fill and random budgets drain, the callback
// submitting the next descriptor itself (on a full ring, into the very
// entry it was handed) after it has read the record.
func TestReapInPlace(t *testing.T) {
	run := func(inPlace bool) []string {
		r := newRig(t, "zynq-7000", "axidma0", false)
		rng := rand.New(rand.NewPCG(5, 6))
		const entries, n, size = 8, 600, 256
		var got []string
		r.run(t, func(p *sim.Proc) {
			ch, err := r.ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem, Entries: entries, Fetch: 3})
			if err != nil {
				t.Fatal(err)
			}
			s := r.mapBuffer(t, p, size*n, dma.ToDevice, nil)
			d := r.mapBuffer(t, p, size*n, dma.FromDevice, nil)
			submitted := 0
			submit := func() {
				if submitted == n || ch.Space() == 0 {
					return
				}
				off := mem.DMAAddr(submitted * size)
				if _, err := ch.Submit(p, dmaengine.Descriptor{Src: s.addr + off, Dst: d.addr + off, Len: uint64(1 + rng.IntN(size))}); err != nil {
					t.Fatal(err)
				}
				submitted++
			}
			record := func(c dmaengine.Completed) {
				got = append(got, fmt.Sprintf("%+v", c))
				if rng.IntN(2) == 0 {
					submit()
				}
			}
			for len(got) < n {
				for range rng.IntN(entries + 1) {
					submit()
				}
				ch.IssuePending(p)
				p.Sleep(sim.Time(rng.IntN(3000)) * sim.Nanosecond)
				max := rng.IntN(4)
				if inPlace {
					ch.ReapInPlace(p, max, func(c *dmaengine.Completed) { record(*c) })
				} else {
					ch.Reap(p, max, record)
				}
			}
			ch.Poll(p, n, nil)
			r.unmap(t, p, s)
			r.unmap(t, p, d)
			if err := ch.Close(p); err != nil {
				t.Error(err)
			}
		})
		return got
	}
	plain, inPlace := run(false), run(true)
	if len(plain) != len(inPlace) {
		t.Fatalf("%d reaped by Reap, %d by ReapInPlace", len(plain), len(inPlace))
	}
	for i := range plain {
		if plain[i] != inPlace[i] {
			t.Fatalf("reap %d: Reap %s, ReapInPlace %s", i, plain[i], inPlace[i])
		}
	}
}

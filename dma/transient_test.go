package dma

import (
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestTransientReused: a chain of transient transfers (each started by
// the previous one's done) reuses its transfer states and flows when
// nothing observes the DMA layer, and gives the same results as the same
// chain made of ordinary transfers; with a hook attached nothing is
// reused. Through a translator whose walks outlast the wire, the delayed
// steps (move, land) run from reused states too.
func TestTransientReused(t *testing.T) {
	const n = 6
	run := func(tr Translator, transient, hooked bool) (infos []string, states int) {
		m, x, g := xferRig(t, false)
		g.SetTranslator(tr)
		if hooked {
			x.Hooks.Hook(func(*Event) {})
		}
		gpu := m.GPUs[0]
		host, _ := m.HostMemory(0)
		src, err := m.Mem.Kmalloc(0, 4*mem.PageSize)
		if err != nil {
			t.Fatal(err)
		}
		spa, _ := m.Mem.VirtToPhys(src)
		seen := map[*TransferInfo]bool{}
		var next func(i int)
		next = func(i int) {
			size := uint64(i+1) * 1000
			tr := &Transfer{Name: "h2d", Master: gpu.CopyEngine(machine.HostToDevice).Master, Src: host, Dst: gpu.Memory(),
				Bytes: int64(size), Read: []Span{BusSpan(mem.DMAAddr(spa), size)}, Transient: transient}
			if _, err := g.StartTransfer(tr, func(i2 *TransferInfo) {
				if !seen[i2] {
					seen[i2] = true
					states++
				}
				info := *i2
				// Compared as text: the flow may be reused, and the
				// route's links and the endpoints are each run's
				// machine's.
				info.Flow = nil
				infos = append(infos, fmt.Sprintf("%+v", info))
				if i+1 < n {
					next(i + 1)
				}
			}); err != nil {
				t.Fatal(err)
			}
		}
		m.Engine.Spawn("start", func(*sim.Proc) { next(0) })
		m.Engine.Run()
		return infos, states
	}
	for _, tr := range []Translator{Direct{}, pageTranslator{walk: 2 * sim.Microsecond, ways: 1}} {
		plain, ps := run(tr, false, false)
		reused, rs := run(tr, true, false)
		hooked, hs := run(tr, true, true)
		if len(plain) != n || len(reused) != n || len(hooked) != n {
			t.Fatalf("%s: %d, %d and %d transfers done, want %d each", tr.Name(), len(plain), len(reused), len(hooked), n)
		}
		// Two states take turns: a done starts the next transfer before
		// its own state is given back.
		if ps != n || hs != n || rs != 2 {
			t.Errorf("%s: %d, %d and %d transfer states for ordinary, transient and observed transient transfers; want %d, 2, %d", tr.Name(), ps, rs, hs, n, n)
		}
		for i := range plain {
			if plain[i] != reused[i] || plain[i] != hooked[i] {
				t.Errorf("%s: transfer %d differs:\nordinary  %s\ntransient %s\nobserved  %s", tr.Name(), i, plain[i], reused[i], hooked[i])
			}
		}
	}
}

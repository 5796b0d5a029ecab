package dma

import (
	"fmt"
	"testing"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// infoText is a transfer's info as text for comparing runs: without the
// flow, which may be reused, with the route's links and the endpoints
// printed as each run's machine's.
func infoText(i *TransferInfo) string {
	info := *i
	info.Flow = nil
	return fmt.Sprintf("%+v", info)
}

// transientChain runs n transfers, each started by the previous one's
// done, transient or not, with a hook on Hooks (hooked) and on Transfers
// (counted) or not. It returns each done's info, the transfer states
// used, and the infos the Transfers hook got.
func transientChain(t *testing.T, n int, tr Translator, transient, hooked, counted bool) (infos []string, states int, told []string) {
	m, x, g := xferRig(t, false)
	g.SetTranslator(tr)
	if hooked {
		x.Hooks.Hook(func(*Event) {})
	}
	if counted {
		x.Transfers.Hook(func(i *TransferInfo) { told = append(told, infoText(i)) })
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
			infos = append(infos, infoText(i2))
			if i+1 < n {
				next(i + 1)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	m.Engine.Spawn("start", func(*sim.Proc) { next(0) })
	m.Engine.Run()
	return infos, states, told
}

// TestTransientReused: a chain of transient transfers (each started by
// the previous one's done) reuses its transfer states and flows when
// nothing observes the DMA layer, and gives the same results as the same
// chain made of ordinary transfers; with a hook attached nothing is
// reused. Through a translator whose walks outlast the wire, the delayed
// steps (move, land) run from reused states too.
func TestTransientReused(t *testing.T) {
	const n = 6
	for _, tr := range []Translator{Direct{}, pageTranslator{walk: 2 * sim.Microsecond, ways: 1}} {
		plain, ps, _ := transientChain(t, n, tr, false, false, false)
		reused, rs, _ := transientChain(t, n, tr, true, false, false)
		hooked, hs, _ := transientChain(t, n, tr, true, true, false)
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

// TestTransfersHook: a hook on Transfers gets every transfer's info, the
// one done gets, and leaves transient transfers reused, as a hook on
// Hooks does not; with both, Transfers gets what the OpTransfer events
// carry. A blocking transfer's info reaches it as Transfer returns it.
func TestTransfersHook(t *testing.T) {
	const n = 6
	tr := pageTranslator{walk: 2 * sim.Microsecond, ways: 1}
	infos, states, told := transientChain(t, n, tr, true, false, true)
	if states != 2 {
		t.Errorf("%d transfer states with a Transfers hook, want 2 (reused)", states)
	}
	if fmt.Sprint(told) != fmt.Sprint(infos) {
		t.Errorf("the Transfers hook got\n%v\nwant what done got\n%v", told, infos)
	}
	_, states, both := transientChain(t, n, tr, true, true, true)
	if states != n || fmt.Sprint(both) != fmt.Sprint(infos) {
		t.Errorf("with both hooks: %d states (want %d) and the Transfers hook got\n%v\nwant\n%v", states, n, both, infos)
	}

	m, x, g := xferRig(t, false)
	var got, events []string
	x.Transfers.Hook(func(i *TransferInfo) { got = append(got, infoText(i)) })
	x.Hooks.Hook(func(e *Event) {
		if e.Op == OpTransfer {
			events = append(events, infoText(e.Transfer))
		}
	})
	gpu := m.GPUs[0]
	host, _ := m.HostMemory(0)
	var want []string
	m.Engine.Spawn("app", func(p *sim.Proc) {
		for i := range 3 {
			info, err := g.Transfer(p, &Transfer{Name: "c", Engine: gpu.CopyEngine(machine.HostToDevice), Src: host, Dst: gpu.Memory(), Bytes: int64(i+1) << 20})
			if err != nil {
				t.Error(err)
			}
			want = append(want, infoText(&info))
		}
	})
	m.Engine.Run()
	if len(want) != 3 || fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("blocking transfers returned\n%v\nthe Transfers hook got\n%v\nthe events carried\n%v", want, got, events)
	}
}

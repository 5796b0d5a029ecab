package dma

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestShortWayMatchesStart: StartPosted and StartRead, which take the
// short way when they can (short), do what StartTransfer does for the
// same transfers, the reference: the same memory accesses (every device
// read and write, its time, range and versions), the same flows (every
// fabric event, with its time and rate), done at the same times with the
// same bytes read and read errors, the same events for a hook added
// while transfers are under way, and the same memory in the end. The
// draws are transfers of one span read or written (the short way's), and
// of others it must leave to start: two spans, both sides, Local spans,
// spans beyond RAM or the device's mask, a translator that is not
// Direct, no Route, not Transient; with reads that wait for their lead
// and writes that do not, with and without payload bytes, a few under
// way at once, some made again on the same Transfer.
func TestShortWayMatchesStart(t *testing.T) {
	for _, c := range []struct {
		payload, fabricHook, peers bool
	}{{true, true, false}, {true, false, false}, {false, true, false}, {false, false, false}, {true, false, true}, {false, true, true}} {
		t.Run(fmt.Sprintf("payload=%v,fabricHook=%v,peers=%v", c.payload, c.fabricHook, c.peers), func(t *testing.T) {
			seed := uint64(31)
			if c.payload {
				seed++
			}
			ref, refShort := shortRun(t, seed, c.payload, c.fabricHook, c.peers, false)
			got, short := shortRun(t, seed, c.payload, c.fabricHook, c.peers, true)
			if refShort != 0 {
				t.Fatalf("the reference took the short way %d times", refShort)
			}
			if len(ref) != len(got) {
				t.Fatalf("%d records with the short way, %d with start", len(got), len(ref))
			}
			for i := range ref {
				if ref[i] != got[i] {
					t.Fatalf("record %d of %d:\nshort way %s\nstart     %s", i, len(ref), got[i], ref[i])
				}
			}
			t.Logf("%d records, %d transfers the short way", len(ref), short)
			if short < 1000 {
				t.Fatalf("only %d transfers took the short way", short)
			}
		})
	}
}

// shortRun makes the draws of seed on a machine of its own, each through
// StartPosted or StartRead (short) or through StartTransfer, and returns
// what it recorded, and how many transfers took the short way. With
// peers the layer has a peer window, as every machine with a GPU has
// its BAR1s, over the draws' addresses that are no RAM, with VRAM
// behind it.
func shortRun(t *testing.T, seed uint64, payload, fabricHook, peers, short bool) ([]string, int) {
	m, x, g := xferRig(t, payload)
	gpu := m.GPUs[0]
	host, _ := m.HostMemory(0)
	const size = 1 << 20
	buf, err := m.Mem.Kmalloc(0, size)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := m.Mem.VirtToPhys(buf)
	toGPU, err := m.DMARoute(host, gpu.Memory(), gpu.CE())
	if err != nil {
		t.Fatal(err)
	}
	toHost, err := m.DMARoute(gpu.Memory(), host, gpu.CE())
	if err != nil {
		t.Fatal(err)
	}
	vram, _, ok := m.Mem.DeviceRange(gpu.Name)
	if !ok {
		t.Fatal("no VRAM")
	}
	if peers {
		x.AddPeerMemory(testWindow{lo: pa + 1<<50, size: size, to: vram, ep: gpu.Memory()})
	}
	var rec []string
	add := func(format string, a ...any) { rec = append(rec, fmt.Sprintf(format, a...)) }
	m.Mem.Hooks.Hook(func(a *mem.Access) {
		add("mem %v %v %s %v %#x+%d stale=%v %v %v", a.Time, a.Kind, a.Proc, a.Node, a.Phys, a.Size, a.Stale, a.Got, a.Want)
	})
	if fabricHook {
		m.Fabric.Hooks.Hook(func(e *fabric.Event) { add("fabric %s tag=%v cap=%g", e, e.Flow.Tag(), e.Flow.MaxRate()) })
	}
	const off = 1 << 40
	slow := slowTranslator{off: off, walk: 300 * sim.Nanosecond, fault: ^mem.DMAAddr(0)}
	rng := rand.New(rand.NewPCG(seed, 7))
	// Transfers made again and again, as a DMA engine's phases are: a
	// draw may take one that is not under way.
	type kept struct {
		t    Transfer
		busy bool
		// hops is a route's hops of the transfer's own, changed in
		// place before each start: such a transfer is never Fixed.
		hops []fabric.Hop
	}
	pool := make([]*kept, 6)
	for i := range pool {
		pool[i] = &kept{}
	}
	if len(toHost.Hops) != len(toGPU.Hops) {
		t.Fatal("routes of different lengths")
	}
	pool[0].hops = make([]fabric.Hop, len(toHost.Hops))
	nShort := 0
	for i := range 4000 {
		// Now and then, a hook on the layer, or on its transfers, added
		// while transfers are under way (in both runs at the same
		// instant): those the short way started report to it when
		// they end.
		if i == 3000 {
			x.Hooks.Hook(func(e *Event) {
				s := fmt.Sprintf("dma %v %v %s %s %d failed=%v warn=%q", e.Time, e.Op, e.Device, e.Call, e.Size, e.Failed, e.Warn)
				if ti := e.Transfer; ti != nil {
					s += fmt.Sprintf(" info %s %v %v %v %v %v %v %v %v %d %x %v %v %v", ti.Name, ti.Call, ti.Start, ti.End, ti.Overhead, ti.Queue, ti.Translate, ti.Move, ti.Route, ti.Bytes, ti.Data, ti.Err, ti.ReadErr, ti.WriteErr)
				}
				add("%s", s)
			})
		}
		if i == 2000 {
			x.Transfers.Hook(func(ti *TransferInfo) {
				add("transfers %s %v %v %v %v %d %v", ti.Name, ti.Call, ti.Start, ti.End, ti.Move, ti.Bytes, ti.Data == nil)
			})
		}
		k := pool[rng.IntN(len(pool))]
		if k.busy {
			k = &kept{}
		}
		tr := &k.t
		n := uint64(1 + rng.IntN(3*int(mem.PageSize)))
		at := func() mem.DMAAddr {
			a := mem.DMAAddr(pa) + mem.DMAAddr(rng.IntN(size-3*int(mem.PageSize)))
			switch rng.IntN(40) {
			case 0:
				a += 1 << 50 // no RAM
			case 1:
				a = MappingErrorAddr - 10 // beyond the mask
			}
			return a
		}
		read := rng.IntN(2) == 0
		// Made again: what the layer keeps with the transfer (its
		// limits, its short way's state) stays, as a DMA engine's
		// phase's does.
		keptLim, keptShort := tr.kept, tr.short
		*tr = Transfer{Name: fmt.Sprintf("x%d", i), Bytes: int64(n), Transient: rng.IntN(10) != 0, Fixed: rng.IntN(8) != 0}
		tr.kept, tr.short = keptLim, keptShort
		switch rng.IntN(8) {
		case 0:
			tr.Opts = []fabric.Option{fabric.Tag(i)}
		case 1:
			tr.Opts = []fabric.Option{fabric.MaxRate(float64(1+rng.IntN(40)) * 1e9)}
		}
		span := BusSpan(at(), n)
		switch rng.IntN(12) {
		case 0:
			span = LocalSpan(vram+mem.PhysAddr(rng.IntN(1<<20)), n)
		case 1:
			span.Pinned = true
		}
		if read {
			tr.Read = []Span{span}
			if rng.IntN(12) == 0 {
				tr.Write = []Span{BusSpan(at(), n)}
			}
		} else {
			tr.Write = []Span{span}
			if rng.IntN(12) == 0 {
				tr.Write = append(tr.Write, BusSpan(at(), n))
			}
			if payload && rng.IntN(4) != 0 {
				tr.Data = make([]byte, n+uint64(rng.IntN(2))-uint64(rng.IntN(2)))
				for j := range tr.Data {
					tr.Data[j] = byte(rng.Uint32())
				}
			}
		}
		if rng.IntN(16) == 0 {
			tr.Bytes = int64(rng.IntN(100))
		}
		switch rng.IntN(16) {
		case 0:
			tr.Src, tr.Dst, tr.Master = host, gpu.Memory(), gpu.CE()
		default:
			// Either route for either side (the route is the flow's
			// path, whatever the spans): their limits differ.
			// Transfers the master loads wait for their request's way
			// out.
			r := toHost
			if rng.IntN(2) == 0 {
				r = toGPU
			}
			if k.hops != nil {
				// Its own hops slice, changed in place.
				copy(k.hops, r.Hops)
				r.Hops = k.hops
				tr.Fixed = false
			}
			tr.Route, tr.Master, tr.Load = &r, gpu.CE(), rng.IntN(2) == 0
		}
		if rng.IntN(20) == 0 {
			g.SetTranslator(slow)
		} else {
			g.SetTranslator(Direct{})
		}
		if _, _, ok := g.shortSpan(tr); ok && tr.Route != nil {
			nShort++
		}
		name := tr.Name
		k.busy = true
		begin := func(j int) {
			var lead sim.Time
			var err error
			switch {
			case !short:
				lead, err = g.StartTransfer(tr, func(ti *TransferInfo) {
					k.busy = false
					if len(tr.Read) > 0 {
						add("done %d %s %v %x %v", j, name, m.Engine.Now(), ti.Data, ti.ReadErr)
					} else {
						add("done %d %s %v", j, name, m.Engine.Now())
					}
				})
			case read:
				lead, err = g.StartRead(tr, func(data []byte, readErr error) {
					k.busy = false
					add("done %d %s %v %x %v", j, name, m.Engine.Now(), data, readErr)
				})
			default:
				lead, err = g.StartPosted(tr, func() {
					k.busy = false
					add("done %d %s %v", j, name, m.Engine.Now())
				})
			}
			add("start %d %s %v %v %v", j, name, m.Engine.Now(), lead, err)
		}
		begin(i)
		if rng.IntN(16) == 0 {
			// The same transfer, unchanged, started again while under
			// way: a state of its own.
			begin(-i)
		}
		if rng.IntN(3) == 0 {
			m.Engine.RunUntil(m.Engine.Now() + sim.Time(rng.IntN(2000))*sim.Nanosecond)
		}
	}
	m.Engine.Run()
	// The memory in the end: its bytes (payload mode) and versions.
	for a := uint64(0); a < size; a += 4096 {
		b := make([]byte, 4096)
		acc, err := g.ReadBytes(mem.DMAAddr(pa)+mem.DMAAddr(a), b)
		add("end %#x %v %v %x", a, err, acc.Got, b)
	}
	if !short {
		nShort = 0
	}
	return rec, nShort
}

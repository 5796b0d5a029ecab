package dma

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// xferRig is h200-pcie with its DMA layer and gpu0 as a bus master.
func xferRig(t *testing.T, payload bool) (*machine.Machine, *DMA, *Device) {
	t.Helper()
	m, x := machineDMA(t, preset(t, "h200-pcie"), payload)
	g, err := x.Device("gpu0")
	if err != nil {
		t.Fatal(err)
	}
	return m, x, g
}

// machineDMA is spec's machine, closed when the test ends, and its DMA
// layer.
func machineDMA(t *testing.T, spec *platform.Spec, payload bool) (*machine.Machine, *DMA) {
	t.Helper()
	m, err := machine.NewWithOptions(spec, 1, machine.Options{Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	x, err := New(m, m.Mem)
	if err != nil {
		t.Fatal(err)
	}
	return m, x
}

// TestTransferQueue: transfers on one engine run one after another in
// submission order, and the second's wait is attributed to queueing; the
// event carries the same split.
func TestTransferQueue(t *testing.T) {
	m, x, g := xferRig(t, false)
	gpu := m.GPUs[0]
	host, _ := m.HostMemory(0)
	var infos []TransferInfo
	x.Hooks.Hook(func(e *Event) {
		if e.Op == OpTransfer {
			infos = append(infos, *e.Transfer)
			if e.Cause != sim.CauseTransfer || e.Component != "dma" || e.Time != e.Transfer.End {
				t.Errorf("transfer event header %+v", e.Header)
			}
		}
	})
	const size = 64 << 20
	for range 2 {
		m.Engine.Spawn("copy", func(p *sim.Proc) {
			_, err := g.Transfer(p, &Transfer{Name: "c", Engine: gpu.CopyEngine(machine.HostToDevice), Src: host, Dst: gpu.Memory(), Bytes: size, Overhead: sim.Microsecond})
			if err != nil {
				t.Error(err)
			}
		})
	}
	m.Engine.Run()
	if len(infos) != 2 {
		t.Fatalf("%d transfers observed", len(infos))
	}
	a, b := infos[0], infos[1]
	if a.Queue != 0 || a.Overhead != sim.Microsecond || a.End-a.Call != a.Overhead+a.Queue+a.Translate+a.Move {
		t.Errorf("first transfer's split %+v does not add up", a)
	}
	if b.Queue != a.Move || b.End != a.End+b.Move {
		t.Errorf("second transfer queued %v (want the first's %v) and ended %v", b.Queue, a.Move, b.End)
	}
	if gpu.CopyEngines[0].Busy != a.Move+b.Move {
		t.Errorf("engine busy %v, want %v", gpu.CopyEngines[0].Busy, a.Move+b.Move)
	}
}

func TestTransferErrors(t *testing.T) {
	m, _, g := xferRig(t, false)
	gpu := m.GPUs[0]
	host, _ := m.HostMemory(0)
	m.Engine.Spawn("bad", func(p *sim.Proc) {
		if _, err := g.Transfer(p, &Transfer{Name: "neg", Engine: gpu.CopyEngines[0], Src: host, Dst: gpu.Memory(), Bytes: -1}); err == nil {
			t.Error("negative size accepted")
		}
		if _, err := g.Transfer(p, &Transfer{Name: "noengine", Src: host, Dst: gpu.Memory(), Bytes: 1}); err == nil {
			t.Error("transfer without an engine or master accepted")
		}
	})
	m.Engine.Run()
	if _, err := g.StartTransfer(&Transfer{Name: "hw", Engine: gpu.CopyEngines[0], Src: host, Dst: gpu.Memory()}, func(*TransferInfo) {}); err == nil {
		t.Error("StartTransfer with an engine accepted")
	}
}

// TestBidirLosesToReadRequests: a copy engine reading host memory while
// another writes it: both directions of the link are busy, and the
// upstream one also carries the reads' requests, so each copy gets
// 1/(1+q) of the link; a write alone gets all of it.
func TestBidirLosesToReadRequests(t *testing.T) {
	m, _, g := xferRig(t, false)
	gpu := m.GPUs[0]
	host, _ := m.HostMemory(0)
	const n = 1 << 30
	var alone, up, down sim.Time
	d2h := func(p *sim.Proc) sim.Time {
		tr, err := g.Transfer(p, &Transfer{Name: "d2h", Engine: gpu.CopyEngine(machine.DeviceToHost), Src: gpu.Memory(), Dst: host, Bytes: n})
		if err != nil {
			t.Error(err)
			return 0
		}
		return tr.Move
	}
	m.Engine.Spawn("alone", func(p *sim.Proc) {
		alone = d2h(p)
		m.Engine.Spawn("h2d", func(p *sim.Proc) {
			tr, err := g.Transfer(p, &Transfer{Name: "h2d", Engine: gpu.CopyEngine(machine.HostToDevice), Src: host, Dst: gpu.Memory(), Bytes: n})
			if err != nil {
				t.Error(err)
				return
			}
			down = tr.Move
		})
		up = d2h(p)
	})
	m.Engine.Run()
	q := machine.ReverseLoad(gpu.Spec.Link, true)
	if want := (8.0/256 + 24.0/4096) * 256 / 280; math.Abs(q-want) > 1e-12 {
		t.Errorf("ReverseLoad %v, want %v", q, want)
	}
	for name, got := range map[string]sim.Time{"d2h beside h2d": up, "h2d beside d2h": down} {
		if ratio := float64(got) / float64(alone); math.Abs(ratio-(1+q)) > 1e-3 {
			t.Errorf("%s took %.4f× the lone copy's time, want 1+q = %.4f", name, ratio, 1+q)
		}
	}
}

// slowTranslator is an IOMMU-shaped translator for the seam: bus
// addresses are physical plus an offset, each access costs a walk, and
// one address faults.
type slowTranslator struct {
	off   mem.DMAAddr
	walk  sim.Time
	fault mem.DMAAddr
}

func (s slowTranslator) Name() string { return "test-iommu" }
func (s slowTranslator) ToBus(pa mem.PhysAddr, size uint64) (mem.DMAAddr, error) {
	return mem.DMAAddr(pa) + s.off, nil
}
func (s slowTranslator) ToPhys(out []mem.PhysRange, a mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, sim.Time, error) {
	if a <= s.fault && s.fault < a+mem.DMAAddr(size) {
		return out, s.walk, errors.New("translation fault")
	}
	return append(out, mem.PhysRange{Start: mem.PhysAddr(a - s.off), Size: size}), s.walk, nil
}

// TestTransferThroughTranslator: bytes a master reads at bus addresses
// go through its Translator: they arrive (payload mode), the walks' cost
// is attributed to translation and delays the data, the access events
// carry the bus address and the physical one, and a faulting address is
// the transfer's error.
func TestTransferThroughTranslator(t *testing.T) {
	m, x, g := xferRig(t, true)
	gpu := m.GPUs[0]
	host, _ := m.HostMemory(0)
	const off = 1 << 40
	g.SetTranslator(slowTranslator{off: off, walk: 500 * sim.Nanosecond, fault: ^mem.DMAAddr(0)})
	src, err := m.Mem.Kmalloc(0, 8192)
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := m.Mem.Kmalloc(0, 8192)
	spa, _ := m.Mem.VirtToPhys(src)
	dpa, _ := m.Mem.VirtToPhys(dst)
	msg := []byte("through the seam")
	var accesses []Event
	x.Hooks.Hook(func(e *Event) {
		if e.Op == OpDeviceAccess {
			accesses = append(accesses, *e)
		}
	})
	var info TransferInfo
	m.Engine.Spawn("copy", func(p *sim.Proc) {
		m.Mem.WriteBytes(p, 0, src, msg)
		sbus, _ := g.Translator().ToBus(spa, 8192)
		dbus, _ := g.Translator().ToBus(dpa, 8192)
		info, err = g.Transfer(p, &Transfer{
			Name: "h2h", Engine: gpu.CopyEngine(machine.DeviceToHost), Src: host, Dst: host, Bytes: int64(len(msg)),
			Read: []Span{BusSpan(sbus, uint64(len(msg)))}, Write: []Span{BusSpan(dbus, uint64(len(msg)))},
		})
	})
	m.Engine.Run()
	if err != nil {
		t.Fatal(err)
	}
	if info.Translate != sim.Microsecond || info.Start-info.Call != info.Translate {
		t.Errorf("translation %v, data started %v after the call; want 1µs both", info.Translate, info.Start-info.Call)
	}
	got := make([]byte, len(msg))
	m.Mem.ReadBytes(nil, 0, dst, got)
	if !bytes.Equal(got, msg) {
		t.Errorf("destination holds %q, want %q", got, msg)
	}
	if len(accesses) != 2 || accesses[0].Addr != mem.DMAAddr(spa)+off || accesses[0].Phys != spa || !accesses[1].Write {
		t.Errorf("access events %+v", accesses)
	}

	g.SetTranslator(slowTranslator{off: off, fault: mem.DMAAddr(dpa) + off})
	m.Engine.Spawn("fault", func(p *sim.Proc) {
		dbus, _ := g.Translator().ToBus(dpa, 8192)
		_, err = g.Transfer(p, &Transfer{
			Name: "w", Engine: gpu.CopyEngine(machine.DeviceToHost), Src: gpu.Memory(), Dst: host, Bytes: 64,
			Write: []Span{BusSpan(dbus, 64)},
		})
	})
	m.Engine.Run()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("translation fault")) {
		t.Errorf("write through a faulting translation: %v", err)
	}
}

// pageTranslator charges a walk per 4 KiB page of an access and serves
// ways of them at once (a Pipeline).
type pageTranslator struct {
	walk sim.Time
	ways int
}

func (s pageTranslator) Name() string { return "test-walkers" }
func (s pageTranslator) ToBus(pa mem.PhysAddr, size uint64) (mem.DMAAddr, error) {
	return mem.DMAAddr(pa), nil
}
func (s pageTranslator) ToPhys(out []mem.PhysRange, a mem.DMAAddr, size uint64, write bool) ([]mem.PhysRange, sim.Time, error) {
	pages := (uint64(a)%mem.PageSize + size + mem.PageSize - 1) / mem.PageSize
	return append(out, mem.PhysRange{Start: mem.PhysAddr(a), Size: size}), sim.Time(pages) * s.walk, nil
}
func (s pageTranslator) Ways() int { return s.ways }

// TestPipelinedTranslation: through a Pipeline translator only the first
// page's walk delays the first byte; the other pages' walks overlap the
// movement, ways at a time, and add time only where they outlast it:
// with enough ways a long copy runs at the wire's rate, with one it is
// bound by the walks, and Translate says how long the bytes waited.
func TestPipelinedTranslation(t *testing.T) {
	const pages, walk = 256, 500 * sim.Nanosecond
	run := func(tr Translator) TransferInfo {
		m, _, g := xferRig(t, false)
		gpu := m.GPUs[0]
		host, _ := m.HostMemory(0)
		g.SetTranslator(tr)
		src, err := m.Mem.Kmalloc(0, pages*mem.PageSize)
		if err != nil {
			t.Fatal(err)
		}
		spa, _ := m.Mem.VirtToPhys(src)
		var info TransferInfo
		m.Engine.Spawn("copy", func(p *sim.Proc) {
			info, err = g.Transfer(p, &Transfer{
				Name: "h2d", Engine: gpu.CopyEngine(machine.HostToDevice), Src: host, Dst: gpu.Memory(), Bytes: pages * mem.PageSize,
				Read: []Span{BusSpan(mem.DMAAddr(spa), pages*mem.PageSize)},
			})
		})
		m.Engine.Run()
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	direct := run(Direct{})
	wide := run(pageTranslator{walk: walk, ways: 64})
	narrow := run(pageTranslator{walk: walk, ways: 1})
	if wide.Start-wide.Call != walk || wide.Translate != walk {
		t.Errorf("64 ways: data began %v after the call, translation %v; want one walk, %v", wide.Start-wide.Call, wide.Translate, walk)
	}
	if got, want := wide.End-wide.Call, direct.End-direct.Call+walk; got != want {
		t.Errorf("64 ways: %v, want the direct copy's %v plus one walk", got, direct.End-direct.Call)
	}
	if got, want := narrow.End-narrow.Call, sim.Time(pages)*walk; got != want {
		t.Errorf("one way: %v, want every walk in turn, %v (the wire is faster)", got, want)
	}
	if narrow.Translate != narrow.End-narrow.Call-narrow.Move {
		t.Errorf("one way: translate %v + move %v != %v", narrow.Translate, narrow.Move, narrow.End-narrow.Call)
	}
}

// TestRouteLimitsKept: the kept limits of a route and master
// (DMA.limits) are the machine's own ReadLimit and CopyRate for every
// draw among more routes, masters and directions than it keeps, routes
// that differ in one hop's weight included, and a route changed in place
// after it was kept is not taken for the one kept.
func TestRouteLimitsKept(t *testing.T) {
	m, x := machineDMA(t, preset(t, "2s-4gpu-pcie"), false)
	var routes []fabric.Route
	var masters []machine.Master
	for _, g := range m.GPUs {
		masters = append(masters, g.CE(), g.SMs())
		for n := range 2 {
			host, err := m.HostMemory(n)
			if err != nil {
				t.Fatal(err)
			}
			for _, pair := range [][2]machine.Endpoint{{host, g.Memory()}, {g.Memory(), host}, {host, host}} {
				r, err := m.DMARoute(pair[0], pair[1], g.CE())
				if err != nil {
					continue
				}
				routes = append(routes, r)
				if len(r.Hops) > 0 {
					w := fabric.Route{Hops: slices.Clone(r.Hops)}
					w.Hops[0].Weight = 2
					routes = append(routes, w)
				}
			}
		}
	}
	masters = append(masters, machine.Master{})
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(r fabric.Route, by machine.Master, read bool) {
		t.Helper()
		var lead sim.Time
		var rate float64
		if read && by != (machine.Master{}) {
			lead, rate = m.ReadLimit(r, by)
		}
		l := x.limits(r, by, read)
		if l.lead != lead || l.read != rate || l.copy != m.CopyRate(r, by) {
			t.Fatalf("kept limits %v %v %v, machine's %v %v %v", l.lead, l.read, l.copy, lead, rate, m.CopyRate(r, by))
		}
	}
	for range 2000 {
		check(routes[rng.IntN(len(routes))], masters[rng.IntN(len(masters))], rng.IntN(2) == 0)
	}
	// Two routes of as many hops with different limits: the first,
	// kept, then overwritten in place with the second.
	for i, a := range routes {
		for _, b := range routes[i+1:] {
			la, lb := x.limits(a, masters[0], true), x.limits(b, masters[0], true)
			if len(a.Hops) != len(b.Hops) || la.lead == lb.lead && la.read == lb.read {
				continue
			}
			x.lims = [len(x.lims)]routeLimits{} // r is the one kept
			r := fabric.Route{Hops: slices.Clone(a.Hops)}
			check(r, masters[0], true)
			copy(r.Hops, b.Hops)
			check(r, masters[0], true)
			return
		}
	}
	t.Fatal("no two routes of as many hops with different limits")
}

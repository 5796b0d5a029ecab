package dma

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// isRAMReference is isRAM as it was before the kept node range: the
// first and the last byte each looked up.
func isRAMReference(m *mem.Memory, pa mem.PhysAddr, size uint64) bool {
	if _, ok := m.NodeOf(pa); !ok {
		return false
	}
	if size <= 1 {
		return true
	}
	end := pa + mem.PhysAddr(size-1)
	if end < pa {
		return false
	}
	_, ok := m.NodeOf(end)
	return ok
}

// TestIsRAMKeptRange: isRAM, which answers from the node range it found
// last, agrees with looking both ends up, on random ranges around every
// node's DRAM and VRAM, their edges and the gaps between them, sizes of
// 0 and 1, ranges that cross from one region into the next and that
// wrap, in an order that moves the kept range from node to node.
func TestIsRAMKeptRange(t *testing.T) {
	for _, name := range []string{"2s-4gpu-pcie", "h200-pcie"} {
		m, x := machineDMA(t, preset(t, name), false)
		var edges []mem.PhysAddr
		for n := range m.Mem.Nodes() {
			base, size := m.Mem.NodeRange(n)
			edges = append(edges, base, base+mem.PhysAddr(size))
		}
		for _, g := range m.GPUs {
			if base, size, ok := m.Mem.DeviceRange(g.Name); ok {
				edges = append(edges, base, base+mem.PhysAddr(size))
			}
		}
		edges = append(edges, ^mem.PhysAddr(0))
		rng := rand.New(rand.NewPCG(3, 4))
		sizes := []uint64{0, 1, 2, 8, 1500, 4096, 1 << 20, 1 << 31, 1 << 40, ^uint64(0)}
		kept, hits := 0, 0
		for range 200_000 {
			e := edges[rng.IntN(len(edges))]
			pa := e + mem.PhysAddr(rng.Int64N(1<<13)) - 1<<12
			if rng.IntN(4) == 0 {
				pa = e - mem.PhysAddr(rng.Uint64N(1<<33))
			}
			size := sizes[rng.IntN(len(sizes))]
			if rng.IntN(2) == 0 {
				size = rng.Uint64N(1 << 14)
			}
			if x.ramLo <= pa && pa < x.ramHi {
				kept++
			}
			got, want := x.isRAM(pa, size), isRAMReference(m.Mem, pa, size)
			if got != want {
				t.Fatalf("%s: isRAM(%v, %#x) = %v, want %v (kept range [%v, %v))", name, pa, size, got, want, x.ramLo, x.ramHi)
			}
			if got {
				hits++
			}
		}
		if kept == 0 || hits == 0 {
			t.Fatalf("%s: %d draws in the kept range, %d in RAM: the test misses its point", name, kept, hits)
		}
	}
}

// TestTranslatorChangeSeen: a device's transfers and accesses go
// through the translator it has now, however often it changes: Direct,
// an offset translator, Direct again, each seen by the transfer and the
// device access that follow (the device keeps whether its translator is
// Direct, to skip the interface's calls).
func TestTranslatorChangeSeen(t *testing.T) {
	m, x, g := xferRig(t, false)
	gpu := m.GPUs[0]
	host, _ := m.HostMemory(0)
	buf, err := m.Mem.Kmalloc(0, 8192)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := m.Mem.VirtToPhys(buf)
	const off = 1 << 40
	var phys []mem.PhysAddr
	x.Hooks.Hook(func(e *Event) {
		if e.Op == OpDeviceAccess {
			phys = append(phys, e.Phys)
		}
	})
	var errs []error
	step := func(tr Translator, bus mem.DMAAddr) {
		g.SetTranslator(tr)
		m.Engine.Spawn("w", func(p *sim.Proc) {
			_, err := g.Transfer(p, &Transfer{
				Name: "w", Engine: gpu.CopyEngine(machine.DeviceToHost), Src: gpu.Memory(), Dst: host, Bytes: 64,
				Write: []Span{BusSpan(bus, 64)},
			})
			errs = append(errs, err)
			_, err = g.Write(bus, 8)
			errs = append(errs, err)
		})
		m.Engine.Run()
	}
	step(Direct{}, mem.DMAAddr(pa))
	step(slowTranslator{off: off, fault: ^mem.DMAAddr(0)}, mem.DMAAddr(pa)+off)
	// Under Direct the offset address is no RAM: both fail.
	step(Direct{}, mem.DMAAddr(pa)+off)
	step(Direct{}, mem.DMAAddr(pa))
	step(slowTranslator{off: off, fault: mem.DMAAddr(pa) + off}, mem.DMAAddr(pa)+off)
	wantErr := []bool{false, false, false, false, true, true, false, false, true, true}
	for i, err := range errs {
		if (err != nil) != wantErr[i] {
			t.Errorf("access %d: error %v, want one: %v", i, err, wantErr[i])
		}
	}
	wantPhys := []mem.PhysAddr{pa, pa, pa, pa, pa + off, pa + off, pa, pa, pa + off, pa + off}
	if len(phys) != len(wantPhys) {
		t.Fatalf("%d access events, want %d: %v", len(phys), len(wantPhys), phys)
	}
	for i := range phys {
		if phys[i] != wantPhys[i] {
			t.Errorf("access %d reached %v, want %v", i, phys[i], wantPhys[i])
		}
	}
}

// TestInTLB: the pool's bounds kept in the DMA layer (inTLB) answer as
// the pool does (swiotlb.contains), around its edges and far from it,
// without a pool and once one is reserved.
func TestInTLB(t *testing.T) {
	for _, name := range []string{"h200-pcie", "2s-4gpu-pcie"} {
		_, x := machineDMA(t, preset(t, name), false)
		for round := range 2 {
			if round == 1 {
				if err := x.ensureSwiotlb(); err != nil {
					t.Fatal(err)
				}
			}
			var edges []mem.PhysAddr
			if x.tlb != nil {
				edges = append(edges, x.tlb.start, x.tlb.start+mem.PhysAddr(x.tlb.size()))
			}
			edges = append(edges, 0, 1<<32, ^mem.PhysAddr(0))
			rng := rand.New(rand.NewPCG(5, 6))
			in := 0
			for range 20_000 {
				pa := edges[rng.IntN(len(edges))] + mem.PhysAddr(rng.Int64N(1<<12)) - 1<<11
				if got, want := x.inTLB(pa), x.tlb.contains(pa); got != want {
					t.Fatalf("%s: inTLB(%v) = %v, pool says %v", name, pa, got, want)
				}
				if x.inTLB(pa) {
					in++
				}
			}
			if round == 1 && in == 0 {
				t.Fatalf("%s: no draw in the pool", name)
			}
		}
	}
}

// TestFixedTransferKeepsLimits: one Fixed transfer made again and again
// (as a channel does) over routes, masters and directions drawn at
// random (a new Route, the same Route given other hops, the same hops
// with another master or Load turned on or off) takes the same times as the same transfers
// not Fixed, on a machine of its own: what it keeps is the limits of
// the route, master and direction it has now.
func TestFixedTransferKeepsLimits(t *testing.T) {
	// A draw gives the transfer a new Route (change 0), the same Route
	// with a new Hops slice (1), the same Route and hops (2), or its
	// first hop alone, in the same array (3), and a master and
	// direction of its own.
	type draw struct {
		change, route, master int
		load                  bool
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var draws []draw
	for i := range 600 {
		d := draw{change: rng.IntN(4), route: rng.IntN(1 << 20), master: rng.IntN(1 << 20), load: rng.IntN(2) == 0}
		if d.change == 3 && i > 0 {
			// Only the length changes.
			d.master, d.load = draws[i-1].master, draws[i-1].load
		}
		draws = append(draws, d)
	}
	run := func(fixed bool) []TransferInfo {
		m, x := machineDMA(t, preset(t, "2s-4gpu-pcie"), false)
		g, err := x.Device("gpu0")
		if err != nil {
			t.Fatal(err)
		}
		var routes [][]fabric.Hop
		var masters []machine.Master
		for _, gp := range m.GPUs {
			masters = append(masters, gp.CE(), gp.SMs())
			for n := range m.Mem.Nodes() {
				host, _ := m.HostMemory(n)
				for _, pair := range [][2]machine.Endpoint{{host, gp.Memory()}, {gp.Memory(), host}, {host, host}} {
					if r, err := m.DMARoute(pair[0], pair[1], gp.CE()); err == nil {
						routes = append(routes, r.Hops)
					}
				}
			}
		}
		masters = append(masters, machine.Master{})
		buf, err := m.Mem.Kmalloc(0, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		pa, _ := m.Mem.VirtToPhys(buf)
		var infos []TransferInfo
		tr := &Transfer{Name: "fixed", Bytes: 1 << 16, Read: []Span{BusSpan(mem.DMAAddr(pa), 1<<16)}, Transient: true, Fixed: fixed}
		route := &fabric.Route{}
		for _, d := range draws {
			switch d.change {
			case 0:
				route = &fabric.Route{Hops: slices.Clone(routes[d.route%len(routes)])}
			case 1:
				route.Hops = slices.Clone(routes[d.route%len(routes)])
			case 3:
				// The same array, its first hop alone.
				route.Hops = route.Hops[:1]
			}
			tr.Route, tr.Master, tr.Load = route, masters[d.master%len(masters)], d.load
			if _, err := g.StartTransfer(tr, func(i *TransferInfo) { infos = append(infos, *i) }); err != nil {
				t.Fatal(err)
			}
			m.Engine.Run()
		}
		return infos
	}
	fixed, plain := run(true), run(false)
	if len(fixed) != len(draws) || len(plain) != len(draws) {
		t.Fatalf("%d and %d transfers, want %d", len(fixed), len(plain), len(draws))
	}
	leads := map[sim.Time]bool{}
	for i := range draws {
		f, p := fixed[i], plain[i]
		if f.Start-f.Call != p.Start-p.Call || f.End-f.Call != p.End-p.Call || f.Move != p.Move {
			t.Fatalf("transfer %d (%+v): Fixed moved in %v and ended %v after its call, not Fixed %v and %v", i, draws[i], f.Move, f.End-f.Call, p.Move, p.End-p.Call)
		}
		leads[p.End-p.Call] = true
	}
	if len(leads) < 4 {
		t.Fatalf("only %d different transfer times: the draws do not exercise the limits", len(leads))
	}
}

// writeReference is Device.Write as it was before its way for Direct:
// every write through accessAll.
func writeReference(d *Device, addr mem.DMAAddr, size uint64) (mem.Version, error) {
	r, _, err := d.accessAll(nil, addr, size, true, false)
	if err != nil {
		return 0, err
	}
	var v mem.Version
	for _, pr := range r {
		v = d.dma.mem.DeviceWrite(d.name, d.coherent, pr.Start, pr.Size)
	}
	return v, nil
}

// TestWriteDirectWay: Device.Write, which under Direct with nothing
// observing writes RAM without going through access, gives the
// versions, the errors and the memory of writeReference on a machine
// of its own, for writes drawn in RAM, across its end, beyond a 32-bit
// mask and at no memory, by a coherent and a non-coherent device, under
// Direct and under another translator (an offset).
func TestWriteDirectWay(t *testing.T) {
	type op struct {
		dev      string
		at, size uint64
		iommu    bool
	}
	rng := rand.New(rand.NewPCG(12, 13))
	var ops []op
	for range 3000 {
		ops = append(ops, op{dev: []string{"nic0", "nic2"}[rng.IntN(2)], at: rng.Uint64N(1 << 20), size: []uint64{0, 1, 8, 64, 1500, 1 << 16}[rng.IntN(6)], iommu: rng.IntN(5) == 0})
	}
	run := func(write func(*Device, mem.DMAAddr, uint64) (mem.Version, error)) (vs []mem.Version, errs []string, reads []mem.Version) {
		m, x := machineDMA(t, server(t, "nic2"), false)
		base, size := m.Mem.NodeRange(0)
		buf, err := m.Mem.Kmalloc(0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		pa, _ := m.Mem.VirtToPhys(buf)
		starts := []mem.PhysAddr{pa, base + mem.PhysAddr(size) - 1<<19, 1 << 32, ^mem.PhysAddr(0) - 1<<20}
		for i, o := range ops {
			d, err := x.Device(o.dev)
			if err != nil {
				t.Fatal(err)
			}
			if o.iommu {
				d.SetTranslator(slowTranslator{off: 1 << 12, fault: ^mem.DMAAddr(0)})
			} else {
				d.SetTranslator(Direct{})
			}
			addr := mem.DMAAddr(starts[i%len(starts)]) + mem.DMAAddr(o.at)
			v, err := write(d, addr, o.size)
			vs = append(vs, v)
			if err != nil {
				errs = append(errs, err.Error())
			} else {
				errs = append(errs, "")
			}
		}
		for _, at := range starts[:2] {
			for off := mem.PhysAddr(0); off < 1<<20+1<<13; off += 256 {
				reads = append(reads, m.Mem.DRAMVersion(at+off))
			}
		}
		return vs, errs, reads
	}
	vs, errs, reads := run((*Device).Write)
	wvs, werrs, wreads := run(writeReference)
	ok := 0
	for i := range ops {
		if vs[i] != wvs[i] || errs[i] != werrs[i] {
			t.Fatalf("write %d (%+v): version %v, error %q; reference %v, %q", i, ops[i], vs[i], errs[i], wvs[i], werrs[i])
		}
		if errs[i] == "" {
			ok++
		}
	}
	if ok == 0 || ok == len(ops) {
		t.Fatalf("%d of %d writes succeeded: the draws miss either way", ok, len(ops))
	}
	for i := range reads {
		if reads[i] != wreads[i] {
			t.Fatalf("read back %d: %+v, reference %+v", i, reads[i], wreads[i])
		}
	}
}

// TestAccessDirectWay: access, which under Direct with nothing
// observing answers for RAM without the whole way, gives the ranges,
// costs and errors of accessAll, appending to ranges already there, for
// accesses drawn in RAM, across its end, beyond a 32-bit mask and at no
// memory, reads and writes, under Direct and an offset translator (with
// a hook listening, access takes the whole way: the tests of events).
func TestAccessDirectWay(t *testing.T) {
	t.Run("no peers", func(t *testing.T) { testAccessDirectWay(t, false) })
	t.Run("peers", func(t *testing.T) { testAccessDirectWay(t, true) })
}

// testAccessDirectWay is TestAccessDirectWay, with peers on a layer
// that has two peer windows (as every machine with a GPU has its
// BAR1s): one over addresses past RAM, one that claims the start of RAM,
// where RAM must win as resolvePeers lets it.
func testAccessDirectWay(t *testing.T, peers bool) {
	m, x := machineDMA(t, server(t, "nic2"), false)
	base, size := m.Mem.NodeRange(0)
	starts := []mem.DMAAddr{mem.DMAAddr(base), mem.DMAAddr(base) + mem.DMAAddr(size) - 1<<19, 1 << 32, ^mem.DMAAddr(0) - 1<<20}
	if peers {
		host, _ := m.HostMemory(0)
		var top mem.PhysAddr // the end of the last node's RAM
		for i := range m.Spec.Nodes {
			b, n := m.Mem.NodeRange(i)
			top = max(top, b+mem.PhysAddr(n))
		}
		if x.isRAM(top, 1) {
			t.Fatalf("%v is RAM", top)
		}
		// Draws from the last half MiB of RAM run into the first window.
		starts = append(starts, mem.DMAAddr(top)-1<<19)
		x.AddPeerMemory(testWindow{lo: top, size: 1 << 21, to: base, ep: host})
		x.AddPeerMemory(testWindow{lo: base, size: 1 << 20, to: base + 1<<21, ep: host})
	}
	rng := rand.New(rand.NewPCG(14, 15))
	fast, whole := 0, 0
	for i := range 20_000 {
		d, err := x.Device([]string{"nic0", "nic2"}[rng.IntN(2)])
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(5) == 0 {
			d.SetTranslator(slowTranslator{off: 1 << 12, walk: 7, fault: ^mem.DMAAddr(0)})
		} else {
			d.SetTranslator(Direct{})
		}
		addr := starts[rng.IntN(len(starts))] + mem.DMAAddr(rng.Uint64N(1<<20))
		n := []uint64{0, 1, 8, 1500, 1 << 16, 1 << 20}[rng.IntN(6)]
		write, pinned := rng.IntN(2) == 0, rng.IntN(4) == 0
		prefix := []mem.PhysRange{{Start: 1, Size: 2}}[:rng.IntN(2)]
		got, gc, gerr := d.access(slices.Clone(prefix), addr, n, write, pinned)
		want, wc, werr := d.accessAll(slices.Clone(prefix), addr, n, write, pinned)
		if !slices.Equal(got, want) || gc != wc || (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Fatalf("access %d (%s %v+%d): %v %v %v, whole way %v %v %v", i, d.name, addr, n, got, gc, gerr, want, wc, werr)
		}
		if gerr == nil && d.direct {
			fast++
		} else {
			whole++
		}
	}
	if fast == 0 || whole == 0 {
		t.Fatalf("%d accesses the direct way, %d not: the draws miss one", fast, whole)
	}
}

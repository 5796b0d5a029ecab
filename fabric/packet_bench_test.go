package fabric

import (
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// packetPath is the fabric's part of a NIC's receive path, as the nic
// package's BenchmarkRxPacket drives it on 2s-4gpu-pcie: the wire's flow
// over the NIC's line, alone on it and restarted (Release, then Start on
// the same route) as each packet arrives; every batch packets, a
// descriptor fetch from memory over PCIe, then one write per packet of
// the batch from the NIC to memory, all at once.
type packetPath struct {
	fab               *Fabric
	line, write, read Route
	packets, sent     int
	batch, pending    int
	wire              *Flow
	arrivedFn         func()
	free              []*slot
}

// slot is one fetch or write in flight, with its completion callback
// made once: a fetch's end starts the batch's writes.
type slot struct {
	fl    *Flow
	fetch bool
	done  func()
}

func (p *packetPath) slot() *slot {
	if n := len(p.free); n > 0 {
		w := p.free[n-1]
		p.free = p.free[:n-1]
		return w
	}
	w := new(slot)
	w.done = func() {
		p.fab.Release(w.fl)
		w.fl = nil
		if w.fetch {
			for range p.batch {
				x := p.slot()
				x.fetch = false
				x.fl = p.fab.Start("write", p.write, 1500)
				x.fl.Done().OnComplete(x.done)
			}
		}
		p.free = append(p.free, w)
	}
	return w
}

func newPacketPath(eng *sim.Engine) *packetPath {
	fab := New(eng, Factors{})
	wireN, nic, sw, rc, node, mem := fab.Node("wire"), fab.Node("nic"), fab.Node("sw"), fab.Node("rc"), fab.Node("node"), fab.Node("mem")
	line := fab.Connect("line", wireN, nic, 50e9, 0, FullDuplex)
	nicPCIe := fab.Connect("nic.pcie", nic, sw, 64e9, 100*sim.Nanosecond, FullDuplex)
	swPCIe := fab.Connect("sw.pcie", sw, rc, 64e9, 100*sim.Nanosecond, FullDuplex)
	rcL := fab.Connect("rc", rc, node, 100e9, 75*sim.Nanosecond, FullDuplex)
	dram := fab.Connect("dram", node, mem, 200e9, 300*sim.Nanosecond, Shared)
	p := &packetPath{fab: fab, batch: 8}
	p.line = Route{Hops: []Hop{{Link: line, Dir: AtoB}}}
	p.write = Route{Hops: []Hop{
		{Link: nicPCIe, Dir: AtoB}, {Link: nicPCIe, Dir: BtoA, Weight: 0.02857142857142857, Load: true},
		{Link: swPCIe, Dir: AtoB}, {Link: swPCIe, Dir: BtoA, Weight: 0.02857142857142857, Load: true},
		{Link: rcL, Dir: AtoB}, {Link: dram, Dir: AtoB},
	}}
	p.read = Route{Hops: []Hop{
		{Link: dram, Dir: BtoA}, {Link: rcL, Dir: BtoA},
		{Link: swPCIe, Dir: BtoA}, {Link: swPCIe, Dir: AtoB, Weight: 0.07142857142857142, Load: true},
		{Link: nicPCIe, Dir: BtoA}, {Link: nicPCIe, Dir: AtoB, Weight: 0.07142857142857142, Load: true},
	}}
	p.arrivedFn = p.arrived
	return p
}

func (p *packetPath) send() {
	if p.sent == p.packets {
		return
	}
	p.sent++
	p.wire = p.fab.Start("wire", p.line, 1500)
	p.wire.Done().OnComplete(p.arrivedFn)
}

func (p *packetPath) arrived() {
	p.fab.Release(p.wire)
	p.wire = nil
	if p.pending++; p.pending == p.batch {
		p.pending = 0
		w := p.slot()
		w.fetch = true
		w.fl = p.fab.Start("fetch", p.read, 256)
		w.fl.Done().OnComplete(w.done)
	}
	p.send()
}

func (p *packetPath) run(packets int) {
	p.packets, p.sent = packets, 0
	p.send()
	p.fab.Engine().Run()
}

// BenchmarkPacketPath is the fabric's part of a received packet
// (packetPath): the wire's flow, an eighth of a descriptor fetch and one
// write to memory per packet. cpu-ns/packet is the process's CPU time.
func BenchmarkPacketPath(b *testing.B) {
	eng := sim.New(1)
	p := newPacketPath(eng)
	p.run(1000)
	b.ReportAllocs()
	b.ResetTimer()
	packets := max(b.N, 1000)
	cpu0 := cpuTime()
	p.run(packets)
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(packets), "cpu-ns/packet")
	eng.Close()
}

// BenchmarkWireRestart is the commonest thing the fabric does on a NIC's
// receive path: a flow alone on its link, restarted over the same route
// from its completion (Release, then Start), as the wire's flow is for
// each packet: each restart costs an end (the completion timer), an
// activation and a recompute that takes shareLone. cpu-ns/flow is the
// process's CPU time.
func BenchmarkWireRestart(b *testing.B) {
	eng := sim.New(1)
	fab := New(eng, Factors{})
	line := fab.Connect("line", fab.Node("wire"), fab.Node("nic"), 50e9, 0, FullDuplex)
	r := Route{Hops: []Hop{{Link: line, Dir: AtoB}}}
	var fl *Flow
	left := 0
	var next func()
	next = func() {
		if fl != nil {
			fab.Release(fl)
			fl = nil
		}
		if left == 0 {
			return
		}
		left--
		fl = fab.Start("wire", r, 1500)
		fl.Done().OnComplete(next)
	}
	run := func(n int) {
		left = n
		next()
		eng.Run()
	}
	run(1000)
	b.ReportAllocs()
	b.ResetTimer()
	flows := max(b.N, 1000)
	cpu0 := cpuTime()
	run(flows)
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(flows), "cpu-ns/flow")
	eng.Close()
}

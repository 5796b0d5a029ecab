package mem

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Every access takes effect, and is reported, at the instant it starts;
// the process then spends the access's cost (p.Sleep). A nil p is an
// access made outside any process (set-up code, tests): it is named ""
// and costs nothing. A zero-length access does nothing and reports
// nothing: its Access is empty but for who and when, its Version 0.

func procName(p *sim.Proc) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

// ---- CPU accesses (cost virtual time on p) ----

// Read is a CPU on node reading [va, va+size) through its mapping
// (cached or uncached), costing size/MemcpyRate (cached) or
// size/UncachedRate (uncached) of p's time. The Access says what the CPU
// obtained (Stale when some byte is older than the latest write).
//
// The rates are node's: Node.MemcpyRate and Cache.UncachedRate, which
// is MemcpyRate/10 when the platform leaves it unset (uncached access on
// Arm cores runs at a tenth of a cached copy or less). The bytes whose
// memory is on another node cost as a remote access does (see
// Options.RemoteTime): the idle remote load latency, then a rate that
// the line fills a core keeps in flight allow over that latency,
// sharing the socket links with every other flow.
//
// A cached read of a line not in node's cache fills it (after another
// node's dirty copy is written back) and, with the node's Prefetch = n,
// the n lines after each run of missed lines, within their 4 KiB page;
// fills beyond the cache's capacity evict the oldest fills. An uncached
// read reads DRAM, whatever the caches hold. If [va, va+size) is not
// mapped (or node does not exist), nothing happens and the Access
// returned, and reported, has Err set.
func (m *Memory) Read(p *sim.Proc, node int, va VirtAddr, size uint64) Access {
	return m.cpuRead(p, node, va, size, nil)
}

// Write is a CPU on node writing [va, va+size): a new version, in the
// cache (write-allocate, lines dirty) or straight to DRAM when uncached.
// Other nodes' copies of the lines are written back and dropped first
// (the CPUs are coherent with each other). If [va, va+size) is not
// mapped, nothing is written, Write returns 0 (no write has version 0)
// and the observers get the Access with Err set.
func (m *Memory) Write(p *sim.Proc, node int, va VirtAddr, size uint64) Version {
	return m.cpuWrite(p, node, va, size, nil)
}

// ReadBytes is Read that also returns the bytes (payload mode; bytes of
// a write made without payload read as zeros). Without payload mode it
// works on versions as Read does and fills buf with zeros.
func (m *Memory) ReadBytes(p *sim.Proc, node int, va VirtAddr, buf []byte) Access {
	return m.cpuRead(p, node, va, uint64(len(buf)), buf)
}

// WriteBytes is Write with the bytes (kept in payload mode; without it
// the write is Write(len(data)) and the bytes are dropped).
func (m *Memory) WriteBytes(p *sim.Proc, node int, va VirtAddr, data []byte) Version {
	return m.cpuWrite(p, node, va, uint64(len(data)), data)
}

// linearHit says whether [va, va+size) lies in the linear map, inside
// the DRAM region regionOf found last, for a CPU of node that exists,
// and if so sets m.segs to its one physical piece and m.remote and
// m.local to its bytes, clearing m.faults: what cpuTranslate and
// countRemote find for it, without their searches (Classify's, and
// regionOf's three). A NIC's ring and buffers are such accesses, one
// after another. The linear map never changes, so nothing is cached
// but the region, which is checked.
func (m *Memory) linearHit(node int, va VirtAddr, size uint64) bool {
	pa := uint64(va) - uint64(LinearStart)
	if va < LinearStart || pa >= maxDRAM || node < 0 || node >= len(m.nodes) ||
		m.lastRegion >= len(m.regions) || m.general {
		return false
	}
	r := &m.regions[m.lastRegion]
	if r.node < 0 || pa < r.start || size > r.end-pa {
		return false
	}
	m.faults = 0
	m.segs = append(m.segs[:0], PhysRange{PhysAddr(pa), size})
	if m.remoteAny {
		clear(m.remote)
		m.remoteAny = false
	}
	m.local = 0
	if r.node != node {
		m.remote[r.node] = size
		m.remoteAny = true
	} else {
		m.local = size
	}
	return true
}

// cpuSegs resolves a CPU access and counts its local and remote bytes
// (m.local, m.remote): from the DRAM region found last where it lies
// in it (linearHit), else through the page tables (cpuTranslate).
func (m *Memory) cpuSegs(node int, va VirtAddr, size uint64) ([]PhysRange, Attr, error) {
	if m.linearHit(node, va, size) {
		return m.segs, Cached, nil
	}
	segs, attr, err := m.cpuTranslate(node, va, size)
	if err == nil {
		m.countRemote(node, segs)
	}
	return segs, attr, err
}

// cpuTranslate resolves a CPU access.
func (m *Memory) cpuTranslate(node int, va VirtAddr, size uint64) ([]PhysRange, Attr, error) {
	if node < 0 || node >= len(m.nodes) {
		return nil, Cached, fmt.Errorf("CPU of node %d: no such node: %w", node, ErrInvalid)
	}
	m.faults = 0
	segs, _, attr, err := m.translate(va, size, m.segs[:0], node)
	m.segs = segs
	return segs, attr, err
}

func (m *Memory) cpuRead(p *sim.Proc, node int, va VirtAddr, size uint64, buf []byte) Access {
	if buf == nil && size > 0 && m.hints == 0 && !m.keep && !m.Hooks.Active() && m.linearHit(node, va, size) {
		// The common case (a driver's read of its ring and buffers),
		// what the loop below does for it: one cached piece, no stale
		// byte (every reader obtains the latest writes while they are
		// not kept), nothing to report. The Access is built once, as
		// it is returned, not zeroed and filled and copied: two of a
		// received packet's three CPU accesses are reads.
		now := m.now()
		s := uint64(m.segs[0].Start)
		m.cacheRead(node, s, s+size)
		m.invariants()
		m.charge(p, node, size, Cached, false, m.faults)
		return Access{Header: sim.Header{Time: now, Proc: procName(p)}, Kind: CPURead, Node: node, Phys: PhysAddr(s), Size: size, VA: va, Attr: Cached}
	}
	if m.hints > 0 && size > 0 {
		m.hintFaults(p, node, va, size)
	}
	a := Access{Header: sim.Header{Time: m.now(), Proc: procName(p)}, Kind: CPURead, Node: node, VA: va, Size: size}
	if size == 0 {
		return a
	}
	segs, attr, err := m.cpuSegs(node, va, size)
	if err != nil {
		a.Err = fmt.Errorf("read: %w", err)
		m.report(&a)
		return a
	}
	a.Attr = attr
	if attr == Uncached {
		m.keepLatest() // DRAM may be behind a dirty line
	}
	var off uint64
	for i, sg := range segs {
		s := uint64(sg.Start)
		e := s + sg.Size
		if attr == Cached {
			m.cacheRead(node, s, e)
			if !m.keep && buf != nil && m.opt.Payload {
				// What the reader obtained, for its bytes: the
				// coherent values (latest.go).
				m.coherentRead(s, e)
			}
		} else {
			m.dramRead(s, e)
		}
		at, got, want, stale := m.checkStale(s, e)
		if buf != nil {
			m.assemble(buf[off:off+sg.Size], s, e)
		}
		if m.Hooks.Active() {
			// Each piece is reported with the stale byte of the
			// pieces before it, unless it has one of its own.
			sa := &m.ev
			*sa = a
			sa.Phys, sa.Size, sa.VA = sg.Start, sg.Size, va+VirtAddr(off)
			if stale {
				sa.Stale, sa.StaleAt, sa.Got, sa.Want = true, at, got, want
			}
			m.emit()
		}
		if i == 0 {
			a.Phys = sg.Start
		}
		if stale && !a.Stale {
			a.Stale, a.StaleAt, a.Got, a.Want = true, at, got, want
		}
		off += sg.Size
	}
	m.invariants()
	m.charge(p, node, size, attr, false, m.faults)
	return a
}

// cpuAccess is the Access of a CPU access, before its outcome.
func (m *Memory) cpuAccess(p *sim.Proc, kind AccessKind, node int, va VirtAddr, size uint64) Access {
	return Access{Header: sim.Header{Time: m.now(), Proc: procName(p)}, Kind: kind, Node: node, VA: va, Size: size}
}

func (m *Memory) cpuWrite(p *sim.Proc, node int, va VirtAddr, size uint64, data []byte) Version {
	if m.hints > 0 && size > 0 {
		m.hintFaults(p, node, va, size)
	}
	if size == 0 {
		return 0
	}
	segs, attr, err := m.cpuSegs(node, va, size)
	if err != nil {
		a := m.cpuAccess(p, CPUWrite, node, va, size)
		a.Err = fmt.Errorf("write: %w", err)
		m.report(&a)
		return 0
	}
	if attr == Uncached {
		m.keepLatest() // the caches' copies are left behind
	}
	v := m.next()
	m.record(v, segs, data)
	var off uint64
	for _, sg := range segs {
		s := uint64(sg.Start)
		e := s + sg.Size
		if attr == Cached {
			m.cacheWrite(node, s, e, v)
		} else {
			m.dram.set(s, e, v)
			m.latest.set(s, e, v)
		}
		if m.Hooks.Active() {
			// Built only when a hook listens (the time cannot have
			// moved: nothing sleeps before the charge).
			m.ev = m.cpuAccess(p, CPUWrite, node, va+VirtAddr(off), sg.Size)
			m.ev.Phys, m.ev.Attr, m.ev.Version = sg.Start, attr, v
			m.emit()
		}
		off += sg.Size
	}
	m.invariants()
	m.charge(p, node, size, attr, attr == Uncached, m.faults)
	return v
}

// countRemote sets m.remote to the bytes of segs that lie in another
// node's DRAM than node's, per home node. Memory that is no node's
// (device memory) counts as local, as it always has.
func (m *Memory) countRemote(node int, segs []PhysRange) {
	clear(m.remote)
	m.local = 0
	for _, sg := range segs {
		m.addRemote(node, uint64(sg.Start), sg.Size)
	}
	m.remoteAny = true // (counted, not looked at)
}

// addRemote adds the bytes of [s, s+size) that lie in another node's
// DRAM than node's to m.remote, region by region (a range may straddle
// two nodes' DRAM).
func (m *Memory) addRemote(node int, s, size uint64) {
	for size > 0 {
		r := m.regionOf(s)
		if r < 0 {
			return
		}
		reg := m.regions[r]
		n := min(size, reg.end-s)
		if reg.node >= 0 && reg.node != node {
			m.remote[reg.node] += n
		} else if reg.node == node {
			m.local += n
		}
		s, size = s+n, size-n
	}
}

// charge makes p spend the time of a CPU access of size bytes, of which
// m.remote lie on other nodes (countRemote). The local part costs what
// it always did, size at the local rate; each remote part then costs
// what Options.RemoteTime says, node by node in order. toMemory says
// the bytes go from the CPU to memory (uncached stores). The access's
// page faults (faults pages faulted in) come first, at faultTime.
func (m *Memory) charge(p *sim.Proc, node int, size uint64, attr Attr, toMemory bool, faults uint64) {
	if p == nil {
		return
	}
	fault := m.faultTime(node, faults)
	rate := m.spec.Nodes[node].MemcpyRate.V
	if attr == Uncached {
		rate = m.caches[node].uncached
	}
	var remote uint64
	if m.remoteAny {
		for _, b := range m.remote {
			remote += b
		}
	}
	dram := m.local
	if remote == 0 {
		// The sleep lets others reuse the scratch: m.local is read.
		if fault > 0 {
			p.Sleep(fault)
		}
		m.localTime(p, node, size, dram, toMemory, float64(rate))
		return
	}
	// Other processes' accesses reuse the scratch while p sleeps (the
	// local part, the hook's flows): take the counts out of it first.
	var parts [8]uint64
	counts := parts[:0]
	counts = append(counts, m.remote...)
	if fault > 0 {
		p.Sleep(fault)
	}
	if local := size - min(remote, size); local > 0 {
		m.localTime(p, node, local, dram, toMemory, float64(rate))
	}
	for home, b := range counts {
		if b > 0 {
			m.remoteTime(p, node, home, b, toMemory, float64(rate))
		}
	}
}

// localTime is the local part of a CPU access, local bytes of which
// dram lie in the node's own DRAM: Options.LocalTime when they all do,
// else (device memory, or no LocalTime) local bytes at rate, alone.
func (m *Memory) localTime(p *sim.Proc, node int, local, dram uint64, toMemory bool, rate float64) {
	if m.opt.LocalTime != nil && dram >= local {
		m.opt.LocalTime(p, node, local, toMemory, rate)
		return
	}
	p.Sleep(sim.TransferTime(float64(local), rate))
}

// remoteTime is Options.RemoteTime, or without it the closed form: the
// idle remote load latency, then the bytes at the one-thread remote
// rate capped by the narrowest socket link on the way.
func (m *Memory) remoteTime(p *sim.Proc, cpu, home int, bytes uint64, toMemory bool, rate float64) {
	if m.opt.RemoteTime != nil {
		m.opt.RemoteTime(p, cpu, home, bytes, toMemory, rate)
		return
	}
	r := float64(m.spec.ThreadRate(cpu, home, platform.Rate(rate)))
	for _, i := range m.spec.SocketPath(cpu, home) {
		r = min(r, float64(m.spec.SocketLinks[i].Rate()))
	}
	p.Sleep(m.spec.LoadLatency(cpu, home) + sim.TransferTime(float64(bytes), r))
}

// dramRead sets m.got to DRAM's versions over [s, e).
func (m *Memory) dramRead(s, e uint64) {
	m.got = m.got[:0]
	m.dram.each(s, e, func(ps, pe uint64, v Version) bool {
		m.gotAdd(ps, pe, v)
		return true
	})
}

// gotAdd appends [s, e) at v to m.got, which ends at or before s: merged
// with the last span when they touch and agree, left out at version 0,
// so that m.got holds the spans a map would.
func (m *Memory) gotAdd(s, e uint64, v Version) {
	if v == 0 {
		return
	}
	if n := len(m.got); n > 0 && m.got[n-1].end == s && m.got[n-1].v == v {
		m.got[n-1].end = e
		return
	}
	m.got = append(m.got, span[Version]{s, e, v})
}

// overlay lays top (spans in address order, disjoint) over m.got: an
// address in a piece of top holds that piece's version (0 too), any
// other m.got's.
func (m *Memory) overlay(top []span[Version]) {
	base := append(m.under[:0], m.got...)
	m.under = base
	m.got = m.got[:0]
	var x uint64 // everything before x is in m.got
	i, j := 0, 0
	for i < len(base) || j < len(top) {
		if j < len(top) && (i == len(base) || top[j].start <= max(base[i].start, x)) {
			t := top[j]
			m.gotAdd(t.start, t.end, t.v)
			x = t.end
			j++
			continue
		}
		b := base[i]
		s := max(b.start, x)
		if s >= b.end {
			i++
			continue
		}
		e := b.end
		if j < len(top) && top[j].start < e {
			e = top[j].start
		}
		m.gotAdd(s, e, b.v)
		x = e
		if e == b.end {
			i++
		}
	}
}

// checkStale compares what the reader obtained (m.got) with the latest
// writes over [s, e): the first byte that differs, the versions there. While the latest writes are not kept, no reader
// can obtain anything else (latest.go): nothing to compare.
func (m *Memory) checkStale(s, e uint64) (at PhysAddr, got, want Version, stale bool) {
	if !m.keep {
		return // every reader obtains the latest writes (latest.go)
	}
	x, got, want, stale := firstDiff(m.got, &m.latest, s, e)
	return PhysAddr(x), got, want, stale
}

// CopyPhys is a CPU on node copying size bytes from src to dst through
// the caches (a memcpy in the linear map: swiotlb bouncing, staging).
// It is a cached read of src and a cached write of dst (one new
// version, carrying the bytes read in payload mode), reported as such,
// and costs what Options.CopyTime says, told the home nodes of src and
// dst (without it: size/MemcpyRate when both are node's memory or the
// source is all in node's cache, else a remote access of size bytes to
// the other node). Both ranges must be DRAM; otherwise
// nothing happens and the observers get the failed Access with Err.
func (m *Memory) CopyPhys(p *sim.Proc, node int, dst, src PhysAddr, size uint64) {
	if size == 0 {
		return
	}
	now, name := m.now(), procName(p)
	r := Access{Header: sim.Header{Time: now, Proc: name}, Kind: CPURead, Node: node, Phys: src, Size: size, VA: m.PhysToVirt(src)}
	w := Access{Header: sim.Header{Time: now, Proc: name}, Kind: CPUWrite, Node: node, Phys: dst, Size: size, VA: m.PhysToVirt(dst)}
	if node < 0 || node >= len(m.nodes) {
		r.Err = fmt.Errorf("copy: CPU of node %d: no such node: %w", node, ErrInvalid)
		m.report(&r)
		return
	}
	if _, err := m.memRange(src, size, true); err != nil {
		r.Err = fmt.Errorf("copy from: %w", err)
		m.report(&r)
		return
	}
	if _, err := m.memRange(dst, size, true); err != nil {
		w.Err = fmt.Errorf("copy to: %w", err)
		m.report(&w)
		return
	}
	s, d := uint64(src), uint64(dst)
	cached := !m.cacheRead(node, s, s+size) // no line had to be filled
	if !m.keep && m.opt.Payload {
		m.coherentRead(s, s+size) // what was read, for its bytes (latest.go)
	}
	if at, got, want, stale := m.checkStale(s, s+size); stale {
		r.Stale, r.StaleAt, r.Got, r.Want = true, at, got, want
	}
	var data []byte
	if m.opt.Payload {
		data = make([]byte, size)
		m.assemble(data, s, s+size)
	}
	m.report(&r)
	v := m.next()
	w.Version = v
	if data != nil {
		m.journal[v] = []jseg{{d, data}}
	}
	m.cacheWrite(node, d, d+size, v)
	m.report(&w)
	m.invariants()
	if p == nil {
		return
	}
	m.copyCost(p, node, src, dst, size, cached)
}

// copyCost makes p, a CPU on node, spend the time of copying size bytes
// from src to dst (CopyPhys, a page migration).
func (m *Memory) copyCost(p *sim.Proc, node int, src, dst PhysAddr, size uint64, cached bool) {
	srcNode, dstNode := m.homeNode(src), m.homeNode(dst)
	if srcNode < 0 {
		srcNode = node
	}
	if dstNode < 0 {
		dstNode = node
	}
	if m.opt.CopyTime != nil {
		m.opt.CopyTime(p, node, srcNode, dstNode, size, cached)
		return
	}
	// Without the machine's model: a copy whose source (unless it is in
	// the cache) or destination is another node's memory costs as a
	// remote access of its size to that node (the source's when both
	// are remote); otherwise size at the memcpy rate, as it always did.
	home := node
	switch {
	case !cached && srcNode != node:
		home = srcNode
	case dstNode != node:
		home = dstNode
	}
	if home == node {
		clear(m.remote)
		m.remoteAny = false
		m.local = 0
		m.charge(p, node, size, Cached, false, 0)
		return
	}
	m.remoteTime(p, node, home, size, false, float64(m.spec.Nodes[node].MemcpyRate.V))
}

// ---- cache maintenance (all nodes' caches; cost on p, per line of the range) ----

type maintOp int

const (
	opClean maintOp = iota
	opInvalidate
	opFlush
)

// Clean writes dirty lines of [pa, pa+size) back to DRAM and keeps them,
// clean (arm64 DC CVAC).
//
// Maintenance acts on every line that holds a byte of the range, in every
// node's cache (to the point of coherency, as the instructions are
// broadcast), and costs p the per-line cost of the node whose DRAM holds
// pa (node 0's for other memory) for every line of the range, cached or
// not, as a loop over the range by address does. A range that wraps does
// nothing.
func (m *Memory) Clean(p *sim.Proc, pa PhysAddr, size uint64) {
	m.maintain(p, pa, size, opClean)
}

// Invalidate discards the lines of [pa, pa+size), dirty or not (DC IVAC):
// dirty data not yet written back is lost. A line only partly inside
// the range is discarded whole: aligning buffers is the caller's job.
func (m *Memory) Invalidate(p *sim.Proc, pa PhysAddr, size uint64) {
	m.maintain(p, pa, size, opInvalidate)
}

// Flush writes back and discards the lines of [pa, pa+size) (DC CIVAC).
func (m *Memory) Flush(p *sim.Proc, pa PhysAddr, size uint64) {
	m.maintain(p, pa, size, opFlush)
}

func (m *Memory) maintain(p *sim.Proc, pa PhysAddr, size uint64, op maintOp) {
	end, ok := pa.Add(size)
	if size == 0 || !ok {
		return
	}
	s, e := uint64(pa), uint64(end)
	if op == opInvalidate {
		m.keepLatest() // a dirty line's write may be lost
	}
	for _, c := range m.caches {
		if c.lines.len() == 0 {
			continue
		}
		cs, ce := c.cover(s, e)
		switch op {
		case opClean:
			m.clean(c, cs, ce)
		case opInvalidate:
			m.discard(c, cs, ce)
		case opFlush:
			m.flush(c, cs, ce)
		}
	}
	m.invariants()
	if p == nil {
		return
	}
	home := m.caches[max(m.homeNode(pa), 0)]
	cs, ce := home.cover(s, e)
	lines := (ce - cs) / home.line
	cost := home.wbCost
	if op == opInvalidate {
		cost = home.invCost
	}
	if cost > 0 && lines > uint64(math.MaxInt64/2/int64(cost)) {
		lines = uint64(math.MaxInt64 / 2 / int64(cost))
	}
	p.Sleep(sim.Time(lines) * cost)
}

// homeNode is the node whose DRAM holds pa, -1 if none.
func (m *Memory) homeNode(pa PhysAddr) int {
	if n, ok := m.NodeOf(pa); ok {
		return n
	}
	return -1
}

// ---- device accesses (no CPU time: the bytes move over the fabric separately) ----

// DeviceRead is dev reading [pa, pa+size). Coherent (snooping): it
// obtains the latest bytes, dirty cache lines included. Non-coherent: it
// reads DRAM, missing dirty lines (Stale when DRAM is behind).
//
// A snooping read takes dirty lines' bytes from the cache that holds
// them and clean ones from DRAM, and leaves the caches as they are. A
// range that is not memory (DRAM or device memory) reads nothing: the
// Access has Err set.
func (m *Memory) DeviceRead(dev string, coherent bool, pa PhysAddr, size uint64) Access {
	return m.deviceRead(dev, coherent, pa, size, nil)
}

// DeviceWrite is dev writing [pa, pa+size): a new version in DRAM.
// Coherent: cache lines covering the range are invalidated (dirty ones
// written back first, as a snoop does). Non-coherent: caches are left as
// they are, so lines there become stale. A range that is not memory
// writes nothing: DeviceWrite returns 0 and observers get the Access
// with Err.
func (m *Memory) DeviceWrite(dev string, coherent bool, pa PhysAddr, size uint64) Version {
	return m.deviceWrite(dev, coherent, pa, size, nil)
}

// DeviceReadBytes and DeviceWriteBytes are the payload forms.
func (m *Memory) DeviceReadBytes(dev string, coherent bool, pa PhysAddr, buf []byte) Access {
	return m.deviceRead(dev, coherent, pa, uint64(len(buf)), buf)
}

// DeviceWriteBytes is DeviceWrite with the bytes.
func (m *Memory) DeviceWriteBytes(dev string, coherent bool, pa PhysAddr, data []byte) Version {
	return m.deviceWrite(dev, coherent, pa, uint64(len(data)), data)
}

func (m *Memory) deviceRead(dev string, coherent bool, pa PhysAddr, size uint64, buf []byte) Access {
	a := m.deviceAccess(DeviceRead, dev, coherent, pa, size)
	if size == 0 {
		return a
	}
	end, err := m.memRange(pa, size, false)
	if err != nil {
		a.Err = fmt.Errorf("%s read: %w", dev, err)
		m.report(&a)
		return a
	}
	s := uint64(pa)
	if !coherent {
		m.keepLatest() // DRAM may be behind a dirty line
	}
	// What the device obtains (m.got) is for the staleness check and
	// the bytes: a coherent read, while the latest writes are not kept
	// (latest.go), without payload, needs neither (a NIC fetching
	// descriptors).
	if m.keep || buf != nil && m.opt.Payload {
		if coherent {
			m.coherentRead(s, end)
		} else {
			m.dramRead(s, end)
		}
	}
	if at, got, want, stale := m.checkStale(s, end); stale {
		a.Stale, a.StaleAt, a.Got, a.Want = true, at, got, want
	}
	if buf != nil {
		m.assemble(buf, s, end)
	}
	m.report(&a)
	m.invariants()
	return a
}

// deviceCut is a coherent device write's snoop of c, [s, e) written:
// c's lines there cut, their dirty pieces appended to m.wb (sorted when
// an earlier cache's pieces, up to from, precede them). It returns the
// from of the next cache.
func (m *Memory) deviceCut(c *cache, s, e uint64, from int) int {
	if c.lines.len() > 0 {
		cs, ce := c.cover(s, e)
		m.cutDirty(c, cs, ce)
	}
	if from > 0 && len(m.wb) > from {
		slices.SortFunc(m.wb, func(a, b span[Version]) int { return cmp.Compare(a.start, b.start) })
	}
	if len(m.wb) > 0 {
		from = len(m.wb)
	}
	return from
}

// deviceAccess is the Access of a device access, before its outcome.
func (m *Memory) deviceAccess(kind AccessKind, dev string, coherent bool, pa PhysAddr, size uint64) Access {
	return Access{Header: sim.Header{Time: m.now(), Proc: dev}, Kind: kind, Node: m.homeNode(pa), Phys: pa, Size: size, Coherent: coherent}
}

func (m *Memory) deviceWrite(dev string, coherent bool, pa PhysAddr, size uint64, data []byte) Version {
	if size == 0 {
		return 0
	}
	end, err := m.memRange(pa, size, false)
	if err != nil {
		a := m.deviceAccess(DeviceWrite, dev, coherent, pa, size)
		a.Err = fmt.Errorf("%s write: %w", dev, err)
		m.report(&a)
		return 0
	}
	s := uint64(pa)
	if !coherent {
		m.keepLatest() // the caches' copies are left behind
	}
	v := m.next()
	// The lines a coherent write snoops are written back (where dirty)
	// and dropped, then the write lands: DRAM gets both in one write,
	// the write-backs left only where the device's write does not
	// cover them. A line is dirty in one cache at most, so the caches'
	// pieces are disjoint; in address order once sorted, when more
	// than one cache has some.
	m.wb = m.wb[:0]
	if coherent {
		// The caches that hold a line, in order: the bits of held (a
		// cut clears only its own cache's bit), where the caches from
		// the 64th on share the last one. The others have nothing to
		// cut.
		from := 0
		for h := m.held; h != 0; h &= h - 1 {
			i := bits.TrailingZeros64(h)
			if i < 63 {
				from = m.deviceCut(m.caches[i], s, end, from)
				continue
			}
			for _, c := range m.caches[63:] {
				from = m.deviceCut(c, s, end, from)
			}
		}
	}
	if len(m.wb) == 0 {
		// No dirty line in the way: the common case.
		m.dram.set(s, end, v)
	} else {
		top := m.wbTop[:0]
		for _, p := range m.wb {
			if p.start < s {
				top = append(top, span[Version]{p.start, min(p.end, s), p.v})
			}
		}
		top = append(top, span[Version]{s, end, v})
		for _, p := range m.wb {
			if p.end > end {
				top = append(top, span[Version]{max(p.start, end), p.end, p.v})
			}
		}
		m.wbTop = top
		m.writeDRAM(top)
	}
	if m.keep {
		m.latest.set(s, end, v)
	}
	if m.opt.Payload && data != nil {
		m.segs = append(m.segs[:0], PhysRange{pa, size})
		m.record(v, m.segs, data)
	}
	if m.Hooks.Active() {
		m.ev = m.deviceAccess(DeviceWrite, dev, coherent, pa, size)
		m.ev.Version = v
		m.emit()
	}
	m.invariants()
	return v
}

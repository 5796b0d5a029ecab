package mem

import "fmt"

// checkInvariants turns on a full check of the content model after every
// access and maintenance operation (a panic on the first violation): for
// debugging the model, far too slow for runs. Tests call verify.
const checkInvariants = false

// Latest is the version of the latest write to pa.
func (m *Memory) Latest(pa PhysAddr) Version {
	if m.keep {
		return m.latest.get(uint64(pa))
	}
	// The coherent value (latest.go): the dirty line's, else DRAM's.
	for i, c := range m.caches {
		if m.held&heldBit(i) != 0 {
			if l := c.lines.get(uint64(pa)); l.dirty() && l.ver != 0 {
				return l.ver // 0 is DRAM's
			}
		}
	}
	return m.dram.get(uint64(pa))
}

// LatestIn is the newest version of the latest writes to any byte of
// [pa, pa+size) (0 when none was written since boot). Versions only
// grow, so a range whose LatestIn is the same before and after a run
// of accesses was not written by any of them: the proof a scenario
// gives that a device changed nothing outside its mappings.
func (m *Memory) LatestIn(pa PhysAddr, size uint64) Version {
	s, e := uint64(pa), uint64(pa)+size
	var v Version
	m.latestIn(s, e, func(_, _ uint64, w Version) { v = max(v, w) })
	return v
}

// DRAMVersion is the version DRAM holds at pa (what a non-coherent
// device reads).
func (m *Memory) DRAMVersion(pa PhysAddr) Version { return m.dram.get(uint64(pa)) }

// CacheLine says whether node's cache holds the byte at pa, the version
// of its copy, and whether its line is dirty.
func (m *Memory) CacheLine(node int, pa PhysAddr) (v Version, present, dirty bool) {
	if node < 0 || node >= len(m.caches) {
		return 0, false, false
	}
	c := m.caches[node]
	// The map holds no zero value: a line present is never lineState{}.
	if l := c.lines.get(uint64(pa)); l != (lineState{}) {
		if l.ver == 0 && !m.keep {
			return m.dram.get(uint64(pa)), true, l.dirty() // latest.go
		}
		return l.ver, true, l.dirty()
	}
	return 0, false, false
}

// LineSize is node's cache line (the coherency granule).
func (m *Memory) LineSize(node int) uint64 {
	if node < 0 || node >= len(m.caches) {
		return 0
	}
	return m.caches[node].line
}

// CacheStats are one node's cache counters.
type CacheStats struct {
	// Used is the bytes of lines present, Capacity the most the cache
	// keeps.
	Used, Capacity uint64
	// Evictions counts lines evicted for capacity.
	Evictions uint64
}

// CacheStats are node's cache counters.
func (m *Memory) CacheStats(node int) CacheStats {
	if node < 0 || node >= len(m.caches) {
		return CacheStats{}
	}
	c := m.caches[node]
	return CacheStats{Used: c.used, Capacity: c.capacity, Evictions: c.evictions}
}

// Footprint is the number of spans the content maps hold (versions of
// DRAM, latest writes and caches): what memory use grows with. The
// latest writes count only once they are kept (latest.go).
func (m *Memory) Footprint() int {
	n := m.dram.len() + m.latest.len()
	for _, c := range m.caches {
		n += c.lines.len()
	}
	return n
}

// verify checks the invariants of the content model.
func (m *Memory) verify() error {
	if err := m.dram.check(); err != nil {
		return fmt.Errorf("dram: %w", err)
	}
	if err := m.latest.check(); err != nil {
		return fmt.Errorf("latest: %w", err)
	}
	if err := m.verifyCoherent(); err != nil {
		return err
	}
	for i, c := range m.caches {
		if err := c.lines.check(); err != nil {
			return fmt.Errorf("cache %d: %w", i, err)
		}
		var used uint64
		lines := c.lines.spans()
		for k, sp := range lines {
			used += sp.end - sp.start
			// A span may start or end inside a line only where its
			// neighbour continues the same line: same fill, same dirt.
			if sp.start%c.line != 0 && (k == 0 || lines[k-1].end != sp.start ||
				lines[k-1].v.sd != sp.v.sd) {
				return fmt.Errorf("cache %d: span [%#x, %#x) starts inside a line alone", i, sp.start, sp.end)
			}
			if sp.end%c.line != 0 && (k+1 == len(lines) || lines[k+1].start != sp.end) {
				return fmt.Errorf("cache %d: span [%#x, %#x) ends inside a line alone", i, sp.start, sp.end)
			}
			if sp.v.dirty() {
				for j, o := range m.caches {
					if j != i && o.lines.covered(o.cover(sp.start, sp.end)) > 0 {
						return fmt.Errorf("cache %d holds [%#x, %#x) dirty while cache %d holds a copy", i, sp.start, sp.end, j)
					}
				}
			}
		}
		// Every fill's record counts the bytes its lines hold, and every
		// line present has its fill's record, the records' seqs
		// consecutive.
		live := map[uint64]uint64{}
		for _, sp := range lines {
			live[sp.v.seq()] += sp.end - sp.start
		}
		for k, r := range c.fifo[c.head:] {
			if r.seq != c.fifo[0].seq+uint64(c.head+k) {
				return fmt.Errorf("cache %d: fill record %d has seq %d, not consecutive from %d", i, c.head+k, r.seq, c.fifo[0].seq)
			}
			if live[r.seq] != r.live {
				return fmt.Errorf("cache %d: fill %d holds %d bytes, its record counts %d", i, r.seq, live[r.seq], r.live)
			}
			delete(live, r.seq)
		}
		if len(live) > 0 {
			return fmt.Errorf("cache %d: %d fills with lines present have no record", i, len(live))
		}
		if used != c.used {
			return fmt.Errorf("cache %d: %d bytes present, counted %d", i, used, c.used)
		}
		if held := m.held&heldBit(i) != 0; used > 0 && !held || used == 0 && held && i < 63 {
			return fmt.Errorf("cache %d: %d bytes present, its bit in held %v", i, used, held)
		}
		if used > c.capacity {
			return fmt.Errorf("cache %d: %d bytes present beyond its capacity %d", i, used, c.capacity)
		}
	}
	return nil
}

// invariants panics on a broken invariant when checkInvariants is on.
func (m *Memory) invariants() {
	if checkInvariants {
		if err := m.verify(); err != nil {
			panic("mem: " + err.Error())
		}
	}
}

package mem

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// The latest write of every byte (m.latest) is what a reader is checked
// against. Until an access that can leave a copy behind the latest
// write, it need not be kept: while every write is coherent (a cached
// CPU write, which snoops the other caches; a coherent device write,
// which writes back and drops the lines it covers) and no dirty line is
// discarded, a line dirty in one cache is in no other, and a clean line
// holds what DRAM holds. The latest write of a byte is then its
// coherent value, the version of the dirty line that holds it or else
// DRAM's, and that is what every reader obtains: a cached CPU read
// (its lines, and the lines it fills from DRAM after the snoop has
// written the other caches' dirty copies back) and a coherent device
// read (DRAM with the dirty lines over it) are never stale.
//
// So m.latest starts empty, not kept (Memory.keep false): writes leave
// it alone and reads skip the check. For the same reason a cache's
// line holds, while they are not kept, version 0 for every byte that
// no CPU wrote since its fill or its last write-back: DRAM holds that
// byte's version (nothing changes DRAM under a line but the line's own
// write-back), so a fill is one span, whatever versions DRAM holds
// there, refilled in place where the line was cut, and a write-back
// skips the bytes DRAM holds already. A reader that wants the bytes
// (payload mode) obtains the coherent values (coherentRead). The accesses that can break the
// rule call keepLatest first, which builds m.latest from the coherent
// values, the map it would hold had it been kept all along (a map's
// spans are a function of its content), and keeps it from then on:
// a write that bypasses the caches (an uncached CPU write, a
// non-coherent device write), a discard of lines that may be dirty
// (Invalidate), and a read that bypasses the caches (an uncached CPU
// read, a non-coherent device read), which may obtain DRAM's old copy
// of a dirty line. A coherent platform's packet path never calls it:
// per packet, three writes of the latest map and two staleness
// searches fewer.

// keepLatest starts keeping m.latest, built from the coherent values.
func (m *Memory) keepLatest() {
	if m.keep {
		return
	}
	m.latest.reset()
	m.coherentMap(&m.latest)
	// The lines' versions made explicit, as kept ones are.
	for _, c := range m.caches {
		var lines spanMap[lineState]
		lines.setLazy(voidLine)
		m.explicitLines(c, &lines)
		c.lines = lines
	}
	m.keep = true
}

// explicitLines sets into dst, an empty map, c's lines with every
// version explicit: where a line holds version 0 while the latest
// writes are not kept, DRAM's versions.
func (m *Memory) explicitLines(c *cache, dst *spanMap[lineState]) {
	var pieces []span[lineState]
	c.lines.each(0, math.MaxUint64, func(ps, pe uint64, l lineState) bool {
		if l.ver != 0 || m.keep {
			dst.set(ps, pe, l)
			return true
		}
		pieces = m.dramPieces(pieces[:0], ps, pe, l)
		for _, p := range pieces {
			dst.set(p.start, p.end, p.v)
		}
		return true
	})
}

// coherentMap sets into dst, an empty map, the coherent value of every
// byte: DRAM's versions, then every cache's dirty lines over them.
func (m *Memory) coherentMap(dst *spanMap[Version]) {
	for _, l := range m.dram.leaves {
		for _, x := range l.s[:l.n] {
			dst.set(x.start, x.end, x.v)
		}
	}
	for i, c := range m.caches {
		if m.held&heldBit(i) == 0 {
			continue
		}
		c.lines.each(0, math.MaxUint64, func(ps, pe uint64, l lineState) bool {
			if l.dirty() && l.ver != 0 {
				dst.set(ps, pe, l.ver) // version 0 is DRAM's
			}
			return true
		})
	}
}

// coherentRead sets m.got to the coherent value of [s, e): DRAM's
// versions with the caches' dirty lines over them, what a snooping
// device reads.
func (m *Memory) coherentRead(s, e uint64) {
	m.dramRead(s, e)
	// Dirty lines replace DRAM's versions. A line is dirty in one
	// cache at most, so the caches' dirty pieces are disjoint; in
	// address order once sorted, when more than one cache has some.
	top := m.dirty[:0]
	from := 0
	for i, c := range m.caches {
		if m.held&heldBit(i) == 0 {
			continue // no line: nothing to add, from stays
		}
		c.lines.each(s, e, func(ps, pe uint64, l lineState) bool {
			if l.dirty() && (l.ver != 0 || m.keep) {
				// Not kept, version 0 is DRAM's.
				top = append(top, span[Version]{ps, pe, l.ver})
			}
			return true
		})
		if from > 0 && len(top) > from {
			slices.SortFunc(top, func(a, b span[Version]) int { return cmp.Compare(a.start, b.start) })
		}
		if len(top) > 0 {
			from = len(top)
		}
	}
	m.dirty = top
	if len(top) > 0 {
		m.overlay(top)
	}
}

// latestIn calls f for every span of the latest writes inside [s, e),
// clipped to it, in address order (version 0 left out).
func (m *Memory) latestIn(s, e uint64, f func(ps, pe uint64, v Version)) {
	if m.keep {
		m.latest.each(s, e, func(ps, pe uint64, v Version) bool { f(ps, pe, v); return true })
		return
	}
	// m.got may be a reader's, inside an access (a hook asking): the
	// walk uses a scratch of its own.
	got := m.got
	m.got = m.view[:0]
	m.coherentRead(s, e)
	m.view, m.got = m.got, got
	for _, p := range m.view {
		if a, b := max(p.start, s), min(p.end, e); a < b {
			f(a, b, p.v)
		}
	}
}

// verifyCoherent checks, while m.latest is not kept, what stands in for
// it: the map is empty and every clean line holds version 0, DRAM's
// (that a dirty line is in no other cache, verify checks always).
func (m *Memory) verifyCoherent() error {
	if m.keep {
		return nil
	}
	if m.latest.len() != 0 {
		return fmt.Errorf("latest not kept, but holds %d spans", m.latest.len())
	}
	for i, c := range m.caches {
		for _, sp := range c.lines.spans() {
			if !sp.v.dirty() && sp.v.ver != 0 {
				return fmt.Errorf("latest not kept, but cache %d holds [%#x, %#x) clean at version %d", i, sp.start, sp.end, sp.v.ver)
			}
		}
	}
	return nil
}

package mem

import (
	"fmt"
	"math/bits"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// lineState is what a cache holds for a byte: the version of its copy,
// and for its whole line, the fill that brought the line in (seq) and
// whether the line is dirty. seq and dirty are the same for every byte
// of a line; ver may differ inside a line (a partial write).
type lineState struct {
	ver   Version
	seq   uint64
	dirty bool
}

// cache is one node's CPU cache (the last-level cache shared by the
// node's cores): write-allocate, write-back, lines evicted in the order
// they were filled once the capacity is exceeded.
//
// lines maps addresses to lineState; an address without a span is not
// cached. Presence, seq and dirty change only over whole lines. fifo
// holds the fills in order; a fill's lines are those in its range that
// still carry its seq (an invalidated and refilled line belongs to the
// newer fill), so records of fills with no line left are dropped lazily.
type cache struct {
	line      uint64 // a power of two
	capacity  uint64
	prefetch  uint64
	wbCost    sim.Time
	invCost   sim.Time
	uncached  platform.Rate
	lines     spanMap[lineState]
	used      uint64 // bytes of lines present
	seq       uint64
	fifo      []fillRec
	head      int
	evictions uint64
}

type fillRec struct{ start, end, seq uint64 }

func newCache(n platform.Node) (*cache, error) {
	cc := n.Cache
	c := &cache{
		line:     uint64(cc.Line()),
		capacity: DefaultCacheSize,
		wbCost:   cc.WritebackCost.V,
		invCost:  cc.InvalidateCost.V,
		uncached: cc.UncachedRate.V,
	}
	if cc.LineSize.V < 0 || bits.OnesCount64(c.line) != 1 || c.line < 8 || c.line > PageSize {
		return nil, fmt.Errorf("cache line %d B: want a power of two from 8 B to a page: %w", cc.LineSize.V, ErrInvalid)
	}
	if cc.Size.V < 0 || cc.Prefetch.V < 0 || c.wbCost < 0 || c.invCost < 0 || c.uncached < 0 {
		return nil, fmt.Errorf("cache parameters must not be negative: %w", ErrInvalid)
	}
	if cc.Size.V > 0 {
		c.capacity = max(alignDown(uint64(cc.Size.V), c.line), c.line)
	}
	c.prefetch = uint64(cc.Prefetch.V)
	if c.uncached == 0 {
		c.uncached = n.MemcpyRate.V / 10
	}
	return c, nil
}

// cover is the line-aligned range holding [s, e).
func (c *cache) cover(s, e uint64) (uint64, uint64) {
	le, _ := alignUp(e, c.line)
	return alignDown(s, c.line), le
}

// fill brings every line of [s, e) (line-aligned) that is not present
// into c, each run of them as one fill holding DRAM's versions, clean.
func (m *Memory) fill(c *cache, s, e uint64) {
	m.gap = m.gap[:0]
	c.lines.gaps(s, e, func(gs, ge uint64) { m.gap = append(m.gap, extent{gs, ge}) })
	for _, g := range m.gap {
		m.fillGap(c, g.start, g.end)
	}
}

// fillGap brings [s, e), line-aligned and with no line present, into c
// as one fill holding DRAM's versions, clean: one write of the cache's
// map, however many versions DRAM holds there.
func (m *Memory) fillGap(c *cache, s, e uint64) {
	c.seq++
	seq := c.seq
	x := s
	pieces := m.linePieces[:0]
	m.dram.each(s, e, func(ds, de uint64, v Version) bool {
		if ds > x {
			pieces = append(pieces, span[lineState]{x, ds, lineState{seq: seq}})
		}
		pieces = append(pieces, span[lineState]{ds, de, lineState{ver: v, seq: seq}})
		x = de
		return true
	})
	if x < e {
		pieces = append(pieces, span[lineState]{x, e, lineState{seq: seq}})
	}
	m.linePieces = pieces
	c.lines.assign(s, e, pieces)
	c.used += e - s
	c.fifo = append(c.fifo, fillRec{s, e, seq})
}

// writeBack copies the dirty bytes of c in [s, e) to DRAM and says
// whether there were any.
func (m *Memory) writeBack(c *cache, s, e uint64) bool {
	any := false
	c.lines.each(s, e, func(ps, pe uint64, l lineState) bool {
		if l.dirty {
			m.dram.set(ps, pe, l.ver)
			any = true
		}
		return true
	})
	return any
}

// clean writes back the lines of [s, e) (line-aligned) and keeps them,
// clean.
func (m *Memory) clean(c *cache, s, e uint64) {
	if m.writeBack(c, s, e) {
		c.lines.update(s, e, func(l lineState) lineState { l.dirty = false; return l })
	}
}

// discard drops the lines of [s, e) (line-aligned), dirty or not.
func (m *Memory) discard(c *cache, s, e uint64) {
	c.used -= c.lines.covered(s, e)
	c.lines.remove(s, e)
}

// flush writes back and drops the lines of [s, e) (line-aligned):
// writeBack and discard in one pass over the lines.
func (m *Memory) flush(c *cache, s, e uint64) {
	var n uint64
	c.lines.each(s, e, func(ps, pe uint64, l lineState) bool {
		if l.dirty {
			m.dram.set(ps, pe, l.ver)
		}
		n += pe - ps
		return true
	})
	if n > 0 {
		c.used -= n
		c.lines.remove(s, e)
	}
}

// evict drops the oldest fills' lines, writing dirty ones back, until c
// is within its capacity.
func (m *Memory) evict(c *cache) {
	for c.used > c.capacity && c.head < len(c.fifo) {
		r := &c.fifo[c.head]
		// The first run of the fill's lines still present: spans with its
		// seq, touching. Runs start and end on line boundaries, since a
		// line's bytes share their seq.
		var ps, pe uint64
		found := false
		c.lines.each(r.start, r.end, func(s, e uint64, l lineState) bool {
			switch {
			case l.seq != r.seq:
				return !found
			case !found:
				ps, found = s, true
			case s != pe:
				return false
			}
			pe = e
			return true
		})
		if !found {
			c.head++
			continue
		}
		need, _ := alignUp(c.used-c.capacity, c.line)
		n := min(pe-ps, need)
		m.flush(c, ps, ps+n)
		c.evictions += n / c.line
		r.start = ps + n
		if r.start >= r.end {
			c.head++
		}
	}
	c.trim()
}

// trim drops consumed fill records and, when most records are of fills
// with no line left, those records.
func (c *cache) trim() {
	if c.head > 0 && c.head >= len(c.fifo)/2 {
		n := copy(c.fifo, c.fifo[c.head:])
		c.fifo = c.fifo[:n]
		c.head = 0
	}
	if len(c.fifo)-c.head <= 2*c.lines.len()+32 {
		return
	}
	w := c.head
	for _, r := range c.fifo[c.head:] {
		if c.live(r) {
			c.fifo[w] = r
			w++
		}
	}
	c.fifo = c.fifo[:w]
}

// live says whether some line of r's fill is still present.
func (c *cache) live(r fillRec) bool {
	found := false
	c.lines.each(r.start, r.end, func(_, _ uint64, l lineState) bool {
		found = l.seq == r.seq
		return !found
	})
	return found
}

// cacheRead is a CPU of node reading [s, e) through its cache: missing
// lines are filled (after other nodes' dirty copies are written back, as
// a snoop does), with the prefetcher's lines after each run of misses;
// m.got receives what the CPU obtained.
func (m *Memory) cacheRead(node int, s, e uint64) {
	c := m.caches[node]
	ls, le := c.cover(s, e)
	m.cand, m.candGap = m.cand[:0], m.candGap[:0]
	c.lines.gaps(ls, le, func(gs, ge uint64) {
		m.cand = append(m.cand, extent{gs, ge})
		m.candGap = append(m.candGap, true)
		if c.prefetch > 0 {
			pageEnd := alignDown(ge-1, PageSize) + PageSize
			if we := min(ge+c.prefetch*c.line, pageEnd); we > ge {
				m.cand = append(m.cand, extent{ge, we})
				m.candGap = append(m.candGap, false)
			}
		}
	})
	// A missed run is still all missing when it is filled, unless the
	// prefetch of the run before reached into it: then fill looks for
	// what is left, as it does for the prefetched lines.
	var done uint64
	for i, r := range m.cand {
		m.snoop(node, r.start, r.end, false)
		if m.candGap[i] && r.start >= done {
			m.fillGap(c, r.start, r.end)
		} else {
			m.fill(c, r.start, r.end)
		}
		done = max(done, r.end)
	}
	m.got = m.got[:0]
	c.lines.each(s, e, func(ps, pe uint64, l lineState) bool {
		m.gotAdd(ps, pe, l.ver)
		return true
	})
	m.evict(c)
}

// cacheWrite is a CPU of node writing version v over [s, e): other
// nodes' copies are flushed, the lines allocated in node's cache and
// made dirty.
func (m *Memory) cacheWrite(node int, s, e uint64, v Version) {
	c := m.caches[node]
	ls, le := c.cover(s, e)
	m.snoop(node, s, e, true)
	m.fill(c, ls, le)
	// One pass over the lines: all of [ls, le) dirty, the bytes of
	// [s, e) at v, written back as one assignment.
	pieces := m.linePieces[:0]
	c.lines.each(ls, le, func(ps, pe uint64, l lineState) bool {
		l.dirty = true
		if ps < s {
			pieces = append(pieces, span[lineState]{ps, min(pe, s), l})
		}
		if a, b := max(ps, s), min(pe, e); a < b {
			w := l
			w.ver = v
			pieces = append(pieces, span[lineState]{a, b, w})
		}
		if pe > e {
			pieces = append(pieces, span[lineState]{max(ps, e), pe, l})
		}
		return true
	})
	m.linePieces = pieces
	c.lines.assign(ls, le, pieces)
	m.latest.set(s, e, v)
	m.evict(c)
}

// snoop keeps the nodes' caches coherent with each other for an access
// by node to [s, e): the other nodes' dirty copies are written back
// (they stay, clean, for a read; they are dropped for a write).
func (m *Memory) snoop(node int, s, e uint64, write bool) {
	for i, o := range m.caches {
		if i == node || o.lines.len() == 0 {
			continue
		}
		os, oe := o.cover(s, e)
		if write {
			m.flush(o, os, oe)
		} else {
			m.clean(o, os, oe)
		}
	}
}

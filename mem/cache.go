package mem

import (
	"fmt"
	"math/bits"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// lineState is what a cache holds for a byte: the version of its copy,
// and for its whole line, the fill that brought the line in (its seq)
// and whether the line is dirty. seq and dirty are the same for every
// byte of a line; ver may differ inside a line (a partial write). seq
// and dirty share a word (seq<<1 | dirty), so that a span of lines is
// 32 bytes, not 40: the cache's map moves and scans a fifth less.
// While the latest writes are not kept, ver 0 stands for DRAM's version
// (latest.go).
type lineState struct {
	ver Version
	sd  uint64
}

// newLine is the state of a byte at ver in a line of fill seq.
func newLine(ver Version, seq uint64, dirty bool) lineState {
	l := lineState{ver: ver, sd: seq << 1}
	if dirty {
		l.sd |= 1
	}
	return l
}

// voidLine is the void value of a cache's lines (spanMap.setLazy): a
// line of fill 0, which no line has (fills count from 1).
var voidLine = lineState{sd: 1}

// seq is the fill that brought l's line in.
func (l lineState) seq() uint64 { return l.sd >> 1 }

// dirty says whether l's line is dirty.
func (l lineState) dirty() bool { return l.sd&1 != 0 }

// withDirty is l with its line dirty or clean.
func (l lineState) withDirty(d bool) lineState {
	l.sd &^= 1
	if d {
		l.sd |= 1
	}
	return l
}

// cache is one node's CPU cache (the last-level cache shared by the
// node's cores): write-allocate, write-back, lines evicted in the order
// they were filled once the capacity is exceeded.
//
// lines maps addresses to lineState; an address without a span is not
// cached (the map is lazy: a line cut keeps its span, void, for the
// fill that brings it back, and every reader takes it for absent). Presence, seq and dirty change only over whole lines. fifo
// holds the fills in order (and so in the order of their seq); a fill's
// lines are those in its range that still carry its seq (an invalidated
// and refilled line belongs to the newer fill), so records of fills with
// no line left are dropped lazily. A record counts its fill's bytes
// still present (live): a line leaves the cache only through flush and
// discard, which count it off, so that telling a dead record needs no
// search of the lines.
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
	renum     []uint64 // trim's scratch
	head      int
	evictions uint64
	bit       uint64 // this cache's bit in Memory.held (heldBit)
}

// fillRec is one fill: its range, its seq, and the bytes of its lines
// still present.
type fillRec struct{ start, end, seq, live uint64 }

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
	// A device's coherent write cuts lines that the driver's read
	// fills again over the same range: a lazy map keeps their spans.
	c.lines.setLazy(voidLine)
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
	if m.keep {
		m.linePieces = m.dramPieces(m.linePieces[:0], s, e, newLine(0, c.seq, false))
		c.lines.assign(s, e, m.linePieces)
	} else {
		// The fill's versions are DRAM's: version 0 (latest.go). One
		// span, and set writes it in place of the void span a device's
		// write left there (its fast path), without assign's general
		// walk.
		c.lines.set(s, e, newLine(0, c.seq, false))
	}
	c.used += e - s
	m.held |= c.bit
	c.fifo = append(c.fifo, fillRec{s, e, c.seq, e - s})
}

// dramPieces appends to pieces the spans of [s, e) as line states: l
// with DRAM's version of each byte (0 where DRAM holds none).
func (m *Memory) dramPieces(pieces []span[lineState], s, e uint64, l lineState) []span[lineState] {
	if s >= e {
		return pieces
	}
	x := s
	m.dram.each(s, e, func(ds, de uint64, v Version) bool {
		if ds > x {
			pieces = append(pieces, span[lineState]{x, ds, l})
		}
		w := l
		w.ver = v
		pieces = append(pieces, span[lineState]{ds, de, w})
		x = de
		return true
	})
	if x < e {
		pieces = append(pieces, span[lineState]{x, e, l})
	}
	return pieces
}

// gone counts n bytes of the lines of fill seq off its record: they left
// the cache. A line present has its fill's record (evict and trim drop
// only records with no line left), and the records' seqs are
// consecutive (trim numbers them anew when it drops some), so the
// record of seq is seq - fifo[0].seq records in.
func (c *cache) gone(seq, n uint64) {
	c.fifo[seq-c.fifo[0].seq].live -= n
}

// writeBack copies the dirty bytes of c in [s, e) to DRAM and says
// whether there were any.
func (m *Memory) writeBack(c *cache, s, e uint64) bool {
	m.wb = m.wb[:0]
	dirty := false
	c.lines.each(s, e, func(ps, pe uint64, l lineState) bool {
		if l.dirty() {
			dirty = true
			m.wbAdd(ps, pe, l)
		}
		return true
	})
	m.writeDRAM(m.wb)
	return dirty
}

// wbAdd appends the dirty piece [s, e) of a line in state l to m.wb, to
// be written back: but for version 0 while the latest writes are not
// kept, which stands for what DRAM holds already (latest.go).
func (m *Memory) wbAdd(s, e uint64, l lineState) {
	if l.ver != 0 || m.keep {
		m.wb = append(m.wb, span[Version]{s, e, l.ver})
	}
}

// writeDRAM makes DRAM hold pieces (in address order, disjoint; version
// 0 too): a set per piece would do, but a run of touching pieces (a
// dirty line's, whose parts were written at different times) is one
// assignment, one search.
func (m *Memory) writeDRAM(pieces []span[Version]) {
	for len(pieces) > 0 {
		n := 1
		for n < len(pieces) && pieces[n].start == pieces[n-1].end {
			n++
		}
		if n == 1 {
			m.dram.set(pieces[0].start, pieces[0].end, pieces[0].v)
		} else {
			// assign takes no piece of the zero value: where it has
			// none, it makes the zero value.
			run := m.wbRun[:0]
			for _, p := range pieces[:n] {
				if p.v != 0 {
					run = append(run, p)
				}
			}
			m.wbRun = run
			m.dram.assign(pieces[0].start, pieces[n-1].end, run)
		}
		pieces = pieces[n:]
	}
}

// clean writes back the lines of [s, e) (line-aligned) and keeps them,
// clean.
func (m *Memory) clean(c *cache, s, e uint64) {
	if m.writeBack(c, s, e) {
		keep := m.keep
		c.lines.update(s, e, func(l lineState) lineState {
			if !keep {
				l.ver = 0 // DRAM holds it now (latest.go)
			}
			return l.withDirty(false)
		})
	}
}

// discard drops the lines of [s, e) (line-aligned), dirty or not.
func (m *Memory) discard(c *cache, s, e uint64) {
	c.used -= c.lines.cut(s, e, func(ps, pe uint64, l lineState) { c.gone(l.seq(), pe-ps) })
	m.emptied(c)
}

// flush writes back and drops the lines of [s, e) (line-aligned):
// writeBack and discard in one pass over the lines.
func (m *Memory) flush(c *cache, s, e uint64) {
	m.wb = m.wb[:0]
	m.cutDirty(c, s, e)
	m.writeDRAM(m.wb)
}

// cutDirty drops the lines of [s, e) (line-aligned) and appends their
// dirty pieces to m.wb, to be written back.
func (m *Memory) cutDirty(c *cache, s, e uint64) {
	c.used -= c.lines.cut(s, e, func(ps, pe uint64, l lineState) {
		if l.dirty() {
			m.wbAdd(ps, pe, l)
		}
		c.gone(l.seq(), pe-ps)
	})
	m.emptied(c)
}

// heldBit is cache i's bit in Memory.held: its own for the first 63
// caches, one shared by the others (set when any of them fills, never
// cleared: it only makes the callers look).
func heldBit(i int) uint64 { return 1 << min(i, 63) }

// emptied clears c's bit in m.held when c holds no line.
func (m *Memory) emptied(c *cache) {
	if c.used == 0 && c.bit != 1<<63 {
		m.held &^= c.bit
	}
}

// evict drops the oldest fills' lines, writing dirty ones back, until c
// is within its capacity.
func (m *Memory) evict(c *cache) {
	// Most accesses find nothing to evict and nothing to trim, and
	// skip the call: trim does nothing unless records were consumed
	// (head > 0) or they outnumber twice the lines' spans (by 32: this
	// test is wider).
	if c.used > c.capacity || c.head > 0 || len(c.fifo) > 2*c.lines.n {
		m.evictTrim(c)
	}
}

// evictTrim is evict's loop and trim.
func (m *Memory) evictTrim(c *cache) {
	for c.used > c.capacity && c.head < len(c.fifo) {
		r := &c.fifo[c.head]
		// The first run of the fill's lines still present: spans with its
		// seq, touching. Runs start and end on line boundaries, since a
		// line's bytes share their seq.
		var ps, pe uint64
		found := false
		c.lines.each(r.start, r.end, func(s, e uint64, l lineState) bool {
			switch {
			case l.seq() != r.seq:
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
//
// The records' seqs stay consecutive (fifo[i].seq = fifo[0].seq + i):
// a fill takes the seq after the last record's, and when trim drops
// records from among the others, it numbers those kept anew, in order,
// from the first one's seq, and their lines with them. The numbering
// keeps every order and every (in)equality between lines' states, so
// the spans, the eviction order and all that is seen stay as they were;
// it costs a pass over the records and one over the lines, once per
// some lines' worth of fills.
func (c *cache) trim() {
	if c.head > 0 && c.head >= len(c.fifo)/2 {
		n := copy(c.fifo, c.fifo[c.head:])
		c.fifo = c.fifo[:n]
		c.head = 0
	}
	if len(c.fifo)-c.head <= 2*c.lines.len()+32 {
		return
	}
	// renum[i] is the new seq of the record i (old seq base+i) kept;
	// the records before head have no line left.
	base := c.fifo[0].seq
	renum := c.renum[:0]
	w := 0
	var first uint64
	for i, r := range c.fifo {
		renum = append(renum, 0)
		if i < c.head || r.live == 0 {
			continue
		}
		if w == 0 {
			first = r.seq
		}
		renum[i] = first + uint64(w)
		r.seq = renum[i]
		c.fifo[w] = r
		w++
	}
	c.renum = renum
	c.fifo, c.head = c.fifo[:w], 0
	if w == 0 {
		return
	}
	for _, l := range c.lines.leaves {
		for i := range l.s[:l.n] {
			if x := &l.s[i].v; *x != voidLine {
				*x = newLine(x.ver, renum[x.seq()-base], x.dirty())
			}
		}
	}
	c.seq = first + uint64(w) - 1
}

// cacheRead is a CPU of node reading [s, e) through its cache: missing
// lines are filled (after other nodes' dirty copies are written back, as
// a snoop does), with the prefetcher's lines after each run of misses;
// m.got receives what the CPU obtained. It says whether any line of
// [s, e) was missing.
//
// The fills are, in order, for each run of missing lines of [s, e): the
// run, then the lines missing among the prefetcher's after it (the run
// is left out where the prefetch before reached into it). Nothing but
// these fills changes the lines meanwhile (a snoop changes the other
// caches and DRAM), so the lines missing at each fill are those missing
// before the read that no earlier fill's range held: one walk over the
// lines up to the last prefetch window finds them all, and, when no
// line of [s, e) was missing, what the reader obtains.
func (m *Memory) cacheRead(node int, s, e uint64) bool {
	c := m.caches[node]
	if m.general {
		return m.cacheReadGeneral(node, s, e)
	}
	ls, le := c.cover(s, e)
	end := le
	if c.prefetch > 0 {
		// Each window ends by le + prefetch lines and within the page
		// of the run it follows, which ends by le.
		end = min(le+c.prefetch*c.line, alignDown(le-1, PageSize)+PageSize)
	}
	m.got, m.gap = m.got[:0], m.gap[:0]
	if !m.keep {
		if done, missed := m.refill(c, node, ls, le, end); done {
			return missed
		}
	}
	x := ls
	c.lines.each(ls, end, func(ps, pe uint64, l lineState) bool {
		if ps > x {
			m.gap = append(m.gap, extent{x, ps})
		}
		x = pe
		if a, b := max(ps, s), min(pe, e); a < b && m.keep {
			m.gotAdd(a, b, l.ver)
		}
		return true
	})
	if x < end {
		m.gap = append(m.gap, extent{x, end})
	}
	if len(m.gap) == 0 || m.gap[0].start >= le {
		m.evict(c)
		return false
	}
	// The runs of missed lines and their prefetch windows, in order.
	m.cand = m.cand[:0]
	for _, g := range m.gap {
		if g.start >= le {
			break
		}
		ge := min(g.end, le)
		m.cand = append(m.cand, extent{g.start, ge})
		if c.prefetch > 0 {
			pageEnd := alignDown(ge-1, PageSize) + PageSize
			if we := min(ge+c.prefetch*c.line, pageEnd); we > ge {
				m.cand = append(m.cand, extent{ge, we})
			}
		}
	}
	// All of [ls, le) missed: the reader obtains what its fill holds.
	whole := m.gap[0].start == ls && m.gap[0].end >= le
	var done uint64
	k := 0 // m.gap[k] is the first gap that may lie after done
	for ci, r := range m.cand {
		m.snoop(node, r.start, r.end, false)
		from := max(r.start, done)
		for k < len(m.gap) && m.gap[k].end <= from {
			k++
		}
		for q := k; q < len(m.gap) && m.gap[q].start < r.end; q++ {
			if gs, ge := max(m.gap[q].start, from), min(m.gap[q].end, r.end); gs < ge {
				m.fillGap(c, gs, ge)
			}
		}
		done = max(done, r.end)
		if ci == 0 && whole && m.keep {
			m.got = m.got[:0]
			for _, p := range m.linePieces {
				if a, b := max(p.start, s), min(p.end, e); a < b {
					m.gotAdd(a, b, p.v.ver)
				}
			}
		}
	}
	if !whole && m.keep {
		m.got = m.got[:0]
		c.lines.each(s, e, func(ps, pe uint64, l lineState) bool {
			m.gotAdd(ps, pe, l.ver)
			return true
		})
	}
	m.evict(c)
	return true
}

// refill is cacheRead's short way for its commonest reads, while the
// latest writes are not kept: a driver reading a buffer whose lines a
// device's coherent write has just cut, or a descriptor's status, in a
// line held or cut. It takes the read when every line of [ls, le) is
// present (a hit: nothing is filled, not even the prefetch window, as
// in the walk), or when none is and the prefetch window after it,
// [le, end), is either held whole or holds no line; otherwise it
// changes nothing and says so (done false). The read is then no miss,
// or one run of missed lines and one window, filled whole or not at
// all, which is what the general walk finds with its lists of gaps and
// windows: one walk from one search finds it here. missed says whether
// a line of [ls, le) was missing. The run's fill takes the place of the
// one void span the device's write left, where it has exactly the run's
// bounds, and else is spliced at the position the search found: no
// second search, and none of set's checks. The fill needs no merge
// check: its seq is new, so no neighbour holds its value. What the
// reader obtains is nothing, as in the walk (the fill holds DRAM's
// versions: version 0).
func (m *Memory) refill(c *cache, node int, ls, le, end uint64) (done, missed bool) {
	lm := &c.lines
	li, i := lm.seek(ls)
	// The run: k void spans overlap it; the live spans that overlap
	// it touch one another from ls to at, unless hole.
	k, at, hole := 0, ls, false
	pl, pi := li, i
	for ; pl < len(lm.leaves); pl, pi = lm.next(pl, pi) {
		y := &lm.leaves[pl].s[pi]
		if y.start >= le {
			break
		}
		if lm.isVoid(y) {
			k++
			continue
		}
		if y.start > at {
			hole = true
		}
		at = y.end
	}
	if at > ls {
		// A line present: a hit when all are (the live spans touch
		// from ls to le: no hole, so no void span among them either),
		// else the general walk.
		if hole || at < le {
			return false, false
		}
		m.evict(c)
		return true, false
	}
	// No line of the run present. The window: its live spans touch
	// from le to end (held), or there are none. A void span in it (or
	// one from the run reaching into it) leaves a hole before the next
	// live span or at the end.
	held, none := true, true
	at = le
	for ; pl < len(lm.leaves); pl, pi = lm.next(pl, pi) {
		y := &lm.leaves[pl].s[pi]
		if y.start >= end {
			break
		}
		if lm.isVoid(y) {
			continue
		}
		none = false
		if y.start != at {
			held = false
		}
		at = y.end
	}
	held = held && at >= end
	if !held && !none {
		return false, false
	}
	// The snoops change the other caches and DRAM, not c's lines: the
	// position found stays.
	m.snoop(node, ls, le, false)
	c.seq++
	v := newLine(0, c.seq, false)
	if x := lm.at(li, i); k == 1 && x.start == ls && x.end == le {
		x.v = v
		lm.n++
		lm.voids--
	} else {
		one := [1]span[lineState]{{ls, le, v}}
		lm.assignAt(li, i, ls, le, one[:])
	}
	c.used += le - ls
	m.held |= c.bit
	c.fifo = append(c.fifo, fillRec{ls, le, c.seq, le - ls})
	if end > le {
		m.snoop(node, le, end, false)
		if !held {
			m.fillGap(c, le, end)
		}
	}
	m.evict(c)
	return true, true
}

// cacheReadGeneral is cacheRead as it was before its one walk: a
// search for the missed runs, a fill (a search for the gaps) per
// prefetch window, a walk for what the reader obtains. Tests hold the
// fast path to it (Memory.general).
func (m *Memory) cacheReadGeneral(node int, s, e uint64) bool {
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
	return len(m.cand) > 0
}

// cacheWrite is a CPU of node writing version v over [s, e): other
// nodes' copies are flushed, the lines allocated in node's cache and
// made dirty.
//
// Where all of the lines are present, or none is, one walk of the lines
// finds it and one assignment writes them (the missing lines as one
// fill, with DRAM's versions only in the parts of the first and last
// line that the write leaves); otherwise the lines missing are filled
// first, as a read fills them, and then written.
func (m *Memory) cacheWrite(node int, s, e uint64, v Version) {
	c := m.caches[node]
	ls, le := c.cover(s, e)
	m.snoop(node, s, e, true)
	// One pass over the lines: all of [ls, le) dirty, the bytes of
	// [s, e) at v, written back as one assignment.
	pieces := m.linePieces[:0]
	x := ls
	hole := false
	dirty := func(ps, pe uint64, l lineState) bool {
		if ps > x {
			hole = true
			return false
		}
		x = pe
		l = l.withDirty(true)
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
	}
	// The walk's search is the assignment's too where nothing is
	// filled between them: the map, and so the position, is unchanged.
	var li, i int
	if !m.general {
		li, i = c.lines.eachAt(ls, le, dirty)
	}
	switch {
	case !m.general && !hole && x == le:
		// Every line present: pieces holds them, written.
	case !m.general && !hole && x == ls:
		// No line present: one fill, written as it is made.
		c.seq++
		l := newLine(0, c.seq, true)
		w := l
		w.ver = v
		if m.keep {
			pieces = m.dramPieces(pieces[:0], ls, s, l)
			pieces = append(pieces, span[lineState]{s, e, w})
			pieces = m.dramPieces(pieces, e, le, l)
		} else {
			// DRAM's versions around the write are version 0
			// (latest.go).
			pieces = pieces[:0]
			if ls < s {
				pieces = append(pieces, span[lineState]{ls, s, l})
			}
			pieces = append(pieces, span[lineState]{s, e, w})
			if e < le {
				pieces = append(pieces, span[lineState]{e, le, l})
			}
		}
		c.used += le - ls
		m.held |= c.bit
		c.fifo = append(c.fifo, fillRec{ls, le, c.seq, le - ls})
	default:
		m.fill(c, ls, le)
		pieces, x = pieces[:0], ls
		li, i = c.lines.eachAt(ls, le, dirty)
	}
	m.linePieces = pieces
	c.lines.assignAt(li, i, ls, le, pieces)
	if m.keep {
		m.latest.set(s, e, v)
	}
	m.evict(c)
}

// snoop keeps the nodes' caches coherent with each other for an access
// by node to [s, e): the other nodes' dirty copies are written back
// (they stay, clean, for a read; they are dropped for a write).
func (m *Memory) snoop(node int, s, e uint64, write bool) {
	if m.held&^heldBit(node) == 0 {
		return // no other cache holds a line: the common case
	}
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

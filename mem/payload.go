package mem

// jseg is the bytes a write put at pa: one physically contiguous piece
// of a write's data.
type jseg struct {
	pa   uint64
	data []byte
}

// record keeps data as the bytes of write v over segs, in payload mode.
// The journal is a map from version to bytes; reads assemble their bytes
// from the versions they obtained, so stale readers get the old bytes.
func (m *Memory) record(v Version, segs []PhysRange, data []byte) {
	if !m.opt.Payload || data == nil {
		return
	}
	d := make([]byte, len(data))
	copy(d, data)
	rec := make([]jseg, 0, len(segs))
	var off uint64
	for _, sg := range segs {
		rec = append(rec, jseg{uint64(sg.Start), d[off : off+sg.Size]})
		off += sg.Size
	}
	m.journal[v] = rec
}

// assemble fills buf, which stands for [s, e), with the bytes of the
// versions the reader obtained (m.got); version 0 and writes made
// without bytes read as zeros, as does everything without payload mode.
func (m *Memory) assemble(buf []byte, s, e uint64) {
	clear(buf)
	if !m.opt.Payload {
		return
	}
	for _, g := range m.got {
		ps, pe := max(g.start, s), min(g.end, e)
		if ps >= pe {
			continue
		}
		for _, j := range m.journal[g.v] {
			js, je := j.pa, j.pa+uint64(len(j.data))
			if lo, hi := max(ps, js), min(pe, je); lo < hi {
				copy(buf[lo-s:hi-s], j.data[lo-js:hi-js])
			}
		}
	}
}

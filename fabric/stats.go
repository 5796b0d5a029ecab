package fabric

import "github.com/dmalab/dmalab/sim"

// LinkStats is what a link has carried up to now, per direction of travel
// (index by Dir: s.Bytes[fabric.AtoB]).
type LinkStats struct {
	// Bytes carried travelling that way: each flow's bytes through so far
	// times its hop's weight. Cross traffic is not payload and is not
	// counted.
	Bytes [2]float64
	// Busy is the time during which at least one flow was transferring
	// over the link that way.
	Busy [2]sim.Time
	// PeakUtil is the highest load over effective capacity of the resource
	// carrying that direction, cross traffic included; on a Shared link
	// both directions report the one resource.
	PeakUtil [2]float64
}

// Stats is l's traffic up to now.
func (l *Link) Stats() LinkStats {
	f := l.fab
	dt := f.eng.Now() - f.last
	var s LinkStats
	for d := range 2 {
		st := &l.dir[d]
		s.Bytes[d] = st.bytes + st.rate*float64(dt)/float64(sim.Second)
		s.Busy[d] = st.busy
		if st.n > 0 {
			s.Busy[d] += dt
		}
		s.PeakUtil[d] = f.res[l.res[d]].peak
	}
	return s
}

// Stats is l's traffic up to now; the same as l.Stats().
func (f *Fabric) Stats(l *Link) LinkStats { return l.Stats() }

// advanceStats adds the traffic since the last recompute, dt, to the
// counters of the link directions in use.
func (f *Fabric) advanceStats(dt sim.Time) {
	for _, u := range f.used {
		st := &f.links[u/2].dir[u%2]
		st.bytes += st.rate * float64(dt) / float64(sim.Second)
		if st.n > 0 {
			st.busy += dt
		}
	}
}

// restartStats sets the per-direction rates from the new flow rates.
func (f *Fabric) restartStats() {
	for _, u := range f.used {
		st := &f.links[u/2].dir[u%2]
		st.rate, st.n = 0, 0
	}
	f.used = f.used[:0]
	for _, fl := range f.active {
		for _, h := range fl.route.Hops {
			st := &h.Link.dir[h.Dir]
			if st.n == 0 {
				f.used = append(f.used, int32(h.Link.index*2+int(h.Dir)))
			}
			st.n++
			st.rate += h.weight() * fl.rate
		}
	}
	for _, r := range f.touched {
		res := &f.res[r]
		res.peak = max(res.peak, (res.cap-res.rem)/res.cap)
	}
}

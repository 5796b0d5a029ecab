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
// counters of the link directions in use, and forgets those that no flow
// crosses any more.
func (f *Fabric) advanceStats(dt sim.Time) {
	kept := f.used[:0]
	for _, st := range f.used {
		st.bytes += st.rate * float64(dt) / float64(sim.Second)
		if st.n > 0 {
			st.busy += dt
			kept = append(kept, st)
		} else {
			st.inUsed = false
		}
	}
	// (The tail keeps pointers into the fabric's own links: nothing
	// for the collector to free.)
	f.used = kept
}

// clearStats zeroes the per-direction rates and flow counts of the
// component's link directions, for countStats to sum anew from the new
// rates; the other directions carry flows of other components only,
// whose rates did not change. It puts the directions in f.used, which
// holds every direction that countStats adds to: one that ends up with
// no flows carries nothing (its rate is 0) and leaves f.used at the next
// advanceStats.
func (f *Fabric) clearStats() {
	// clearRes's body, in the loop: a call per resource costs a few per
	// cent of a busy fabric's recompute.
	for _, r := range f.comp {
		res := &f.res[r]
		l := res.link
		if res.dirs == 2 {
			f.clearDir(l, 0)
			f.clearDir(l, 1)
		} else {
			f.clearDir(l, int(res.dirs))
		}
		res.peak = max(res.peak, (res.cap-f.fst[r].rem)/res.cap)
	}
}

// clearRes clears the counters of resource r's link directions and
// raises its peak to the load its filling state leaves on it.
func (f *Fabric) clearRes(r int32) {
	res := f.clearDirs(r)
	res.peak = max(res.peak, (res.cap-f.fst[r].rem)/res.cap)
}

// clearDirs clears the counters of resource r's link directions, and
// returns r.
func (f *Fabric) clearDirs(r int32) *resource {
	res := &f.res[r]
	l := res.link
	if res.dirs == 2 {
		f.clearDir(l, 0)
		f.clearDir(l, 1)
	} else {
		f.clearDir(l, int(res.dirs))
	}
	return res
}

func (f *Fabric) clearDir(l *Link, d int) {
	st := &l.dir[d]
	st.rate, st.n = 0, 0
	if !st.inUsed {
		st.inUsed = true
		f.used = append(f.used, st)
	}
}

// countStats adds g's flows and new rate to the counters of the link
// directions it crosses (countBatch for a batch). The recompute counts the component's groups in
// creation order, so that the sums are those of a recompute of every
// group, bit for bit.
func (f *Fabric) countStats(g *group) {
	n, rate := g.n, g.rate
	k := float64(n)
	for _, d := range g.dirs {
		st := d.st
		st.n += int32(n)
		// × k: exact for a group of one, which so sums as a flow.
		st.rate += d.w * rate * k
	}
}

// countBatch is countStats for batch g: its flows one after the other,
// as groups of one.
func (f *Fabric) countBatch(g *group) {
	for range g.n {
		for _, d := range g.dirs {
			d.st.rate += d.w * g.rate * 1
		}
	}
	for _, d := range g.dirs {
		d.st.n += int32(g.n)
	}
}

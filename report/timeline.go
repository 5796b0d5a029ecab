package report

import (
	"cmp"
	"slices"
	"strings"

	"github.com/dmalab/dmalab/sim"
)

// Timeline is a trace reduced for a picture: per track (a copy engine, a
// link direction, a memory), when it was busy and its throughput over
// time. A trace of a long run holds tens of thousands of slices; a page
// shows a few hundred pixels across, so busy spans closer than one
// pixel's worth of time are merged and bytes are summed into bins.
type Timeline struct {
	// Seconds is the end of the last slice: the span drawn.
	Seconds float64 `json:"seconds"`
	// BinSeconds is the width of each bin of TimelineTrack.GBps.
	BinSeconds float64         `json:"bin_seconds"`
	Tracks     []TimelineTrack `json:"tracks"`
}

// TimelineTrack is one track of a Timeline.
type TimelineTrack struct {
	Name string `json:"name"`
	// Kind is "engine" for a copy engine's transfers, "link" for the
	// flows over a link direction or a memory.
	Kind string `json:"kind"`
	// Slices is how many slices (transfers or flows) the track had;
	// Bytes what they moved.
	Slices int   `json:"slices"`
	Bytes  int64 `json:"bytes"`
	// Busy are the spans in which at least one slice was active, in
	// seconds, start and end, merged where closer than the resolution.
	Busy [][2]float64 `json:"busy"`
	// GBps is the mean throughput in each bin (bytes of each slice
	// spread evenly over its duration), GB/s.
	GBps []float64 `json:"gbps"`
}

// Timeline reduces t to at most about resolution busy spans per track and
// bins throughput bins. Slices whose arguments name a source ("src") are
// a copy engine's transfers; the others are flows on links.
func (t *Trace) Timeline(resolution, bins int) *Timeline {
	var end sim.Time
	for _, tr := range t.tracks {
		for _, s := range tr.slices {
			end = max(end, s.end)
		}
	}
	if end == 0 || resolution < 1 || bins < 1 {
		return nil
	}
	sec := func(ps sim.Time) float64 { return float64(ps) / float64(sim.Second) }
	gap := end / sim.Time(resolution)
	binW := float64(end) / float64(bins)
	tl := &Timeline{Seconds: sec(end), BinSeconds: sec(end) / float64(bins)}
	for _, tr := range t.tracks {
		out := TimelineTrack{Name: tr.name, Kind: "link", Slices: len(tr.slices), GBps: make([]float64, bins)}
		byStart := slices.Clone(tr.slices)
		slices.SortStableFunc(byStart, func(a, b slice) int { return cmp.Compare(a.start, b.start) })
		var cur [2]sim.Time
		open := false
		for _, s := range byStart {
			if _, ok := s.args["src"]; ok {
				out.Kind = "engine"
			}
			b := sliceBytes(s.args)
			out.Bytes += b
			spread(out.GBps, binW, float64(s.start), float64(s.end), float64(b))
			switch {
			case !open:
				cur, open = [2]sim.Time{s.start, s.end}, true
			case s.start <= cur[1]+gap:
				cur[1] = max(cur[1], s.end)
			default:
				out.Busy = append(out.Busy, [2]float64{sec(cur[0]), sec(cur[1])})
				cur = [2]sim.Time{s.start, s.end}
			}
		}
		if open {
			out.Busy = append(out.Busy, [2]float64{sec(cur[0]), sec(cur[1])})
		}
		// Bytes per bin to GB/s.
		for i := range out.GBps {
			out.GBps[i] /= tl.BinSeconds * 1e9
		}
		tl.Tracks = append(tl.Tracks, out)
	}
	// Engines first, then links, each in the order they appeared: the
	// picture reads from who moved data to where it went.
	slices.SortStableFunc(tl.Tracks, func(a, b TimelineTrack) int { return strings.Compare(a.Kind, b.Kind) })
	return tl
}

// sliceBytes is a slice's "bytes" argument, 0 when it has none.
func sliceBytes(args map[string]any) int64 {
	switch v := args["bytes"].(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case float64:
		return int64(v)
	}
	return 0
}

// spread adds bytes, moved evenly from start to end (picoseconds), to
// the bins of width w they overlap; a slice of no duration adds to the
// bin of its instant.
func spread(bins []float64, w, start, end, bytes float64) {
	n := len(bins)
	first := min(int(start/w), n-1)
	if end <= start {
		bins[first] += bytes
		return
	}
	last := min(int(end/w), n-1)
	for i := first; i <= last; i++ {
		lo, hi := max(start, float64(i)*w), min(end, float64(i+1)*w)
		if i == n-1 {
			hi = end
		}
		if hi > lo {
			bins[i] += bytes * (hi - lo) / (end - start)
		}
	}
}

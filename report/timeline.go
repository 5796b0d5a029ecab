package report

import (
	"cmp"
	"math"
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

// timelineRec keeps, per track, what Timeline draws: the slices of
// engines and devices (start, end, bytes) and the steps of counters (a
// link direction's load in bytes/s from an instant on). A streamed
// trace keeps nothing of what it wrote, so this is kept only when asked
// (RecordTimeline): its memory grows with the run, as an HTML report's
// picture of the run needs.
type timelineRec struct {
	order  []string
	tracks map[string]*tlTrack
}

type tlTrack struct {
	name   string
	engine bool
	slices []tlSlice
	steps  []tlStep
}

type tlSlice struct {
	start, end sim.Time
	bytes      int64
}

type tlStep struct {
	ts sim.Time
	v  float64
}

// RecordTimeline makes t keep what Timeline needs from here on.
func (t *Trace) RecordTimeline() {
	if t.tl == nil {
		t.tl = &timelineRec{tracks: map[string]*tlTrack{}}
	}
}

func (r *timelineRec) track(name string) *tlTrack {
	tr := r.tracks[name]
	if tr == nil {
		tr = &tlTrack{name: name}
		r.tracks[name] = tr
		r.order = append(r.order, name)
	}
	return tr
}

func (r *timelineRec) slice(name string, start, end sim.Time, args []Arg) {
	tr := r.track(name)
	var bytes int64
	for _, a := range args {
		switch a.Key {
		case "src":
			// Slices that name a source are a copy engine's (or a
			// device's) transfers.
			tr.engine = true
		case "bytes":
			bytes = argBytes(a.Value)
		}
	}
	tr.slices = append(tr.slices, tlSlice{start, end, bytes})
}

func (r *timelineRec) step(name string, ts sim.Time, v float64) {
	tr := r.track(name)
	tr.steps = append(tr.steps, tlStep{ts, v})
}

// Timeline reduces what t recorded (RecordTimeline) to at most about
// resolution busy spans per track and bins throughput bins. Tracks of
// slices that name a source are engines; counters (a link direction's
// load in bytes/s) and other slices are links. nil when nothing was
// recorded.
func (t *Trace) Timeline(resolution, bins int) *Timeline {
	if t.tl == nil || resolution < 1 || bins < 1 {
		return nil
	}
	var end sim.Time
	for _, name := range t.tl.order {
		tr := t.tl.tracks[name]
		for _, s := range tr.slices {
			end = max(end, s.end)
		}
		for _, s := range tr.steps {
			end = max(end, s.ts)
		}
	}
	if end == 0 {
		return nil
	}
	sec := func(ps sim.Time) float64 { return float64(ps) / float64(sim.Second) }
	gap := end / sim.Time(resolution)
	binW := float64(end) / float64(bins)
	tl := &Timeline{Seconds: sec(end), BinSeconds: sec(end) / float64(bins)}
	for _, name := range t.tl.order {
		tr := t.tl.tracks[name]
		out := TimelineTrack{Name: tr.name, Kind: "link", GBps: make([]float64, bins)}
		if tr.engine {
			out.Kind = "engine"
		}
		// A counter's steps become slices: each interval of non-zero
		// load, its bytes the load times the interval.
		spans := slices.Clone(tr.slices)
		for i, s := range tr.steps {
			if s.v <= 0 {
				continue
			}
			e := end
			if i+1 < len(tr.steps) {
				e = tr.steps[i+1].ts
			}
			spans = append(spans, tlSlice{s.ts, e, int64(math.Round(s.v * sec(e-s.ts)))})
		}
		slices.SortStableFunc(spans, func(a, b tlSlice) int { return cmp.Compare(a.start, b.start) })
		out.Slices = len(spans)
		var cur [2]sim.Time
		open := false
		for _, s := range spans {
			out.Bytes += s.bytes
			spread(out.GBps, binW, float64(s.start), float64(s.end), float64(s.bytes))
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
		if out.Slices == 0 || out.Bytes == 0 && !tr.engine {
			// Nothing drawn, or CPU work (slices that move no bytes):
			// the picture is of engines and links.
			continue
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

// argBytes is a "bytes" argument's value as an integer.
func argBytes(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case uint64:
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

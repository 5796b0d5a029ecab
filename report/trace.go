package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/dmalab/dmalab/sim"
)

// Trace collects slices on named tracks (a link direction, a copy
// engine) and writes them in the Chrome trace-event format.
//
// A Chrome "complete" event (ph "X") must nest properly within its
// thread, but flows sharing a link overlap arbitrarily; so each track is
// split into lanes, and a slice goes to the first lane that is free when
// it starts. Slices must be added in order of their start time for the
// lane assignment to be tight; any order is still valid.
type Trace struct {
	Process string
	tracks  []*track
	byName  map[string]*track
	tids    int
}

type track struct {
	name   string
	order  int
	lanes  []lane
	slices []slice
}

type lane struct {
	tid  int
	busy sim.Time // end of the last slice in this lane
}

type slice struct {
	tid        int
	name       string
	start, end sim.Time
	args       map[string]any
}

// NewTrace returns an empty trace whose process is named process.
func NewTrace(process string) *Trace {
	return &Trace{Process: process, byName: map[string]*track{}}
}

// Slice adds a slice named name on track from start to end, with args
// shown in the viewer's details pane.
func (t *Trace) Slice(trackName, name string, start, end sim.Time, args map[string]any) {
	tr := t.byName[trackName]
	if tr == nil {
		tr = &track{name: trackName, order: len(t.tracks)}
		t.tracks = append(t.tracks, tr)
		t.byName[trackName] = tr
	}
	i := slices.IndexFunc(tr.lanes, func(l lane) bool { return l.busy <= start })
	if i < 0 {
		t.tids++
		tr.lanes = append(tr.lanes, lane{tid: t.tids})
		i = len(tr.lanes) - 1
	}
	tr.lanes[i].busy = end
	tr.slices = append(tr.slices, slice{tid: tr.lanes[i].tid, name: name, start: start, end: end, args: args})
}

// Len is the number of slices.
func (t *Trace) Len() int {
	n := 0
	for _, tr := range t.tracks {
		n += len(tr.slices)
	}
	return n
}

// micros formats picoseconds as microseconds, exactly (Chrome trace
// timestamps are in µs).
func micros(ps sim.Time) string {
	neg := ps < 0
	if neg {
		ps = -ps
	}
	s := strconv.FormatInt(int64(ps/sim.Microsecond), 10)
	if frac := int64(ps % sim.Microsecond); frac != 0 {
		f := fmt.Sprintf("%06d", frac)
		for f[len(f)-1] == '0' {
			f = f[:len(f)-1]
		}
		s += "." + f
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Write writes the trace as a JSON object with a traceEvents array: one
// process, a named thread per lane of each track (sorted in the order the
// tracks appeared), and a complete event per slice.
func (t *Trace) Write(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
	name, _ := json.Marshal(t.Process)
	fmt.Fprintf(bw, "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":%s}}", name)
	for _, tr := range t.tracks {
		for i, l := range tr.lanes {
			label := tr.name
			if i > 0 {
				label = fmt.Sprintf("%s #%d", tr.name, i+1)
			}
			ln, _ := json.Marshal(label)
			fmt.Fprintf(bw, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":%s}}", l.tid, ln)
			fmt.Fprintf(bw, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}", l.tid, l.tid)
		}
	}
	for _, tr := range t.tracks {
		for _, s := range tr.slices {
			sn, _ := json.Marshal(s.name)
			fmt.Fprintf(bw, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"name\":%s,\"ts\":%s,\"dur\":%s",
				s.tid, sn, micros(s.start), micros(s.end-s.start))
			if len(s.args) > 0 {
				// encoding/json sorts map keys: deterministic.
				a, err := json.Marshal(s.args)
				if err != nil {
					return fmt.Errorf("trace slice %s: %w", s.name, err)
				}
				fmt.Fprintf(bw, ",\"args\":%s", a)
			}
			bw.WriteString("}")
		}
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/dmalab/dmalab/sim"
)

// Trace writes a Chrome trace-event file (the JSON object format that
// Perfetto, ui.perfetto.dev, and chrome://tracing open) while a run
// produces it: every event goes to a buffered writer as it is added, so
// the memory a trace takes is that of its tracks, never of its events.
// The format allows this: the traceEvents array need not be sorted by
// time, and metadata events ("M") may come anywhere in it.
//
// Events are grouped as the viewers group them: a process (pid) per
// thing that owns tracks (the machine with its links' counters, each
// device and GPU with its engines, the CPU with the model's threads),
// and a thread (tid) per track within it.
//
// A complete event ("X") must nest within its thread, but the transfers
// of one bus master may overlap; so a track is split into lanes, and a
// slice goes to the first lane free when it starts (a lane is a thread
// named "track #2", "#3", ...). Slices need not come in order of start;
// lanes are then merely less tight.
//
// Close ends the JSON document; a trace that is not closed is not valid
// JSON. Errors of the underlying writer are kept: the first is returned
// by Err and Close, and nothing more is written after it.
type Trace struct {
	w     *bufio.Writer
	mem   *bytes.Buffer // the document, for a trace kept in memory
	err   error
	first bool // no event written yet
	done  bool

	procs   []*TraceProcess
	byName  map[string]*TraceProcess
	tids    int
	slices  int
	events  int
	tracks  int
	asyncID int64
	meta    TraceMeta
	scratch []byte
	// tl, when RecordTimeline was called, keeps what Timeline draws.
	tl *timelineRec
}

// TraceMeta is what the run was: written as the document's top-level
// "metadata" object when the trace is closed.
type TraceMeta struct {
	Scenario string
	Platform string
	// Params are the run's parameters as given or defaulted (seed
	// included).
	Params map[string]string
	// Version is the program's module version and VCS revision.
	Version string
	// Error is why the run failed, empty when it did not.
	Error string
}

// TraceProcess is one process of the trace: a group of tracks.
type TraceProcess struct {
	t        *Trace
	pid      int
	name     string
	threads  map[string]*Track
	counters map[string]*Counter
	async    map[string]bool
}

// Track is one track of slices (a thread, split into lanes as needed).
type Track struct {
	p     *TraceProcess
	name  string
	lanes []lane
}

type lane struct {
	tid  int
	busy sim.Time // end of the last slice in this lane
}

// Counter is a counter track: a value over time ("C" events), drawn as a
// step function.
type Counter struct {
	p      *TraceProcess
	name   string
	series string
	last   float64
	set    bool
}

// Arg is one entry of an event's args, shown in the viewer's details
// pane. Args are written in the order given.
type Arg struct {
	Key   string
	Value any
}

// NewTrace returns a trace kept in memory, whose first process (the
// machine) is named title; Write copies it out.
func NewTrace(title string) *Trace {
	var b bytes.Buffer
	t := NewTraceTo(&b, title)
	t.mem = &b
	return t
}

// NewTraceTo returns a trace that streams to w, whose first process (the
// machine) is named title.
func NewTraceTo(w io.Writer, title string) *Trace {
	t := &Trace{w: bufio.NewWriterSize(w, 64<<10), first: true, byName: map[string]*TraceProcess{}}
	t.w.WriteString("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")
	t.Process(title)
	return t
}

// Machine is the trace's first process, named by NewTrace's title.
func (t *Trace) Machine() *TraceProcess { return t.procs[0] }

// Process returns the process called name, creating it (with its
// metadata events) the first time. Processes sort in creation order.
func (t *Trace) Process(name string) *TraceProcess {
	if p := t.byName[name]; p != nil {
		return p
	}
	p := &TraceProcess{t: t, pid: len(t.procs) + 1, name: name, threads: map[string]*Track{}, counters: map[string]*Counter{}}
	t.procs = append(t.procs, p)
	t.byName[name] = p
	b := t.begin("M", "")
	b = appendPidTid(b, p.pid, 0)
	b = append(b, `,"name":"process_name","args":{"name":`...)
	b = appendString(b, name)
	b = append(b, "}}"...)
	t.end(b)
	b = t.begin("M", "")
	b = appendPidTid(b, p.pid, 0)
	b = append(b, `,"name":"process_sort_index","args":{"sort_index":`...)
	b = strconv.AppendInt(b, int64(p.pid), 10)
	b = append(b, "}}"...)
	t.end(b)
	return p
}

// Name is the process's name.
func (p *TraceProcess) Name() string { return p.name }

// Thread returns p's track called name, creating it the first time (its
// first lane is named when the first slice lands in it).
func (p *TraceProcess) Thread(name string) *Track {
	tr := p.threads[name]
	if tr == nil {
		tr = &Track{p: p, name: name}
		p.threads[name] = tr
	}
	return tr
}

// Counter returns p's counter track called name, whose values are
// shown under series (a unit: "bytes/s"), creating it the first time.
func (p *TraceProcess) Counter(name, series string) *Counter {
	c := p.counters[name]
	if c == nil {
		c = &Counter{p: p, name: name, series: series}
		p.counters[name] = c
	}
	return c
}

// Slice adds a complete event named name of category cat (the cause:
// call, queue, translate, transfer, fault, access, lifecycle) from start
// to end on tr.
func (tr *Track) Slice(cat, name string, start, end sim.Time, args ...Arg) {
	t := tr.p.t
	if t.done {
		return
	}
	i := slices.IndexFunc(tr.lanes, func(l lane) bool { return l.busy <= start })
	if i < 0 {
		t.tids++
		tr.lanes = append(tr.lanes, lane{tid: t.tids})
		i = len(tr.lanes) - 1
		t.nameLane(tr, i)
	}
	if end > tr.lanes[i].busy {
		tr.lanes[i].busy = end
	}
	t.slices++
	if t.tl != nil {
		t.tl.slice(tr.name, start, end, args)
	}
	b := t.begin("X", cat)
	b = appendPidTid(b, tr.p.pid, tr.lanes[i].tid)
	b = append(b, `,"name":`...)
	b = appendString(b, name)
	b = append(b, `,"ts":`...)
	b = appendMicros(b, start)
	b = append(b, `,"dur":`...)
	b = appendMicros(b, end-start)
	b = appendArgs(b, args)
	b = append(b, '}')
	t.end(b)
}

// Async adds a slice named name on p's async track group (the viewers
// gather async slices of one name in one group, rows added as they
// overlap), of category cat, from start to end, with args: for work
// that overlaps without bound, a device's transfers in flight.
func (p *TraceProcess) Async(cat, name string, start, end sim.Time, args ...Arg) {
	t := p.t
	if t.done {
		return
	}
	if !p.async[name] {
		if p.async == nil {
			p.async = map[string]bool{}
		}
		p.async[name] = true
		t.tracks++
	}
	t.slices++
	if t.tl != nil {
		t.tl.slice(name, start, end, args)
	}
	t.asyncID++
	for _, ph := range [2]string{"b", "e"} {
		b := t.begin(ph, cat)
		b = appendPidTid(b, p.pid, 0)
		b = append(b, `,"id":`...)
		b = strconv.AppendInt(b, t.asyncID, 10)
		b = append(b, `,"name":`...)
		b = appendString(b, name)
		b = append(b, `,"ts":`...)
		if ph == "b" {
			b = appendMicros(b, start)
			b = appendArgs(b, args)
		} else {
			b = appendMicros(b, end)
		}
		b = append(b, '}')
		t.end(b)
	}
}

// nameLane writes the metadata of lane i of tr, a new thread.
func (t *Trace) nameLane(tr *Track, i int) {
	t.tracks++
	label := tr.name
	if i > 0 {
		label = tr.name + " #" + strconv.Itoa(i+1)
	}
	tid := tr.lanes[i].tid
	b := t.begin("M", "")
	b = appendPidTid(b, tr.p.pid, tid)
	b = append(b, `,"name":"thread_name","args":{"name":`...)
	b = appendString(b, label)
	b = append(b, "}}"...)
	t.end(b)
	b = t.begin("M", "")
	b = appendPidTid(b, tr.p.pid, tid)
	b = append(b, `,"name":"thread_sort_index","args":{"sort_index":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	b = append(b, "}}"...)
	t.end(b)
}

// Set records the counter's value v from ts on; a value equal to the
// last one writes nothing.
func (c *Counter) Set(ts sim.Time, v float64) {
	t := c.p.t
	if t.done || (c.set && v == c.last) {
		return
	}
	if !c.set {
		t.tracks++
	}
	c.last, c.set = v, true
	if t.tl != nil {
		t.tl.step(c.name, ts, v)
	}
	b := t.begin("C", "")
	b = appendPidTid(b, c.p.pid, 0)
	b = append(b, `,"name":`...)
	b = appendString(b, c.name)
	b = append(b, `,"ts":`...)
	b = appendMicros(b, ts)
	b = append(b, `,"args":{`...)
	b = appendString(b, c.series)
	b = append(b, ':')
	b = appendFloat(b, v)
	b = append(b, "}}"...)
	t.end(b)
}

// SetMeta sets what the run was, written when the trace is closed.
func (t *Trace) SetMeta(m TraceMeta) { t.meta = m }

// Meta is what SetMeta set.
func (t *Trace) Meta() TraceMeta { return t.meta }

// Len is the number of slices.
func (t *Trace) Len() int { return t.slices }

// Events is the number of events written so far, metadata included.
func (t *Trace) Events() int { return t.events }

// Tracks is the number of tracks a viewer shows: threads (a lane each)
// and counters.
func (t *Trace) Tracks() int { return t.tracks }

// Err is the first error of the underlying writer.
func (t *Trace) Err() error { return t.err }

// Close ends the traceEvents array, writes the top-level metadata and
// flushes. It returns the first error of the underlying writer; closing
// again returns it again and writes nothing.
func (t *Trace) Close() error {
	if t.done {
		return t.err
	}
	t.done = true
	b := append(t.scratch[:0], "\n],\"metadata\":{\"scenario\":"...)
	b = appendString(b, t.meta.Scenario)
	b = append(b, ",\"platform\":"...)
	b = appendString(b, t.meta.Platform)
	b = append(b, ",\"params\":{"...)
	keys := make([]string, 0, len(t.meta.Params))
	for k := range t.meta.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendString(b, t.meta.Params[k])
	}
	b = append(b, "},\"version\":"...)
	b = appendString(b, t.meta.Version)
	if t.meta.Error != "" {
		b = append(b, ",\"error\":"...)
		b = appendString(b, t.meta.Error)
	}
	b = append(b, "}}\n"...)
	t.write(b)
	if t.err == nil {
		if err := t.w.Flush(); err != nil {
			t.err = fmt.Errorf("trace: %w", err)
		}
	}
	return t.err
}

// Write closes a trace kept in memory (NewTrace) and copies the
// document to w.
func (t *Trace) Write(w io.Writer) error {
	if t.mem == nil {
		return errors.New("trace: written to its file as the run went (NewTraceTo)")
	}
	if err := t.Close(); err != nil {
		return err
	}
	_, err := w.Write(t.mem.Bytes())
	return err
}

// begin starts an event of phase ph in the scratch buffer.
func (t *Trace) begin(ph, cat string) []byte {
	b := t.scratch[:0]
	if !t.first {
		b = append(b, ",\n"...)
	}
	t.first = false
	b = append(b, `{"ph":"`...)
	b = append(b, ph...)
	b = append(b, '"')
	if cat != "" {
		b = append(b, `,"cat":`...)
		b = appendString(b, cat)
	}
	return b
}

// end writes the event begun in b.
func (t *Trace) end(b []byte) {
	t.events++
	t.write(b)
	t.scratch = b[:0]
}

func (t *Trace) write(b []byte) {
	if t.err != nil {
		return
	}
	if _, err := t.w.Write(b); err != nil {
		t.err = fmt.Errorf("trace: %w", err)
	}
}

func appendPidTid(b []byte, pid, tid int) []byte {
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, `,"tid":`...)
	return strconv.AppendInt(b, int64(tid), 10)
}

func appendArgs(b []byte, args []Arg) []byte {
	if len(args) == 0 {
		return b
	}
	b = append(b, `,"args":{`...)
	for i, a := range args {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, a.Key)
		b = append(b, ':')
		b = appendValue(b, a.Value)
	}
	return append(b, '}')
}

func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return appendString(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		return appendFloat(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	case sim.Time:
		return appendMicros(b, x)
	}
	j, err := json.Marshal(v)
	if err != nil {
		return appendString(b, fmt.Sprint(v))
	}
	return append(b, j...)
}

// appendFloat writes v as JSON allows: NaN and infinities, which it
// does not, as null.
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// appendString writes s as a JSON string.
func appendString(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		j, _ := json.Marshal(s) // replaces invalid bytes with U+FFFD
		return append(b, j...)
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// micros formats picoseconds as microseconds, exactly (Chrome trace
// timestamps are in µs).
func micros(ps sim.Time) string { return string(appendMicros(nil, ps)) }

func appendMicros(b []byte, ps sim.Time) []byte {
	if ps < 0 {
		b = append(b, '-')
		ps = -ps
	}
	b = strconv.AppendInt(b, int64(ps/sim.Microsecond), 10)
	frac := int64(ps % sim.Microsecond)
	if frac == 0 {
		return b
	}
	var d [6]byte
	for i := 5; i >= 0; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 6
	for d[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, d[:n]...)
}

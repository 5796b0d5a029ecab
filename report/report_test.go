package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

func TestMicros(t *testing.T) {
	for ps, want := range map[sim.Time]string{
		0: "0", 1: "0.000001", sim.Microsecond: "1", 6600 * sim.Nanosecond: "6.6",
		sim.Second + 1: "1000000.000001", -1500 * sim.Nanosecond: "-1.5",
	} {
		if got := micros(ps); got != want {
			t.Errorf("micros(%d) = %q, want %q", ps, got, want)
		}
	}
}

type traceDoc struct {
	DisplayTimeUnit string `json:"displayTimeUnit"`
	TraceEvents     []struct {
		Ph   string         `json:"ph"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Name string         `json:"name"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
}

// TestTraceLanes: overlapping slices on one track go to separate lanes
// (threads), so every thread's complete events nest; a slice that starts
// after another ended reuses its lane.
func TestTraceLanes(t *testing.T) {
	tr := NewTrace("test")
	us := sim.Microsecond
	tr.Slice("gpu0.pcie A→B", "a", 0, 10*us, map[string]any{"bytes": 1})
	tr.Slice("gpu0.pcie A→B", "b", 5*us, 15*us, nil) // overlaps a
	tr.Slice("gpu0.pcie A→B", "c", 10*us, 12*us, nil)
	tr.Slice("gpu0.ce0", "d", 1*us, 2*us, nil)
	var buf bytes.Buffer
	if err := tr.Write(&buf); err != nil {
		t.Fatal(err)
	}
	var doc traceDoc
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not JSON: %v\n%s", err, buf.String())
	}
	tid := map[string]int{}
	names := map[int]string{}
	for _, ev := range doc.TraceEvents {
		switch {
		case ev.Ph == "X":
			tid[ev.Name] = ev.Tid
		case ev.Ph == "M" && ev.Name == "thread_name":
			names[ev.Tid] = ev.Args["name"].(string)
		}
	}
	if tid["a"] == tid["b"] {
		t.Error("overlapping slices a and b share a lane")
	}
	if tid["c"] != tid["a"] {
		t.Error("slice c, starting when a ends, did not reuse a's lane")
	}
	if names[tid["a"]] != "gpu0.pcie A→B" || names[tid["b"]] != "gpu0.pcie A→B #2" || names[tid["d"]] != "gpu0.ce0" {
		t.Errorf("thread names %v", names)
	}
	if tr.Len() != 4 {
		t.Errorf("Len() = %d", tr.Len())
	}
	if !strings.Contains(buf.String(), `"ts":5,"dur":10`) {
		t.Errorf("slice b not at ts 5 µs, dur 10 µs:\n%s", buf.String())
	}
}

func TestTableAndJSON(t *testing.T) {
	r := &Result{
		Scenario: "transfers", Platform: "p",
		Params:  map[string]string{"b": "2", "a": "1"},
		Results: []Row{{Name: "pinned h2d 256 MiB", Path: "pinned", Direction: "h2d", Bytes: 256 << 20, Seconds: 0.0048, GBps: 55.92}},
		Factors: map[string]Factor{"x.efficiency": {Value: 0.88, Source: "measured"}, "y": {Value: 1}},
	}
	var tb bytes.Buffer
	if err := WriteTable(&tb, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"transfers on p", "params: a=1 b=2", "256 MiB", "4.8 ms", "55.92", "x.efficiency = 0.88  (measured)"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "platform", "params", "results", "factors"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	row := back["results"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "path", "direction", "bytes", "seconds", "gbps"} {
		if _, ok := row[k]; !ok {
			t.Errorf("result row lacks %q", k)
		}
	}
	if strings.Contains(js.String(), `"y": {"value": 1, "source"`) {
		t.Error("an empty source is written")
	}
}

func TestFormatters(t *testing.T) {
	cases := []struct {
		n    int64
		want string
	}{{8, "8 B"}, {4096, "4 KiB"}, {1 << 30, "1 GiB"}, {1536, "1536 B"}, {3 << 40, "3 TiB"}}
	for _, c := range cases {
		if got := FormatBytes(c.n); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := FormatSeconds(6.6e-6); got != "6.6 us" {
		t.Errorf("FormatSeconds(6.6e-6) = %q", got)
	}
	if got := FormatGBps(0.0012); got != "0.0012" {
		t.Errorf("FormatGBps(0.0012) = %q", got)
	}
}

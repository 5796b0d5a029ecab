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
		Cat  string         `json:"cat"`
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
	dev := tr.Process("gpu0")
	link := dev.Thread("gpu0 SMs")
	link.Slice("transfer", "a", 0, 10*us, Arg{"bytes", 1})
	link.Slice("transfer", "b", 5*us, 15*us) // overlaps a
	link.Slice("transfer", "c", 10*us, 12*us)
	dev.Thread("gpu0.ce0").Slice("transfer", "d", 1*us, 2*us)
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
			if ev.Pid != 2 || ev.Cat != "transfer" {
				t.Errorf("slice %s in pid %d, category %q", ev.Name, ev.Pid, ev.Cat)
			}
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
	if names[tid["a"]] != "gpu0 SMs" || names[tid["b"]] != "gpu0 SMs #2" || names[tid["d"]] != "gpu0.ce0" {
		t.Errorf("thread names %v", names)
	}
	if tr.Len() != 4 || tr.Tracks() != 3 {
		t.Errorf("Len() = %d, Tracks() = %d", tr.Len(), tr.Tracks())
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
	for _, want := range []string{"transfers on p", "params: a=1 b=2", "256 MiB", "4.8 ms", "55.9\n", "x.efficiency = 0.88  (measured)"} {
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
	// One rule for rates: three significant digits, never an exponent,
	// so that a column never shows "0.02" beside "0.00033".
	for g, want := range map[float64]string{0.0012: "0.00120", 0.00033: "0.000330", 0.02: "0.0200", 0.614: "0.614",
		8.417: "8.42", 55.48: "55.5", 99.96: "100", 123.4: "123", 2190.4: "2190", 0: "0"} {
		if got := FormatRate(g); got != want {
			t.Errorf("FormatRate(%g) = %q, want %q", g, got, want)
		}
	}
	// Sentences keep their old form: they are part of the JSON.
	if got := FormatGBps(0.0012); got != "0.0012" {
		t.Errorf("FormatGBps(0.0012) = %q", got)
	}
}

// TestTableOptionalColumns: the columns of the IOMMU scenarios appear
// when a row has them, and their JSON fields only then; an attack's
// faults are in its own columns, not the unified-memory driver's.
func TestTableOptionalColumns(t *testing.T) {
	for _, c := range []struct {
		name     string
		row      Row
		want     []string
		wantNot  []string
		jsonWant []string
	}{
		{"copy", Row{Path: "pinned", Direction: "h2d", Bytes: 1 << 20, Seconds: 1e-4, GBps: 10},
			nil, []string{"escapes", "line Gb/s", "faults"}, nil},
		{"attack", Row{Path: "strict", Direction: "attack", Bytes: 1 << 20, Ops: 10, Faults: 9},
			[]string{"faults", "escapes", "stale", "secret read", "changed pages"}, []string{"migrated", "line Gb/s"}, []string{`"faults": 9`}},
		{"attack that escaped", Row{Path: "off", Direction: "attack", Ops: 10, Escapes: 4, SecretRead: true, Changed: 2},
			[]string{"escapes", "true"}, []string{"migrated"}, []string{`"escapes": 4`, `"secret_read": true`, `"changed_pages": 2`}},
		{"nic behind an iommu", Row{Path: "lazy", Direction: "rx", Mode: "4KiB", Bytes: 1500, Ops: 10, LineGbps: 200, IOTLBMisses: 1, MapSeconds: 28e-9},
			[]string{"line Gb/s", "IOTLB miss/op", "map/op", "200", "28 ns"}, []string{"escapes"}, []string{`"line_gbps": 200`, `"iotlb_misses": 1`, `"map_seconds": 2.8e-8`}},
	} {
		r := &Result{Scenario: "s", Platform: "p", Results: []Row{c.row}}
		var tb, js bytes.Buffer
		if err := WriteTable(&tb, r); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(&js, r); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(tb.String(), w) {
				t.Errorf("%s: table lacks %q:\n%s", c.name, w, tb.String())
			}
		}
		for _, w := range c.wantNot {
			if strings.Contains(tb.String(), w) {
				t.Errorf("%s: table has %q:\n%s", c.name, w, tb.String())
			}
		}
		for _, w := range c.jsonWant {
			if !strings.Contains(js.String(), w) {
				t.Errorf("%s: JSON lacks %s:\n%s", c.name, w, js.String())
			}
		}
		if c.name == "copy" && strings.Contains(js.String(), "escapes") {
			t.Errorf("copy: JSON has IOMMU fields:\n%s", js.String())
		}
	}
}

package dmalab_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dmalab/dmalab"
	_ "github.com/dmalab/dmalab/scenario" // the built-in scenarios
)

// traceDoc is a Chrome trace as the viewers read it.
type traceDoc struct {
	TraceEvents []struct {
		Ph   string         `json:"ph"`
		Cat  string         `json:"cat"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Name string         `json:"name"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	Metadata struct {
		Scenario string            `json:"scenario"`
		Platform string            `json:"platform"`
		Params   map[string]string `json:"params"`
		Version  *string           `json:"version"`
		Error    string            `json:"error"`
	} `json:"metadata"`
}

// traced runs a scenario with its trace streamed to a buffer, and parses
// the trace back.
func traced(t *testing.T, name, plat string, sets ...string) (traceDoc, []byte, *dmalab.Outcome) {
	t.Helper()
	s, err := dmalab.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	out, err := dmalab.RunScenario(s, dmalab.RunOptions{Platform: plat, Sets: sets, Trace: true, TraceTo: &b})
	if err != nil {
		t.Fatal(err)
	}
	var doc traceDoc
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	return doc, b.Bytes(), out
}

// names are the trace's process, thread and counter names, and its
// async groups, each with what it is.
func (d traceDoc) names() map[string]string {
	n := map[string]string{}
	for _, e := range d.TraceEvents {
		switch {
		case e.Ph == "M" && (e.Name == "process_name" || e.Name == "thread_name"):
			n[e.Args["name"].(string)] = e.Name
		case e.Ph == "C":
			n[e.Name] = "counter"
		case e.Ph == "b":
			n[e.Name] = "async"
		}
	}
	return n
}

// tracks counts what a viewer shows as tracks: threads, counters and
// async groups.
func (d traceDoc) tracks() int {
	n := 0
	seen := map[[2]any]bool{}
	for _, e := range d.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "thread_name":
			n++
		case e.Ph == "C" || e.Ph == "b":
			k := [2]any{e.Pid, e.Ph + e.Name}
			if !seen[k] {
				seen[k] = true
				n++
			}
		}
	}
	return n
}

// TestTraceZynqNames: on the Zynq, whose AXI DMA hangs on an AXI HP
// port, no track says PCIe, and the DMA engine's tracks and link
// counters are named after axidma0 and the axi interconnect.
func TestTraceZynqNames(t *testing.T) {
	doc, _, _ := traced(t, "dma-vs-memcpy", "zynq-7000", "sizes=64KiB")
	names := doc.names()
	for n := range names {
		if strings.Contains(n, "pcie") || strings.Contains(n, "PCIe") {
			t.Errorf("track %q on the Zynq mentions PCIe", n)
		}
	}
	for _, want := range []string{"axi → axidma0 (on-chip port)", "axidma0 → axi (on-chip port)", "node0 DRAM"} {
		if names[want] != "counter" {
			t.Errorf("no counter %q; names %v", want, names)
		}
	}
	var dev, cpu bool
	for n, kind := range names {
		dev = dev || kind == "process_name" && strings.HasPrefix(n, "axidma0 (dma, on-chip port below axi)")
		cpu = cpu || kind == "process_name" && n == "CPU"
	}
	if !dev || !cpu {
		t.Errorf("processes: axidma0 %v, CPU %v; names %v", dev, cpu, names)
	}
	// The driver's CPU work is there, cache maintenance included.
	var work bool
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" && e.Cat != "" && e.Dur > 0 {
			work = true
		}
		if (e.Ph == "X" || e.Ph == "b") && !validCat[e.Cat] {
			t.Errorf("event %s has category %q", e.Name, e.Cat)
		}
	}
	if !work {
		t.Error("no slice with a duration")
	}
}

var validCat = map[string]bool{"call": true, "queue": true, "translate": true, "transfer": true, "fault": true, "access": true, "lifecycle": true}

// TestTraceGPUNames: on h200-pcie the copy engines are tracks of the
// GPU's process and the PCIe link's directions are counters named by
// their ends and generation; the metadata says what ran.
func TestTraceGPUNames(t *testing.T) {
	doc, _, _ := traced(t, "transfers", "h200-pcie", "sizes=1MiB", "paths=pinned,pageable", "directions=h2d,d2h")
	names := doc.names()
	for n, kind := range map[string]string{
		"gpu0 (GPU, PCIe Gen5 x16 below rc0)": "process_name",
		"gpu0.ce0":                            "thread_name",
		"gpu0.ce1":                            "thread_name",
		"rc0 → gpu0 (PCIe Gen5 x16)":          "counter",
		"gpu0 → rc0 (PCIe Gen5 x16)":          "counter",
		"CPU":                                 "process_name",
	} {
		if names[n] != kind {
			t.Errorf("%q is %q, want %s", n, names[n], kind)
		}
	}
	for n := range names {
		if strings.Contains(n, ".pcie") || strings.Contains(n, "A→B") {
			t.Errorf("track %q has a fabric-internal name", n)
		}
	}
	var peak float64
	for _, e := range doc.TraceEvents {
		if e.Ph == "C" && e.Name == "rc0 → gpu0 (PCIe Gen5 x16)" {
			peak = max(peak, e.Args["bytes/s"].(float64))
		}
	}
	// The h2d copy runs at the link's 55.5 GB/s (ARCHITECTURE.md).
	if peak < 50e9 || peak > 64e9 {
		t.Errorf("peak load of rc0 → gpu0 %.3g B/s, want the link's ~55.5 GB/s", peak)
	}
	m := doc.Metadata
	if m.Scenario != "transfers" || m.Platform != "h200-pcie" || m.Params["seed"] != "1" || m.Params["sizes"] != "1MiB" || m.Version == nil {
		t.Errorf("metadata %+v", m)
	}
}

// TestTraceTrackBound: dma-streaming, which drew 99 tracks (a lane per
// flow in flight on every link), has a readable number now.
func TestTraceTrackBound(t *testing.T) {
	doc, _, out := traced(t, "dma-streaming", "", "packets=2000")
	if n := doc.tracks(); n > 20 {
		t.Errorf("dma-streaming has %d tracks, want at most 20: %v", n, doc.names())
	}
	if got := out.Trace.Tracks(); got != doc.tracks() {
		t.Errorf("Trace.Tracks() = %d, the document has %d", got, doc.tracks())
	}
}

// TestTraceDeterministic: the same run writes the same bytes, and the
// trace kept in memory is the streamed one.
func TestTraceDeterministic(t *testing.T) {
	_, a, _ := traced(t, "dma-vs-memcpy", "zynq-7000", "sizes=4KiB,64KiB")
	_, b, _ := traced(t, "dma-vs-memcpy", "zynq-7000", "sizes=4KiB,64KiB")
	if !bytes.Equal(a, b) {
		t.Fatal("two runs wrote different traces")
	}
	s, _ := dmalab.Lookup("dma-vs-memcpy")
	out, err := dmalab.RunScenario(s, dmalab.RunOptions{Platform: "zynq-7000", Sets: []string{"sizes=4KiB,64KiB"}, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	var c bytes.Buffer
	if err := out.Trace.Write(&c); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, c.Bytes()) {
		t.Error("the trace kept in memory differs from the streamed one")
	}
}

// TestTraceRunError: a run that fails after its trace began still leaves
// a valid document, with the error in its metadata.
func TestTraceRunError(t *testing.T) {
	s, _ := dmalab.Lookup("transfers")
	var b bytes.Buffer
	_, err := dmalab.RunScenario(s, dmalab.RunOptions{Platform: "zynq-7000", Trace: true, TraceTo: &b})
	if err == nil {
		t.Fatal("transfers ran on a platform without a GPU")
	}
	var doc traceDoc
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("trace of a failed run is not JSON: %v\n%s", err, b.String())
	}
	if !strings.Contains(doc.Metadata.Error, "no GPU") || strings.HasPrefix(doc.Metadata.Error, "usage") {
		t.Errorf("metadata error %q", doc.Metadata.Error)
	}
}

// TestTraceInnerSystems: the default scenario, camera-pipeline, boots a
// system per platform and mode; each draws into the run's trace as
// processes of its own (the trace was empty when they drew nowhere), and
// the same run writes the same bytes.
func TestTraceInnerSystems(t *testing.T) {
	doc, a, _ := traced(t, "camera-pipeline", "", "frames=4", "modes=copy,mapped")
	names := doc.names()
	for _, n := range []string{"jetson-orin copy", "jetson-orin copy: CPU", "jetson-orin mapped: gpu0 (integrated GPU)",
		"h200-pcie copy: gpu0 (GPU, PCIe Gen5 x16 below rc0)", "h200-pcie mapped: CPU"} {
		if names[n] != "process_name" {
			t.Errorf("no process %q in the trace", n)
		}
	}
	slices := map[int]int{}
	for _, e := range doc.TraceEvents {
		if e.Ph == "X" || e.Ph == "b" {
			slices[e.Pid]++
		}
	}
	if len(slices) < 4 {
		t.Errorf("slices in %d processes, want the inner systems' (at least 4): %v", len(slices), slices)
	}
	_, b, _ := traced(t, "camera-pipeline", "", "frames=4", "modes=copy,mapped")
	if !bytes.Equal(a, b) {
		t.Error("two runs wrote different traces")
	}
}

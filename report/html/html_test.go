package html_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/report/html"
)

func copies() *report.Result {
	r := &report.Result{Scenario: "transfers", Platform: "h200-pcie", Params: map[string]string{"sizes": "4KiB,1MiB"},
		Factors: map[string]report.Factor{"fabric.bandwidth_factor": {Value: 1, Source: "default <assumed>"}}}
	for _, b := range []int64{4096, 1 << 20} {
		r.Results = append(r.Results, report.Row{Path: "pinned", Direction: "h2d", Bytes: b, Seconds: float64(b) / 50e9, GBps: 50})
	}
	return r
}

// TestWrite: each section appears where its data is, and only there;
// text is escaped.
func TestWrite(t *testing.T) {
	measured := copies()
	for i := range measured.Results {
		measured.Results[i].Measured = &report.Measured{GBps: 45, MinGBps: 44, MaxGBps: 46}
	}
	stages := &report.Result{Scenario: "camera-pipeline", Platform: "jetson-orin", Results: []report.Row{
		{Path: "zero-copy", Direction: "glass-to-glass", Stages: []report.Stage{{Name: "capture", Seconds: 0.033}, {Name: "isp", Seconds: 0.0015}}},
	}}
	timeline := copies()
	tr := report.NewTrace("t")
	tr.RecordTimeline()
	tr.Machine().Thread("gpu0.ce0").Slice("transfer", "x", 0, 1000, report.Arg{Key: "bytes", Value: int64(10)}, report.Arg{Key: "src", Value: "a"})
	tr.Machine().Counter("gpu0.pcie A→B", "bytes/s").Set(0, 1e10)
	tr.Machine().Counter("gpu0.pcie A→B", "bytes/s").Set(1000, 0)
	timeline.Timeline = tr.Timeline(600, 200)
	diag := &check.Report{Diagnostics: []check.Diagnostic{{Class: "unmap-size", Severity: "error", Time: 6025000, Device: "gem0",
		Message: "freed with size 1000, mapped with size 1500", Origin: "dma_map_single(gem0, ...) at 6.025us by driver"}}}
	for _, c := range []struct {
		name      string
		page      html.Page
		want, not []string
		svgs      int
	}{
		{"copies", html.Page{Title: "t", Result: copies()}, []string{"Bandwidth against size, host to device", "default &lt;assumed&gt;", "does not carry the platform"},
			[]string{"Model against measurement", "Diagnostics", "Timeline"}, 1},
		{"measured", html.Page{Title: "t", Result: measured}, []string{"Model against measurement", "(measured)", "44.0–46.0"}, nil, 2},
		{"stages", html.Page{Title: "t", Result: stages}, []string{"Latency of a frame, by stage", "capture"}, []string{"Bandwidth against size"}, 1},
		{"timeline", html.Page{Title: "t", Result: timeline}, []string{"Timeline: when each copy engine", "Link utilisation"}, nil, 3},
		{"check", html.Page{Title: "t", Result: copies(), Check: diag}, []string{"unmap-size", "provenance", "dma_map_single(gem0, ...)", "Diagnostics over virtual time"}, nil, 2},
		{"clean check", html.Page{Title: "t", Result: copies(), Check: &check.Report{}}, []string{"No diagnostics"}, nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := html.Write(&b, &c.page); err != nil {
				t.Fatal(err)
			}
			s := b.String()
			for _, w := range c.want {
				if !strings.Contains(s, w) {
					t.Errorf("no %q", w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(s, w) {
					t.Errorf("has %q", w)
				}
			}
			if n := strings.Count(s, "<svg"); n != c.svgs {
				t.Errorf("%d plots, want %d", n, c.svgs)
			}
			// XML namespaces are names, not addresses loaded.
			local := strings.NewReplacer(`xmlns="http://www.w3.org/2000/svg"`, "", `xmlns:xlink="http://www.w3.org/1999/xlink"`, "").Replace(s)
			for _, bad := range []string{"<script", "http://", "https://", "<?xml", "url("} {
				if strings.Contains(local, bad) {
					t.Errorf("page has %q: not self-contained", bad)
				}
			}
			// Deterministic: the same page twice gives the same bytes.
			var again bytes.Buffer
			html.Write(&again, &c.page)
			if again.String() != s {
				t.Error("two writes differ")
			}
		})
	}
	if err := html.Write(&bytes.Buffer{}, &html.Page{Title: "empty"}); err == nil {
		t.Error("a page of nothing: no error")
	}
}

// TestPlatformParams: every parameter of a preset with its --set path and
// source; lists by name.
func TestPlatformParams(t *testing.T) {
	spec, err := platform.Resolve("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := html.PlatformParams(spec)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]report.PlatformParam{}
	for _, p := range ps {
		byPath[p.Path] = p
	}
	for path, want := range map[string]string{"name": "h200-pcie", "gpus.gpu0.link.gen": "5", "nodes.0.dram": "128 GiB"} {
		if byPath[path].Value != want {
			t.Errorf("%s = %q, want %q", path, byPath[path].Value, want)
		}
	}
	if p := byPath["gpus.gpu0.link.efficiency"]; !strings.HasPrefix(p.Source, "calibrated") {
		t.Errorf("gpus.gpu0.link.efficiency: source %q", p.Source)
	}
	// Every path is one --set accepts.
	for _, p := range ps {
		if _, err := platform.Set(spec, p.Path, p.Value); err != nil && !strings.HasPrefix(p.Path, "distances") {
			t.Errorf("--set platform.%s=%s: %v", p.Path, p.Value, err)
		}
	}
}

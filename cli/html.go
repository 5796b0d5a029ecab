package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/calib"
	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/hw/probe"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/report/html"
)

func init() {
	register(&command{name: "report", summary: "turn a saved JSON document (run, check, probe, validate --json) into an HTML report", run: runReport})
}

// htmlFlagHelp is the --html flag's help, the same on every command.
const htmlFlagHelp = "write an HTML report to `FILE`: plots (inline SVG) and tables in one self-contained page"

// timelineResolution and timelineBins bound the timeline an HTML report
// draws: busy spans closer than 1/600 of the run are merged (a plot is
// about that many points across) and throughput is binned in 200.
const (
	timelineResolution = 600
	timelineBins       = 200
)

// addHTMLData adds to res what only the HTML report draws: the timeline
// of engines and links (when the run collected a trace) and every
// platform parameter with its source (platform name or file as given,
// with the run's platform.* --set assignments applied). It is called only
// when --html is given, so that other outputs keep their fields.
func addHTMLData(res *report.Result, trace *report.Trace, plat, defaultPlat string, sets []string) error {
	if trace != nil {
		res.Timeline = trace.Timeline(timelineResolution, timelineBins)
	}
	if plat == "" {
		plat = defaultPlat
	}
	spec, err := platform.Resolve(plat)
	if err != nil {
		return err
	}
	for _, kv := range sets {
		k, v, _ := strings.Cut(kv, "=")
		if path, ok := strings.CutPrefix(strings.TrimSpace(k), "platform."); ok {
			if spec, err = platform.Set(spec, path, v); err != nil {
				return err
			}
		}
	}
	res.PlatformParams, err = html.PlatformParams(spec)
	return err
}

// WriteHTMLReport writes the HTML report of a result (and of a check,
// when chk is not nil) to path: the one function every command with
// --html ends in (run, check, probe, report; validate's rows carry both
// the model and Measured, through writeValidationHTML).
func WriteHTMLReport(path, title, command string, res *report.Result, chk *check.Report, note string) error {
	// A probe's result has measurements and no model.
	measured := res != nil && res.Scenario == probeScenario
	return writePage(path, &html.Page{Title: title, Command: command, Result: res, Check: chk, Note: note, Measured: measured})
}

func writePage(path string, p *html.Page) error {
	var buf bytes.Buffer
	if err := html.Write(&buf, p); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// writeValidationHTML is validate --html: each row of the probe report
// beside the model's value. Bandwidth rows carry both numbers (GBps the
// model's, Measured the probe's) and so are drawn; the others (times
// per operation, faults) say both numbers and the error in their note.
func writeValidationHTML(path string, v *calib.Validation, spec *platform.Spec, command string) error {
	res := &report.Result{Scenario: "validate", Platform: v.Platform, Params: map[string]string{"probe": v.Probe}}
	if v.MaxErrorPct != nil {
		res.Params["max-error"] = strconv.FormatFloat(*v.MaxErrorPct, 'g', -1, 64) + "%"
	}
	gpus := map[int]bool{}
	for _, r := range v.Rows {
		gpus[r.GPU] = true
	}
	for _, r := range v.Rows {
		mode := r.Family
		if r.Operation != "" {
			mode += " " + r.Operation
		}
		if r.Family == "ce_copy" {
			mode = ""
		}
		row := report.Row{Name: r.Row, Path: r.Path, Direction: r.Direction, Bytes: r.SizeBytes, Mode: mode}
		if len(gpus) > 1 {
			row.Platform = fmt.Sprintf("gpu%d", r.GPU)
		}
		var notes []string
		if r.Calibration {
			notes = append(notes, "calibration row: the platform was fitted to it, so its error only says the fit worked")
		}
		switch {
		case r.Model == nil:
			notes = append(notes, fmt.Sprintf("measured %.4g %s; not modelled: %s", r.Measured, r.Unit, r.NotModelled))
			if r.Unit == probe.UnitGBps {
				row.Measured = &report.Measured{GBps: r.Measured, Source: v.Probe}
			}
		case r.Unit == probe.UnitGBps:
			row.GBps = *r.Model
			if row.GBps > 0 && r.SizeBytes > 0 {
				row.Seconds = float64(r.SizeBytes) / (row.GBps * 1e9)
			}
			row.Measured = &report.Measured{GBps: r.Measured, Source: v.Probe}
		default:
			notes = append(notes, fmt.Sprintf("model %.4g %s, measured %.4g %s", *r.Model, r.Unit, r.Measured, r.Unit))
		}
		if r.ErrorPct != nil {
			notes = append(notes, fmt.Sprintf("error %+.1f %%", *r.ErrorPct))
		}
		row.Note = strings.Join(notes, "; ")
		res.Results = append(res.Results, row)
	}
	var summary []string
	for _, c := range v.Classes {
		line := fmt.Sprintf("%s: %d rows compared", c.Class, c.Rows)
		if c.MedianAbsErrorPct != nil {
			line += fmt.Sprintf(", median absolute error %.2f %%", *c.MedianAbsErrorPct)
		}
		if c.Exceeds {
			line += " (above --max-error)"
		}
		line += fmt.Sprintf("; %d calibration rows left out, %d not modelled", c.CalibrationRows, c.NotModelledRows)
		summary = append(summary, line)
	}
	res.Summary = summary
	if spec != nil {
		var err error
		if res.PlatformParams, err = html.PlatformParams(spec); err != nil {
			return err
		}
	}
	return writePage(path, &html.Page{
		Title: fmt.Sprintf("dmalab validate %s on %s", v.Probe, v.Platform), Command: command, Result: res,
		Intro: fmt.Sprintf("The model of platform %s beside the measurements of %s, row by row: error is (model − measured) / measured.", v.Platform, v.Probe),
	})
}

// commandLine is the command as a user would type it again.
func commandLine(cmd string, args []string) string {
	parts := []string{"dmalab", cmd}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$\\") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// probeScenario names a probe's result (probeResult): no scenario has it.
const probeScenario = "probe"

// probeResult is a probe report as a result: one row per bandwidth
// measurement (the copy engines', the SMs', synchronous copies', unified
// memory's), with the measurement in Measured and no model number.
func probeResult(rep *probe.Report) *report.Result {
	res := &report.Result{Scenario: probeScenario, Platform: "this machine", Params: map[string]string{
		"samples": strconv.Itoa(rep.Options.Samples),
		"sizes":   joinSizes(rep.Options.Sizes),
		"started": rep.Started.UTC().Format("2006-01-02 15:04 MST"),
	}}
	var names []string
	for _, g := range rep.GPUs {
		dev := fmt.Sprintf("gpu%d %s", g.Device.Ordinal, g.Device.Name)
		names = append(names, dev)
		for _, m := range g.Measurements {
			if m.Unit != probe.UnitGBps || m.SizeBytes <= 0 || !(m.Median > 0) {
				continue
			}
			mode := m.Family
			if m.Operation != "" {
				mode += " " + m.Operation
			}
			if m.Family == "ce_copy" {
				mode = "" // the copy engines' copies are the default
			}
			row := report.Row{
				Name: fmt.Sprintf("%s %s %s", m.Path, m.Direction, report.FormatBytes(m.SizeBytes)),
				Path: m.Path, Direction: m.Direction, Bytes: m.SizeBytes, Mode: mode,
				Measured: &report.Measured{GBps: m.Median, MinGBps: m.Min, MaxGBps: m.Max, Samples: m.Samples,
					Source: fmt.Sprintf("%s (probe %s, %s)", dev, m.Family, m.Method)},
			}
			if len(rep.GPUs) > 1 {
				row.Platform = fmt.Sprintf("gpu%d", g.Device.Ordinal)
			}
			res.Results = append(res.Results, row)
		}
	}
	if len(names) > 0 {
		res.Platform = strings.Join(names, ", ")
	}
	return res
}

// runReport is dmalab report FILE.json --html OUT.html.
func runReport(e *env, args []string) int {
	fs := newFlags(e, "report", "report FILE.json --html OUT.html",
		`Reads a JSON document that dmalab saved (run --json, check --json, probe
--json, validate --json) and writes it as an HTML report: the same page --html writes at the
end of a run. A run's document carries its timeline and every platform
parameter only when it was written with --html too (dmalab run --json
--html r.html > r.json); without them the page says where to find them.`)
	out := fs.String("html", "", htmlFlagHelp)
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) != 1 {
		return usageError(e, "report", "want one JSON file, got %d", len(pos))
	}
	if *out == "" {
		return usageError(e, "report", "want --html OUT.html (the only format so far)")
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return usageError(e, "report", "%v", err)
	}
	var kind struct {
		Scenario    *string          `json:"scenario"`
		Diagnostics *json.RawMessage `json:"diagnostics"`
		Schema      string           `json:"schema"`
	}
	if err := json.Unmarshal(data, &kind); err != nil {
		return usageError(e, "report", "%s: not a JSON document: %v", pos[0], err)
	}
	title, note := "", "Read back from "+pos[0]+"."
	var res *report.Result
	var chk *check.Report
	switch {
	case kind.Scenario != nil:
		res = new(report.Result)
		if err := json.Unmarshal(data, res); err != nil {
			return usageError(e, "report", "%s: %v", pos[0], err)
		}
		title = fmt.Sprintf("dmalab run %s on %s", res.Scenario, res.Platform)
	case kind.Diagnostics != nil:
		chk = new(check.Report)
		if err := json.Unmarshal(data, chk); err != nil {
			return usageError(e, "report", "%s: %v", pos[0], err)
		}
		title = "dmalab check"
		note += " A check's JSON holds its diagnostics only: the scenario, platform and parameters are not in it."
	case kind.Schema == calib.ValidateSchema:
		v := new(calib.Validation)
		if err := json.Unmarshal(data, v); err != nil {
			return usageError(e, "report", "%s: %v", pos[0], err)
		}
		// The platform's fields, where its name is a preset's; a
		// platform file's are not in the document.
		spec, _ := platform.Preset(v.Platform)
		if err := writeValidationHTML(*out, v, spec, commandLine("report", args)); err != nil {
			return usageError(e, "report", "--html: %v", err)
		}
		fmt.Fprintf(e.stdout, "%s: dmalab validate %s on %s\n", *out, v.Probe, v.Platform)
		return exitOK
	case kind.Schema == probe.Schema:
		rep, err := probe.ReadJSON(bytes.NewReader(data))
		if err != nil {
			return usageError(e, "report", "%s: %v", pos[0], err)
		}
		res = probeResult(rep)
		title = "dmalab probe on " + res.Platform
	default:
		return usageError(e, "report", "%s: not a document of dmalab run, check, probe or validate --json", pos[0])
	}
	if err := WriteHTMLReport(*out, title, commandLine("report", args), res, chk, note); err != nil {
		return usageError(e, "report", "--html: %v", err)
	}
	fmt.Fprintf(e.stdout, "%s: %s\n", *out, title)
	return exitOK
}

package html

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
)

// Page is what one report shows. Result may be nil only when Check is
// set; each section appears where its data is.
type Page struct {
	// Title heads the page; Command is the command line that made it.
	Title   string
	Command string
	Result  *report.Result
	// Check is the checker's report (dmalab check); nil when nothing
	// was checked, which the page says apart from "no diagnostics".
	Check *check.Report
	// Note, if set, is a sentence under the title about where the data
	// comes from (a probe's machine, a JSON file read back).
	Note string
	// Intro, if set, replaces the sentence under the title that says
	// what the numbers are (validate: the model beside a measurement).
	Intro string
	// Measured says the rows are a real machine's measurements (dmalab
	// probe), not the model's: the page says so and shows no platform.
	Measured bool
}

//go:embed page.tmpl
var pageText string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"svg":     func(s string) template.HTML { return template.HTML(s) },
	"bytes":   report.FormatBytes,
	"size":    report.FormatSize,
	"seconds": fmtSecondsOrDash,
	"gbps":    fmtGBps,
	"ps":      func(t sim.Time) string { return t.String() },
	"inc":     func(i int) int { return i + 1 },
}).Parse(pageText))

func fmtSecondsOrDash(s float64) string {
	if s == 0 {
		return "–"
	}
	return report.FormatSeconds(s)
}

func fmtGBps(g float64) string {
	if g == 0 {
		return "–"
	}
	return report.FormatRate(g)
}

// view is the template's data: the page with its figures drawn and its
// tables decided.
type view struct {
	*Page
	Bandwidth []figure
	Compare   *figure
	Stages    *figure
	Timeline  []figure
	Columns   columns
	Rows      []rowView
	Params    [][2]string
	Factors   []factorView
	Classes   []classCount
	Checked   bool
	DiagPlot  *figure
}

// columns says which optional columns of the results table any row
// fills.
type columns struct {
	Platform, Mode, Ops, Model, Measured, Latency, CPU, FPS, Note bool
}

type rowView struct {
	report.Row
	Label string
}

type factorView struct {
	Name   string
	Value  string
	Source string
}

type classCount struct {
	Class    string
	Severity string
	Count    int
}

// Write writes p as one HTML document.
func Write(w io.Writer, p *Page) error {
	if p.Result == nil && p.Check == nil {
		return fmt.Errorf("html report %q: nothing to report", p.Title)
	}
	v := view{Page: p, Checked: p.Check != nil}
	if r := p.Result; r != nil {
		var err error
		if v.Bandwidth, err = bandwidthPlots(r); err != nil {
			return fmt.Errorf("html report: %w", err)
		}
		if v.Compare, err = comparisonPlot(r); err != nil {
			return fmt.Errorf("html report: %w", err)
		}
		if v.Stages, err = stagesPlot(r); err != nil {
			return fmt.Errorf("html report: %w", err)
		}
		if v.Timeline, err = timelinePlots(r.Timeline); err != nil {
			return fmt.Errorf("html report: %w", err)
		}
		for _, row := range r.Results {
			c := &v.Columns
			c.Platform = c.Platform || row.Platform != ""
			c.Mode = c.Mode || row.Mode != ""
			c.Ops = c.Ops || row.Ops != 0
			c.Measured = c.Measured || row.Measured != nil
			c.Model = c.Model || row.Seconds != 0 || row.GBps != 0
			c.Latency = c.Latency || row.P50Seconds != 0 || row.P99Seconds != 0
			c.CPU = c.CPU || row.CPUSeconds != 0
			c.FPS = c.FPS || row.FPS != 0
			c.Note = c.Note || row.Note != ""
			v.Rows = append(v.Rows, rowView{Row: row, Label: rowLabel(row, true)})
		}
		for _, k := range slices.Sorted(mapKeys(r.Params)) {
			v.Params = append(v.Params, [2]string{k, r.Params[k]})
		}
		for _, k := range slices.Sorted(mapKeys(r.Factors)) {
			f := r.Factors[k]
			v.Factors = append(v.Factors, factorView{Name: k, Value: strconv.FormatFloat(f.Value, 'g', 6, 64), Source: f.Source})
		}
	}
	if p.Check != nil {
		var err error
		if v.DiagPlot, err = diagnosticsPlot(p.Check); err != nil {
			return fmt.Errorf("html report: %w", err)
		}
		idx := map[string]int{}
		for _, d := range p.Check.Diagnostics {
			i, ok := idx[d.Class]
			if !ok {
				i = len(v.Classes)
				idx[d.Class] = i
				v.Classes = append(v.Classes, classCount{Class: d.Class, Severity: d.Severity})
			}
			v.Classes[i].Count++
		}
	}
	if err := page.Execute(w, v); err != nil {
		return fmt.Errorf("html report %q: %w", p.Title, err)
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dmalab/dmalab/calib"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

func init() {
	register(&command{name: "validate", summary: "compare the model with every row of a probe report", run: runValidate})
}

func runValidate(e *env, args []string) int {
	fs := newFlags(e, "validate", "validate PROBE.json --platform FILE [--json|--csv] [--max-error PCT] [--calibrated-from ROWS] [--html FILE]",
		`Runs the model of the platform for every row of a probe report (from
"dmalab probe --json"): the same operation, path, direction, size and memory
kind, on the GPU of the row's ordinal. Prints row | model | measured |
error %, where error is (model - measured) / measured, then the median
absolute error per class: bandwidth (copies, zero-copy, prefetch, remote
access in GB/s), latency (times per operation) and unified (managed memory
moved by GPU or CPU page faults). Rows the platform was calibrated from
(its sources say "calibrated from" this report's file name, as "dmalab
calibrate" writes them, or --calibrated-from names them) are marked "cal"
and left out of the medians. Rows the model cannot compute are listed as
"not modelled: why".

Exit status: 1 when a class's median exceeds --max-error, 2 for bad input,
0 otherwise. --json prints one document (docs/json.md, dmalab.validate/v1).
--html writes the comparison as a page to open in a browser: bandwidth
against size, model (solid) and measurement (dashed), model against
measurement, every row, and the platform's parameters with their sources.`)
	plat := fs.String("platform", "", "the platform to run: a preset name or a YAML `file` (required)")
	asJSON := fs.Bool("json", false, "print one JSON document")
	asCSV := fs.Bool("csv", false, "print the rows' table as CSV (RFC 4180)")
	maxErr := fs.String("max-error", "", "exit 1 when a class's median absolute error exceeds `PCT` percent (default: no bound)")
	calFrom := fs.String("calibrated-from", "", "more calibration rows, comma-separated `ROWS` as validate names them (\"gpu0 ce_copy pinned h2d 1GiB\")")
	htmlPath := fs.String("html", "", htmlFlagHelp)
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) != 1 {
		return usageError(e, "validate", "want one probe report (dmalab probe --json), got %d arguments", len(pos))
	}
	if *asJSON && *asCSV {
		return usageError(e, "validate", "--json and --csv: choose one")
	}
	if *plat == "" {
		return usageError(e, "validate", "--platform is required (a preset name, or the file dmalab calibrate wrote)")
	}
	var bound *float64
	if *maxErr != "" {
		x, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(*maxErr), "%"), 64)
		if err != nil || x < 0 || x != x {
			return usageError(e, "validate", "--max-error %q: want a percentage, 0 or more", *maxErr)
		}
		bound = &x
	}
	var extra []string
	for _, r := range strings.Split(*calFrom, ",") {
		if r = strings.TrimSpace(r); r != "" {
			extra = append(extra, r)
		}
	}
	rep, code := readProbe(e, "validate", pos[0])
	if rep == nil {
		return code
	}
	spec, err := platform.Resolve(*plat)
	if err != nil {
		return usageError(e, "validate", "--platform: %v", err)
	}
	v, err := calib.Validate(rep, pos[0], spec, extra, bound)
	if err != nil {
		fmt.Fprintf(e.stderr, "dmalab validate: %v\n", err)
		return exitUsage
	}
	if *htmlPath != "" {
		if err := writeValidationHTML(*htmlPath, v, spec, commandLine("validate", args)); err != nil {
			return usageError(e, "validate", "--html: %v", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			fmt.Fprintf(e.stderr, "dmalab validate: %v\n", err)
			return exitUsage
		}
	} else if *asCSV {
		if err := validationTable(v).WriteCSV(e.stdout); err != nil {
			fmt.Fprintf(e.stderr, "dmalab validate: %v\n", err)
			return exitUsage
		}
	} else {
		writeValidation(e, v)
	}
	if v.Exceeded() {
		return exitFindings
	}
	return exitOK
}

// validationTable is validate's rows: the model beside the measurement
// and the error, "-" where the model has no number.
func validationTable(v *calib.Validation) *report.Table {
	t := &report.Table{Columns: []report.Column{{Name: "row"}, {Name: "class"}, {Name: "model", Align: report.AlignDecimal},
		{Name: "measured", Align: report.AlignDecimal}, {Name: "unit"}, {Name: "error %", Align: report.AlignDecimal}, {Name: "note"}}}
	for _, r := range v.Rows {
		if r.ErrorPct == nil {
			t.AddRow(r.Row, string(r.Class), "-", report.FormatSig(r.Measured, 3), r.Unit, "-", "not modelled: "+r.NotModelled)
			continue
		}
		note := ""
		if r.Calibration {
			note = "(cal)"
		}
		t.AddRow(r.Row, string(r.Class), report.FormatSig(*r.Model, 3), report.FormatSig(r.Measured, 3), r.Unit, fmt.Sprintf("%+.1f", *r.ErrorPct), note)
	}
	return t
}

func writeValidation(e *env, v *calib.Validation) {
	fmt.Fprintf(e.stdout, "%s on %s\n\n", v.Probe, v.Platform)
	validationTable(v).WriteText(e.stdout, "")
	fmt.Fprintln(e.stdout)
	t := &report.Table{Columns: []report.Column{{Name: "class"}, {Name: "rows", Align: report.AlignRight},
		{Name: "median |error| %", Align: report.AlignDecimal}, {Name: "calibration rows", Align: report.AlignRight},
		{Name: "not modelled", Align: report.AlignRight}}}
	for _, c := range v.Classes {
		med := "-"
		if c.MedianAbsErrorPct != nil {
			med = fmt.Sprintf("%.1f", *c.MedianAbsErrorPct)
			if c.Exceeds {
				med += fmt.Sprintf(" > %g", *v.MaxErrorPct)
			}
		}
		t.AddRow(string(c.Class), fmt.Sprint(c.Rows), med, fmt.Sprint(c.CalibrationRows), fmt.Sprint(c.NotModelledRows))
	}
	t.WriteText(e.stdout, "")
}

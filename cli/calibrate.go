package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/dmalab/dmalab/calib"
	"github.com/dmalab/dmalab/hw/probe"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

func init() {
	register(&command{name: "calibrate", summary: "fit a platform's calibration parameters to a probe report", run: runCalibrate})
}

func runCalibrate(e *env, args []string) int {
	fs := newFlags(e, "calibrate", "calibrate PROBE.json [--platform BASE] [-o FILE]",
		`Writes a platform file (the YAML of "dmalab platform show") in which only the
calibration subset of BASE changes, each parameter solved so that the model's
own prediction of one row of the probe report (from "dmalab probe --json")
equals the measurement: the parameter is bisected, the model run for the row
at every step. The parameters and their rows:

  `+strings.Join(calib.Parameters, "\n  ")+`

Each changed parameter's source says "calibrated from PROBE.json (date,
machine, GPU, driver) row [ROW]: value"; "dmalab validate" reads those sources
to leave the rows out of its medians. Everything else keeps its value and
source. A parameter whose row is missing, or that the model cannot reach
inside wide bounds (something else limits the row), keeps its value, with a
note. BASE defaults to the preset of the report's GPU (h200-pcie for an H200
and for a lone H100, the closest one-GPU Hopper preset; dgx-h100 for several
H100s); the note says which and why. What changed (old -> new) is printed to
stderr; the platform goes to FILE, or to stdout.`)
	plat := fs.String("platform", "", "the platform to calibrate: a preset name or a YAML `file` (default: the preset of the report's GPU)")
	out := fs.String("o", "", "write the platform to `FILE` instead of stdout")
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) != 1 {
		return usageError(e, "calibrate", "want one probe report (dmalab probe --json), got %d arguments", len(pos))
	}
	rep, code := readProbe(e, "calibrate", pos[0])
	if rep == nil {
		return code
	}
	if *plat == "" {
		name, why := calib.DefaultBase(rep)
		*plat = name
		fmt.Fprintf(e.stderr, "dmalab calibrate: base platform %s: %s\n", name, why)
	}
	base, err := platform.Resolve(*plat)
	if err != nil {
		return usageError(e, "calibrate", "--platform: %v", err)
	}
	spec, changes, notes, err := calib.Calibrate(rep, pos[0], base)
	if err != nil {
		fmt.Fprintf(e.stderr, "dmalab calibrate: %v\n", err)
		return exitUsage
	}
	yaml, err := platform.Marshal(spec)
	if err != nil {
		fmt.Fprintf(e.stderr, "dmalab calibrate: %v\n", err)
		return exitUsage
	}
	t := &report.Table{Columns: []report.Column{{Name: "parameter"}, {Name: "old"}, {Name: "new"}, {Name: "row"},
		{Name: "measured", Align: report.AlignDecimal}}}
	for _, c := range changes {
		t.AddRow(c.Path, c.Old, c.New, c.Row, fmt.Sprintf("%.6g %s", c.Measured, c.Unit))
	}
	t.WriteText(e.stderr, "")
	for _, n := range notes {
		fmt.Fprintf(e.stderr, "note: %s\n", n)
	}
	if *out == "" {
		e.stdout.Write(yaml)
		return exitOK
	}
	if err := os.WriteFile(*out, yaml, 0o644); err != nil {
		return usageError(e, "calibrate", "-o: %v", err)
	}
	return exitOK
}

// readProbe reads a probe report; a nil report comes with the exit
// status (bad input).
func readProbe(e *env, cmd, file string) (*probe.Report, int) {
	f, err := os.Open(file)
	if err != nil {
		return nil, usageError(e, cmd, "%v", err)
	}
	defer f.Close()
	rep, err := probe.ReadJSON(f)
	if err != nil {
		return nil, usageError(e, cmd, "%s: %v", file, err)
	}
	if len(rep.GPUs) == 0 {
		return nil, usageError(e, cmd, "%s: the report has no GPU", file)
	}
	return rep, exitOK
}

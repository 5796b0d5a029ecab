package cli

import (
	"encoding/json"
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/scenario"
	"github.com/dmalab/dmalab/sim"
)

func init() {
	register(&command{name: "check", summary: "run a scenario under the DMA checker and report every misuse", run: runCheck})
}

func runCheck(e *env, args []string) int {
	fs := newFlags(e, "check", "check SCENARIO [--platform NAME|FILE] [--set key=value]... [--numactl OPTIONS] [--sweep key=v1,v2,...]... [--shard I/N] [--json|--csv] [--html FILE] | check --classes [--json|--csv]",
		`Runs a scenario with the checker attached to the DMA API and to memory: every
misuse the kernel's DMA-API debug code (kernel/dma/debug.c) would report, plus
CPU access to a buffer the device owns, stale reads proved by content
versions, and device access to memory that is no longer mapped. Prints the
diagnostics, each with its class, severity, virtual time, device, and the
call that made the mapping concerned.

Exit status: 0 when there is no diagnostic, 1 when there is any, 2 for bad
usage or input (or a run the model cannot complete), 3 for an internal
error. --classes lists every class with a one-line explanation: the
DMA-API classes, then those of GPU memory (the CUDA driver API façade).
--html writes the diagnostics with their provenance, the run's results and
every parameter with its source as a page to open in a browser.
--sweep and --shard are those of "dmalab run": each point's diagnostics in
turn, exit status 1 when any point has one.`)
	plat := fs.String("platform", "", "the platform: a preset name or a YAML file (`NAME|FILE`; default: the scenario's)")
	var sets setFlags
	fs.Var(&sets, "set", "set a parameter: `key=value` (repeatable)")
	numactlOpts := fs.String("numactl", "", "numactl's placement `OPTIONS` for every process of the run (\"--cpunodebind=1 --membind=0\")")
	asJSON := fs.Bool("json", false, `print {"diagnostics": [...]} as JSON`)
	asCSV := fs.Bool("csv", false, "print the diagnostics (or --classes) as CSV (RFC 4180), one line each")
	classes := fs.Bool("classes", false, "list the diagnostic classes and exit")
	htmlPath := fs.String("html", "", htmlFlagHelp)
	var sweep sweepFlags
	fs.Var(&sweep.axes, "sweep", "check once per value of a key: `KEY=V1,V2,...` (repeatable: the cartesian product)")
	fs.StringVar(&sweep.shard, "shard", "", "check shard `I/N` of the sweep (for dmalab merge)")
	args, help := splitHelp(args)
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if help {
		if len(pos) > 0 {
			if _, err := scenario.Lookup(pos[0]); err != nil {
				return usageError(e, "check", "%s", scenario.UsageMessage(err))
			}
		}
		fs.SetOutput(e.stdout)
		fs.Usage()
		return exitOK
	}
	if *asJSON && *asCSV {
		return usageError(e, "check", "--json and --csv: choose one")
	}
	if *classes {
		if len(pos) > 0 {
			return usageError(e, "check", "--classes takes no scenario")
		}
		return listClasses(e, *asJSON, *asCSV)
	}
	if len(pos) != 1 {
		return usageError(e, "check", "want one scenario (dmalab list shows them), got %d", len(pos))
	}
	s, err := scenario.Lookup(pos[0])
	if err != nil {
		return usageError(e, "check", "%s", scenario.UsageMessage(err))
	}
	opt := scenario.Options{Platform: *plat, Sets: sets, Check: true, NUMACtl: *numactlOpts, Trace: *htmlPath != "", TraceTimeline: *htmlPath != ""}
	if e.isTerminal {
		opt.Progress = e.stderr
	}
	if len(sweep.axes) > 0 || sweep.shard != "" {
		if *asCSV {
			return usageError(e, "check", "--sweep: --csv takes one run's diagnostics, not a sweep (--json gives the sweep's document)")
		}
		if *htmlPath != "" {
			return usageError(e, "check", "--sweep: --html takes one run, not a sweep")
		}
		opt.Trace, opt.TraceTimeline = false, false
		return runSweep(e, "check", s, &sweep, opt, *asJSON)
	}
	out, err := scenario.Run(s, opt)
	if err != nil {
		return scenarioError(e, "check", s.Name, err)
	}
	rep := out.Check
	if *htmlPath != "" {
		if err := addHTMLData(out.Result, out.Trace, *plat, s.Platform, sets); err != nil {
			return usageError(e, "check", "--html: %v", err)
		}
		title := fmt.Sprintf("dmalab check %s on %s", s.Name, out.Result.Platform)
		if err := WriteHTMLReport(*htmlPath, title, commandLine("check", args), out.Result, rep, ""); err != nil {
			return usageError(e, "check", "--html: %v", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(e.stderr, "dmalab check: %v\n", err)
			return exitFindings
		}
	} else if *asCSV {
		if err := diagnosticsTable(rep).WriteCSV(e.stdout); err != nil {
			fmt.Fprintf(e.stderr, "dmalab check: %v\n", err)
			return exitFindings
		}
	} else {
		writeDiagnostics(e, s.Name, out.Result.Platform, rep)
	}
	if len(rep.Diagnostics) > 0 || rep.Dropped > 0 {
		return exitFindings
	}
	return exitOK
}

func writeDiagnostics(e *env, name, platform string, rep *check.Report) {
	n := len(rep.Diagnostics) + rep.Dropped
	if n == 0 {
		fmt.Fprintf(e.stdout, "%s on %s: no diagnostics\n", name, platform)
		return
	}
	fmt.Fprintf(e.stdout, "%s on %s: %d diagnostic(s)\n", name, platform, n)
	for _, d := range rep.Diagnostics {
		fmt.Fprintf(e.stdout, "\n%s %s [%s] at %s, device %s", d.Severity, d.Class, d.Proc, sim.Time(d.Time), d.Device)
		if d.Buffer != "" {
			fmt.Fprintf(e.stdout, ", %s", d.Buffer)
		}
		fmt.Fprintf(e.stdout, "\n  %s\n", d.Message)
		if d.Origin != "" {
			fmt.Fprintf(e.stdout, "  made by %s\n", d.Origin)
		}
	}
	if rep.Dropped > 0 {
		fmt.Fprintf(e.stdout, "\n(%d more not kept)\n", rep.Dropped)
	}
	counts := map[string]int{}
	var order []string
	for _, d := range rep.Diagnostics {
		if counts[d.Class] == 0 {
			order = append(order, d.Class)
		}
		counts[d.Class]++
	}
	fmt.Fprintln(e.stdout, "\nby class:")
	t := &report.Table{Columns: []report.Column{{Name: "class"}, {Name: "count", Align: report.AlignRight}}, NoHeader: true}
	for _, c := range order {
		t.AddRow(c, fmt.Sprint(counts[c]))
	}
	t.WriteText(e.stdout, "  ")
}

// diagnosticsTable is the diagnostics as a table, for --csv: a line per
// diagnostic, the time in picoseconds as the JSON gives it.
func diagnosticsTable(rep *check.Report) *report.Table {
	t := &report.Table{}
	for _, name := range []string{"severity", "class", "time_ps", "proc", "device", "buffer", "message", "origin"} {
		t.Columns = append(t.Columns, report.Column{Name: name})
	}
	for _, d := range rep.Diagnostics {
		t.AddRow(d.Severity, d.Class, fmt.Sprint(int64(d.Time)), d.Proc, d.Device, d.Buffer, d.Message, d.Origin)
	}
	return t
}

// classesWidth is what --classes fits in: the meaning wraps, its source
// on a line of its own, so that no line is wider.
const classesWidth = 100

func listClasses(e *env, asJSON, asCSV bool) int {
	cs := check.Classes()
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(map[string]any{"classes": cs})
		return exitOK
	}
	if asCSV {
		t := &report.Table{Columns: []report.Column{{Name: "class"}, {Name: "severity"}, {Name: "source"}, {Name: "meaning"}}}
		for _, c := range cs {
			t.AddRow(c.Code, c.Severity, c.Source, c.Summary)
		}
		t.WriteCSV(e.stdout)
		return exitOK
	}
	codeW, sevW := len("CLASS"), len("SEVERITY")
	for _, c := range cs {
		codeW, sevW = max(codeW, len(c.Code)), max(sevW, len(c.Severity))
	}
	t := &report.Table{Columns: []report.Column{{Name: "CLASS"}, {Name: "SEVERITY"},
		{Name: "MEANING (SOURCE)", Wrap: classesWidth - codeW - sevW - 4}}}
	for _, c := range cs {
		t.AddRow(c.Code, c.Severity, c.Summary+"\n("+c.Source+")")
	}
	t.WriteText(e.stdout, "")
	return exitOK
}

package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/scenario"
)

func init() {
	register(&command{name: "run", summary: "run a scenario on a modelled platform (default: " + scenario.Default + ")", run: runRun})
}

// setFlags collects repeated --set key=value flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func runRun(e *env, args []string) int {
	fs := newFlags(e, "run", "run [SCENARIO] [--platform NAME|FILE] [--set key=value]... [--numactl OPTIONS] [--sweep key=v1,v2,...]... [--shard I/N] [--json|--csv] [--trace FILE] [--attribution] [--html FILE]",
		`Runs a built-in scenario on a modelled platform, in virtual time, and prints
its results. Without SCENARIO it runs `+scenario.Default+` on its default platform.
"dmalab list" shows the scenarios and platforms; "dmalab run SCENARIO --help"
shows a scenario's parameters.

--set takes a scenario parameter (sizes=4KiB,1GiB), seed=N, or
platform.<field path>=<value> to change one field of the platform
(platform.gpus.gpu0.copy_overhead=5us, platform.fabric.cross_traffic=0.05).

--numactl runs every process of the scenario as numactl(8) would start it:
--interleave/-i, --preferred/-p, --preferred-many/-P, --weighted-interleave/-w,
--membind/-m, --localalloc/-l set the memory policy, --cpunodebind/-N and
--physcpubind/-C the CPUs; lists as numactl takes them (0,2-3, all, +1, !0).
Memory the kernel places by policy follows it: anonymous memory (numa-first-touch,
numa-policies) and CUDA's host allocations (host-memory, gpu-affinity); buffers
a scenario puts on an explicit node (transfers, the DMA scenarios) do not move.
The options are recorded in the params ("numactl").

--attribution adds where the transfers' time went, by cause: the calls'
fixed overheads, queueing for a busy engine, address translation, bytes
on the wire, and waiting for unified-memory faults ("time_split" in JSON).

--html writes a report to open in a browser: bandwidth against size, the
timeline of engines and links, stages, every parameter with its source.
With --json too, the document carries what the page draws ("timeline",
"platform_params"), so "dmalab report" makes the same page from it.

`+sweepHelp)
	plat := fs.String("platform", "", "the platform: a preset name or a YAML file (`NAME|FILE`; default: the scenario's)")
	var sets setFlags
	fs.Var(&sets, "set", "set a parameter: `key=value` (repeatable)")
	numactlOpts := fs.String("numactl", "", "numactl's placement `OPTIONS` for every process of the run (\"--cpunodebind=1 --membind=0\")")
	asJSON := fs.Bool("json", false, "print one JSON document instead of a table")
	asCSV := fs.Bool("csv", false, "print the results table as CSV (RFC 4180) instead of text")
	tracePath := fs.String("trace", "", "write a Chrome trace-event file (opens in Perfetto) to `FILE`")
	attribution := fs.Bool("attribution", false, "add the time split by cause (call, queue, translate, transfer, fault)")
	htmlPath := fs.String("html", "", htmlFlagHelp)
	var sweep sweepFlags
	fs.Var(&sweep.axes, "sweep", "run once per value of a key: `KEY=V1,V2,...` (repeatable: the cartesian product)")
	fs.StringVar(&sweep.shard, "shard", "", "run shard `I/N` of the sweep (for dmalab merge)")
	args, help := splitHelp(args)
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if help {
		// The scenario's parameters follow the generic help; a scenario
		// that does not exist is an error, not help.
		var s *scenario.Scenario
		if len(pos) > 0 {
			var err error
			if s, err = scenario.Lookup(pos[0]); err != nil {
				return usageError(e, "run", "%s", scenario.UsageMessage(err))
			}
		}
		fs.SetOutput(e.stdout)
		fs.Usage()
		if s != nil {
			scenarioHelp(e, s)
		}
		return exitOK
	}
	if len(pos) > 1 {
		return usageError(e, "run", "one scenario at a time, got %q", pos)
	}
	if *asJSON && *asCSV {
		return usageError(e, "run", "--json and --csv: choose one")
	}
	name := scenario.Default
	if len(pos) == 1 {
		name = pos[0]
	}
	s, err := scenario.Lookup(name)
	if err != nil {
		return usageError(e, "run", "%s", scenario.UsageMessage(err))
	}
	// The text output explains where the time went by default; JSON and
	// CSV carry the split only when asked, so that documents stay as
	// they were.
	text := !*asJSON && !*asCSV
	opt := scenario.Options{Platform: *plat, Sets: sets, Trace: *tracePath != "" || *htmlPath != "", TraceTimeline: *htmlPath != "", Attribution: *attribution || text, NUMACtl: *numactlOpts}
	if e.isTerminal {
		opt.Progress = e.stderr
	}
	if len(sweep.axes) > 0 || sweep.shard != "" {
		if *asCSV {
			return usageError(e, "run", "--sweep: --csv takes one run's table, not a sweep (--json gives the sweep's document)")
		}
		// A sweep's points print as they always have: the split only
		// when asked for.
		opt.Attribution = *attribution
		if *tracePath != "" || *htmlPath != "" {
			return usageError(e, "run", "--sweep: --trace and --html take one run, not a sweep")
		}
		return runSweep(e, "run", s, &sweep, opt, *asJSON)
	}
	var trace *traceFile
	if *tracePath != "" {
		// Opened before the run, so that a path that cannot be written
		// fails at once; the trace streams into it as the run goes.
		if trace, err = createTrace(*tracePath); err != nil {
			return usageError(e, "run", "--trace: %v", err)
		}
		opt.TraceTo = trace
	}
	out, err := scenario.Run(s, opt)
	if trace != nil {
		if cerr := trace.close(err != nil); cerr != nil && err == nil {
			return usageError(e, "run", "--trace: %v", cerr)
		}
	}
	if err != nil {
		return scenarioError(e, "run", name, err)
	}
	if t := out.Result.Time; t != nil && !*attribution && t.Transfers == 0 && t.Stalls == 0 {
		// A split asked for by default only: nothing to split.
		out.Result.Time = nil
	}
	if *htmlPath != "" {
		if err := addHTMLData(out.Result, out.Trace, *plat, s.Platform, sets); err != nil {
			return usageError(e, "run", "--html: %v", err)
		}
		title := fmt.Sprintf("dmalab run %s on %s", name, out.Result.Platform)
		if err := WriteHTMLReport(*htmlPath, title, commandLine("run", args), out.Result, nil, ""); err != nil {
			return usageError(e, "run", "--html: %v", err)
		}
	}
	switch {
	case *asJSON:
		err = report.WriteJSON(e.stdout, out.Result)
	case *asCSV:
		err = report.WriteCSV(e.stdout, out.Result)
	default:
		if err = report.WriteTable(e.stdout, out.Result); err == nil {
			writeHints(e.stdout, s, out.Result)
		}
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "dmalab run: %v\n", err)
		return exitFindings
	}
	return exitOK
}

func scenarioHelp(e *env, s *scenario.Scenario) {
	fmt.Fprintf(e.stdout, "\nScenario %s: %s\n\n%s\n\nDefault platform: %s\n\nParameters (--set name=value):\n", s.Name, s.Summary, s.Doc, s.Platform)
	fmt.Fprintf(e.stdout, "  %-12s %s (default %s)\n", "seed", "seed of the engine's random source", "1")
	for _, p := range s.Params {
		if p.Default == "" {
			// The help says what an empty value means.
			fmt.Fprintf(e.stdout, "  %-12s %s\n", p.Name, p.Help)
			continue
		}
		fmt.Fprintf(e.stdout, "  %-12s %s (default %s)\n", p.Name, p.Help, p.Default)
	}
}

// writeFile writes a file through fn, reporting the first error.
func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// traceFile is the --trace file, counting what was written to it.
type traceFile struct {
	f *os.File
	n int64
}

func createTrace(path string) (*traceFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &traceFile{f: f}, nil
}

func (t *traceFile) Write(b []byte) (int, error) {
	n, err := t.f.Write(b)
	t.n += int64(n)
	return n, err
}

// close closes the file; a run that failed before its trace began (bad
// input) leaves no empty file behind.
func (t *traceFile) close(failed bool) error {
	err := t.f.Close()
	if failed && t.n == 0 {
		os.Remove(t.f.Name())
	}
	return err
}

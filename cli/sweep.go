package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	checkpkg "github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/scenario"
)

// sweepHelp is what run's help says of --sweep and --shard.
const sweepHelp = `--sweep KEY=V1,V2,... runs the scenario once per value of KEY, any key
--set takes (a scenario parameter, seed, or platform.<field path>);
repeated, once per point of the cartesian product, the first --sweep
varying slowest. When a value itself holds commas (a list parameter), separate
the values with ';' instead: --sweep 'sizes=4KiB,1MiB;64MiB' is two points.
The points run in parallel, one per core, and print in the product's order:
the same bytes whatever the number of cores. --json prints one sweep
document (docs/json.md).

--shard I/N runs shard I (from 0) of N: the points whose index modulo N is I.
"dmalab merge" joins the N shards' --json documents into the document the
whole sweep prints, byte for byte (a Slurm job array or a Kubernetes
Indexed Job runs one shard per task: docs/examples/).`

// sweepFlags collects run's sweep flags.
type sweepFlags struct {
	axes  setFlags
	shard string
}

// parseSweepAxis parses one --sweep KEY=V1,V2,... (values separated by
// ';' instead when there is one).
func parseSweepAxis(arg string) (report.SweepAxis, error) {
	key, list, ok := strings.Cut(arg, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return report.SweepAxis{}, fmt.Errorf("--sweep %q: want KEY=V1,V2,...", arg)
	}
	sep := ","
	if strings.Contains(list, ";") {
		sep = ";"
	}
	a := report.SweepAxis{Key: key}
	for i, v := range strings.Split(list, sep) {
		v = strings.TrimSpace(v)
		if v == "" {
			return report.SweepAxis{}, fmt.Errorf("--sweep %s=%s: value %d is empty", key, list, i+1)
		}
		if slices.Contains(a.Values, v) {
			return report.SweepAxis{}, fmt.Errorf("--sweep %s: value %q given twice", key, v)
		}
		a.Values = append(a.Values, v)
	}
	return a, nil
}

// parseShard parses --shard I/N.
func parseShard(arg string) (index, count int, err error) {
	i, n, ok := strings.Cut(arg, "/")
	index, err1 := strconv.Atoi(strings.TrimSpace(i))
	count, err2 := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err1 != nil || err2 != nil || count < 1 || index < 0 || index >= count {
		return 0, 0, fmt.Errorf("--shard %q: want I/N, the shard's index from 0 and the number of shards (0 <= I < N)", arg)
	}
	return index, count, nil
}

// setKey is the key of a "key=value" assignment.
func setKey(kv string) string {
	k, _, _ := strings.Cut(kv, "=")
	return strings.TrimSpace(k)
}

// sweepDef checks run's flags for a sweep and returns its definition and
// shard (nil for the whole sweep).
func sweepDef(cmd string, s *scenario.Scenario, sf *sweepFlags, opt scenario.Options) (*report.SweepDef, *report.SweepShard, error) {
	d := &report.SweepDef{Command: cmd, Scenario: s.Name, Platform: opt.Platform, Sets: opt.Sets, NUMACtl: opt.NUMACtl, Attribution: opt.Attribution}
	if len(sf.axes) == 0 {
		return nil, nil, errors.New("--shard: there is no --sweep to shard")
	}
	for _, arg := range sf.axes {
		a, err := parseSweepAxis(arg)
		if err != nil {
			return nil, nil, err
		}
		known := a.Key == "seed" || strings.HasPrefix(a.Key, "platform.") && len(a.Key) > len("platform.") ||
			slices.ContainsFunc(s.Params, func(p scenario.Param) bool { return p.Name == a.Key })
		if !known {
			names := []string{"seed", "platform.<field path>"}
			for _, p := range s.Params {
				names = append(names, p.Name)
			}
			return nil, nil, fmt.Errorf("--sweep %s: unknown key for scenario %s (keys: %s)", a.Key, s.Name, strings.Join(names, ", "))
		}
		if slices.ContainsFunc(d.Axes, func(b report.SweepAxis) bool { return b.Key == a.Key }) {
			return nil, nil, fmt.Errorf("--sweep %s: the key is swept twice", a.Key)
		}
		if slices.ContainsFunc(opt.Sets, func(kv string) bool { return setKey(kv) == a.Key }) {
			return nil, nil, fmt.Errorf("--sweep %s: the key is also given by --set", a.Key)
		}
		d.Axes = append(d.Axes, a)
	}
	d.Points = d.Size()
	if sf.shard == "" {
		return d, nil, nil
	}
	i, n, err := parseShard(sf.shard)
	if err != nil {
		return nil, nil, err
	}
	return d, &report.SweepShard{Index: i, Count: n}, nil
}

// runSweep runs the points of a sweep (of its shard) on a pool of
// GOMAXPROCS workers and prints them in the product's order.
// cmd is "run" or "check" (opt.Check set).
func runSweep(e *env, cmd string, s *scenario.Scenario, sf *sweepFlags, opt scenario.Options, asJSON bool) int {
	def, shard, err := sweepDef(cmd, s, sf, opt)
	if err != nil {
		return usageError(e, cmd, "%v", err)
	}
	doc := &report.Sweep{Sweep: *def, Shard: shard, Points: []report.SweepPoint{}}
	var todo []int
	for p := range def.Points {
		if shard == nil || report.InShard(p, shard.Index, shard.Count) {
			todo = append(todo, p)
		}
	}
	results := make([]report.SweepPoint, len(todo))
	errs := make([]error, len(todo))
	// A point after the first that failed (in the product's order) is not
	// started; every point before it is, so that the error reported is
	// always the same one whatever the order of completion.
	var failed atomic.Int64
	failed.Store(int64(len(todo)))
	var (
		mu   sync.Mutex
		done int
	)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(len(todo), 1)) {
		wg.Go(func() {
			for j := range jobs {
				if int64(j) > failed.Load() {
					continue
				}
				results[j], errs[j] = runPointGuarded(s, def, todo[j], opt)
				if errs[j] != nil {
					for {
						f := failed.Load()
						if int64(j) >= f || failed.CompareAndSwap(f, int64(j)) {
							break
						}
					}
				}
				if e.isTerminal {
					mu.Lock()
					done++
					fmt.Fprintf(e.stderr, "\rdmalab %s: sweep of %s, %d of %d points done", cmd, s.Name, done, len(todo))
					mu.Unlock()
				}
			}
		})
	}
	for j := range todo {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	if e.isTerminal {
		fmt.Fprintln(e.stderr)
	}
	for j, err := range errs {
		if err == nil {
			continue
		}
		at := pointText(def, todo[j])
		if p, ok := err.(pointPanic); ok {
			// On this goroutine, so that dispatch reports it as the
			// internal error it is.
			panic(fmt.Sprintf("%v (sweep point %s)\n\npoint's goroutine:\n%s", p.value, at, p.stack))
		}
		if errors.Is(err, scenario.ErrUsage) {
			return usageError(e, cmd, "--sweep at %s: %s", at, scenario.UsageMessage(err))
		}
		fmt.Fprintf(e.stderr, "dmalab %s %s: --sweep at %s: %v\n", cmd, s.Name, at, err)
		return exitUsage
	}
	doc.Points = append(doc.Points, results...)
	return writeSweep(e, cmd, doc, asJSON)
}

// writeSweep prints a sweep document, as JSON or text, and returns the
// exit status: a check sweep's is 1 when any point has a diagnostic.
func writeSweep(e *env, cmd string, doc *report.Sweep, asJSON bool) int {
	check := doc.Sweep.Command == "check"
	reps := make([]checkpkg.Report, len(doc.Points))
	findings := false
	if check {
		for i, p := range doc.Points {
			if err := json.Unmarshal(p.Check, &reps[i]); err != nil {
				return usageError(e, cmd, "point %d: %v", p.Index, err)
			}
			findings = findings || len(reps[i].Diagnostics) > 0 || reps[i].Dropped > 0
		}
	}
	var err error
	switch {
	case asJSON:
		err = report.WriteSweepJSON(e.stdout, doc)
	case check:
		report.WriteSweepHeading(e.stdout, doc)
		for i, p := range doc.Points {
			var r report.Result
			if err = json.Unmarshal(p.Result, &r); err != nil {
				break
			}
			fmt.Fprintf(e.stdout, "\n%s\n", doc.PointHeading(p))
			writeDiagnostics(&env{stdout: e.stdout}, r.Scenario, r.Platform, &reps[i])
		}
	default:
		err = report.WriteSweepTable(e.stdout, doc)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "dmalab %s: %v\n", cmd, err)
		return exitFindings
	}
	if findings {
		return exitFindings
	}
	return exitOK
}

// runPoint runs point p of a sweep: the shared --set assignments, then
// the point's.
func runPoint(s *scenario.Scenario, def *report.SweepDef, p int, opt scenario.Options) (report.SweepPoint, error) {
	pt := report.SweepPoint{Index: p, Params: map[string]string{}}
	opt.Sets = slices.Clone(opt.Sets)
	for i, v := range def.Point(p) {
		opt.Sets = append(opt.Sets, def.Axes[i].Key+"="+v)
		pt.Params[def.Axes[i].Key] = v
	}
	// Progress lines of parallel runs would interleave: the sweep says
	// how many points are done instead.
	opt.Progress = nil
	out, err := scenario.Run(s, opt)
	if err != nil {
		return pt, err
	}
	if pt.Result, err = json.Marshal(out.Result); err != nil {
		return pt, err
	}
	if opt.Check {
		pt.Check, err = json.Marshal(out.Check)
	}
	return pt, err
}

// pointPanic is a point's panic, carried to the sweep's goroutine.
type pointPanic struct {
	value any
	stack []byte
}

func (p pointPanic) Error() string { return fmt.Sprint(p.value) }

// runPointGuarded is runPoint on a worker: a panic (a bug in dmalab)
// becomes a pointPanic, not the end of the process.
func runPointGuarded(s *scenario.Scenario, def *report.SweepDef, p int, opt scenario.Options) (pt report.SweepPoint, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = pointPanic{r, debug.Stack()}
		}
	}()
	return runPoint(s, def, p, opt)
}

// pointText is point p's assignments, "key=value key=value".
func pointText(def *report.SweepDef, p int) string {
	var at []string
	for i, v := range def.Point(p) {
		at = append(at, def.Axes[i].Key+"="+v)
	}
	return strings.Join(at, " ")
}

package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	root "github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/report"
)

// sweepArgs is a small sweep of 3 × 3 points: a platform field and a
// scenario parameter.
var sweepArgs = []string{"run", "transfers", "--set", "sizes=64MiB", "--set", "paths=pinned",
	"--sweep", "platform.gpus.gpu0.link.gen=3,4,5", "--sweep", "directions=h2d,d2h,bidir"}

func sweepRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := dmalab(t, args...)
	if code != exitOK {
		t.Fatalf("dmalab %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

func decodeSweep(t *testing.T, doc string) *report.Sweep {
	t.Helper()
	s, err := report.ReadSweep(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSweepCartesianOrder(t *testing.T) {
	doc := decodeSweep(t, sweepRun(t, append(slices.Clone(sweepArgs), "--json")...))
	if doc.Sweep.Points != 9 || len(doc.Points) != 9 || doc.Shard != nil {
		t.Fatalf("points %d, %d held, shard %v; want 9, 9, none", doc.Sweep.Points, len(doc.Points), doc.Shard)
	}
	i := 0
	for _, gen := range []string{"3", "4", "5"} {
		for _, dir := range []string{"h2d", "d2h", "bidir"} {
			p := doc.Points[i]
			want := map[string]string{"platform.gpus.gpu0.link.gen": gen, "directions": dir}
			if p.Index != i || !equalMaps(p.Params, want) {
				t.Errorf("point %d: index %d, params %v; want %d, %v", i, p.Index, p.Params, i, want)
			}
			var r report.Result
			if err := json.Unmarshal(p.Result, &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Results) != 1 || r.Results[0].Direction != dir || r.Params["directions"] != dir {
				t.Errorf("point %d: result %+v, want one %s row", i, r.Results, dir)
			}
			i++
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestSweepPlatformField: a platform field takes several values, and each
// point is the run that --set of its values gives.
func TestSweepPlatformField(t *testing.T) {
	doc := decodeSweep(t, sweepRun(t, "run", "transfers", "--set", "sizes=64MiB", "--set", "paths=pinned", "--set", "directions=h2d",
		"--sweep", "platform.gpus.gpu0.link.gen=3,4,5", "--json"))
	var gbps []float64
	for _, p := range doc.Points {
		single := sweepRun(t, "run", "transfers", "--set", "sizes=64MiB", "--set", "paths=pinned", "--set", "directions=h2d",
			"--set", "platform.gpus.gpu0.link.gen="+p.Params["platform.gpus.gpu0.link.gen"], "--json")
		var alone, point bytes.Buffer
		if err := json.Compact(&alone, []byte(single)); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&point, p.Result); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(alone.Bytes(), point.Bytes()) {
			t.Errorf("point %v differs from its run alone:\n%s\n%s", p.Params, point.Bytes(), alone.Bytes())
		}
		var r report.Result
		if err := json.Unmarshal(p.Result, &r); err != nil {
			t.Fatal(err)
		}
		gbps = append(gbps, r.Results[0].GBps)
	}
	// Each generation doubles the lane rate: a 64 MiB copy is bound by it.
	if len(gbps) != 3 || !(gbps[0]*1.8 < gbps[1] && gbps[1]*1.8 < gbps[2]) {
		t.Errorf("GB/s at Gen3, 4, 5: %v; want each about twice the one before", gbps)
	}
}

// TestSweepParallelSameBytes: the points run on as many workers as
// GOMAXPROCS, and the output is the same bytes with one or four, run
// after run.
func TestSweepParallelSameBytes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, format := range []string{"--json", "--text"} {
		args := slices.Clone(sweepArgs)
		if format == "--json" {
			args = append(args, format)
		}
		var outs []string
		for _, procs := range []int{1, 4, 4} {
			runtime.GOMAXPROCS(procs)
			outs = append(outs, sweepRun(t, args...))
		}
		for i, o := range outs[1:] {
			if o != outs[0] {
				t.Errorf("%s: run %d (GOMAXPROCS 4) differs from GOMAXPROCS 1", format, i+2)
			}
		}
	}
}

// TestSweepShardsMerge is the proof: a sweep of 3 × 3 values run
// whole and as 3 shards merged gives identical documents, JSON and text.
func TestSweepShardsMerge(t *testing.T) {
	dir := t.TempDir()
	whole := sweepRun(t, append(slices.Clone(sweepArgs), "--json")...)
	wholeText := sweepRun(t, sweepArgs...)
	var files []string
	for _, i := range []string{"2", "0", "1"} {
		out := sweepRun(t, append(slices.Clone(sweepArgs), "--shard", i+"/3", "--json")...)
		doc := decodeSweep(t, out)
		if doc.Shard == nil || len(doc.Points) != 3 {
			t.Fatalf("shard %s/3: %v with %d points, want 3", i, doc.Shard, len(doc.Points))
		}
		f := filepath.Join(dir, "shard-"+i+".json")
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	merged := sweepRun(t, append([]string{"merge", "--json"}, files...)...)
	if merged != whole {
		t.Errorf("merged shards differ from the whole sweep:\n%s\n----\n%s", merged, whole)
	}
	if text := sweepRun(t, append([]string{"merge"}, files...)...); text != wholeText {
		t.Errorf("merge's text differs from the whole sweep's:\n%s\n----\n%s", text, wholeText)
	}

	// Shards that do not make one sweep.
	write := func(name, content string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	other := write("other.json", sweepRun(t, "run", "transfers", "--set", "sizes=4KiB", "--set", "paths=pinned",
		"--sweep", "platform.gpus.gpu0.link.gen=3,4,5", "--sweep", "directions=h2d,d2h,bidir", "--shard", "1/3", "--json"))
	four := write("four.json", sweepRun(t, append(slices.Clone(sweepArgs), "--shard", "1/4", "--json")...))
	wholeFile := write("whole.json", whole)
	broken := write("broken.json", "{\"sweep\": ")
	// A shard whose points were edited: it holds another shard's point.
	var s report.Sweep
	if err := json.Unmarshal([]byte(sweepRun(t, append(slices.Clone(sweepArgs), "--shard", "1/3", "--json")...)), &s); err != nil {
		t.Fatal(err)
	}
	s.Points[0].Index = 0
	var b bytes.Buffer
	if err := report.WriteSweepJSON(&b, &s); err != nil {
		t.Fatal(err)
	}
	edited := write("edited.json", b.String())
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{files[0], files[1]}, "shard(s) 1/3 missing"},
		{[]string{files[0], files[1], files[2], files[2]}, "shard-1.json: shard 1/3 again"},
		{[]string{files[0], other, files[1]}, "other.json: a shard of another sweep than " + files[0] + ` (--set ["sizes=4KiB" "paths=pinned"]`},
		{[]string{files[0], four}, "four.json: shard 1/4, but " + files[0] + " is one of 3 shards"},
		{[]string{wholeFile}, "whole.json: not a shard"},
		{[]string{files[0], broken}, "broken.json: read sweep"},
		{[]string{files[0], edited, files[1]}, "edited.json: shard 1/3 holds the points of index [0 4 7], want [1 4 7]"},
		{[]string{filepath.Join(dir, "nosuch.json")}, "nosuch.json"},
		{nil, "want the shards' files"},
	} {
		code, out, errs := dmalab(t, append([]string{"merge", "--json"}, c.files...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("merge %v: exit %d, stdout %d bytes, stderr %q; want exit 2 saying %q", c.files, code, len(out), errs, c.want)
		}
	}
}

func TestSweepUsageErrors(t *testing.T) {
	base := []string{"run", "transfers", "--set", "sizes=4KiB", "--set", "paths=pinned"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sweep", "directions"}, `--sweep "directions": want KEY=V1,V2,...`},
		{[]string{"--sweep", "=h2d"}, `want KEY=V1,V2,...`},
		{[]string{"--sweep", "nosuch=1,2"}, "--sweep nosuch: unknown key for scenario transfers"},
		{[]string{"--sweep", "platform.=1"}, "--sweep platform.: unknown key"},
		{[]string{"--sweep", "directions=h2d,,d2h"}, "--sweep directions=h2d,,d2h: value 2 is empty"},
		{[]string{"--sweep", "directions=h2d,h2d"}, `--sweep directions: value "h2d" given twice`},
		{[]string{"--sweep", "gpu=0", "--sweep", "gpu=0,1"}, "--sweep gpu: the key is swept twice"},
		{[]string{"--sweep", "sizes=4KiB,8KiB"}, "--sweep sizes: the key is also given by --set"},
		{[]string{"--sweep", "platform.gpus.gpu0.link.gen=4,x"}, `--sweep at platform.gpus.gpu0.link.gen=x:`},
		{[]string{"--sweep", "platform.gpus.gpu0.link.gen=4,x"}, `bad integer "x"`},
		{[]string{"--sweep", "directions=h2d,sideways"}, "--sweep at directions=sideways:"},
		{[]string{"--sweep", "gpu=0,1", "--shard", "1"}, `--shard "1": want I/N`},
		{[]string{"--sweep", "gpu=0,1", "--shard", "2/2"}, `--shard "2/2": want I/N`},
		{[]string{"--sweep", "gpu=0,1", "--shard", "-1/2"}, `--shard "-1/2": want I/N`},
		{[]string{"--shard", "0/2"}, "--shard: there is no --sweep to shard"},
		{[]string{"--sweep", "gpu=0", "--trace", filepath.Join(t.TempDir(), "t.json")}, "--trace and --html take one run"},
	} {
		code, out, errs := dmalab(t, append(slices.Clone(base), c.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestSweepSemicolons: values that hold commas (list parameters) are
// separated by ';'.
func TestSweepSemicolons(t *testing.T) {
	doc := decodeSweep(t, sweepRun(t, "run", "transfers", "--set", "paths=pinned", "--set", "directions=h2d",
		"--sweep", "sizes=4KiB,1MiB;64MiB", "--json"))
	want := [][]int64{{4 << 10, 1 << 20}, {64 << 20}}
	if len(doc.Points) != len(want) {
		t.Fatalf("%d points, want %d", len(doc.Points), len(want))
	}
	for i, p := range doc.Points {
		var r report.Result
		if err := json.Unmarshal(p.Result, &r); err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, row := range r.Results {
			got = append(got, row.Bytes)
		}
		if !slices.Equal(got, want[i]) {
			t.Errorf("point %d (%v): sizes %v, want %v", i, p.Params, got, want[i])
		}
	}
}

func TestParseSweepAxis(t *testing.T) {
	for _, c := range []struct {
		in   string
		key  string
		vals []string
		err  bool
	}{
		{"gen=3,4,5", "gen", []string{"3", "4", "5"}, false},
		{" gen = 3, 4 ", "gen", []string{"3", "4"}, false},
		{"sizes=4KiB,1MiB;64MiB", "sizes", []string{"4KiB,1MiB", "64MiB"}, false},
		{"sizes=4KiB;", "", nil, true},
		{"gen=", "", nil, true},
		{"gen", "", nil, true},
		{"gen=3,3", "", nil, true},
	} {
		a, err := parseSweepAxis(c.in)
		if (err != nil) != c.err || err == nil && (a.Key != c.key || !slices.Equal(a.Values, c.vals)) {
			t.Errorf("parseSweepAxis(%q) = %+v, %v; want %s %v (error %v)", c.in, a, err, c.key, c.vals, c.err)
		}
	}
}

func TestSweepDefPoint(t *testing.T) {
	d := report.SweepDef{Axes: []report.SweepAxis{{Key: "a", Values: []string{"1", "2"}}, {Key: "b", Values: []string{"x", "y", "z"}}}}
	var got []string
	for p := range d.Size() {
		got = append(got, strings.Join(d.Point(p), ""))
	}
	if want := []string{"1x", "1y", "1z", "2x", "2y", "2z"}; !slices.Equal(got, want) {
		t.Errorf("points %v, want %v", got, want)
	}
}

// TestCheckSweep: check takes --sweep too; each point has its
// diagnostics, the exit status is 1 when any point has one, and merged
// shards are the whole sweep.
func TestCheckSweep(t *testing.T) {
	args := []string{"check", "dma-bugs", "--sweep", "bug=stale-read,unmap-size,unmap-direction", "--json"}
	code, whole, errs := dmalab(t, args...)
	if code != exitFindings {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	doc := decodeSweep(t, whole)
	var classes []string
	for _, p := range doc.Points {
		var rep struct {
			Diagnostics []struct{ Class string }
		}
		if err := json.Unmarshal(p.Check, &rep); err != nil || len(p.Result) == 0 {
			t.Fatalf("point %v: check %s, result %d bytes: %v", p.Params, p.Check, len(p.Result), err)
		}
		var cs []string
		for _, d := range rep.Diagnostics {
			cs = append(cs, d.Class)
		}
		classes = append(classes, p.Params["bug"]+":"+strings.Join(cs, ","))
	}
	if want := []string{"stale-read:stale-read", "unmap-size:unmap-size", "unmap-direction:unmap-direction"}; !slices.Equal(classes, want) {
		t.Errorf("diagnostics per point %v, want %v", classes, want)
	}
	dir := t.TempDir()
	var files []string
	for _, i := range []string{"0", "1"} {
		code, out, errs := dmalab(t, append(slices.Clone(args), "--shard", i+"/2")...)
		if code != exitFindings {
			t.Fatalf("shard %s/2: exit %d: %s", i, code, errs)
		}
		f := filepath.Join(dir, i+".json")
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	code, merged, errs := dmalab(t, append([]string{"merge", "--json"}, files...)...)
	if code != exitFindings || merged != whole {
		t.Errorf("merge: exit %d (want 1), same bytes %v: %s", code, merged == whole, errs)
	}
	_, text, _ := dmalab(t, args[:len(args)-1]...)
	_, mergedText, _ := dmalab(t, append([]string{"merge"}, files...)...)
	if text != mergedText || !strings.Contains(text, "[point 3 of 3] bug=unmap-direction\ndma-bugs on zynq-7000: 1 diagnostic(s)\n") {
		t.Errorf("text of the sweep and of the merge:\n%s\n----\n%s", text, mergedText)
	}
	if code, out, errs := dmalab(t, "check", "dma-streaming", "--platform", "zynq-7000", "--sweep", "seed=1,2"); code != exitOK ||
		!strings.Contains(out, "[point 2 of 2] seed=2\ndma-streaming on zynq-7000: no diagnostics\n") {
		t.Errorf("a sweep without diagnostics: exit %d: %s%s", code, out, errs)
	}
}

// TestSweepProgress: on a terminal, stderr counts the points done; the
// output is the same as without one.
func TestSweepProgress(t *testing.T) {
	var out, errb bytes.Buffer
	args := append(slices.Clone(sweepArgs), "--json")
	if code := dispatch(&env{stdout: &out, stderr: &errb, isTerminal: true}, args); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "\rdmalab run: sweep of transfers, 9 of 9 points done\n") {
		t.Errorf("progress %q lacks the last count", errb.String())
	}
	if out.String() != sweepRun(t, args...) {
		t.Error("the output on a terminal differs")
	}
}

func init() {
	root.Register(&root.Scenario{Name: "sweep-test-panic", Summary: "a bug, for TestSweepPanic", Platform: "zynq-7000",
		Run: func(c *root.Context) error { panic("a bug in a point") }})
}

// TestSweepPanic: a panic in a point's worker is an internal error (exit
// 3) that names the point, as one in a single run is.
func TestSweepPanic(t *testing.T) {
	code, out, errs := dmalab(t, "run", "sweep-test-panic", "--sweep", "seed=1,2")
	if code != exitInternal || out != "" || !strings.Contains(errs, "internal error: a bug in a point") || !strings.Contains(errs, "(sweep point seed=1)") {
		t.Errorf("exit %d, stdout %q, stderr %s; want exit 3 naming seed=1", code, out, errs)
	}
}

// TestSweepEmptyShard: more shards than points leaves some empty, and
// the merge is still the whole sweep.
func TestSweepEmptyShard(t *testing.T) {
	args := []string{"run", "transfers", "--set", "sizes=4KiB", "--set", "paths=pinned", "--sweep", "directions=h2d,d2h", "--json"}
	whole := sweepRun(t, args...)
	dir := t.TempDir()
	var files []string
	for _, i := range []string{"0", "1", "2"} {
		out := sweepRun(t, append(slices.Clone(args), "--shard", i+"/3")...)
		if i == "2" && !strings.Contains(out, `"points": []`) {
			t.Errorf("shard 2/3 of 2 points:\n%s", out)
		}
		f := filepath.Join(dir, i+".json")
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if merged := sweepRun(t, append([]string{"merge", "--json"}, files...)...); merged != whole {
		t.Errorf("merged:\n%s\nwhole:\n%s", merged, whole)
	}
}

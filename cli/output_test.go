package cli

import (
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestWhatIfRecorded: a --set of a platform field is in the params of
// the text and the JSON, in the sources of the factors it touches, and
// re-running with exactly what the JSON records reproduces the results.
func TestWhatIfRecorded(t *testing.T) {
	args := []string{"transfers", "--set", "sizes=1GiB", "--set", "paths=pinned", "--set", "directions=h2d",
		"--set", "platform.gpus.gpu0.link.gen=4"}
	d := runJSON(t, args...)
	if got := d.Params["platform.gpus.gpu0.link.gen"]; got != "4" {
		t.Fatalf("params record gen %q, want 4: %v", got, d.Params)
	}
	if src := d.Factors["gpu0.link.efficiency"].Source; !strings.HasPrefix(src, "--set platform.gpus.gpu0.link.gen=4; ") {
		t.Errorf("gpu0.link.efficiency's source does not name the --set: %q", src)
	}
	if src := d.Factors["fabric.cross_traffic"].Source; strings.Contains(src, "--set") {
		t.Errorf("an untouched factor names the --set: %q", src)
	}
	_, text, _ := dmalab(t, append([]string{"run"}, args...)...)
	if !strings.Contains(text, "platform.gpus.gpu0.link.gen=4") {
		t.Errorf("the text's params lack the platform change:\n%s", text)
	}
	// Re-run from the document alone.
	again := []string{d.Scenario, "--platform", d.Platform}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range d.Params {
			if !yield(k) {
				return
			}
		}
	}) {
		again = append(again, "--set", k+"="+d.Params[k])
	}
	d2 := runJSON(t, again...)
	if !reflect.DeepEqual(d.Results, d2.Results) || !reflect.DeepEqual(d.Params, d2.Params) {
		t.Errorf("re-running with the recorded params gives\n%+v\nnot\n%+v", d2.Results, d.Results)
	}
	base := runJSON(t, "transfers", "--set", "sizes=1GiB", "--set", "paths=pinned", "--set", "directions=h2d")
	if base.Results[0].GBps <= d.Results[0].GBps {
		t.Errorf("Gen4 copies at %g GB/s, no slower than Gen5's %g", d.Results[0].GBps, base.Results[0].GBps)
	}
}

// TestCSV: every table command's --csv is RFC 4180 with a header and
// the rows of its text table; --json with --csv is bad usage.
func TestCSV(t *testing.T) {
	probeFile := filepath.Join("..", "docs", "measurements", "2026-11-21-h200-cli-probe.json")
	for _, tc := range []struct {
		name string
		args []string
		head []string
		rows int // at least
		code int
	}{
		{"run", []string{"run", "transfers", "--set", "sizes=4KiB,1GiB", "--set", "paths=pinned", "--csv"},
			[]string{"path", "direction", "size", "time", "GB/s"}, 6, exitOK},
		{"check", []string{"check", "dma-bugs", "--csv"}, []string{"severity", "class", "time_ps"}, 10, exitFindings},
		{"classes", []string{"check", "--classes", "--csv"}, []string{"class", "severity", "source", "meaning"}, 20, exitOK},
		{"validate", []string{"validate", probeFile, "--platform", "h200-pcie", "--csv"}, []string{"row", "class", "model", "measured"}, 10, -1},
		{"probe", []string{"probe", "--input", probeFile, "--csv"}, []string{"gpu", "family", "operation", "path"}, 10, exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := dmalab(t, tc.args...)
			if tc.code >= 0 && code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errs)
			}
			recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
			if err != nil {
				t.Fatalf("not CSV: %v\n%s", err, out)
			}
			if len(recs) < tc.rows+1 {
				t.Fatalf("%d records, want at least %d:\n%s", len(recs), tc.rows+1, out)
			}
			if !slices.Equal(recs[0][:len(tc.head)], tc.head) {
				t.Errorf("header %q, want it to start %q", recs[0], tc.head)
			}
		})
	}
	if code, _, errs := dmalab(t, "run", "transfers", "--csv", "--json"); code != exitUsage || !strings.Contains(errs, "choose one") {
		t.Errorf("--csv --json: exit %d, %q", code, errs)
	}
}

// TestHelpGNUStyle: help names flags as the README does, --json, and
// says a default once.
func TestHelpGNUStyle(t *testing.T) {
	for _, cmd := range []string{"run", "check", "probe", "validate", "calibrate", "topo"} {
		_, out, _ := dmalab(t, cmd, "--help")
		if strings.Contains(out, "\n  -json") || strings.Contains(out, "\n  -platform") {
			t.Errorf("%s --help shows single-dash long flags:\n%s", cmd, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "default") > 1 {
				t.Errorf("%s --help says the default twice: %q", cmd, line)
			}
		}
	}
	_, out, _ := dmalab(t, "run", "--help")
	for _, want := range []string{"\n  --json\n", "\n  --set key=value\n", "\n  --csv\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = dmalab(t, "probe", "--help")
	if !strings.Contains(out, "--samples int\n      samples per measurement (at least 3) (default 3)") {
		t.Errorf("probe --help does not give --samples's default once:\n%s", out)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, _ := dmalab(t, args...)
		if code != exitOK || !strings.HasPrefix(out, "dmalab ") || !strings.Contains(out, "go1.") {
			t.Errorf("%v: exit %d, %q", args, code, out)
		}
	}
}

// TestCompletion: each shell's script is produced and names the
// commands, flags, scenarios and presets; bash's parses and registers
// its function for dmalab.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		t.Run(sh, func(t *testing.T) {
			code, out, errs := dmalab(t, "completion", sh)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			for _, want := range []string{"validate", "attribution", "camera-pipeline", "jetson-orin", "classes"} {
				if !strings.Contains(out, want) {
					t.Errorf("the %s script lacks %q", sh, want)
				}
			}
			if sh == "bash" {
				if !strings.Contains(out, "\ncomplete -F _dmalab dmalab\n") {
					t.Errorf("no complete -F line for dmalab:\n%s", out)
				}
				bash, err := exec.LookPath("bash")
				if err != nil {
					t.Skip("no bash to parse the script")
				}
				f := filepath.Join(t.TempDir(), "dmalab.bash")
				if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				if b, err := exec.Command(bash, "-n", f).CombinedOutput(); err != nil {
					t.Errorf("bash -n: %v\n%s", err, b)
				}
			}
		})
	}
	if code, _, _ := dmalab(t, "completion", "tcsh"); code != exitUsage {
		t.Errorf("completion tcsh: exit %d, want %d", code, exitUsage)
	}
}

// TestClassesWidth: check --classes fits in 100 columns.
func TestClassesWidth(t *testing.T) {
	_, out, _ := dmalab(t, "check", "--classes")
	for _, line := range strings.Split(out, "\n") {
		if n := len([]rune(line)); n > classesWidth {
			t.Errorf("%d columns: %q", n, line)
		}
	}
	if !strings.Contains(out, "stale-read") || !strings.Contains(out, "(kernel/dma/debug.c") {
		t.Errorf("--classes lacks a class or its source:\n%s", out)
	}
}

// TestDefaultOutputExplains: the text of a run defines its GB/s, gives
// the time's phases with their shares, and says what to try next.
func TestDefaultOutputExplains(t *testing.T) {
	_, out, _ := dmalab(t, "run", "host-memory", "--set", "size=16MiB")
	for _, want := range []string{"GB/s is size / time", "a roundtrip's time is the whole round trip",
		"time by cause", " %)", "of the rows' ", "\nnext:\n", "dmalab run host-memory --set size=16MiB", "dmalab run transfers", "dmalab check host-memory"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	// JSON carries the time split only when asked for.
	d := runJSONRaw(t, "host-memory", "--set", "size=16MiB")
	if strings.Contains(d, "time_split") {
		t.Error("run --json carries time_split without --attribution")
	}
}

func runJSONRaw(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := dmalab(t, append([]string{"run", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	return out
}

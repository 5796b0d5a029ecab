package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const recordedProbe = "../docs/measurements/2026-11-21-h200-probe.json"

// TestCalibrateThenValidate runs the commands as a user would: calibrate
// writes a platform that platform show loads and validate marks its rows
// of; --max-error decides the exit status.
func TestCalibrateThenValidate(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "cal.yaml")
	code, stdout, stderr := dmalab(t, "calibrate", recordedProbe, "-o", cal)
	if code != exitOK || stdout != "" {
		t.Fatalf("calibrate: exit %d, stdout %q\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{"base platform h200-pcie", "parameter", "gpus.gpu0.link.efficiency", "0.8807373046875", "nodes.0.memcpy_rate"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("calibrate's stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code, _, stderr := dmalab(t, "platform", "show", cal); code != exitOK {
		t.Fatalf("platform show of the calibrated file: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = dmalab(t, "validate", recordedProbe, "--platform", cal)
	if code != exitOK {
		t.Fatalf("validate: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"gpu0 ce_copy pinned h2d 256MiB", "(cal)", "latency mapped h2d pointer_chase", "not modelled: a driver call that does nothing", "median |error| %", "bandwidth", "unified"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("validate's table lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, _ := dmalab(t, "validate", recordedProbe, "--platform", cal, "--max-error", "0.001"); code != exitFindings {
		t.Errorf("validate --max-error 0.001: exit %d, want %d", code, exitFindings)
	}
	if code, _, _ := dmalab(t, "validate", recordedProbe, "--platform", cal, "--max-error", "1000%"); code != exitOK {
		t.Errorf("validate --max-error 1000%%: exit %d, want 0", code)
	}
	code, stdout, _ = dmalab(t, "validate", recordedProbe, "--platform", cal, "--json")
	var doc struct {
		Schema string `json:"schema"`
		Rows   []struct {
			Row         string
			Calibration bool
			NotModelled string `json:"not_modelled"`
		} `json:"rows"`
		Classes []struct{ Class string } `json:"classes"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != exitOK {
		t.Fatalf("validate --json: exit %d, %v", code, err)
	}
	cals, nm := 0, 0
	for _, r := range doc.Rows {
		if r.Calibration {
			cals++
		}
		if r.NotModelled != "" {
			nm++
		}
	}
	if doc.Schema != "dmalab.validate/v1" || len(doc.Classes) != 3 || cals < 4 || nm == 0 {
		t.Errorf("validate --json: schema %q, %d classes, %d calibration rows, %d not modelled", doc.Schema, len(doc.Classes), cals, nm)
	}
}

// TestCalibrateBadInput: bad input exits 2 with a reason.
func TestCalibrateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema": "dmalab.probe/v1", "gpus": [`), 0o644)
	topoBad := filepath.Join(dir, "topo.json")
	os.WriteFile(topoBad, []byte(`{"numa_nodes": 3}`), 0o644)
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calibrate"}, "want one probe report"},
		{[]string{"calibrate", filepath.Join(dir, "nosuch.json")}, "no such file"},
		{[]string{"calibrate", bad}, "probe report"},
		{[]string{"calibrate", recordedProbe, "--platform", "nosuch"}, "--platform"},
		{[]string{"validate", recordedProbe}, "--platform is required"},
		{[]string{"validate", bad, "--platform", "h200-pcie"}, "probe report"},
		{[]string{"validate", recordedProbe, "--platform", "h200-pcie", "--max-error", "lots"}, "--max-error"},
		{[]string{"validate", recordedProbe, "--platform", "h200-pcie", "--max-error", "-1"}, "--max-error"},
		{[]string{"platform", "from-topo"}, "want one topo report"},
		{[]string{"platform", "from-topo", topoBad}, "not a dmalab topo --json report"},
		{[]string{"platform", "from-topo", empty}, "no NUMA node"},
		{[]string{"platform", "from-topo", "../docs/measurements/2026-11-21-h200-topo.json", "--base", "nosuch"}, "--base"},
	} {
		code, _, stderr := dmalab(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d saying %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}

// TestFromTopoRuns: the skeleton of a recorded machine loads and runs a
// scenario; its sources name the topo run.
func TestFromTopoRuns(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "skel.yaml")
	code, _, stderr := dmalab(t, "platform", "from-topo", "../docs/measurements/2026-11-21-h200x2-topo.json", "--host", "h200x2", "--date", "2026-11-21", "-o", out)
	if code != exitOK || !strings.Contains(stderr, "note: ") {
		t.Fatalf("from-topo: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), "from dmalab topo on h200x2, 2026-11-21") || !strings.Contains(string(b), "calibrate to replace") {
		t.Fatalf("skeleton: %v\n%s", err, b)
	}
	if code, stdout, stderr := dmalab(t, "run", "transfers", "--platform", out, "--set", "sizes=1GiB", "--set", "paths=pinned,peer"); code != exitOK || !strings.Contains(stdout, "peer") {
		t.Fatalf("run on the skeleton: exit %d: %s", code, stderr)
	}
}

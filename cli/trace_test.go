package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTraceUnwritable: a --trace path that cannot be created fails with
// exit 2 before the run: transfers on a platform without a GPU would
// fail in the run with another message, and must not get that far.
func TestTraceUnwritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "trace.json")
	code, out, errs := dmalab(t, "run", "transfers", "--platform", "zynq-7000", "--trace", path)
	if code != exitUsage {
		t.Fatalf("exit %d, want %d", code, exitUsage)
	}
	if out != "" || !strings.Contains(errs, "--trace: open "+path) || strings.Contains(errs, "no GPU") {
		t.Errorf("stdout %q, stderr %q: want the --trace error before the run", out, errs)
	}
}

// TestTraceFileOnError: bad input leaves no trace file behind; a run that
// fails after it began leaves a valid document saying why.
func TestTraceFileOnError(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if code, _, _ := dmalab(t, "run", "transfers", "--set", "sizes=lots", "--trace", bad); code != exitUsage {
		t.Fatalf("bad --set: exit %d", code)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Errorf("bad input left %s behind (%v)", bad, err)
	}
	failed := filepath.Join(dir, "failed.json")
	if code, _, _ := dmalab(t, "run", "transfers", "--platform", "zynq-7000", "--trace", failed); code != exitUsage {
		t.Fatalf("transfers on zynq-7000: exit %d", code)
	}
	b, err := os.ReadFile(failed)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Metadata struct{ Error string } `json:"metadata"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || !strings.Contains(doc.Metadata.Error, "no GPU") {
		t.Errorf("trace of the failed run: %v, metadata error %q", err, doc.Metadata.Error)
	}
}

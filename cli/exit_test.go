package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitStatus pins the documented exit statuses: 0 success, 1
// findings, 2 bad usage or input (a model that cannot run the input
// among them), 3 internal error.
func TestExitStatus(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		code int
		// want is a substring of stderr.
		want string
	}{
		{"findings", []string{"check", "dma-bugs", "--set", "bug=unmap-direction"}, exitFindings, ""},
		{"help of an unknown scenario", []string{"run", "nosuch", "--help"}, exitUsage, `unknown scenario "nosuch"`},
		{"help of an unknown scenario to check", []string{"check", "nosuch", "--help"}, exitUsage, `unknown scenario "nosuch"`},
		{"help after a flag value", []string{"run", "--platform", "h200-pcie", "--help"}, exitOK, ""},
		{"unknown device", []string{"run", "dma-streaming", "--set", "device=nosuch"}, exitUsage, "nosuch"},
		{"sizes beyond the parameter's bound", []string{"run", "dma-vs-memcpy", "--platform", "zynq-7000", "--set", "sizes=4GiB"}, exitUsage, "at most 1 GiB"},
		{"memory too small for the sizes", []string{"run", "dma-vs-memcpy", "--platform", "zynq-7000", "--set", "sizes=1GiB"}, exitUsage, "out of memory"},
		{"host memory too small for the working set", []string{"run", "um-oversubscribe", "--set", "vram=platform", "--set", "ratios=2", "--set", "modes=zero-copy"}, exitUsage, "out of memory"},
		{"managed buffer beyond the machine's memory", []string{"run", "um-prefetch", "--set", "size=1TiB"}, exitUsage, "cannot be backed"},
		{"starved of bandwidth", []string{"run", "host-memory", "--set", "platform.nodes.0.dram_bandwidth=1B/s"}, exitUsage, "--set size="},
		{"starved managed memory", []string{"run", "um-prefetch", "--set", "platform.nodes.0.dram_bandwidth=1B/s"}, exitUsage, "virtual time"},
		{"starved check", []string{"check", "um-oversubscribe", "--set", "platform.nodes.0.dram_bandwidth=1B/s"}, exitUsage, "virtual time"},
		{"numactl node out of range", []string{"run", "numa-first-touch", "--numactl", "--cpunodebind=1 --membind=2"}, exitUsage, `"--membind=2": node 2 out of range`},
		{"numactl unknown option", []string{"run", "numa-policies", "--numactl=--hardware"}, exitUsage, `"--hardware": not a placement option`},
		{"numactl conflicting policies", []string{"check", "numa-first-touch", "--numactl", "-m 0 -i all"}, exitUsage, `"-i all": conflicting policies`},
		{"numactl on one node", []string{"run", "host-memory", "--numactl", "--interleave=0,1"}, exitUsage, "node 1 out of range"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := dmalab(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errs)
			}
			if !strings.Contains(errs, tt.want) {
				t.Errorf("stderr %q does not say %q", errs, tt.want)
			}
			if code != exitInternal && strings.Contains(errs, "internal error") {
				t.Errorf("stderr reports an internal error: %q", errs)
			}
		})
	}
}

// TestPanicIsInternalError: a panic anywhere below dispatch exits 3 with
// "internal error", the panic value, a stack and a request for a bug
// report; it used to exit 2, like bad usage.
func TestPanicIsInternalError(t *testing.T) {
	register(&command{name: "test-panic", summary: "panics", run: func(*env, []string) int { panic("boom") }})
	defer delete(commands, "test-panic")
	code, _, errs := dmalab(t, "test-panic")
	if code != exitInternal {
		t.Errorf("exit %d, want %d", code, exitInternal)
	}
	for _, want := range []string{"internal error: boom", "please report it", "goroutine", "runtime/debug.Stack"} {
		if !strings.Contains(strings.ToLower(errs), strings.ToLower(want)) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
}

// TestUsageDocumentsExitStatus: the usage text lists all four statuses.
func TestUsageDocumentsExitStatus(t *testing.T) {
	_, out, _ := dmalab(t, "help")
	if !strings.Contains(out, "0 success, 1 findings, 2 bad usage or input, 3 internal error") {
		t.Errorf("usage does not document the exit statuses:\n%s", out)
	}
}

// TestPlatformCheckRefusesDevices: platform check of something that is
// not a regular file (/dev/zero never ends) says so at once, exit 2,
// instead of reading gigabytes.
func TestPlatformCheckRefusesDevices(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero here")
	}
	code, _, errs := dmalab(t, "platform", "check", "/dev/zero")
	if code != exitUsage || !strings.Contains(errs, "not a regular file") {
		t.Errorf("platform check /dev/zero: exit %d, stderr %q", code, errs)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, []byte("name: big\n"+strings.Repeat("#", 17<<20)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = dmalab(t, "run", "--platform", big)
	if code != exitUsage || !strings.Contains(errs, "larger than") {
		t.Errorf("run --platform of a 17 MiB file: exit %d, stderr %q", code, errs)
	}
}

// TestProbeInputOutOfBounds: a saved report with an ordinal, peer or GPU
// count out of range is bad input (exit 2) in every format; a -1 ordinal
// panicked in the nvbandwidth writer and a huge gpu_count allocated
// gigabytes.
func TestProbeInputOutOfBounds(t *testing.T) {
	dir := t.TempDir()
	peer := `{"schema":"dmalab.probe/v1","gpus":[{"device":{"ordinal":%s},"measurements":[{"family":"ce_copy","path":"peer","direction":"d2d",` +
		`"operation":"read","method":"spin_events","unit":"GB/s","size_bytes":1,"repetitions":1,"samples":1,"values":[1],"median":1,"min":1,"max":1,"peer_gpu":0}]}]}`
	for name, doc := range map[string]string{
		"ordinal":   strings.Replace(peer, "%s", "-1", 1),
		"gpu_count": `{"schema":"dmalab.probe/v1","machine":{"gpu_count":1000000000}}`,
	} {
		f := filepath.Join(dir, name+".json")
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"table", "json", "nvbandwidth"} {
			code, _, errs := dmalab(t, "probe", "--input", f, "--format", format)
			if code != exitUsage || !strings.Contains(errs, name) {
				t.Errorf("probe --input with a bad %s --format %s: exit %d, stderr %q", name, format, code, errs)
			}
		}
	}
}

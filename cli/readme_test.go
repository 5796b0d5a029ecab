package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/hw/cuda"
)

// readmeCommand is one "dmalab ..." line of a ```sh block in README.md.
type readmeCommand struct {
	line int
	text string   // the command as written, without its comment
	args []string // after "dmalab"
	// stdout is the file of a "> FILE" redirection, if any.
	stdout string
	// status is what its comment documents ("exit 1: ..."), else 0.
	status int
}

var exitComment = regexp.MustCompile(`\bexit ([0-9])\b`)

// readmeCommands extracts every dmalab command from the README's sh
// blocks, in order. The README is read as a user would paste it, so the
// test refuses shell syntax it does not interpret rather than run
// something else than what the README says.
func readmeCommands(t *testing.T, path string) []readmeCommand {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeCommand
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in && strings.TrimPrefix(line, "```") == "sh"
			continue
		case !in || !strings.HasPrefix(line, "dmalab "):
			continue
		}
		cmd, comment, _ := strings.Cut(line, " #")
		c := readmeCommand{line: n, text: strings.TrimSpace(cmd)}
		if m := exitComment.FindStringSubmatch(comment); m != nil {
			c.status, _ = strconv.Atoi(m[1])
		}
		if strings.ContainsAny(cmd, "|;&$`<'\"\\()") {
			t.Fatalf("README.md:%d: %q: shell syntax the test does not interpret", n, c.text)
		}
		if before, file, ok := strings.Cut(cmd, ">"); ok {
			cmd, c.stdout = before, strings.TrimSpace(file)
			if c.stdout == "" || strings.ContainsAny(c.stdout, " >") {
				t.Fatalf("README.md:%d: %q: want one > FILE", n, c.text)
			}
		}
		c.args = strings.Fields(cmd)[1:]
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestREADMECommands runs every command of the README's sh blocks
// in-process, in order, in a temporary directory (so that files they
// write, such as mine.yaml and trace.json, land there and later commands
// read them), and checks the exit status the README documents: 0 unless
// its comment says "exit N". probe needs an NVIDIA driver: without one it
// must exit 2 saying so; with one, the probe commands are skipped (a full
// probe takes minutes). probe --numa needs no GPU and runs everywhere
// (a few seconds).
func TestREADMECommands(t *testing.T) {
	readme, err := filepath.Abs("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeCommands(t, readme)
	if len(cmds) < 20 {
		t.Fatalf("found %d commands in README.md; the extraction is broken", len(cmds))
	}
	driver := cuda.Load() == nil
	// The compare commands read a probe report and a topo report; the
	// README's own probe and topo commands write them where a driver and
	// sysfs allow, over these recorded ones.
	recorded := map[string]string{
		"probe.json": "../docs/measurements/2026-11-21-h200-probe.json",
		"topo.json":  "../docs/measurements/2026-11-21-h200-topo.json",
	}
	files := map[string][]byte{}
	for name, path := range recorded {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	t.Chdir(t.TempDir())
	for name, b := range files {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cmds {
		t.Run(strconv.Itoa(c.line), func(t *testing.T) {
			want := c.status
			numa := slices.Contains(c.args, "--numa")
			if c.args[0] == "probe" && !numa {
				if driver {
					t.Skipf("README.md:%d: %s: an NVIDIA driver is present and a full probe takes minutes", c.line, c.text)
				}
				want = exitUsage
			}
			if c.args[0] == "topo" || numa {
				if _, err := os.Stat("/sys/devices"); err != nil {
					t.Skipf("README.md:%d: %s: no sysfs here", c.line, c.text)
				}
			}
			code, stdout, stderr := dmalab(t, c.args...)
			if code != want {
				t.Fatalf("README.md:%d: %s: exit %d, want %d\nstderr: %s", c.line, c.text, code, want, stderr)
			}
			if c.args[0] == "probe" && !numa && !strings.Contains(stderr, "no NVIDIA driver") {
				t.Errorf("README.md:%d: %s without a driver: stderr %q does not say so", c.line, c.text, stderr)
			}
			if code == exitOK && stdout == "" {
				t.Errorf("README.md:%d: %s printed nothing", c.line, c.text)
			}
			if c.stdout != "" && code == exitOK {
				if err := os.WriteFile(c.stdout, []byte(stdout), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	// The files the README's commands write are there and usable.
	for _, f := range []string{"mine.yaml", "trace.json", "calibrated.yaml", "validation.json", "skeleton.yaml", "mine-calibrated.yaml",
		"report.html", "run.html", "again.html", "check.html", "validate.html"} {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s after the README's commands: %v", f, err)
		}
	}
	// The README says the merged shards are the whole sweep's bytes.
	if whole, merged := readOrEmpty("sweep.json"), readOrEmpty("merged.json"); whole == "" || whole != merged {
		t.Errorf("merged.json (%d bytes) is not sweep.json (%d bytes)", len(merged), len(whole))
	}
}

func readOrEmpty(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

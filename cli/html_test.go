package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "write the HTML reports' screenshots to docs/report-*.png")

// browser finds a headless Chromium: Debian's chromium, or another build
// under the names it usually has. With CI_REQUIRE_BROWSER=1 (set by
// .ci/run) a missing browser fails the test instead of skipping it.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium, chromium-browser or google-chrome on PATH, and CI_REQUIRE_BROWSER=1: install chromium (apt-get install -y chromium)")
	}
	t.Skip("no chromium, chromium-browser or google-chrome on PATH: the HTML report's browser test needs one (apt-get install -y chromium)")
	return ""
}

// figureStats is what the page's script reports of each figure: its
// title (the SVG's text), its drawn size, and its paths' points.
type figureStats struct {
	Text      string  `json:"text"`
	Width     float64 `json:"width"`
	Height    float64 `json:"height"`
	Paths     int     `json:"paths"`
	MaxPoints int     `json:"maxPoints"`
}

type pageStats struct {
	Title     string        `json:"title"`
	Figures   []figureStats `json:"figures"`
	Resources int           `json:"resources"`
	Sections  []string      `json:"sections"`
	Scripts   int           `json:"scripts"`
}

const statsJS = `(() => {
  const figs = Array.from(document.querySelectorAll('figure svg')).map(s => {
    const r = s.getBoundingClientRect();
    const paths = Array.from(s.querySelectorAll('path'));
    return {
      text: s.textContent.replace(/\s+/g, ' ').trim(),
      width: r.width, height: r.height, paths: paths.length,
      maxPoints: Math.max(0, ...paths.map(p => ((p.getAttribute('d') || '').match(/[ML]/g) || []).length)),
    };
  });
  return {
    title: document.title,
    figures: figs,
    resources: performance.getEntriesByType('resource').length,
    sections: Array.from(document.querySelectorAll('section h2')).map(h => h.textContent),
    scripts: document.scripts.length,
  };
})()`

// TestHTMLReportInBrowser makes the reports of run, check, probe and
// report, opens each in headless Chromium and checks that it loads
// without a console error or exception, fetches nothing, and that each
// plot is drawn with data; it takes a screenshot of each.
func TestHTMLReportInBrowser(t *testing.T) {
	exe := browser(t)
	dir := t.TempDir()
	probeJSON, err := filepath.Abs(filepath.Join("..", "hw", "probe", "testdata", "h200-2026-11-21.json"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Abs(filepath.Join("..", "docs"))
	if err != nil {
		t.Fatal(err)
	}
	// The pages show their command line: with the files in the current
	// directory, it reads as a user would type it.
	t.Chdir(dir)
	if b, err := os.ReadFile(probeJSON); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Base(probeJSON), b, 0o644); err != nil {
		t.Fatal(err)
	}
	probeJSON = filepath.Base(probeJSON)
	var cal, calErr bytes.Buffer
	if code := Run([]string{"calibrate", probeJSON}, &cal, &calErr); code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, calErr.String())
	}
	if err := os.WriteFile("calibrated.yaml", cal.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		status  int
		figures []string // a text each figure must have, in order
		shot    string   // docs/ screenshot with -update-screenshots
	}{
		{"run-default", []string{"run"}, 0, []string{"Latency of a frame, by stage"}, ""},
		{"run", []string{"run", "transfers", "--set", "paths=pinned,pageable,managed-fault", "--set", "directions=h2d,d2h", "--set", "sizes=4KiB,64KiB,1MiB,16MiB,256MiB"}, 0,
			[]string{"Bandwidth against size, host to device", "Bandwidth against size, device to host", "Timeline: when each copy engine", "Link utilisation"}, "report-run.png"},
		{"check", []string{"check", "dma-bugs"}, 1, []string{"Diagnostics over virtual time"}, ""},
		{"check-gpu", []string{"check", "gpu-bugs", "--set", "platform.gpus.gpu0.arch=maxwell"}, 1, []string{"Diagnostics over virtual time"}, "report-check.png"},
		{"probe", []string{"probe", "--input", probeJSON}, 0, []string{"Bandwidth against size, host to device"}, "report-probe.png"},
		{"validate", []string{"validate", probeJSON, "--platform", "calibrated.yaml"}, 0,
			[]string{"Bandwidth against size, host to device", "Model against measurement"}, "report-validate.png"},
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1100, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := c.name + ".html"
			var stdout, stderr bytes.Buffer
			if code := Run(append(c.args, "--html", out), &stdout, &stderr); code != c.status {
				t.Fatalf("dmalab %s: exit %d, want %d\n%s", strings.Join(c.args, " "), code, c.status, stderr.String())
			}
			st, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() > 2<<20 {
				t.Errorf("%s: %d bytes, want under 2 MiB", out, st.Size())
			}
			ctx, cancel := chromedp.NewContext(allocCtx)
			defer cancel()
			console := chromedp.Console(ctx)
			if err := chromedp.Do(ctx, chromedp.Navigate("file://"+filepath.Join(dir, out))); err != nil {
				t.Fatal(err)
			}
			stats, err := chromedp.Run(ctx, chromedp.Evaluate[pageStats](statsJS))
			if err != nil {
				t.Fatal(err)
			}
			// A marker through the console: every message of the load came
			// before it.
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`console.info("dmalab-test-end")`)); err != nil {
				t.Fatal(err)
			}
			for m, err := range console {
				if err != nil {
					t.Fatalf("console: %v", err)
				}
				if strings.Contains(m.Text, "dmalab-test-end") {
					break
				}
				if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
					t.Errorf("console %s", m)
				}
			}
			if stats.Resources != 0 {
				t.Errorf("the page fetched %d resources; it must be self-contained", stats.Resources)
			}
			if stats.Scripts != 0 {
				t.Errorf("the page has %d scripts, want none", stats.Scripts)
			}
			if !strings.HasPrefix(stats.Title, "dmalab ") {
				t.Errorf("title %q", stats.Title)
			}
			if len(stats.Figures) < len(c.figures) {
				t.Errorf("%d figures, want at least %d: %+v", len(stats.Figures), len(c.figures), stats.Figures)
			}
			for _, want := range c.figures {
				if !slices.ContainsFunc(stats.Figures, func(f figureStats) bool { return strings.Contains(f.Text, want) }) {
					t.Errorf("no figure has %q", want)
				}
			}
			for i, f := range stats.Figures {
				// A plot with data: drawn at a visible size, with a path
				// of several points (a series, a bar, a busy span's
				// outline has 4).
				if f.Width < 300 || f.Height < 100 || f.Paths < 5 || f.MaxPoints < 4 {
					t.Errorf("figure %d (%.60s): %+v: not drawn with data", i, f.Text, f)
				}
			}
			if c.args[0] == "check" && !slices.Contains(stats.Sections, "Diagnostics") {
				t.Errorf("check report sections %q: no Diagnostics", stats.Sections)
			}
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if len(png) < 10000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
				t.Fatalf("screenshot: %d bytes, not a PNG of a page", len(png))
			}
			shot := filepath.Join(dir, c.name+".png")
			if err := os.WriteFile(shot, png, 0o644); err != nil {
				t.Fatal(err)
			}
			if *updateScreenshots && c.shot != "" {
				if err := os.WriteFile(filepath.Join(docs, c.shot), png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if d := os.Getenv("DMALAB_REPORT_DIR"); d != "" {
				// For looking at the pages by hand: each figure too.
				chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelectorAll('figure').forEach((f, i) => f.id = 'fig' + i)`))
				for i := range stats.Figures {
					img, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(fmt.Sprintf("#fig%d", i))))
					if err != nil {
						t.Fatal(err)
					}
					os.WriteFile(filepath.Join(d, fmt.Sprintf("%s-fig%d.png", c.name, i)), img, 0o644)
				}
				for _, f := range []string{out, shot} {
					b, _ := os.ReadFile(f)
					os.WriteFile(filepath.Join(d, filepath.Base(f)), b, 0o644)
				}
			}
		})
	}
}

// TestReportCommand: a run's JSON saved with --html turns back into the
// same page by dmalab report; a check's and a probe's JSON make pages too;
// anything else is bad input.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	direct := filepath.Join(dir, "direct.html")
	args := []string{"run", "transfers", "--set", "sizes=4KiB,1MiB", "--set", "paths=pinned", "--json", "--html", direct}
	var stdout, stderr bytes.Buffer
	if code := Run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"timeline", "platform_params"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("run --json --html: no %q in the document", k)
		}
	}
	saved := filepath.Join(dir, "run.json")
	os.WriteFile(saved, stdout.Bytes(), 0o644)
	again := filepath.Join(dir, "again.html")
	stderr.Reset()
	if code := Run([]string{"report", saved, "--html", again}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	a, _ := os.ReadFile(direct)
	b, _ := os.ReadFile(again)
	// The same figures and tables; only the command line and the note
	// that says where the data came from differ.
	if strings.Count(string(a), "<svg") != strings.Count(string(b), "<svg") || strings.Count(string(a), "<svg") < 3 {
		t.Errorf("run --html has %d plots, report of its JSON %d", strings.Count(string(a), "<svg"), strings.Count(string(b), "<svg"))
	}
	if !strings.Contains(string(b), "gpus.gpu0.link.efficiency") {
		t.Errorf("report of a run's JSON lacks the platform's parameters")
	}

	// Without --html the run's JSON is as it always was.
	stdout.Reset()
	Run([]string{"run", "transfers", "--set", "sizes=4KiB", "--set", "paths=pinned", "--json"}, &stdout, &stderr)
	if strings.Contains(stdout.String(), "timeline") || strings.Contains(stdout.String(), "platform_params") {
		t.Errorf("run --json without --html carries the report's fields")
	}

	probeJSON := filepath.Join("..", "hw", "probe", "testdata", "h200-2026-11-21.json")
	stdout.Reset()
	if code := Run([]string{"validate", probeJSON, "--platform", "h200-pcie", "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("validate: exit %d: %s", code, stderr.String())
	}
	os.WriteFile(filepath.Join(dir, "validation.json"), stdout.Bytes(), 0o644)

	checkJSON := filepath.Join(dir, "check.json")
	stdout.Reset()
	Run([]string{"check", "dma-bugs", "--json"}, &stdout, &stderr)
	os.WriteFile(checkJSON, stdout.Bytes(), 0o644)
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"report", checkJSON, "--html", filepath.Join(dir, "c.html")}, 0, "provenance"},
		{[]string{"report", filepath.Join("..", "hw", "probe", "testdata", "h200x2-2026-11-21.json"), "--html", filepath.Join(dir, "p.html")}, 0, "measured"},
		{[]string{"report", filepath.Join(dir, "validation.json"), "--html", filepath.Join(dir, "v.html")}, 0, "Model against measurement"},
		{[]string{"report", checkJSON}, 2, ""},
		{[]string{"report", "--html", filepath.Join(dir, "x.html")}, 2, ""},
		{[]string{"report", filepath.Join("..", "go.mod"), "--html", filepath.Join(dir, "y.html")}, 2, ""},
		{[]string{"report", filepath.Join(dir, "direct.html"), "--html", filepath.Join(dir, "z.html")}, 2, ""},
	} {
		stderr.Reset()
		code := Run(c.args, &bytes.Buffer{}, &stderr)
		if code != c.status {
			t.Errorf("dmalab %s: exit %d, want %d (%s)", strings.Join(c.args, " "), code, c.status, stderr.String())
			continue
		}
		if c.want != "" {
			b, err := os.ReadFile(c.args[len(c.args)-1])
			if err != nil || !strings.Contains(string(b), c.want) {
				t.Errorf("dmalab %s: page lacks %q (%v)", strings.Join(c.args, " "), c.want, err)
			}
		}
	}
}

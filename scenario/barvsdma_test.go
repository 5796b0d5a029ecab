package scenario

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/gdr"
	"github.com/dmalab/dmalab/report"
)

var bvUpdate = flag.Bool("update", false, "rewrite the golden files in testdata/")

// bvRows indexes a bar-vs-dma run's rows by "platform method direction
// pattern size".
func bvRows(t *testing.T, out *Outcome) map[string]report.Row {
	t.Helper()
	rows := map[string]report.Row{}
	for _, r := range out.Result.Results {
		k := strings.Join([]string{r.Platform, r.Path, r.Direction, r.Mode, report.FormatBytes(r.Bytes)}, " ")
		if _, dup := rows[k]; dup {
			t.Fatalf("two rows %q", k)
		}
		rows[k] = r
	}
	return rows
}

func bvRunOut(t *testing.T, sets ...string) *Outcome {
	t.Helper()
	s, err := Lookup("bar-vs-dma")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(s, Options{Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// crossAt is the crossover size a summary line gives ("a → b at ~N"),
// in bytes.
var crossAt = regexp.MustCompile(`(\S+) → (\S+) at ~([0-9.]+) (B|KiB|MiB)`)

func bvCross(t *testing.T, line string) (from, to string, at float64) {
	t.Helper()
	m := crossAt.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no crossover in %q", line)
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil {
		t.Fatal(err)
	}
	return m[1], m[2], v * map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}[m[4]]
}

func bvLine(t *testing.T, summary []string, prefix string) string {
	t.Helper()
	for _, l := range summary {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return l
		}
	}
	t.Fatalf("no summary line %q in\n%s", prefix, strings.Join(summary, "\n"))
	return ""
}

// TestBarVsDMACrossovers is the proof the issue asks for, on h200-pcie:
// CPU stores through BAR1 beat cuMemcpy for small sizes (97 ns against
// the copy's 6 µs) and lose for large ones (10 GB/s of write-combined
// stores against the copy engine); CPU loads lose sooner than stores
// (a PCIe round trip each, 1.3 GB/s); the rates the rows reach are the
// parameters'; and the summary names each crossover between the two
// sizes around it.
func TestBarVsDMACrossovers(t *testing.T) {
	out := bvRunOut(t, "platforms=h200-pcie")
	rows := bvRows(t, out)
	sum := out.Result.Summary
	small, large := "8 B", "64 MiB"
	for _, dir := range []string{"h2d", "d2h"} {
		g, m := rows["h200-pcie gdr "+dir+" sequential "+small], rows["h200-pcie memcpy "+dir+" sequential "+small]
		if g.Seconds <= 0 || g.Seconds >= m.Seconds {
			t.Errorf("%s %s: gdr %v s, memcpy %v s: gdr must win small", dir, small, g.Seconds, m.Seconds)
		}
		g, m = rows["h200-pcie gdr "+dir+" sequential "+large], rows["h200-pcie memcpy "+dir+" sequential "+large]
		if g.Seconds <= m.Seconds {
			t.Errorf("%s %s: gdr %v s, memcpy %v s: memcpy must win large", dir, large, g.Seconds, m.Seconds)
		}
	}
	// The rates at 64 MiB are the model's parameters: write-combined
	// stores at most gdr.WCStoreRate, loads near LoadBytes × LoadsInFlight
	// per round trip (the consuming kernel and the producing one add a
	// little).
	if g := rows["h200-pcie gdr h2d sequential 64 MiB"].GBps; g > gdr.WCStoreRate/1e9 || g < 0.85*gdr.WCStoreRate/1e9 {
		t.Errorf("gdr stores at 64 MiB: %v GB/s, want just under %v", g, gdr.WCStoreRate/1e9)
	}
	if g := rows["h200-pcie gdr d2h sequential 64 MiB"].GBps; g < 1 || g > 1.4 {
		t.Errorf("gdr loads at 64 MiB: %v GB/s, want about 1.28 (640 B per 500 ns round trip)", g)
	}
	// Crossovers: stores against the copy between 8 KiB and 1 MiB, loads
	// against it sooner.
	_, to, st := bvCross(t, bvLine(t, sum, "gdr against memcpy: gdr → memcpy"))
	if to != "memcpy" || st < 8<<10 || st > 1<<20 {
		t.Errorf("stores: crossover to %s at %v B, want memcpy between 8 KiB and 1 MiB", to, st)
	}
	var ld float64
	for i, l := range sum {
		if strings.Contains(l, "h2d sequential") {
			continue
		}
		if strings.Contains(l, "d2h sequential") {
			_, _, ld = bvCross(t, bvLine(t, sum[i:], "gdr against memcpy"))
			break
		}
	}
	if ld <= 0 || ld >= st {
		t.Errorf("loads cross at %v B, stores at %v B: loads (a round trip each) must lose sooner", ld, st)
	}
	// Every "a → b" line of a fastest sequence names a size between its
	// two bracketing sizes, and the sequence's crossovers grow.
	for _, dir := range []string{"h2d sequential", "h2d scattered"} {
		var prev float64
		in := false
		for _, l := range sum {
			if strings.HasPrefix(l, "h200-pcie ") {
				in = strings.HasPrefix(l, "h200-pcie "+dir+":")
				continue
			}
			if !in || strings.Contains(l, "against") {
				continue
			}
			from, to, at := bvCross(t, l)
			if from == to || at <= prev {
				t.Errorf("%s: %s → %s at %v after %v: want a change of method at a growing size", dir, from, to, at, prev)
			}
			prev = at
		}
		if prev == 0 {
			t.Errorf("%s: no crossover in the fastest sequence", dir)
		}
	}
	// The reasons carry the parameters.
	for _, want := range []string{"97 ns per call (gdr.StoreOverhead)", "10.27 GB/s (gdr.WCStoreRate)", "10 loads of 64 B per round trip", "copy_overhead 6.24 us"} {
		if !strings.Contains(strings.Join(sum, "\n"), want) {
			t.Errorf("summary does not say %q", want)
		}
	}
}

// TestBarVsDMAJetson: on jetson-orin gdr fails cleanly (no BAR1:
// nvidia_p2p_get_pages is ENOTSUPP) and says so, cpu-mapped runs in its
// place (it runs nowhere else), and managed-prefetch is refused (no
// concurrent managed access on the iGPU).
func TestBarVsDMAJetson(t *testing.T) {
	out := bvRunOut(t, "platforms=jetson-orin,h200-pcie", "sizes=8B,64KiB,4MiB")
	rows := bvRows(t, out)
	for _, dir := range []string{"h2d", "d2h"} {
		for _, pat := range []string{"sequential", "scattered"} {
			g, ok := rows["jetson-orin gdr "+dir+" "+pat+" 0 B"]
			if !ok || g.Seconds != 0 || !strings.Contains(g.Note, "no BAR1") || !strings.Contains(g.Note, "errno 524") {
				t.Errorf("jetson-orin gdr %s %s: %+v: want a row that says no BAR1 (ENOTSUPP)", dir, pat, g)
			}
			for _, n := range []string{"8 B", "64 KiB", "4 MiB"} {
				if r := rows["jetson-orin cpu-mapped "+dir+" "+pat+" "+n]; r.Seconds <= 0 {
					t.Errorf("jetson-orin cpu-mapped %s %s %s: no time", dir, pat, n)
				}
				if _, ok := rows["h200-pcie cpu-mapped "+dir+" "+pat+" "+n]; ok {
					t.Errorf("h200-pcie has a cpu-mapped row: a discrete GPU's memory is reached through BAR1")
				}
				if r := rows["h200-pcie gdr "+dir+" "+pat+" "+n]; r.Seconds <= 0 {
					t.Errorf("h200-pcie gdr %s %s %s: no time", dir, pat, n)
				}
			}
		}
	}
	if r := rows["jetson-orin managed-prefetch h2d sequential 0 B"]; !strings.Contains(r.Note, "concurrent managed access") {
		t.Errorf("jetson-orin managed-prefetch: %q", r.Note)
	}
	sum := strings.Join(out.Result.Summary, "\n")
	for _, want := range []string{"jetson-orin gdr: no BAR1", "cpu-mapped is what replaces it", "cpu-mapped against memcpy"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary does not say %q:\n%s", want, sum)
		}
	}
}

// TestBarVsDMAScattered: objects one call each cost more than the same
// bytes contiguous for gdr (a call per object) and for the gathering
// copy (a CPU gather first), while zero-copy's strided kernel moves
// whole sectors and managed memory migrates the pages the objects lie
// in (twice the bytes).
func TestBarVsDMAScattered(t *testing.T) {
	out := bvRunOut(t, "platforms=h200-pcie", "sizes=8B,1MiB", "object=4KiB")
	rows := bvRows(t, out)
	at := func(m, d, p string) float64 { return rows["h200-pcie "+m+" "+d+" "+p+" 1 MiB"].Seconds }
	for _, m := range []struct{ method, dir string }{{"gdr", "h2d"}, {"gdr", "d2h"}, {"memcpy", "h2d"}, {"2-streams", "h2d"}, {"managed", "h2d"}} {
		if s, q := at(m.method, m.dir, "scattered"), at(m.method, m.dir, "sequential"); s <= q {
			t.Errorf("%s %s 1 MiB: scattered %v s ≤ sequential %v s", m.method, m.dir, s, q)
		}
	}
	// 8 B is one object: the same work either way.
	for _, m := range []string{"memcpy", "gdr", "zero-copy"} {
		s, q := rows["h200-pcie "+m+" h2d scattered 8 B"], rows["h200-pcie "+m+" h2d sequential 8 B"]
		if s.Seconds != q.Seconds {
			t.Errorf("%s 8 B: scattered %v s, sequential %v s: one object is the same work", m, s.Seconds, q.Seconds)
		}
	}
}

// TestBarVsDMACrossoverInterpolation: the crossover lies where the two
// methods' times, linear between the bracketing sizes, meet.
func TestBarVsDMACrossoverInterpolation(t *testing.T) {
	row := func(path string, n int64, s float64) report.Row {
		return report.Row{Path: path, Bytes: n, Seconds: s, GBps: float64(n) / s / 1e9}
	}
	for _, tc := range []struct {
		name string
		a, b [2]float64 // seconds at 1 KiB and 3 KiB
		want string
	}{
		{"halfway", [2]float64{1e-6, 3e-6}, [2]float64{2e-6, 2e-6}, "~2 KiB"},
		{"near the start", [2]float64{1e-6, 5e-6}, [2]float64{1.5e-6, 2.5e-6}, "~1.33 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ra := []report.Row{row("a", 1<<10, tc.a[0]), row("a", 3<<10, tc.a[1])}
			rb := []report.Row{row("b", 1<<10, tc.b[0]), row("b", 3<<10, tc.b[1])}
			got := bvCrossover(ra, rb, 1, "", "")
			if !strings.Contains(got, "a → b at "+tc.want+" (between 1 KiB and 3 KiB)") {
				t.Errorf("%s", got)
			}
		})
	}
}

// TestBarVsDMAGolden pins the default run's table (both platforms):
// the numbers docs/measurements/2026-11-25-bar-vs-dma.md reports. Run
// with -update after a deliberate change to the model.
func TestBarVsDMAGolden(t *testing.T) {
	out := bvRunOut(t)
	var b bytes.Buffer
	if err := report.WriteTable(&b, out.Result); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "bar-vs-dma.golden")
	if *bvUpdate {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("the table differs from %s (go test ./scenario -run BarVsDMAGolden -update after a deliberate change):\n%s", path, b.String())
	}
}

// TestBarVsDMADeterministic: two runs, byte for byte.
func TestBarVsDMADeterministic(t *testing.T) {
	run := func() []byte {
		out := bvRunOut(t, "sizes=8B,32KiB,4MiB")
		var b bytes.Buffer
		if err := report.WriteJSON(&b, out.Result); err != nil {
			t.Fatal(err)
		}
		if err := report.WriteTable(&b, out.Result); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Error("two runs differ")
	}
}

// TestBarVsDMAUsage: bad input is a usage error naming it.
func TestBarVsDMAUsage(t *testing.T) {
	s, _ := Lookup("bar-vs-dma")
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"object=2GiB"}, "object=2GiB"},
		{[]string{"sizes=2GiB"}, "sizes=2GiB"},
		{[]string{"sizes=64MiB", "object=8B"}, "objects; at most"},
		{[]string{"kernel_rate=1,2"}, "kernel_rate"},
		{[]string{"platforms=nowhere"}, "platforms=nowhere"},
		{[]string{"methods=dma"}, "dma"},
		{[]string{"platforms=zynq-7000"}, "zynq-7000"},
	} {
		_, err := Run(s, Options{Sets: tc.sets})
		if err == nil || !strings.Contains(UsageMessage(err), tc.want) {
			t.Errorf("%v: %v, want a usage error with %q", tc.sets, err, tc.want)
		}
	}
}

// TestBarVsDMATinyRun: a run whose largest size is below a GPU page
// still pins whole 64 KiB pages for gdr, so its rows have times.
func TestBarVsDMATinyRun(t *testing.T) {
	out := bvRunOut(t, "platforms=h200-pcie", "sizes=1B,8B")
	for _, r := range out.Result.Results {
		if r.Seconds <= 0 || r.Note != "" {
			t.Errorf("%s %s %s %s: %v s, note %q", r.Path, r.Direction, r.Mode, report.FormatBytes(r.Bytes), r.Seconds, r.Note)
		}
	}
}

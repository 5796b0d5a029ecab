package scenario

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
)

func run(t *testing.T, platform string, sets ...string) *report.Result {
	t.Helper()
	s, err := Lookup("transfers")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(s, Options{Platform: platform, Sets: sets})
	if err != nil {
		t.Fatalf("transfers on %s %v: %v", platform, sets, err)
	}
	return out.Result
}

func row(t *testing.T, r *report.Result, path, dir string, bytes int64) report.Row {
	t.Helper()
	for _, x := range r.Results {
		if x.Path == path && x.Direction == dir && x.Bytes == bytes {
			return x
		}
	}
	t.Fatalf("no %s %s %d row in %+v", path, dir, bytes, r.Results)
	return report.Row{}
}

// TestBandwidthRisesWithSize: the per-call overhead dominates small copies
// and fades for large ones, so bandwidth rises monotonically with size
// and approaches the link rate.
func TestBandwidthRisesWithSize(t *testing.T) {
	r := run(t, "h200-pcie", "paths=pinned", "directions=h2d", "sizes=4KiB,64KiB,1MiB,16MiB,256MiB,1GiB")
	prev := 0.0
	for _, x := range r.Results {
		if x.GBps <= prev {
			t.Errorf("%s: %.3f GB/s, not above the smaller size's %.3f", x.Name, x.GBps, prev)
		}
		prev = x.GBps
	}
	if prev > 55.5 || prev < 55 {
		t.Errorf("1 GiB h2d at %.2f GB/s, want just under the 55.5 GB/s link", prev)
	}
}

// TestBidirOnOneCopyEngine: with two or more copy engines both directions
// run at once on a full-duplex link; with one, they take turns.
func TestBidirOnOneCopyEngine(t *testing.T) {
	two := row(t, run(t, "h200-pcie", "paths=pinned", "sizes=256MiB"), "pinned", "bidir", 256<<20)
	one := row(t, run(t, "h200-pcie", "paths=pinned", "sizes=256MiB", "platform.gpus.gpu0.copy_engines=1"), "pinned", "bidir", 256<<20)
	// Both directions at once: the host-to-device copy's read requests
	// take q of the upstream direction per byte, so each direction runs
	// at 1/(1+q) of the 55.4 GB/s a one-way copy gets; taking turns on
	// one engine, each runs alone at the full rate.
	q := readRequestLoad(t)
	if want := 55.4 / (1 + q); math.Abs(two.GBps-want)/want > 0.01 {
		t.Errorf("bidir with 3 copy engines: %.2f GB/s per direction, want ~%.2f (55.4/(1+%.4f))", two.GBps, want, q)
	}
	if ratio, want := one.Seconds/two.Seconds, 2/(1+q); math.Abs(ratio-want) > 0.01 {
		t.Errorf("bidir on one copy engine takes %.3f× the time of two engines, want %.3f×", ratio, want)
	}
}

// readRequestLoad is q of h200-pcie's GPU link (machine.ReverseLoad of a
// read: its requests and Acks).
func readRequestLoad(t *testing.T) float64 {
	t.Helper()
	spec, err := platform.Preset("h200-pcie")
	if err != nil {
		t.Fatal(err)
	}
	q := machine.ReverseLoad(spec.GPUs[0].Link, true)
	if q <= 0 || q > 0.1 {
		t.Fatalf("read-request load %v of a PCIe Gen5 link, want a few per cent", q)
	}
	return q
}

// TestCrossTrafficSlowsBidir: with a cross-traffic factor, each direction
// also loads the other (read requests, acknowledgements), so bidir drops
// while one-way copies keep their rate.
func TestCrossTrafficSlowsBidir(t *testing.T) {
	r := run(t, "h200-pcie", "paths=pinned", "sizes=256MiB", "platform.fabric.cross_traffic=0.1")
	h2d, bidir := row(t, r, "pinned", "h2d", 256<<20), row(t, r, "pinned", "bidir", 256<<20)
	// Upstream carries the d2h data, 0.1 of the h2d data as cross
	// traffic, the h2d requests and Acks (q), and 0.1 of the d2h Acks
	// going down as cross traffic: x(1+0.1+q+0.1a) = the link.
	q := readRequestLoad(t)
	spec, _ := platform.Preset("h200-pcie")
	a := machine.ReverseLoad(spec.GPUs[0].Link, false)
	want := h2d.GBps / (1.1 + q + 0.1*a)
	if math.Abs(bidir.GBps-want)/want > 0.01 {
		t.Errorf("bidir with cross traffic 0.1: %.2f GB/s per direction, want h2d/(1.1+%.4f) = %.2f", bidir.GBps, q, want)
	}
}

// TestDeviceCopyReadsAndWrites: a copy within VRAM moves every byte
// through the memory twice (read and write).
func TestDeviceCopyReadsAndWrites(t *testing.T) {
	r := run(t, "h200-pcie", "paths=device", "sizes=1GiB")
	d2d := row(t, r, "device", "d2d", 1<<30)
	// h200-pcie: VRAM 4384 GB/s, per-call overhead 6.35 µs and the VRAM
	// read's 141.9 ns latency; a 1 GiB copy moves 2 GiB through the
	// memory.
	want := float64(1<<30) / (6.35e-6 + 0.1419e-6 + 2*float64(1<<30)/4384e9) / 1e9
	if math.Abs(d2d.GBps-want)/want > 0.001 {
		t.Errorf("d2d 1 GiB at %.1f GB/s, want %.1f (half the VRAM bandwidth, less the call overhead)", d2d.GBps, want)
	}
}

func TestUnknownInputsAreUsageErrors(t *testing.T) {
	s, _ := Lookup("transfers")
	for _, sets := range [][]string{{"nope=1"}, {"sizes=0B"}, {"paths=teleport"}, {"directions=sideways"}, {"gpu=x"}, {"platform.nope=1"}} {
		if _, err := Run(s, Options{Sets: sets}); !errors.Is(err, ErrUsage) {
			t.Errorf("%v: err = %v, want ErrUsage", sets, err)
		}
	}
	if _, err := Lookup("nope"); !errors.Is(err, ErrUsage) {
		t.Errorf("Lookup(nope) = %v", err)
	}
	if _, err := Run(s, Options{Platform: "nope"}); !errors.Is(err, ErrUsage) {
		t.Errorf("unknown platform: %v", err)
	}
}

// TestPageableIsStaged: a pageable copy is as fast as the slower of its
// two overlapped stages: one thread's copy through the staging buffers
// (memcpy in to the device, the streaming copy-out from the device), or
// the copy engine over the link.
func TestPageableIsStaged(t *testing.T) {
	r := run(t, "h200-pcie", "paths=pageable", "sizes=1GiB")
	spec, _ := platform.Preset("h200-pcie")
	memcpy, stream := float64(spec.Nodes[0].MemcpyRate.V)/1e9, float64(spec.Nodes[0].StreamCopyRate())/1e9
	for _, c := range []struct {
		dir  string
		want float64
	}{{"h2d", memcpy}, {"d2h", stream}, {"bidir", memcpy}} {
		got := row(t, r, "pageable", c.dir, 1<<30).GBps
		if math.Abs(got-c.want)/c.want > 0.01 {
			t.Errorf("pageable %s 1 GiB at %.3f GB/s, want the CPU stage's %.3f GB/s", c.dir, got, c.want)
		}
	}
	fast := run(t, "h200-pcie", "paths=pageable", "sizes=1GiB", "directions=h2d", "platform.nodes.0.memcpy_rate=100 GB/s")
	// Each 2 MiB chunk's copy also waits for its read's round trip.
	if got := row(t, fast, "pageable", "h2d", 1<<30).GBps; got < 53 || got > 55.5 {
		t.Errorf("with a 100 GB/s memcpy the link should bind: %.2f GB/s", got)
	}
	// One staging chunk: no overlap, the stages add up.
	one := row(t, run(t, "h200-pcie", "paths=pageable", "sizes=2MiB", "directions=h2d"), "pageable", "h2d", 2<<20)
	pinned := row(t, run(t, "h200-pcie", "paths=pinned", "sizes=2MiB", "directions=h2d"), "pinned", "h2d", 2<<20)
	memcpy = float64(2<<20) / (memcpy * 1e9)
	if d := one.Seconds - pinned.Seconds - memcpy; d < 0 || d > 1e-6 {
		t.Errorf("2 MiB pageable = pinned %.3g s + memcpy %.3g s + %.3g s, want under 1 µs of extra latency", pinned.Seconds, memcpy, d)
	}
}

// TestHostMemoryTypesOnACopyEngine: to a copy engine, write-combined and
// registered memory are pinned memory.
func TestHostMemoryTypesOnACopyEngine(t *testing.T) {
	r := run(t, "h200-pcie", "paths=pinned,writecombined,registered", "sizes=4KiB,256MiB")
	for _, dir := range []string{"h2d", "d2h", "bidir"} {
		for _, n := range []int64{4 << 10, 256 << 20} {
			p := row(t, r, "pinned", dir, n)
			for _, path := range []string{"writecombined", "registered"} {
				if x := row(t, r, path, dir, n); x.Seconds != p.Seconds {
					t.Errorf("%s %s %d: %g s, pinned %g s", path, dir, n, x.Seconds, p.Seconds)
				}
			}
		}
	}
}

// TestPageableBulkIsContinuous: past cuda.MaxStagedChunks a pageable copy
// is modelled in bulk; the rate must not jump at the switch, and a copy of
// a petabyte must cost what one of gigabytes does.
func TestPageableBulkIsContinuous(t *testing.T) {
	r := run(t, "h200-pcie", "paths=pageable", "directions=h2d,d2h", "sizes=2GiB,2050MiB,1PiB")
	for _, dir := range []string{"h2d", "d2h"} {
		exact := row(t, r, "pageable", dir, 2<<30).GBps
		for _, n := range []int64{2050 << 20, 1 << 50} {
			if bulk := row(t, r, "pageable", dir, n).GBps; math.Abs(bulk-exact)/exact > 0.005 {
				t.Errorf("pageable %s: %.4f GB/s chunk by chunk at 2 GiB, %.4f in bulk at %d B", dir, exact, bulk, n)
			}
		}
	}
}

// TestProgress: long scenarios report each step on one overwritten line
// and clear it at the end; without a writer nothing is printed.
func TestProgress(t *testing.T) {
	s, _ := Lookup("transfers")
	var buf strings.Builder
	if _, err := Run(s, Options{Sets: []string{"sizes=4KiB,1MiB", "paths=pinned"}, Progress: &buf}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "transfers: "); n != 6 || !strings.Contains(out, "6/6 pinned bidir 1 MiB") || !strings.HasSuffix(out, "\r\033[K") {
		t.Errorf("progress: %q", out)
	}
}

package scenario

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/report"
)

// ftRun runs numa-first-touch small and indexes its rows by path and
// direction.
func ftRun(t *testing.T, opt Options) (*report.Result, map[string]report.Row) {
	t.Helper()
	s, err := Lookup("numa-first-touch")
	if err != nil {
		t.Fatal(err)
	}
	opt.Sets = append([]string{"size=8MiB", "threads=4"}, opt.Sets...)
	out, err := Run(s, opt)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]report.Row{}
	for _, r := range out.Result.Results {
		rows[r.Path+"/"+r.Direction] = r
	}
	return out.Result, rows
}

func TestNUMAFirstTouch(t *testing.T) {
	for _, plat := range []string{"2s-4gpu-pcie", "dgx-h100"} {
		t.Run(plat, func(t *testing.T) {
			res, rows := ftRun(t, Options{Platform: plat})
			if len(res.Summary) == 0 || !strings.HasPrefix(res.Summary[0], "first-touch: node1 workers 0.0 % local, 5.7") || !strings.Contains(res.Summary[0], "% below 10.0)") {
				t.Errorf("summary %q: want the pitfall's remote share and the bandwidth lost first", res.Summary)
			}
			pit := rows["first-touch/node1 workers"]
			if s := pit.LocalFraction(); s > 0.05 {
				t.Fatalf("pitfall: node-1 workers %.1f %% local, want remote share >= 95 %%", 100*s)
			}
			if near := rows["first-touch/node0 workers"]; near.LocalFraction() != 1 || near.ThreadGBps <= pit.ThreadGBps {
				t.Errorf("pitfall: node-0 workers %.2f local at %.2f GB/s, want all local and faster than node 1's %.2f",
					near.LocalFraction(), near.ThreadGBps, pit.ThreadGBps)
			}
			base := rows["first-touch/all workers"]
			for _, fix := range []string{"parallel-init", "interleave", "mbind-move"} {
				far, all := rows[fix+"/node1 workers"], rows[fix+"/all workers"]
				if far.LocalFraction() <= pit.LocalFraction() || far.ThreadGBps <= pit.ThreadGBps || all.GBps <= base.GBps {
					t.Errorf("%s: node-1 workers %.2f local at %.2f GB/s a thread, all %.2f GB/s; want more than the pitfall's %.2f, %.2f, %.2f",
						fix, far.LocalFraction(), far.ThreadGBps, all.GBps, pit.LocalFraction(), pit.ThreadGBps, base.GBps)
				}
			}
			for _, fix := range []string{"parallel-init", "mbind-move"} {
				if s := rows[fix+"/all workers"].LocalFraction(); s != 1 {
					t.Errorf("%s: %.2f local, want all", fix, s)
				}
			}
			// Interleave: exactly half of the pages on each node.
			il := rows["interleave/all workers"]
			if len(il.NUMAStat) != 2 || il.NUMAStat[0].NumaHit != il.NUMAStat[1].NumaHit || il.NUMAStat[0].InterleaveHit != 1024 || il.LocalFraction() != 0.5 {
				t.Errorf("interleave: numastat %+v, local %.2f; want 1024 pages per node, half local", il.NUMAStat, il.LocalFraction())
			}
			// MOVE migrates exactly the node-1 workers' half.
			if mv := rows["mbind-move/migrate"]; mv.Bytes != 4<<20 || mv.Seconds <= 0 {
				t.Errorf("mbind-move: migrated %d B in %g s, want 4 MiB at a cost", mv.Bytes, mv.Seconds)
			}
			// The pitfall's numastat: every page on node 0, local to the
			// main thread.
			if st := rows["first-touch/all workers"].NUMAStat; st[0].NumaHit != 2048 || st[0].LocalNode != 2048 || st[1].NumaHit != 0 {
				t.Errorf("first-touch numastat %+v, want 2048 pages on node 0", st)
			}
		})
	}
}

func TestNUMAFirstTouchNode1Workers(t *testing.T) {
	_, rows := ftRun(t, Options{Sets: []string{"workers=node1", "variants=first-touch,interleave"}})
	if _, ok := rows["first-touch/node0 workers"]; ok {
		t.Fatal("workers=node1 ran workers on node 0")
	}
	pit, il := rows["first-touch/node1 workers"], rows["interleave/node1 workers"]
	if pit.LocalFraction() != 0 || il.LocalFraction() != 0.5 || il.ThreadGBps <= pit.ThreadGBps {
		t.Errorf("node-1 workers: pitfall %.2f local at %.2f GB/s, interleave %.2f at %.2f", pit.LocalFraction(), pit.ThreadGBps, il.LocalFraction(), il.ThreadGBps)
	}
}

// TestNUMAFirstTouchNumactl: numactl's options reach the processes the
// scenario creates: --membind=1 puts the first-touch buffer on node 1,
// --cpunodebind=1 runs the initialising main thread there.
func TestNUMAFirstTouchNumactl(t *testing.T) {
	for _, tc := range []struct {
		opts       string
		wantLocal0 float64 // node-0 workers' local share
	}{
		{"--membind=1", 0},
		{"-m 1 -N 0", 0},
		{"--cpunodebind=1", 0},
		{"--interleave=all", 0.5},
		{"--membind=0", 1},
	} {
		t.Run(tc.opts, func(t *testing.T) {
			res, rows := ftRun(t, Options{NUMACtl: tc.opts, Sets: []string{"variants=first-touch"}})
			if res.Params["numactl"] != tc.opts {
				t.Errorf("params record numactl=%q, want %q", res.Params["numactl"], tc.opts)
			}
			if got := rows["first-touch/node0 workers"].LocalFraction(); got != tc.wantLocal0 {
				t.Errorf("node-0 workers %.2f local, want %.2f", got, tc.wantLocal0)
			}
			st := rows["first-touch/all workers"].NUMAStat
			on1 := st[1].NumaHit + st[1].NumaMiss
			want1 := map[float64]uint64{0: 2048, 0.5: 1024, 1: 0}[tc.wantLocal0]
			if on1 != want1 {
				t.Errorf("%d pages on node 1, want %d (numastat %+v)", on1, want1, st)
			}
		})
	}
}

func TestNUMAScenarioInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    string
		opt  Options
	}{
		{"one node", "numa-first-touch", Options{Platform: "h200-pcie"}},
		{"one node", "numa-policies", Options{Platform: "h200-pcie"}},
		{"too many threads", "numa-first-touch", Options{Sets: []string{"threads=57"}}},
		{"bad numactl", "numa-first-touch", Options{NUMACtl: "--membind=2"}},
		{"numactl conflict", "numa-policies", Options{NUMACtl: "--membind=0 --interleave=1"}},
		{"bad weights", "numa-policies", Options{Sets: []string{"weights=3"}}},
		{"zero weight", "numa-policies", Options{Sets: []string{"weights=0,1"}}},
	} {
		t.Run(tc.name+" "+tc.s, func(t *testing.T) {
			s, err := Lookup(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Run(s, tc.opt); !errors.Is(err, ErrUsage) {
				t.Fatalf("Run = %v, want a usage error", err)
			}
		})
	}
}

func TestNUMAScenariosDeterministic(t *testing.T) {
	for _, name := range []string{"numa-first-touch", "numa-policies"} {
		t.Run(name, func(t *testing.T) {
			s, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			var docs [2]bytes.Buffer
			for i := range docs {
				out, err := Run(s, Options{Sets: []string{"size=4MiB", "threads=2"}, NUMACtl: "--cpunodebind=0"})
				if err != nil {
					t.Fatal(err)
				}
				if err := report.WriteJSON(&docs[i], out.Result); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(docs[0].Bytes(), docs[1].Bytes()) {
				t.Fatal("two runs with the same seed differ")
			}
		})
	}
}

// TestNumactlPinnedHostMemory: --numactl reaches the CUDA driver's host
// allocations too: with the pinned buffers bound to node 1, GPU 0's
// round trip crosses UPI and takes longer.
func TestNumactlPinnedHostMemory(t *testing.T) {
	s, err := Lookup("host-memory")
	if err != nil {
		t.Fatal(err)
	}
	secs := map[string]float64{}
	for _, opts := range []string{"", "--membind=1"} {
		out, err := Run(s, Options{Platform: "2s-4gpu-pcie", Sets: []string{"size=16MiB", "types=pinned"}, NUMACtl: opts})
		if err != nil {
			t.Fatal(err)
		}
		secs[opts] = out.Result.Results[0].Seconds
	}
	if secs["--membind=1"] <= secs[""] {
		t.Errorf("pinned round trip %g s with --membind=1, %g s without: want slower across sockets", secs["--membind=1"], secs[""])
	}
}

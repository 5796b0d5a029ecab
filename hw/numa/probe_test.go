package numa

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// fakeSysfs writes a tree of nodes, each "cpulist|MemTotal kB|distances".
func fakeSysfs(t *testing.T, nodes ...string) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range nodes {
		f := strings.Split(n, "|")
		dir := fmt.Sprintf("sys/devices/system/node/node%d/", i)
		write(dir+"cpulist", f[0]+"\n")
		write(dir+"meminfo", fmt.Sprintf("Node %d MemTotal: %s kB\nNode %d MemFree: %s kB\n", i, f[1], i, f[1]))
		write(dir+"distance", f[2]+"\n")
	}
	write("proc/cpuinfo", "processor\t: 0\nmodel name\t: Fake CPU @ 2.0GHz\n")
	write("sys/devices/system/cpu/cpu0/cache/index3/size", "4096K\n")
	os.MkdirAll(filepath.Join(root, "sys/devices/system"), 0o755)
	return root
}

var small = Options{BufferBytes: 2 << 20, Loads: 1 << 12, Passes: 1, TouchPages: 16}

// refusing is this machine's kernel with the calls that containers and
// seccomp profiles refuse replaced by refusals, and every page reported
// on node where by the query, when it answers.
func refusing(pinErr, bindErr, whereErr error) sys {
	k := linuxSys()
	k.allowed = func() ([]int, error) { return []int{0, 1, 2, 3}, nil }
	k.pin = func(cpu int) error { return pinErr }
	k.bind = func([]byte, int) error { return bindErr }
	k.where = func(b []byte, offs []int) ([]int32, error) {
		if whereErr != nil {
			return nil, whereErr
		}
		return make([]int32, len(offs)), nil // everything on node 0
	}
	return k
}

// TestRunDegrades: on two fake nodes with pinning, mbind and move_pages
// refused, the probe still measures every pair and says what it could
// not do, in the notes and in the table.
func TestRunDegrades(t *testing.T) {
	root := fakeSysfs(t, "0-1|1048576|10 21", "2-3|1048576|21 10")
	o := small
	o.Root = root
	rep, err := run(context.Background(), o, refusing(
		fmt.Errorf("sched_setaffinity CPU 0: %w", syscall.EPERM),
		fmt.Errorf("mbind MPOL_BIND: %w", syscall.ENOSYS),
		fmt.Errorf("move_pages: %w", syscall.EPERM)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Latency) != 4 || len(rep.Bandwidth) != 4 || len(rep.FirstTouch) != 2 || len(rep.Placement) != 2 {
		t.Fatalf("%d latencies, %d bandwidths, %d first touches, %d placements; want 4, 4, 2, 2",
			len(rep.Latency), len(rep.Bandwidth), len(rep.FirstTouch), len(rep.Placement))
	}
	want := [][2]int{{0, 0}, {1, 0}, {0, 1}, {1, 1}}
	for i, l := range rep.Latency {
		if got := [2]int{l.CPUNode, l.MemNode}; got != want[i] || l.Median <= 0 || len(l.CPUs) != 0 {
			t.Errorf("latency %d: pair %v, median %v, CPUs %v; want pair %v, > 0, unpinned", i, got, l.Median, l.CPUs, want[i])
		}
		if b := rep.Bandwidth[i]; b.Median <= 0 || len(b.CPUs) != 0 || !strings.Contains(b.Method, "2 threads") {
			t.Errorf("bandwidth %d: %+v", i, b)
		}
	}
	for _, p := range rep.Placement {
		if p.Error == "" || !strings.HasPrefix(p.Policy, "first touch from node") {
			t.Errorf("placement with mbind and move_pages refused: %+v", p)
		}
	}
	notes := strings.Join(rep.Notes, "\n")
	for _, s := range []string{"sched_setaffinity CPU 0: operation not permitted: threads run unpinned",
		"node 1: mbind MPOL_BIND: function not implemented: the buffer is placed by first touch from node 1 instead",
		"first touch on node 0: where the pages went is unknown: move_pages: operation not permitted",
		"is not well beyond the largest CPU cache (4MiB)"} {
		if !strings.Contains(notes, s) {
			t.Errorf("notes lack %q:\n%s", s, notes)
		}
	}
	if strings.Count(notes, "threads run unpinned") != 1 {
		t.Errorf("the refused pin is noted more than once:\n%s", notes)
	}
	var tab bytes.Buffer
	if err := rep.WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Fake CPU @ 2.0GHz", "available: 2 nodes (0-1)", "Numa node          0         1\n        0 ",
		"(threads unpinned: see the notes)", "node 0 (an unpinned thread): unknown: move_pages: operation not permitted"} {
		if !strings.Contains(tab.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, tab.String())
		}
	}
}

// TestRunPlacement: with the calls answering, the placement and first
// touch count the pages the query reports per node.
func TestRunPlacement(t *testing.T) {
	o := small
	o.Root = fakeSysfs(t, "0-3|1048576|10")
	k := refusing(nil, nil, nil)
	k.where = func(b []byte, offs []int) ([]int32, error) {
		st := make([]int32, len(offs))
		st[0] = -2 // one page not present
		return st, nil
	}
	rep, err := run(context.Background(), o, k)
	if err != nil {
		t.Fatal(err)
	}
	p, f := rep.Placement[0], rep.FirstTouch[0]
	if p.Policy != "mbind MPOL_BIND" || p.Pages != 512 || p.OnNode != 511 || !reflect.DeepEqual(p.ByNode, map[int]int{0: 511, -2: 1}) {
		t.Errorf("placement %+v", p)
	}
	if f.CPU != 0 || f.Pages != 16 || f.Local != 15 || f.Fraction != 15.0/16 {
		t.Errorf("first touch %+v", f)
	}
	if len(rep.Latency[0].CPUs) != 1 || len(rep.Bandwidth[0].CPUs) != 4 {
		t.Errorf("pinned CPUs: latency %v, bandwidth %v", rep.Latency[0].CPUs, rep.Bandwidth[0].CPUs)
	}
	var tab bytes.Buffer
	rep.WriteTable(&tab)
	if s := "511 of 512 pages on node 0 (99.8%); 1 on no page (ENOENT)"; !strings.Contains(tab.String(), s) {
		t.Errorf("table lacks %q:\n%s", s, tab.String())
	}
}

// TestRunNoNUMA: a kernel without NUMA shows no nodes; the machine is one
// node 0 with the allowed CPUs.
func TestRunNoNUMA(t *testing.T) {
	o := small
	o.Root = t.TempDir()
	rep, err := run(context.Background(), o, refusing(nil, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Nodes) != 1 || rep.Nodes[0].CPUList != "0-3" || len(rep.Latency) != 1 {
		t.Errorf("nodes %+v, %d latencies", rep.Nodes, len(rep.Latency))
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "the machine taken as one node 0") {
		t.Errorf("notes: %v", rep.Notes)
	}
}

func TestOptions(t *testing.T) {
	root := fakeSysfs(t, "0-1|1048576|10")
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"buffer too small", Options{BufferBytes: 4096}, "buffer 4096 bytes"},
		{"two samples", Options{Samples: 2}, "samples 2"},
		{"negative threads", Options{Threads: -1}, "threads -1"},
		{"unknown node", Options{Nodes: []int{3}}, "node 3: the machine has nodes 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Root = root
			_, err := run(context.Background(), tt.o, refusing(nil, nil, nil))
			if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want ErrBadOptions with %q", err, tt.want)
			}
		})
	}
	if _, err := run(context.Background(), Options{Root: filepath.Join(root, "missing")}, refusing(nil, nil, nil)); err == nil {
		t.Error("a missing root: no error")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	o := small
	o.Root = fakeSysfs(t, "0-1|1048576|10")
	rep, err := run(context.Background(), o, refusing(nil, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	back.WriteJSON(&again)
	if again.String() != buf.String() {
		t.Errorf("JSON changed through a round trip:\n%s\n%s", buf.String(), again.String())
	}
	for _, s := range []string{`"latency": [`, `"cpu_node": 0`, `"unit": "MB/s"`, `"first_touch": [`, `"schema": "dmalab-numa-probe/1"`} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("JSON lacks %s", s)
		}
	}
	if _, err := ReadJSON(strings.NewReader(`{"schema":"other"}`)); err == nil {
		t.Error("a report of another schema: no error")
	}
}

func TestBuildChaseIsOneCycle(t *testing.T) {
	w := make([]uint64, 4096/8*16)
	buildChase(w, 1)
	lines := len(w) / (LineSize / 8)
	seen := map[uint64]bool{}
	var i uint64
	for range lines {
		if seen[i] || i%(LineSize/8) != 0 {
			t.Fatalf("index %d seen twice or not at a line's start", i)
		}
		seen[i] = true
		i = w[i]
	}
	if i != 0 || len(seen) != lines {
		t.Errorf("after %d links at %d, %d lines seen", lines, i, len(seen))
	}
}

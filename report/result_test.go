package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestWriteTablePipeline: the summary comes first, then the table with
// the platform and frame columns, then the stages of each row.
func TestWriteTablePipeline(t *testing.T) {
	r := &Result{Scenario: "camera-pipeline", Platform: "jetson-orin", Params: map[string]string{"fps": "30"},
		Summary: []string{"zero-copy saves 4.1 ms per frame on jetson-orin"},
		Results: []Row{{Platform: "jetson-orin", Path: "zero-copy", Direction: "frame", Bytes: 3110400, Ops: 60, Seconds: 2,
			FPS: 30, Dropped: 1, DRAMBytes: 13 << 20, PCIeBytes: 0,
			Stages: []Stage{{"capture", 0.033}, {"isp", 0.002}}}}}
	var b strings.Builder
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"camera-pipeline on jetson-orin\n  zero-copy saves 4.1 ms", "platform", "fps", "30.00", "13 MiB", "jetson-orin zero-copy: capture 33 ms (94 %), isp 2 ms (6 %)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Index(out, "zero-copy saves") > strings.Index(out, "params:") {
		t.Error("the summary must come before the params")
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1000: "1000 B", 1536: "1.5 KiB", 13 << 20: "13 MiB", 3110400: "2.97 MiB",
		3000000000: "2.79 GiB", 1536 << 20: "1.5 GiB", 1 << 30: "1 GiB", 1000 << 10: "1000 KiB", 1023 << 20: "1020 MiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestWriteTableLinks: rows with link bytes get a "bytes per link"
// section under the table, each row named as the table names it, zero
// links included; rows without them add nothing.
func TestWriteTableLinks(t *testing.T) {
	for _, tc := range []struct {
		row  Row
		want []string
		not  string
	}{
		{Row{Platform: "dgx-h100", Path: "gpudirect", Direction: "same-switch", Mode: "nic0→gpu0", Bytes: 4096, Seconds: 1e-6,
			Links: []LinkBytes{{"rc0", 0}, {"gpu0.pcie", 4213}}},
			[]string{"\nbytes per link:\n", "  dgx-h100 gpudirect same-switch nic0→gpu0 4 KiB: rc0 0 B, gpu0.pcie 4.11 KiB\n"}, ""},
		{Row{Path: "h2d", Direction: "h2d", Bytes: 4096, Seconds: 1e-6}, nil, "bytes per link"},
	} {
		var b strings.Builder
		if err := WriteTable(&b, &Result{Scenario: "s", Platform: "p", Results: []Row{tc.row}}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("no %q in:\n%s", w, out)
			}
		}
		if tc.not != "" && strings.Contains(out, tc.not) {
			t.Errorf("%q in:\n%s", tc.not, out)
		}
	}
}

func TestNUMAStatJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		stat []NUMANode
		want string // a piece the JSON must hold; "" for no numastat at all
	}{
		{"none", nil, ""},
		{"two nodes", []NUMANode{{Node: 0, NumaHit: 8, LocalNode: 8}, {Node: 1, NumaMiss: 2, OtherNode: 2}},
			`"numastat":[{"node":0,"numa_hit":8,"numa_miss":0,"numa_foreign":0,"interleave_hit":0,"local_node":8,"other_node":0},{"node":1,"numa_hit":0,"numa_miss":2,`},
	} {
		b, err := json.Marshal(&Result{Scenario: "s", NUMAStat: tc.stat})
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(b), "numastat"); has != (tc.want != "") || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s", tc.name, b)
		}
	}
}

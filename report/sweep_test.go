package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func testSweep(t *testing.T) *Sweep {
	t.Helper()
	def := SweepDef{Command: "run", Scenario: "transfers", Sets: []string{"paths=pinned"},
		Axes: []SweepAxis{{Key: "platform.gpus.gpu0.link.gen", Values: []string{"4", "5"}}, {Key: "directions", Values: []string{"h2d", "d2h"}}}}
	def.Points = def.Size()
	s := &Sweep{Sweep: def}
	for p := range def.Points {
		v := def.Point(p)
		r := &Result{Scenario: "transfers", Platform: "h200-pcie", Params: map[string]string{"directions": v[1]},
			Results: []Row{{Name: "pinned", Path: "pinned", Direction: v[1], Bytes: 1 << 20, Seconds: 1e-4 / float64(p+1), GBps: 0.1 * float64(p+1) / 3}}}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		s.Points = append(s.Points, SweepPoint{Index: p, Params: map[string]string{def.Axes[0].Key: v[0], def.Axes[1].Key: v[1]}, Result: b})
	}
	return s
}

// TestSweepJSONRoundTrip: a document read and written again is the same
// bytes, which is what makes a merge of shards byte-identical.
func TestSweepJSONRoundTrip(t *testing.T) {
	var a, b bytes.Buffer
	if err := WriteSweepJSON(&a, testSweep(t)); err != nil {
		t.Fatal(err)
	}
	s, err := ReadSweep(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteSweepJSON(&b, s); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("written again:\n%s\nfirst:\n%s", b.String(), a.String())
	}
	if _, err := ReadSweep(strings.NewReader(`{"scenario": "transfers"}`)); err == nil {
		t.Error("a run's document read as a sweep")
	}
}

func TestSameSweep(t *testing.T) {
	a, b := testSweep(t).Sweep, testSweep(t).Sweep
	if !SameSweep(&a, &b) {
		t.Error("equal definitions differ")
	}
	b.Axes[1].Values = []string{"d2h", "h2d"}
	if SameSweep(&a, &b) {
		t.Error("axes in another order are the same sweep")
	}
}

func TestWriteSweepTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSweepTable(&b, testSweep(t)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"sweep of transfers: 4 points over platform.gpus.gpu0.link.gen (2) × directions (2)\n",
		"point  link.gen  directions",
		"[point 4 of 4] platform.gpus.gpu0.link.gen=5 directions=d2h\ntransfers on h200-pcie\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "transfers on h200-pcie"); n != 4 {
		t.Errorf("%d points' tables, want 4", n)
	}
}

func ExampleSweepDef_Point() {
	d := SweepDef{Axes: []SweepAxis{
		{Key: "platform.gpus.gpu0.link.gen", Values: []string{"3", "4", "5"}},
		{Key: "directions", Values: []string{"h2d", "d2h"}},
	}}
	for p := range d.Size() {
		fmt.Println(p, d.Point(p), InShard(p, 1, 3))
	}
	// Output:
	// 0 [3 h2d] false
	// 1 [3 d2h] true
	// 2 [4 h2d] false
	// 3 [4 d2h] false
	// 4 [5 h2d] true
	// 5 [5 d2h] false
}

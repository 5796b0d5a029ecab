package scenario

import (
	"bytes"
	"testing"

	"github.com/dmalab/dmalab/report"
)

// gaRows indexes a gpu-affinity run's rows by "platform path direction
// mode".
func gaRows(t *testing.T, out *Outcome) map[string]report.Row {
	t.Helper()
	rows := map[string]report.Row{}
	for _, r := range out.Result.Results {
		k := r.Platform + " " + r.Path + " " + r.Direction + " " + r.Mode
		if _, dup := rows[k]; dup {
			t.Fatalf("two rows %q", k)
		}
		rows[k] = r
	}
	return rows
}

func gaRun(t *testing.T, sets ...string) *Outcome {
	t.Helper()
	s, err := Lookup("gpu-affinity")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(s, Options{Sets: append([]string{"size=64MiB"}, sets...)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGPUAffinityOneGPU: pinned memory on the other socket crosses the
// socket link with every byte and is never faster than local memory;
// one GPU's PCIe Gen5 x16 (55.5 GB/s a direction) binds below UPI's
// 113.8 GB/s, so the rates are equal to within the socket link's
// latency (80 ns over a ~1.2 ms copy). A pageable copy pays the remote
// memcpy: slower by the remote latency's toll on one thread.
func TestGPUAffinityOneGPU(t *testing.T) {
	out := gaRun(t, "platforms=2s-4gpu-pcie")
	rows := gaRows(t, out)
	// 2 paths × 3 directions × 2 placements, then 2 and 4 GPUs × 3
	// directions × 2 placements.
	if len(rows) != 24 {
		t.Fatalf("%d rows, want 24", len(rows))
	}
	for _, dir := range []string{"h2d", "d2h", "bidir"} {
		l, r := rows["2s-4gpu-pcie pinned "+dir+" 1gpu-local"], rows["2s-4gpu-pcie pinned "+dir+" 1gpu-remote"]
		if r.GBps > l.GBps {
			t.Errorf("pinned %s: remote %.3f GB/s above local %.3f", dir, r.GBps, l.GBps)
		}
		if r.GBps < 0.999*l.GBps {
			t.Errorf("pinned %s: remote %.3f GB/s, local %.3f: PCIe binds both, want equal within the latency", dir, r.GBps, l.GBps)
		}
		if b, _ := gdLink(l, "upi"); b != 0 {
			t.Errorf("pinned %s local: UPI carried %d bytes", dir, b)
		}
		if b, _ := gdLink(r, "upi"); b < r.Bytes*r.Ops {
			t.Errorf("pinned %s remote: UPI carried %d bytes of %d", dir, b, r.Bytes*r.Ops)
		}
		pl, pr := rows["2s-4gpu-pcie pageable "+dir+" 1gpu-local"], rows["2s-4gpu-pcie pageable "+dir+" 1gpu-remote"]
		if !(pr.GBps < 0.9*pl.GBps) {
			t.Errorf("pageable %s: remote %.2f GB/s, local %.2f: want the remote memcpy's loss", dir, pr.GBps, pl.GBps)
		}
	}
	if len(out.Result.Summary) != 3 {
		t.Errorf("summary %q: want the pinned, pageable and several-GPU answers", out.Result.Summary)
	}
}

// TestGPUAffinityShareUPI: four GPUs with all memory on node 0. On
// 2s-4gpu-pcie the two remote GPUs sit behind one switch whose uplink
// (55.5 GB/s) feeds UPI below its 113.8 GB/s: nothing is lost, and UPI
// carries half the bytes. With one UPI link (28.4 GB/s) the remote GPUs
// share it: the crossing rate stays at or under the link's capacity,
// the aggregate falls below the local one, and local memory is not
// touched by the change.
func TestGPUAffinityShareUPI(t *testing.T) {
	full := gaRows(t, gaRun(t, "platforms=2s-4gpu-pcie", "directions=h2d"))
	one := gaRows(t, gaRun(t, "platforms=2s-4gpu-pcie", "directions=h2d", "platform.socket_links.upi.links=1"))
	const upi1 = 4 * 32e9 * 8 / 9 / 4 // one link's data rate, B/s
	for _, c := range []struct {
		rows   map[string]report.Row
		upi    float64
		sharer bool
	}{{full, 4 * upi1, false}, {one, upi1, true}} {
		l, r := c.rows["2s-4gpu-pcie pinned h2d 4gpus-local"], c.rows["2s-4gpu-pcie pinned h2d 4gpus-node0"]
		aggL := float64(l.Bytes*l.Ops) / l.Seconds
		aggR := float64(r.Bytes*r.Ops) / r.Seconds
		crossed, _ := gdLink(r, "upi")
		if crossed != r.Bytes*r.Ops/2 {
			t.Errorf("UPI %.0f GB/s: carried %d bytes, want the remote half of %d", c.upi/1e9, crossed, r.Bytes*r.Ops)
		}
		if rate := float64(crossed) / r.Seconds; rate > c.upi*1.001 {
			t.Errorf("UPI %.0f GB/s: crossed at %.2f GB/s, above its capacity", c.upi/1e9, rate/1e9)
		}
		if b, _ := gdLink(l, "upi"); b != 0 {
			t.Errorf("UPI %.0f GB/s: local memory crossed %d bytes", c.upi/1e9, b)
		}
		if lost := aggR < 0.99*aggL; lost != c.sharer {
			t.Errorf("UPI %.0f GB/s: aggregate %.1f GB/s from node 0, %.1f local: loss %v, want %v", c.upi/1e9, aggR/1e9, aggL/1e9, lost, c.sharer)
		}
	}
	if a, b := full["2s-4gpu-pcie pinned h2d 4gpus-local"], one["2s-4gpu-pcie pinned h2d 4gpus-local"]; a.Seconds != b.Seconds {
		t.Errorf("local memory took %v with 4 UPI links, %v with one", a.Seconds, b.Seconds)
	}
}

// TestGPUAffinityDeterministic: the same run twice gives the same JSON.
func TestGPUAffinityDeterministic(t *testing.T) {
	var docs [2]bytes.Buffer
	for i := range docs {
		out := gaRun(t, "platforms=dgx-h100", "directions=bidir")
		if err := report.WriteJSON(&docs[i], out.Result); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(docs[0].Bytes(), docs[1].Bytes()) {
		t.Error("two runs differ")
	}
}

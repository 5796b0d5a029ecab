package scenario

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/report"
)

// gdRows indexes a gpudirect run's rows by "platform path placement
// size".
func gdRows(t *testing.T, out *Outcome) map[string]report.Row {
	t.Helper()
	rows := map[string]report.Row{}
	for _, r := range out.Result.Results {
		k := r.Platform + " " + r.Path + " " + r.Direction + " " + report.FormatBytes(r.Bytes)
		if _, dup := rows[k]; dup {
			t.Fatalf("two rows %q", k)
		}
		rows[k] = r
	}
	return rows
}

func gdLink(r report.Row, name string) (int64, bool) {
	for _, l := range r.Links {
		if l.Link == name {
			return l.Bytes, true
		}
	}
	return 0, false
}

// TestGPUDirectTopology is the proof that the bounce path and RDMA
// differ the way the topology says. Below one switch GPUDirect is ahead
// of the bounce path at every size and its bytes never reach the
// switch's uplink or the root complex, while the bounce path crosses
// both twice; across sockets nvidia_p2p refuses the mapping (ENOTSUPP)
// and the bounce path still delivers, over the socket link; through a
// root complex (dgx-h100: nic0 on pcie0, gpu2 on pcie1) GPUDirect is
// slower than below a switch, capped by the root complex's
// p2p_efficiency, and slower still with a lower one.
func TestGPUDirectTopology(t *testing.T) {
	s, err := Lookup("gpudirect")
	if err != nil {
		t.Fatal(err)
	}
	sizes := []string{"4 KiB", "1 MiB", "64 MiB"}
	out, err := Run(s, Options{Sets: []string{"sizes=4KiB,1MiB,64MiB"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := gdRows(t, out)
	// 2 platforms; 2s-4gpu-pcie has no GPU through the root complex from
	// nic0: (2 + 3) placements × 3 sizes × 2 paths.
	if len(rows) != 30 {
		t.Fatalf("%d rows, want 30", len(rows))
	}
	for _, plat := range []string{"2s-4gpu-pcie", "dgx-h100"} {
		uplink := map[string]string{"2s-4gpu-pcie": "sw0.pcie", "dgx-h100": "pcie0.pcie"}[plat]
		for _, n := range sizes {
			g, b := rows[plat+" gpudirect same-switch "+n], rows[plat+" bounce same-switch "+n]
			if g.Seconds <= 0 || g.Seconds >= b.Seconds || g.GBps <= b.GBps {
				t.Errorf("%s same-switch %s: gpudirect %v s, bounce %v s: GPUDirect must be ahead", plat, n, g.Seconds, b.Seconds)
			}
			if g.CPUSeconds >= b.CPUSeconds {
				t.Errorf("%s same-switch %s: CPU gpudirect %v ≥ bounce %v", plat, n, g.CPUSeconds, b.CPUSeconds)
			}
			for _, l := range []string{uplink, "rc0", "upi"} {
				v, ok := gdLink(g, l)
				if !ok || v != 0 {
					t.Errorf("%s gpudirect same-switch %s: %s carried %d (listed %v), want 0", plat, n, l, v, ok)
				}
			}
			if v, _ := gdLink(g, "gpu0.pcie"); v < g.Bytes {
				t.Errorf("%s gpudirect same-switch %s: gpu0.pcie carried %d < the message", plat, n, v)
			}
			// The bounce path: the NIC writes DRAM, the copy engine reads it:
			// the message crosses the uplink and the root complex twice.
			if v, _ := gdLink(b, "rc0"); v < 2*b.Bytes {
				t.Errorf("%s bounce same-switch %s: rc0 carried %d, want ≥ 2 × %d", plat, n, v, b.Bytes)
			}
			if v, _ := gdLink(b, uplink); v < 2*b.Bytes {
				t.Errorf("%s bounce same-switch %s: %s carried %d, want ≥ 2 × %d", plat, n, uplink, v, b.Bytes)
			}
			g, b = rows[plat+" gpudirect cross-socket "+n], rows[plat+" bounce cross-socket "+n]
			if g.Seconds != 0 || !strings.Contains(g.Note, "ENOTSUPP") || len(g.Links) != 0 {
				t.Errorf("%s gpudirect cross-socket %s: %+v, want refused with ENOTSUPP", plat, n, g)
			}
			if v, _ := gdLink(b, "upi"); b.Seconds <= 0 || v < b.Bytes {
				t.Errorf("%s bounce cross-socket %s: %v s, upi %d: want delivered across the socket link", plat, n, b.Seconds, v)
			}
		}
	}
	if _, ok := rows["2s-4gpu-pcie gpudirect through-root-complex 4 KiB"]; ok {
		t.Error("2s-4gpu-pcie has no GPU through the root complex from nic0")
	}
	for _, n := range sizes {
		sw, rc := rows["dgx-h100 gpudirect same-switch "+n], rows["dgx-h100 gpudirect through-root-complex "+n]
		if rc.Seconds <= sw.Seconds {
			t.Errorf("dgx-h100 %s: through the root complex %v s, below the switch %v s: want slower", n, rc.Seconds, sw.Seconds)
		}
		// Up pcie0's uplink and down pcie1's, turning in rc0.
		for _, l := range []string{"pcie0.pcie", "pcie1.pcie", "gpu2.pcie"} {
			if v, _ := gdLink(rc, l); v < rc.Bytes {
				t.Errorf("dgx-h100 through-root-complex %s: %s carried %d", n, l, v)
			}
		}
		if v, _ := gdLink(rc, "upi"); v != 0 {
			t.Errorf("dgx-h100 through-root-complex %s: upi carried %d", n, v)
		}
	}
	sum := strings.Join(out.Result.Summary, "\n")
	for _, w := range []string{"2s-4gpu-pcie same-switch", "GPUDirect refused (ENOTSUPP)", "dgx-h100 through-root-complex", "next:"} {
		if !strings.Contains(sum, w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}
	if !strings.Contains(out.Result.Summary[0], "faster") {
		t.Errorf("the first line does not say where GPUDirect wins: %q", out.Result.Summary[0])
	}

	// The root complex's share is one resource: the NIC's two pieces in
	// flight share it, so 64 MiB runs at p2p_efficiency (0.5) of the
	// 55.5 GB/s port, less TLP overhead, not twice that.
	if r, ok := rows["dgx-h100 gpudirect through-root-complex 64 MiB"]; !ok || r.GBps > 0.5*55.5 || r.GBps < 0.45*55.5 {
		t.Errorf("dgx-h100 through-root-complex 64 MiB: %+v, want about half of 55.5 GB/s", r)
	}

	// A lower p2p_efficiency slows the root-complex path, and only it.
	lower, err := Run(s, Options{Platform: "dgx-h100", Sets: []string{"sizes=64MiB", "platform.root_complexes.rc0.p2p_efficiency=0.2"}})
	if err != nil {
		t.Fatal(err)
	}
	lr := gdRows(t, lower)
	if a, b := lr["dgx-h100 gpudirect through-root-complex 64 MiB"], rows["dgx-h100 gpudirect through-root-complex 64 MiB"]; a.GBps >= b.GBps*0.75 {
		t.Errorf("p2p_efficiency 0.2: %v GB/s, at 0.5: %v GB/s", a.GBps, b.GBps)
	}
	if a, b := lr["dgx-h100 gpudirect same-switch 64 MiB"], rows["dgx-h100 gpudirect same-switch 64 MiB"]; a.Seconds != b.Seconds {
		t.Errorf("p2p_efficiency changed the same-switch path: %v s against %v s", a.Seconds, b.Seconds)
	}
}

// TestGPUDirectWireBound: 1 GiB below one switch runs at the wire's
// payload rate (400 Gb/s × 4096/4122 = 49.7 GB/s) less the post, the
// pipeline's fill and the ACK; the bounce path is the write then the
// copy (Gen5 x16 at 55.5 GB/s), one after the other.
func TestGPUDirectWireBound(t *testing.T) {
	s, _ := Lookup("gpudirect")
	out, err := Run(s, Options{Sets: []string{"sizes=1GiB", "platforms=2s-4gpu-pcie", "placements=same-switch"}})
	if err != nil {
		t.Fatal(err)
	}
	rows := gdRows(t, out)
	g, b := rows["2s-4gpu-pcie gpudirect same-switch 1 GiB"], rows["2s-4gpu-pcie bounce same-switch 1 GiB"]
	const wire = 400e9 / 8 * 4096 / 4122 / 1e9
	if g.GBps > wire || g.GBps < 0.95*wire {
		t.Errorf("gpudirect 1 GiB at %v GB/s, want just under the wire's %v", g.GBps, wire)
	}
	serial := 1 / (1/g.GBps + 1/55.5)
	if b.GBps > serial*1.01 || b.GBps < serial*0.97 {
		t.Errorf("bounce 1 GiB at %v GB/s, want the write then the copy, about %v", b.GBps, serial)
	}
}

// TestGPUDirectCheck: "dmalab check gpudirect" of the correct scenario
// draws nothing from the DMA-API or IOMMU packs, on either host.
func TestGPUDirectCheck(t *testing.T) {
	s, _ := Lookup("gpudirect")
	for _, sets := range [][]string{{"sizes=4KiB,1MiB"}, {"sizes=64KiB", "platform.iommu.mode=passthrough"}} {
		out, err := Run(s, Options{Check: true, Sets: sets})
		if err != nil {
			t.Fatal(err)
		}
		if out.Check == nil {
			t.Fatal("no check report")
		}
		for _, d := range out.Check.Diagnostics {
			k := check.Find(d.Class)
			if k == nil || k.Pack() == "dma-debug" || k.Pack() == "iommu" {
				t.Errorf("%v: %s: %s", sets, d.Class, d.Message)
			}
		}
	}
}

// TestGPUDirectDeterministic: the same inputs, the same bytes.
func TestGPUDirectDeterministic(t *testing.T) {
	s, _ := Lookup("gpudirect")
	run := func() []byte {
		out, err := Run(s, Options{Sets: []string{"sizes=4KiB,16MiB"}})
		if err != nil {
			t.Fatal(err)
		}
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

// TestGPUDirectUsage: bad input is a usage error naming it.
func TestGPUDirectUsage(t *testing.T) {
	s, _ := Lookup("gpudirect")
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{Sets: []string{"platforms=nosuch"}}, "nosuch"},
		{Options{Sets: []string{"placements=next-door"}}, "placement"},
		{Options{Sets: []string{"sizes=32GiB"}}, "sizes"},
		{Options{Sets: []string{"sizes=lots"}}, "sizes"},
		{Options{Platform: "jetson-orin"}, "jetson-orin"},
		{Options{Platform: "dgx-h100", Sets: []string{"placements=through-root-complex", "platforms=2s-4gpu-pcie"}}, "no discrete GPU"},
	} {
		_, err := Run(s, tc.opt)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error naming %q", tc.opt, err, tc.want)
		}
	}
}

// TestGPUDirectBehindIOMMU: with the IOMMU translating, nvidia_p2p
// refuses every placement (ENOTSUPP), the bounce rows still run, and
// the gpudirect pack says why; passthrough works as off does.
func TestGPUDirectBehindIOMMU(t *testing.T) {
	s, _ := Lookup("gpudirect")
	base := []string{"sizes=64KiB", "platforms=2s-4gpu-pcie"}
	out, err := Run(s, Options{Check: true, Sets: append(base, "platform.iommu.mode=strict")})
	if err != nil {
		t.Fatal(err)
	}
	rows := gdRows(t, out)
	for _, pl := range []string{"same-switch", "cross-socket"} {
		g, b := rows["2s-4gpu-pcie gpudirect "+pl+" 64 KiB"], rows["2s-4gpu-pcie bounce "+pl+" 64 KiB"]
		if g.Seconds != 0 || !strings.Contains(g.Note, "ENOTSUPP") || b.Seconds <= 0 {
			t.Errorf("strict, %s: gpudirect %+v, bounce %v s", pl, g, b.Seconds)
		}
	}
	var translating int
	for _, d := range out.Check.Diagnostics {
		if d.Class == "gpudirect-iommu-translating" {
			translating++
		} else {
			t.Errorf("%s: %s", d.Class, d.Message)
		}
	}
	if translating == 0 {
		t.Error("no gpudirect-iommu-translating diagnostic under a translating IOMMU")
	}
	pt, err := Run(s, Options{Sets: append(base, "platform.iommu.mode=passthrough")})
	if err != nil {
		t.Fatal(err)
	}
	off, err := Run(s, Options{Sets: base})
	if err != nil {
		t.Fatal(err)
	}
	a, b := gdRows(t, pt)["2s-4gpu-pcie gpudirect same-switch 64 KiB"], gdRows(t, off)["2s-4gpu-pcie gpudirect same-switch 64 KiB"]
	if a.Seconds <= 0 || a.Seconds != b.Seconds {
		t.Errorf("passthrough %v s, off %v s: want the same delivered write", a.Seconds, b.Seconds)
	}
}

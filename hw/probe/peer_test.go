package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
)

func peerOpts() Options {
	return Options{Sizes: []int64{1 << 20}, SmallSizes: []int64{8}, Families: []string{FamilyCapabilities, FamilyCE, FamilySM}}
}

func TestPeerMeasurements(t *testing.T) {
	f := NewFake(FakeConfig{GPUs: 2})
	rep, err := run(t, f, peerOpts())
	if err != nil {
		t.Fatal(err)
	}
	c := f.Config()
	size := int64(1 << 20)
	for gi, g := range rep.GPUs {
		other := 1 - gi
		if caps := g.Capabilities; caps == nil || len(caps.PeerAccess) != 1 || caps.PeerAccess[0] != other {
			t.Errorf("GPU %d peer access %+v", gi, g.Capabilities)
		}
		var ops []string
		for _, m := range g.Find("", MemPeer.String(), "") {
			if m.PeerGPU == nil || *m.PeerGPU != other || !m.Verified {
				t.Errorf("GPU %d: %s peer %v verified %v", gi, m.Key(), m.PeerGPU, m.Verified)
			}
			ops = append(ops, m.Family+" "+m.Direction+" "+m.Operation)
			if m.Family == FamilyCE && m.Direction == D2D {
				w := float64(size) / (c.CopyLatency.Seconds() + float64(size)/(f.Bandwidth(Route{"ce", MemDevice, MemPeer})*1e9)) / 1e9
				if !near(m.Median, w, 1e-4) {
					t.Errorf("%s: %g GB/s, formula %g", m.Key(), m.Median, w)
				}
			}
			if m.Direction == Bidir && (m.PerDirection["write"].Median == 0 || m.PerDirection["read"].Median == 0) {
				t.Errorf("%s: per direction %v", m.Key(), m.PerDirection)
			}
		}
		want := []string{"ce_copy d2d write", "ce_copy d2d read", "ce_copy bidir ", "sm_copy d2d write", "sm_copy d2d read"}
		if len(ops) != len(want) {
			t.Fatalf("GPU %d peer measurements %v, want %v", gi, ops, want)
		}
		for i := range want {
			if ops[i] != want[i] {
				t.Errorf("GPU %d peer measurement %d is %q, want %q", gi, i, ops[i], want[i])
			}
		}
	}

	doc := nvbDocOf(t, rep)
	found := 0
	for _, tc := range doc.NVBandwidth.Testcases {
		switch tc.Name {
		case "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce", "device_to_device_memcpy_read_sm", "device_to_device_memcpy_write_sm":
			found++
			m := tc.BandwidthMatrix
			if len(m) != 2 || len(m[0]) != 2 || m[0][0] != "N/A" || m[1][1] != "N/A" || m[0][1] == "N/A" || m[1][0] == "N/A" {
				t.Errorf("%s matrix %v", tc.Name, m)
			}
		case "host_to_device_memcpy_ce":
			if len(tc.BandwidthMatrix) != 1 || len(tc.BandwidthMatrix[0]) != 2 {
				t.Errorf("%s matrix %v", tc.Name, tc.BandwidthMatrix)
			}
		}
	}
	if found != 4 {
		t.Errorf("%d peer testcases", found)
	}
}

func TestNoPeerAccess(t *testing.T) {
	f := NewFake(FakeConfig{GPUs: 2, NoPeerAccess: true})
	rep, err := run(t, f, peerOpts())
	if err != nil {
		t.Fatal(err)
	}
	if ms := rep.GPUs[0].Find("", MemPeer.String(), ""); len(ms) != 0 {
		t.Errorf("peer measurements without peer access: %v", ms)
	}
}

func TestPeerAllocFailure(t *testing.T) {
	boom := errors.New("no BAR space")
	f := NewFake(FakeConfig{GPUs: 2, Fail: func(op string) error {
		if op == "AllocPeer" {
			return boom
		}
		return nil
	}})
	rep, err := run(t, f, peerOpts())
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the allocation error", err)
	}
	if len(rep.GPUs[0].Find(FamilyCE, "pinned", H2D)) == 0 {
		t.Error("local measurements were lost")
	}
}

// TestPeerPointerChase: with two GPUs the latency family chases pointers
// through each GPU's peer too (nvbandwidth's device_to_device_latency_sm),
// a row of its own with the peer named, verified like the others; with
// peer access off there is none.
func TestPeerPointerChase(t *testing.T) {
	opts := Options{Sizes: []int64{1 << 20}, SmallSizes: []int64{8}, Families: []string{FamilyLatency}}
	f := NewFake(FakeConfig{GPUs: 2})
	rep, err := run(t, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	for gi, g := range rep.GPUs {
		chases := g.Find(FamilyLatency, MemPeer.String(), "")
		if len(chases) != 1 {
			t.Fatalf("GPU %d: %d peer latency rows", gi, len(chases))
		}
		m := chases[0]
		if m.Operation != "pointer_chase" || m.PeerGPU == nil || *m.PeerGPU != 1-gi || !m.Verified || m.Unit != UnitNs || m.Median <= 0 {
			t.Errorf("GPU %d: %s peer %v verified %v unit %s median %g", gi, m.Key(), m.PeerGPU, m.Verified, m.Unit, m.Median)
		}
		if dev := g.Find(FamilyLatency, MemDevice.String(), ""); len(dev) != 1 || dev[0].SizeBytes != m.SizeBytes || dev[0].StrideBytes != m.StrideBytes {
			t.Errorf("GPU %d: the peer chase's layout %d/%d, the device's %+v", gi, m.SizeBytes, m.StrideBytes, dev)
		}
	}
	doc := nvbDocOf(t, rep)
	found := false
	for _, tc := range doc.NVBandwidth.Testcases {
		if tc.Name != "device_to_device_latency_sm" {
			continue
		}
		found = true
		m := tc.BandwidthMatrix
		if len(m) != 2 || len(m[0]) != 2 || m[0][0] != "N/A" || m[1][1] != "N/A" || m[0][1] == "N/A" || m[1][0] == "N/A" {
			t.Errorf("%s matrix %v", tc.Name, m)
		}
		for gi, g := range rep.GPUs {
			want := strconv.FormatFloat(g.Find(FamilyLatency, MemPeer.String(), "")[0].Median, 'g', 6, 64)
			if m[gi][1-gi] != want {
				t.Errorf("%s: row %d column %d is %s, the chase's median %s", tc.Name, gi, 1-gi, m[gi][1-gi], want)
			}
		}
	}
	if !found {
		t.Error("no device_to_device_latency_sm testcase")
	}
	f = NewFake(FakeConfig{GPUs: 2, NoPeerAccess: true})
	if rep, err = run(t, f, opts); err != nil {
		t.Fatal(err)
	}
	if n := len(rep.GPUs[0].Find(FamilyLatency, MemPeer.String(), "")); n != 0 {
		t.Errorf("%d peer latency rows without peer access", n)
	}
}

// nvbDocOf is rep written in nvbandwidth's layout and read back.
func nvbDocOf(t *testing.T, rep *Report) nvbRoot {
	t.Helper()
	var out bytes.Buffer
	if err := rep.WriteNVBandwidth(&out); err != nil {
		t.Fatal(err)
	}
	var doc nvbRoot
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

package machine

import (
	"testing"

	"github.com/dmalab/dmalab/platform"
)

func TestPeerPath(t *testing.T) {
	spec, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dev := func(name string) Endpoint {
		for _, d := range m.Devices {
			if d.Name == name {
				return d.Side()
			}
		}
		t.Fatalf("no %s", name)
		return Endpoint{}
	}
	host, _ := m.HostMemory(0)
	g0, g1, g2 := m.GPUs[0].Memory(), m.GPUs[1].Memory(), m.GPUs[2].Memory()
	tests := []struct {
		name string
		a, b Endpoint
		want PeerPath
	}{
		{"nic and gpu below sw0", dev("nic0"), g0, PeerPath{Kind: PeerSwitch, At: "sw0"}},
		{"two gpus below sw0", g1, g0, PeerPath{Kind: PeerSwitch, At: "sw0"}},
		{"nvme on rc0 to gpu0", dev("nvme0"), g0, PeerPath{Kind: PeerRootComplex, At: "rc0"}},
		{"nic1 on socket 1 to gpu0", dev("nic1"), g0, PeerPath{Kind: PeerCrossSocket, At: "rc1"}},
		{"gpu2 to nic0", g2, dev("nic0"), PeerPath{Kind: PeerCrossSocket, At: "rc1"}},
		{"host memory", host, g0, PeerPath{}},
		{"itself", g0, g0, PeerPath{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.PeerPath(tt.a, tt.b)
			if err != nil || got != tt.want {
				t.Errorf("PeerPath = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if _, err := m.PeerPath(Endpoint{}, g0); err == nil {
		t.Error("unset endpoint: no error")
	}
	if PeerRootComplex.String() != "root-complex" || PeerNone.String() != "none" {
		t.Error("names")
	}
}

package platform

import (
	"strings"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// threeNodes is base with three nodes in a chain (0-1 over UPI's
// structure, 1-2 over an AMD xGMI bundle), 100 ns DRAM each.
func threeNodes(links string) string {
	node := func(id string) string {
		return "  - {id: " + id + ", cores: 4, dram: 16 GiB, dram_bandwidth: 50 GB/s, dram_latency: 100ns, memcpy_rate: 10 GB/s}\n"
	}
	return "name: numa\nnodes:\n" + node("0") + node("1") + node("2") + "socket_links:\n" + links
}

const chain = `  - {name: upi, a: 0, b: 1, protocol: upi, links: 4, link_rate: 32 GB/s, efficiency: 0.8888888888888888, latency: 40ns}
  - {name: xgmi, a: 1, b: 2, protocol: xgmi, links: 4, link_rate: 36 GB/s, efficiency: 0.75, latency: 60ns}
`

// TestSocketLinkStructure: a link described by its structure has the
// capacity links × link_rate × efficiency, one described by a fixed
// bandwidth that bandwidth; both forms parse, marshal and round-trip.
func TestSocketLinkStructure(t *testing.T) {
	s, err := Parse("numa.yaml", []byte(threeNodes(chain+"  - {name: fixed, a: 0, b: 2, bandwidth: 50 GB/s, latency: 100ns}\n")))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Rate{128e9 * 0.8888888888888888, 4 * 36e9 * 0.75, 50e9} {
		if got := s.SocketLinks[i].Rate(); got != want {
			t.Errorf("%s: rate %v, want %v", s.SocketLinks[i].Name, got, want)
		}
	}
	if s.SocketLinks[1].Protocol != "xgmi" {
		t.Errorf("protocol %q, want xgmi", s.SocketLinks[1].Protocol)
	}
	out, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse("back.yaml", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for i := range s.SocketLinks {
		if back.SocketLinks[i].Rate() != s.SocketLinks[i].Rate() || back.SocketLinks[i].Protocol != s.SocketLinks[i].Protocol {
			t.Errorf("round trip of %s: %+v", s.SocketLinks[i].Name, back.SocketLinks[i])
		}
	}
	if strings.Contains(string(out), "bandwidth: 0") {
		t.Errorf("an unset bandwidth is written:\n%s", out)
	}
}

// TestSocketLinkErrors: a link is described one way, completely, with a
// protocol dmalab knows.
func TestSocketLinkErrors(t *testing.T) {
	for _, tt := range []struct{ link, want string }{
		{"  - {name: l, a: 0, b: 1, links: 4, link_rate: 32 GB/s, efficiency: 0.9, bandwidth: -1 GB/s}\n", "socket_links[0].bandwidth"},
		{"  - {name: l, a: 0, b: 1, links: 4, link_rate: 32 GB/s}\n", "socket_links[0].efficiency"},
		{"  - {name: l, a: 0, b: 1, links: 4, efficiency: 0.9}\n", "socket_links[0].link_rate"},
		{"  - {name: l, a: 0, b: 1, link_rate: 32 GB/s, efficiency: 1.5}\n", "socket_links[0].links"},
		{"  - {name: l, a: 0, b: 1}\n", "socket_links[0].bandwidth"},
		{"  - {name: l, a: 0, b: 1, protocol: qpi, bandwidth: 10 GB/s}\n", "socket_links[0].protocol"},
	} {
		_, err := Parse("numa.yaml", []byte(threeNodes(tt.link)))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one at %s", strings.TrimSpace(tt.link), err, tt.want)
		}
	}
}

// TestSocketLinkBandwidthReplacesStructure: a fixed bandwidth given beside
// the structure (a what-if --set on a preset) is the link's rate.
func TestSocketLinkBandwidthReplacesStructure(t *testing.T) {
	s, err := Resolve("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	structured := s.SocketLinks[0].Rate()
	s, err = Set(s, "socket_links.upi.bandwidth", "50 GB/s")
	if err != nil {
		t.Fatalf("--set socket_links.upi.bandwidth on a structured link: %v", err)
	}
	if got := s.SocketLinks[0].Rate(); got != 50e9 || got == structured {
		t.Errorf("rate %v, want the 50 GB/s given (structure gives %v)", got, structured)
	}
}

// TestLoadLatencyAndThreadRate: the idle load latency adds the round
// trip over every socket link on the way; one thread's rate falls by
// local over remote latency (Little's law); local is unchanged.
func TestLoadLatencyAndThreadRate(t *testing.T) {
	s, err := Parse("numa.yaml", []byte(threeNodes(chain)))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.SocketPath(0, 2); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Errorf("path 0→2 %v, want [0 1]", got)
	}
	if got := s.SocketPath(2, 0); len(got) != 2 || got[0] != 1 || got[1] != 0 {
		t.Errorf("path 2→0 %v, want [1 0]", got)
	}
	for _, tt := range []struct {
		cpu, home int
		lat       sim.Time
		rate      Rate
	}{
		{0, 0, 100 * sim.Nanosecond, 10e9},
		{0, 1, 180 * sim.Nanosecond, 10e9 * 100 / 180},
		{2, 0, 300 * sim.Nanosecond, 10e9 * 100 / 300},
	} {
		if got := s.LoadLatency(tt.cpu, tt.home); got != tt.lat {
			t.Errorf("LoadLatency(%d, %d) = %v, want %v", tt.cpu, tt.home, got, tt.lat)
		}
		if got := s.ThreadRate(tt.cpu, tt.home, 10e9); got < tt.rate*(1-1e-12) || got > tt.rate*(1+1e-12) {
			t.Errorf("ThreadRate(%d, %d) = %v, want %v", tt.cpu, tt.home, got, tt.rate)
		}
	}
}

// TestPresetSocketLinks: the Sapphire Rapids presets describe UPI as
// four links of 32 GB/s at 8/9 efficiency.
func TestPresetSocketLinks(t *testing.T) {
	for _, name := range []string{"2s-4gpu-pcie", "dgx-h100"} {
		s, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		l := s.SocketLinks[0]
		if l.Protocol != "upi" || l.Links.V != 4 || l.LinkRate.V != 32e9 {
			t.Errorf("%s: %+v", name, l)
		}
		if got, want := float64(l.Rate()), 128e9*8/9; got < want*(1-1e-12) || got > want*(1+1e-12) {
			t.Errorf("%s: UPI %v B/s, want %v", name, got, want)
		}
	}
}

// numa_balancing is off unless set; --set turns it on; only 0 and 1
// are accepted.
func TestNUMABalancingSetting(t *testing.T) {
	s, err := Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	if s.NUMABalancing.V != 0 {
		t.Fatalf("preset numa_balancing = %d, want 0", s.NUMABalancing.V)
	}
	on, err := Set(s, "numa_balancing", "1")
	if err != nil || on.NUMABalancing.V != 1 {
		t.Fatalf("set numa_balancing=1: %v, %+v", err, on.NUMABalancing)
	}
	for _, bad := range []string{"2", "-1"} {
		if _, err := Set(s, "numa_balancing", bad); err == nil {
			t.Errorf("set numa_balancing=%s: no error", bad)
		}
	}
	y, err := Marshal(on)
	if err != nil || !strings.Contains(string(y), "numa_balancing: 1") {
		t.Errorf("marshal: %v\n%s", err, y)
	}
}

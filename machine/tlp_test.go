package machine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/fabric"
)

// loads renders a route's hops with their weights, "(load)" on hops that
// only load a link.
func loads(r fabric.Route) string {
	var s []string
	for _, h := range r.Hops {
		step := fmt.Sprintf("%s:%v×%.4f", h.Link.Name(), h.Dir, h.Weight)
		if h.Load {
			step += "(load)"
		}
		s = append(s, step)
	}
	return strings.Join(s, " ")
}

// TestDMARouteTLPs works the transaction layer by hand on h200-pcie's
// Gen5 link (Max_Payload_Size 256 B, Max_Read_Request_Size 4 KiB, 24 B
// per TLP, an 8 B Ack per TLP): a copy engine's write costs the link's
// rate exactly and puts an Ack per 256 B on the other direction; its read
// also a 24 B request per 4 KiB; the SMs' 128 B requests cost
// (152/128)/(280/256) of the link per byte, an Ack per 128 B and, for
// reads, 24 B per 128 B the other way.
func TestDMARouteTLPs(t *testing.T) {
	m := build(t, "h200-pcie")
	g := m.GPUs[0]
	host, _ := m.HostMemory(0)
	full := 256.0 / 280
	for _, c := range []struct {
		name     string
		src, dst Endpoint
		by       Master
		want     string
	}{
		{"CE write (d2h)", g.Memory(), host, g.CE(),
			fmt.Sprintf("gpu0.hbm:B→A×1.0000 gpu0.pcie:B→A×1.0000 gpu0.pcie:A→B×%.4f(load) rc0:B→A×1.0000 node0.dram:A→B×1.0000", 8.0/256*full)},
		{"CE read (h2d)", host, g.Memory(), g.CE(),
			fmt.Sprintf("node0.dram:B→A×1.0000 rc0:A→B×1.0000 gpu0.pcie:A→B×1.0000 gpu0.pcie:B→A×%.4f(load) gpu0.hbm:A→B×1.0000", (8.0/256+24.0/4096)*full)},
		{"SM write", g.Memory(), host, g.SMs(),
			fmt.Sprintf("gpu0.hbm:B→A×1.0000 gpu0.pcie:B→A×%.4f gpu0.pcie:A→B×%.4f(load) rc0:B→A×1.0000 node0.dram:A→B×1.0000", 152.0/128*full, 8.0/128*full)},
		{"SM read", host, g.Memory(), g.SMs(),
			fmt.Sprintf("node0.dram:B→A×1.0000 rc0:A→B×1.0000 gpu0.pcie:A→B×%.4f gpu0.pcie:B→A×%.4f(load) gpu0.hbm:A→B×1.0000", 152.0/128*full, (8.0+24)/128*full)},
		{"no master", host, g.Memory(), Master{},
			"node0.dram:B→A×1.0000 rc0:A→B×1.0000 gpu0.pcie:A→B×1.0000 gpu0.hbm:A→B×1.0000"},
	} {
		r, err := m.DMARoute(c.src, c.dst, c.by)
		if err != nil {
			t.Fatal(err)
		}
		if got := loads(r); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		plain, _ := m.Route(c.src, c.dst)
		if r.Latency() != plain.Latency() {
			t.Errorf("%s: latency %v, want the data's %v (requests add none)", c.name, r.Latency(), plain.Latency())
		}
	}
}

package cli

import (
	"testing"

	"github.com/dmalab/dmalab/hw/nvml"
)

func TestCountNVLinks(t *testing.T) {
	link := func(remote string, n int) []nvml.NVLink {
		var out []nvml.NVLink
		for i := range n {
			out = append(out, nvml.NVLink{Link: i, RemoteBusID: remote})
		}
		return out
	}
	// Two H200s joined directly by 18 links (the lent h200-x2 machine).
	a, b := link("00000000:07:00.0", 18), link("00000000:06:00.0", 18)
	if got := countNVLinks(a, b, "0000:07:00.0"); got != 18 {
		t.Errorf("direct NV18: got %d", got)
	}
	// GPUs whose links all end at NVSwitches (DGX H100): 18 links into
	// switches the peer reaches too.
	var sw1, sw2 []nvml.NVLink
	for i, bus := range []string{"00000000:A1:00.0", "00000000:A2:00.0", "00000000:A3:00.0"} {
		for j := range 6 {
			sw1 = append(sw1, nvml.NVLink{Link: i*6 + j, RemoteBusID: bus})
			sw2 = append(sw2, nvml.NVLink{Link: i*6 + j, RemoteBusID: bus})
		}
	}
	if got := countNVLinks(sw1, sw2, "0000:1b:00.0"); got != 18 {
		t.Errorf("through NVSwitch: got %d, want 18", got)
	}
	if got := countNVLinks(a, nil, "0000:09:00.0"); got != 0 {
		t.Errorf("unrelated GPU: got %d", got)
	}
	if normBusID("00000000:1A:00.0") != normBusID("0000:1a:00.0") {
		t.Error("bus IDs of different domain width or case differ")
	}
}

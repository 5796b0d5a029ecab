package dma

import (
	"testing"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// TestReadBoundByOutstandingRequests: a device that keeps k reads in
// flight over a round trip r moves at most k × request / r (Little's
// law): with 2 tags of 4 KiB over 2s-4gpu-pcie's NIC round trip the
// read is far below its Gen5 x16 link, and waits one request's way out
// before its first byte. Its write the other way is posted: link-bound,
// no request leg.
func TestReadBoundByOutstandingRequests(t *testing.T) {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	for i := range spec.Devices {
		if spec.Devices[i].Name == "nic0" {
			spec.Devices[i].OutstandingReads = platform.Param[int]{V: 2, Source: "test"}
		}
	}
	r := newRig(t, spec, false)
	var nic *machine.Device
	for _, d := range r.m.Devices {
		if d.Name == "nic0" {
			nic = d
		}
	}
	host, _ := r.m.HostMemory(0)
	d := r.dev("nic0")
	const n = 16 << 20
	var read, write TransferInfo
	r.run(func(p *sim.Proc) {
		var err error
		if read, err = d.Transfer(p, &Transfer{Name: "tx", Master: nic.DMA(), Src: host, Dst: nic.Side(), Bytes: n}); err != nil {
			t.Fatal(err)
		}
		if write, err = d.Transfer(p, &Transfer{Name: "rx", Master: nic.DMA(), Src: nic.Side(), Dst: host, Bytes: n}); err != nil {
			t.Fatal(err)
		}
	})
	rtt := r.m.RoundTrip(read.Route, nic.DMA())
	rate := 2 * float64(nic.Spec.Link.ReadRequest()) / rtt.Seconds()
	// The move is the request's way out, the data's way back (the
	// flow's latency) and the bytes at the bound: rtt + n/rate.
	want := rtt + sim.TransferTime(n, rate)
	if d := read.Move - want; d < -2 || d > 2 {
		t.Errorf("read of 16 MiB with 2 tags: %v, want round trip + n/(2 × 4 KiB / %v) = %v", read.Move, rtt, want)
	}
	if got := float64(n) / write.Move.Seconds(); got < 10*rate {
		t.Errorf("posted write at %.3g B/s, want it link-bound, far above the read's %.3g", got, rate)
	}
}

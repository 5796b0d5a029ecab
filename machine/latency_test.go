package machine

import (
	"math"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// TestRoundTrip: a read's round trip is the master's hub when it leaves
// the chip, every link and component between it and the memory twice,
// and the memory's latency once; the memory it writes into is not
// waited for. On h200-pcie: 565 + 2 × (100 + 150) + 110 = 1175 ns from
// host memory, the 141.9 ns of VRAM within the GPU.
func TestRoundTrip(t *testing.T) {
	m := build(t, "h200-pcie")
	g := m.GPUs[0]
	host, _ := m.HostMemory(0)
	r, err := m.DMARoute(host, g.Memory(), g.CE())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.RoundTrip(r, g.CE()), 1175*sim.Nanosecond; got != want {
		t.Errorf("host → gpu0 round trip %v, want %v", got, want)
	}
	// The data's way back is the flow's latency (DRAM, root complex,
	// link: 360 ns); the request's way out is the rest.
	lead, rate := m.ReadLimit(r, g.CE())
	if want := 1175*sim.Nanosecond - r.Latency(); lead != want || lead != 815*sim.Nanosecond {
		t.Errorf("request leg %v, want %v (815 ns)", lead, want)
	}
	// 768 tags × 4 KiB requests over 1175 ns: far above the link.
	if want := 768 * 4096 / 1175e-9; math.Abs(rate/want-1) > 1e-12 {
		t.Errorf("tag-limited rate %v, want %v", rate, want)
	}
	local, err := m.Route(g.Memory(), g.Memory())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.RoundTrip(local, g.SMs()); got != 141900*sim.Picosecond {
		t.Errorf("VRAM round trip %v, want 141.9 ns (no hub: the read stays on the chip)", got)
	}
	if _, rate := m.ReadLimit(local, g.SMs()); rate != 0 {
		t.Errorf("VRAM reads limited to %v B/s by PCIe tags, want no limit (no PCIe link)", rate)
	}
	// The latency factor scales the round trip as it does flows.
	s, _ := platform.Preset("h200-pcie")
	s.Fabric.LatencyFactor = platform.Param[float64]{V: 2}
	m2, err := New(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	g2 := m2.GPUs[0]
	h2, _ := m2.HostMemory(0)
	r2, _ := m2.DMARoute(h2, g2.Memory(), g2.CE())
	if got := m2.RoundTrip(r2, g2.CE()); got != 2350*sim.Nanosecond {
		t.Errorf("round trip at latency factor 2: %v, want 2350 ns", got)
	}
}

// TestReadLimitLittlesLaw: a master with k reads in flight over a round
// trip r gets at most k × request / r (Little's law), whatever the
// links give; writes are posted and not limited.
func TestReadLimitLittlesLaw(t *testing.T) {
	s, _ := platform.Preset("2s-4gpu-pcie")
	i := -1
	for j, d := range s.Devices {
		if d.Name == "nic0" {
			i = j
		}
	}
	s.Devices[i].OutstandingReads = platform.Param[int]{V: 4, Source: "test"}
	m, err := New(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var nic *Device
	for _, d := range m.Devices {
		if d.Name == "nic0" {
			nic = d
		}
	}
	host, _ := m.HostMemory(0)
	if !m.Reads(nic.Side(), nic.DMA()) || m.Reads(host, nic.DMA()) {
		t.Fatal("Reads: the NIC reads into its side and writes into host memory")
	}
	r, err := m.DMARoute(host, nic.Side(), nic.DMA())
	if err != nil {
		t.Fatal(err)
	}
	rtt := m.RoundTrip(r, nic.DMA())
	_, rate := m.ReadLimit(r, nic.DMA())
	mrrs := float64(s.Devices[i].Link.ReadRequest())
	if want := 4 * mrrs / rtt.Seconds(); math.Abs(rate/want-1) > 1e-12 {
		t.Errorf("4 reads in flight of %v B over %v: %v B/s, want %v", mrrs, rtt, rate, want)
	}
	// The flow under that cap: bytes / rate, after the round trip.
	const n = 64 << 20
	var end sim.Time
	m.Engine.Spawn("rx", func(p *sim.Proc) {
		lead, rate := m.ReadLimit(r, nic.DMA())
		p.Sleep(lead)
		fl := m.Fabric.Start("read", r, n, fabric.MaxRate(rate))
		p.Wait(fl.Done())
		end = p.Now()
	})
	m.Engine.Run()
	if got := float64(n) / (end - rtt).Seconds(); got > rate*(1+1e-9) || got < rate*(1-1e-6) {
		t.Errorf("read of %d B moved at %v B/s, want the Little's-law bound %v", n, got, rate)
	}
}

// TestNVLinkReadRequests: a read over NVLink sends a header-only request
// packet the other way per packet of data: 16/(128+16) of the link per
// byte, in units of its data rate; a write sends none.
func TestNVLinkReadRequests(t *testing.T) {
	m := build(t, "dgx-h100")
	a, b := m.GPUs[0], m.GPUs[1]
	read, err := m.DMARoute(b.Memory(), a.Memory(), a.CE())
	if err != nil {
		t.Fatal(err)
	}
	write, err := m.DMARoute(a.Memory(), b.Memory(), a.CE())
	if err != nil {
		t.Fatal(err)
	}
	loads := func(r fabric.Route) (n int, w float64) {
		for _, h := range r.Hops {
			if h.Load {
				n++
				w = h.Weight
			}
		}
		return
	}
	if n, w := loads(read); n != 2 || math.Abs(w-16.0/144) > 1e-12 {
		t.Errorf("read over NVLink: %d request loads of weight %v, want 2 (one per bundle) of 16/144", n, w)
	}
	if n, _ := loads(write); n != 0 {
		t.Errorf("write over NVLink: %d request loads, want none (posted)", n)
	}
	if got := a.NVLinks["nvswitch"].Capacity(); math.Abs(got/400e9-1) > 1e-12 {
		t.Errorf("NV18 bundle carries %v B/s of data, want 18 × 25 GB/s × 128/144 = 400 GB/s", got)
	}
}

package machine

import (
	"math"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A read is a round trip: the master's request travels out to the
// memory, the memory answers, and the completion (the data) travels
// back. Writes are posted and pay the way out only, which is what a
// flow's latency is (fabric.Route.Latency: every link once, the memory
// bus included). RoundTrip adds the way out for reads, and ReadLimit
// the bound Little's law puts on a master with a limited number of
// requests in flight: no more than outstanding × request / round trip.

// nvPacket is the packet view of one NVLink bundle.
type nvPacket struct{ payload, header float64 }

func newNVPacket(l platform.NVLink) nvPacket {
	return nvPacket{payload: float64(l.PacketPayload()), header: float64(l.PacketHeader())}
}

// request is the load a read's request packets put on the link's other
// direction per byte of data, in units of the link's data rate: one
// header per payload of data, each header worth header × share bytes of
// data (the link's rate counts data only).
func (p nvPacket) request() float64 { return p.header / (p.payload + p.header) }

func weightOf(h fabric.Hop) float64 {
	if h.Weight == 0 {
		return 1
	}
	return h.Weight
}

// RoundTrip is the latency of one read by master over route r, whose
// first hop reads the memory (as Route and DMARoute give it, and a
// kernel's access route): the master's own share (its hub, when the
// route leaves its chip), twice the one-way latency of every link and
// component between it and the memory, and the memory's read latency
// (a node's dram_latency, a GPU's vram_latency). The memory the master
// writes into, at the route's other end, is not waited for. Scaled by
// the fabric's latency factor, as flows are.
func (m *Machine) RoundTrip(r fabric.Route, by Master) sim.Time {
	var t sim.Time
	offChip := false
	first := true
	for _, h := range r.Hops {
		if h.Load {
			continue
		}
		if lat, ok := m.memory[h.Link]; ok {
			if first {
				t += lat
			}
			first = false
			continue
		}
		first = false
		offChip = true
		t += 2 * h.Link.Latency()
	}
	if offChip {
		t += by.hub
	}
	return m.scaleLatency(t)
}

func (m *Machine) scaleLatency(t sim.Time) sim.Time {
	if f := m.Spec.Fabric.Latency(); f != 1 {
		return sim.Time(math.Round(float64(t) * f))
	}
	return t
}

// Reads says whether master's transfer into dst reads over the route:
// dst is the master's own memory or side, so the data comes back to it
// as completions of its requests.
func (m *Machine) Reads(dst Endpoint, by Master) bool {
	return by.port != nil && m.attachment(dst).port == by.port
}

// ReadLimit is what a read by master over r adds to its flow: lead, the
// request's way out, which the flow's own latency (the data's way back)
// does not hold, and rate, the most the master's outstanding requests
// carry per second (Little's law: outstanding × request size / round
// trip), 0 when nothing limits them. The request size is the master's
// (the SMs' line) or the smallest Max_Read_Request_Size of the PCIe
// links on r; a route without PCIe links is not limited by tags.
func (m *Machine) ReadLimit(r fabric.Route, by Master) (lead sim.Time, rate float64) {
	rtt := m.RoundTrip(r, by)
	lead = rtt - m.scaleLatency(r.Latency())
	if lead < 0 {
		lead = 0
	}
	if by.outstanding <= 0 || rtt <= 0 {
		return lead, 0
	}
	// Tags are PCIe's: a route without a PCIe link (a GPU's own VRAM,
	// NVLink) is not limited by them.
	var req float64
	for _, h := range r.Hops {
		if t := m.tlp[h.Link]; t != nil && (req == 0 || t.readReq < req) {
			req = t.readReq
		}
	}
	if req == 0 {
		return lead, 0
	}
	if by.request > 0 {
		req = float64(by.request)
	}
	return lead, float64(by.outstanding) * req / rtt.Seconds()
}

// CopyRate is the most a copy or DMA engine's transfer over r gets when
// it reads and writes the same node's DRAM (its route crosses that bus
// twice, or once with weight 2): the bus's rate × the node's
// copy_efficiency / the bytes it moves over it per byte copied. The bus
// turns around between the copy's reads and writes and loses data
// cycles; the flow's own bytes still count once each way on the bus. 0
// when nothing limits it (no such bus, efficiency 1, the SMs, whose
// kernel reads and writes are separate accesses).
func (m *Machine) CopyRate(r fabric.Route, by Master) float64 {
	if by.port == nil || by.request != 0 {
		return 0
	}
	for _, n := range m.Nodes {
		share := n.Spec.CopyShare()
		if share == 1 {
			continue
		}
		var w float64
		for _, h := range r.Hops {
			if h.Link == n.DRAM && !h.Load {
				w += weightOf(h)
			}
		}
		if w >= 2 {
			return n.DRAM.Effective() * share / w
		}
	}
	return 0
}

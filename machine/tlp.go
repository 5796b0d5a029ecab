package machine

import (
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Master is the PCIe agent whose transactions move a transfer's bytes: a
// GPU's copy engines, a GPU's SMs, or a device's DMA engine. It decides
// what each PCIe link of the route carries besides the data (DMARoute).
type Master struct {
	port *pciePort
	// request is the data per transaction: 0 means the link's own sizes
	// (Max_Payload_Size for writes and completions, Max_Read_Request_Size
	// for a read request), as DMA engines issue them.
	request int64
	// hub is the master's own share of a read's round trip that leaves
	// its chip (platform.GPU.HubLatency); outstanding the reads it may
	// have in flight, 0 for no limit.
	hub         sim.Time
	outstanding int
}

// CE is the GPU's copy engines as a PCIe master.
func (g *GPU) CE() Master {
	return Master{port: g.port, hub: g.Spec.HubLatency.V, outstanding: g.Spec.Outstanding()}
}

// SMs is the GPU's streaming multiprocessors as a PCIe master: a kernel's
// loads and stores of host memory, one platform.GPU.SMRequestSize line a
// transaction.
func (g *GPU) SMs() Master {
	return Master{port: g.port, request: int64(g.Spec.SMRequestSize()), hub: g.Spec.HubLatency.V, outstanding: g.Spec.Outstanding()}
}

// DMA is the device's DMA engine as a PCIe master.
func (d *Device) DMA() Master { return Master{port: d.port, outstanding: d.Spec.OutstandingReads.V} }

// tlpLink is the transaction-layer view of one PCIe link.
type tlpLink struct {
	payload, readReq, overhead, ack float64
}

func newTLPLink(l platform.PCIeLink) *tlpLink {
	if l.Bandwidth.V != 0 {
		// Not PCIe (an on-chip port given by its bandwidth): no TLPs.
		return nil
	}
	return &tlpLink{payload: float64(l.Payload()), readReq: float64(l.ReadRequest()), overhead: float64(l.Overhead()),
		ack: float64(l.Ack())}
}

// cost is the link capacity one byte of data takes in TLPs of payload p,
// in units of the link's rate: the rate is the payload rate at
// Max_Payload_Size, so a full-size TLP costs 1 and a smaller one more.
func (t *tlpLink) cost(p float64) float64 {
	return (p + t.overhead) / p * t.payload / (t.payload + t.overhead)
}

// DMARoute is Route(src, dst) as master's transactions load it. On every
// PCIe link of the path the data travels as TLPs no bigger than the
// link's Max_Payload_Size, or the master's request size where that is
// smaller, so a smaller request costs more of the link per byte (the
// link's rate is calibrated at Max_Payload_Size). The opposite direction
// of each PCIe link carries an Ack DLLP per data TLP and, when the master
// reads (dst is its own memory or side, the data coming back as
// completions), one request header per read request: what a copy in the
// other direction loses to them. A master at neither end (a GPU's engine
// moving host memory to another GPU) is treated as writing.
func (m *Machine) DMARoute(src, dst Endpoint, by Master) (fabric.Route, error) {
	r, err := m.Route(src, dst)
	if err != nil || by.port == nil {
		return r, err
	}
	read := m.attachment(dst).port == by.port
	hops := make([]fabric.Hop, 0, 2*len(r.Hops))
	for _, h := range r.Hops {
		t := m.tlp[h.Link]
		if t == nil {
			hops = append(hops, h)
			// A read over NVLink sends a header-only request packet
			// the other way per packet of data.
			if nv, ok := m.nvlink[h.Link]; ok && read {
				hops = append(hops, fabric.Hop{Link: h.Link, Dir: h.Dir.Reverse(), Load: true, Weight: weightOf(h) * nv.request()})
			}
			continue
		}
		// A master with a request size of its own (the SMs) moves and
		// asks for that much a TLP; a DMA engine uses the link's sizes.
		size, req := t.payload, t.readReq
		if by.request > 0 {
			size, req = min(size, float64(by.request)), float64(by.request)
		}
		w := h.Weight
		if w == 0 {
			w = 1
		}
		h.Weight = w * t.cost(size)
		hops = append(hops, h)
		// The other direction carries an Ack per data TLP and, for a
		// read, a request header per request.
		if back := t.back(size, req, read); back > 0 {
			hops = append(hops, fabric.Hop{Link: h.Link, Dir: h.Dir.Reverse(), Load: true, Weight: w * back})
		}
	}
	r.Hops = hops
	return r, nil
}

// back is what data in TLPs of payload size puts on the link's other
// direction per byte, in units of the link's rate: an Ack per TLP and,
// for a read, a request header per req bytes.
func (t *tlpLink) back(size, req float64, read bool) float64 {
	b := t.ack / size
	if read {
		b += t.overhead / req
	}
	return b * t.payload / (t.payload + t.overhead)
}

// ReverseLoad is what a copy engine's transfer over link l puts on the
// link's other direction per byte of data, in units of the link's rate:
// an Ack per Max_Payload_Size TLP and, for a read, a request header per
// Max_Read_Request_Size. Two copies against each other on l each run at
// 1/(1+ReverseLoad(l, true)) of it, the reads' requests and the writes'
// Acks sharing the upstream direction with the written data. 0 for a
// link that is not PCIe.
func ReverseLoad(l platform.PCIeLink, read bool) float64 {
	t := newTLPLink(l)
	if t == nil {
		return 0
	}
	return t.back(t.payload, t.readReq, read)
}

package rdma

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/sim"
)

// Cable is what joins two ports: its one-way latency, with where the
// number comes from.
type Cable struct {
	Latency sim.Time
	Source  string
}

// DefaultCable is a 2 m passive copper direct-attach cable: signals
// cross twinax at about 0.7 c, ~4.8 ns a metre (IEEE 802.3 clause 92's
// cable assemblies), rounded to 5 ns a metre. The HCAs' own port
// latency (SerDes, MAC) is not modelled.
var DefaultCable = Cable{Latency: 10 * sim.Nanosecond, Source: "2 m direct-attach copper, ~5 ns/m propagation (IEEE 802.3 clause 92 twinax)"}

// Wire is two HCAs' ports joined by a cable: one full-duplex link at the
// slower port's line rate, in a fabric of its own on the hosts' shared
// engine, that every message's packets cross (shared by flows, max-min
// fair, as every link is).
type Wire struct {
	Fabric *fabric.Fabric
	Link   *fabric.Link
	a, b   *Device
	cable  Cable
}

type port struct {
	w    *Wire
	peer *Device
	// out and in are the directions this side sends and receives on.
	out fabric.Dir
}

// ErrEngine is wrapped by Connect for hosts on different engines.
var ErrEngine = errors.New("hosts do not share an engine")

// Connect joins a's and b's ports by cable c. The two hosts must run
// on one engine (machine.Options.Engine); a port takes one cable
// (EBUSY).
func Connect(a, b *Device, c Cable) (*Wire, error) {
	call := fmt.Sprintf("connect %s/%s — %s/%s", a.env.Machine.Spec.Name, a.name, b.env.Machine.Spec.Name, b.name)
	switch {
	case a == b:
		return nil, fmt.Errorf("%s: one port: %w", call, syscall.EINVAL)
	case a.port != nil || b.port != nil:
		return nil, fmt.Errorf("%s: a port is cabled already: %w", call, syscall.EBUSY)
	case a.env.Machine.Engine != b.env.Machine.Engine:
		return nil, fmt.Errorf("%s: %w", call, ErrEngine)
	case c.Latency < 0:
		return nil, fmt.Errorf("%s: negative latency: %w", call, syscall.EINVAL)
	}
	eng := a.env.Machine.Engine
	f := fabric.New(eng, fabric.Factors{})
	rate := min(a.LineRate(), b.LineRate())
	name := a.env.Machine.Spec.Name + "." + a.name + "-" + b.env.Machine.Spec.Name + "." + b.name
	w := &Wire{Fabric: f, cable: c}
	w.Link = f.Connect(name, f.Node(name+".a"), f.Node(name+".b"), rate, c.Latency, fabric.FullDuplex)
	w.a, w.b = a, b
	a.port = &port{w: w, peer: b, out: fabric.AtoB}
	b.port = &port{w: w, peer: a, out: fabric.BtoA}
	return w, nil
}

// Cable is the wire's cable.
func (w *Wire) Cable() Cable { return w.cable }

// send starts bytes of packets over the wire from this side and calls
// done when the last has arrived; it returns the cable's latency.
func (p *port) send(name string, bytes int64, done func()) sim.Time {
	r := fabric.Route{Hops: []fabric.Hop{{Link: p.w.Link, Dir: p.out, Weight: 1}}}
	fl := p.w.Fabric.Start(name, r, bytes)
	fl.Done().OnComplete(done)
	return p.w.Link.Latency()
}

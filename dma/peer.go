package dma

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
)

// Peer-to-peer DMA. A device's bus address may name no RAM but another
// PCIe agent's memory window: a GPU's BAR1, through which
// nvidia_p2p_get_pages exposes 64 KiB pages of VRAM to third-party
// devices (GPUDirect RDMA). The layer knows such windows as PeerMemory:
// an access that translates into one lands in the memory behind it
// (versions, payload bytes), and a transfer naming one takes the
// peer-to-peer path with its rules (PeerRule).

// PeerMemory is a window of PCIe address space with memory behind it.
type PeerMemory interface {
	// Name names the window ("gpu0 BAR1").
	Name() string
	// Contains says whether pa lies in the window.
	Contains(pa mem.PhysAddr) bool
	// Resolve appends the memory behind [pa, pa+size) to out; a part of
	// the window that maps nothing now is an error (the agent answers
	// with Unsupported Request).
	Resolve(out []mem.PhysRange, pa mem.PhysAddr, size uint64) ([]mem.PhysRange, error)
	// Endpoint is the memory's end of a route (a GPU's VRAM).
	Endpoint() machine.Endpoint
}

// ErrPeerRefused is wrapped by a transfer whose peer-to-peer path the
// platform does not carry (across sockets).
var ErrPeerRefused = errors.New("peer-to-peer path not supported")

// errNotPeer: the address is neither RAM nor in a peer window.
var errNotPeer = errors.New("not RAM")

// AddPeerMemory makes pm's window reachable by every device's DMA.
func (x *DMA) AddPeerMemory(pm PeerMemory) { x.peers = append(x.peers, pm) }

// PeerAt is the window holding pa, or nil.
func (x *DMA) PeerAt(pa mem.PhysAddr) PeerMemory {
	for _, pm := range x.peers {
		if pm.Contains(pa) {
			return pm
		}
	}
	return nil
}

// resolvePeers replaces, in out[n:], every range that is no RAM but
// lies in a peer window by the memory behind it. A range that is
// neither is the error.
func (x *DMA) resolvePeers(out []mem.PhysRange, n int) ([]mem.PhysRange, mem.PhysAddr, error) {
	var tail []mem.PhysRange
	for i, r := range out[n:] {
		if x.isRAM(r.Start, r.Size) {
			if tail != nil {
				tail = append(tail, r)
			}
			continue
		}
		pm := x.PeerAt(r.Start)
		if pm == nil {
			return out, r.Start, errNotPeer
		}
		if tail == nil {
			tail = append([]mem.PhysRange(nil), out[n:n+i]...)
		}
		var err error
		if tail, err = pm.Resolve(tail, r.Start, r.Size); err != nil {
			return out, r.Start, fmt.Errorf("%s: %w: %w", pm.Name(), err, mem.ErrBadAddr)
		}
	}
	if tail == nil {
		return out, 0, nil
	}
	return append(out[:n], tail...), 0, nil
}

// PeerRule is how the platform carries peer-to-peer traffic of a given
// path. NVIDIA's GPUDirect RDMA guide ("Supported Systems"): with only
// PCIe switches on the path it performs best; through a single CPU/IOH
// it works but worse (peer reads especially); across QPI/HT it "may be
// extremely performance-limited or even not work reliably". The model:
// below one switch at the links' rate; through one root complex capped
// at its p2p_efficiency of the narrowest link on the way; across
// sockets refused (ErrPeerRefused), or, where a caller says the
// platform carries it (AllowCrossSocket), capped at that fraction.
type PeerRule struct {
	Path machine.PeerPath
	// Cap is the rate cap in bytes/s (0: none).
	Cap float64
}

// AllowCrossSocket, when set, carries cross-socket peer traffic capped
// at CrossSocketEfficiency of the narrowest link instead of refusing it.
func (x *DMA) AllowCrossSocket(eff float64) { x.crossSocket = eff }

// CrossSocketPeers is the efficiency AllowCrossSocket set; 0 refuses.
func (x *DMA) CrossSocketPeers() float64 { return x.crossSocket }

// peer prepares t when one of its spans names a peer window: the
// window's memory becomes the end it reads or writes (the route is the
// peer path, whatever Src or Dst said), and the platform's rule caps or
// refuses it. It returns t itself, unchanged, otherwise (and for a
// transfer with a given route).
func (d *Device) peer(t *Transfer) (*Transfer, *PeerRule, error) {
	x := d.dma
	if len(x.peers) == 0 || t.Route != nil {
		return t, nil, nil
	}
	// Only an untranslated master names a peer window by its bus
	// address: behind a translating IOMMU the BAR1 address is an IOVA no
	// one mapped, and the access faults there (GPUDirect RDMA does not
	// work with the IOMMU translating).
	if !d.direct {
		return t, nil, nil
	}
	at := func(spans []Span) PeerMemory {
		for _, s := range spans {
			if s.Local {
				continue
			}
			if pa := mem.PhysAddr(s.Bus); !x.isRAM(pa, 1) {
				if pm := x.PeerAt(pa); pm != nil {
					return pm
				}
			}
		}
		return nil
	}
	src, dst := at(t.Read), at(t.Write)
	if src == nil && dst == nil {
		return t, nil, nil
	}
	c := *t
	if src != nil {
		c.Src = src.Endpoint()
	}
	if dst != nil {
		c.Dst = dst.Endpoint()
	}
	path, err := x.mach.PeerPath(c.Src, c.Dst)
	if err != nil {
		return t, nil, fmt.Errorf("dma: %s: transfer %s: %w", d.name, t.Name, err)
	}
	rule := &PeerRule{Path: path}
	route, err := d.route(&c)
	if err != nil {
		return t, nil, err
	}
	narrow := 0.0
	for _, h := range route.Hops {
		if c := h.Link.Effective(); narrow == 0 || c < narrow {
			narrow = c
		}
	}
	switch path.Kind {
	case machine.PeerRootComplex:
		for _, rc := range x.mach.Spec.RootComplexes {
			if rc.Name != path.At {
				continue
			}
			// The root complex forwards peer-to-peer requests at a share
			// of its rate, one resource that every peer flow through it
			// shares (a flow's own cap would let two flows take twice
			// the share): a link of that capacity in the route.
			if l := x.p2pLink(rc.Name, narrow*rc.P2P()); l != nil {
				route.Hops = append(slices.Clone(route.Hops), fabric.Hop{Link: l, Dir: fabric.AtoB})
				c.Route = &route
				rule.Cap = min(narrow, l.Effective())
			} else {
				rule.Cap = narrow * rc.P2P()
			}
		}
	case machine.PeerCrossSocket:
		if x.crossSocket <= 0 {
			return t, rule, fmt.Errorf("dma: %s: transfer %s: %v ↔ %v through %s: %w", d.name, t.Name, c.Src, c.Dst, path.At, ErrPeerRefused)
		}
		rule.Cap = narrow * x.crossSocket
	}
	if rule.Cap > 0 && c.Route == nil {
		// Applied with the master's own read limit (readLimit): the
		// lower of the two binds.
		c.rateCap = rule.Cap
	}
	return &c, rule, nil
}

// p2pLink is root complex rc's peer-to-peer forwarding, made on first
// use with capacity rate (p2p_efficiency times the narrowest link of
// the first peer route through it: a root port's, the same for every
// port of the presets), off every other route (two nodes of its own);
// peer routes through rc add it as a hop. Nil for a rate of zero.
func (x *DMA) p2pLink(rc string, rate float64) *fabric.Link {
	f := x.mach.Fabric
	name := rc + ".p2p"
	if l := f.Link(name); l != nil {
		return l
	}
	if !(rate > 0) {
		return nil
	}
	return f.Connect(name, f.Node(name+".in"), f.Node(name+".out"), rate, 0, fabric.FullDuplex)
}

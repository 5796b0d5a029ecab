package platform

import "github.com/dmalab/dmalab/sim"

// The cost of a CPU access to another node's memory follows from two
// mechanisms, not from a factor.
//
// Latency: an idle load from a core on node cpu to memory on node home
// costs home's DRAM latency plus the round trip over the socket links
// between them (the request out, the data back): LoadLatency.
//
// Bandwidth: a core keeps a bounded number of cache-line fills in
// flight (Intel's L1D line fill buffers: Intel 64 and IA-32
// Architectures Optimization Reference Manual), so by Little's law one
// thread streams lines-in-flight × line size / load latency. The number
// of fills in flight is the same whichever memory it reads, so a
// thread's rate to remote memory is its local rate scaled by local
// latency / remote latency (ThreadRate); the socket link's share, when
// lower, caps it further (the machine's fabric decides that, shared
// with every other flow crossing the link).

// SocketPath is the shortest path over socket links from node a to
// node b, as indices into SocketLinks (breadth-first, links in spec
// order, so it is deterministic); nil when a == b or no path exists.
func (s *Spec) SocketPath(a, b int) []int {
	if a == b {
		return nil
	}
	type via struct{ from, link int }
	prev := map[int]via{a: {-1, -1}}
	queue := []int{a}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n == b {
			break
		}
		for i, l := range s.SocketLinks {
			next := -1
			switch n {
			case l.A:
				next = l.B
			case l.B:
				next = l.A
			}
			if next < 0 {
				continue
			}
			if _, seen := prev[next]; seen {
				continue
			}
			prev[next] = via{n, i}
			queue = append(queue, next)
		}
	}
	if _, ok := prev[b]; !ok {
		return nil
	}
	var path []int
	for n := b; n != a; n = prev[n].from {
		path = append(path, prev[n].link)
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

// SocketLatency is the one-way latency over the socket links from node
// a to node b: the sum of their latencies along SocketPath.
func (s *Spec) SocketLatency(a, b int) sim.Time {
	var t sim.Time
	for _, i := range s.SocketPath(a, b) {
		t += s.SocketLinks[i].Latency.V
	}
	return t
}

// LoadLatency is the idle load latency of a core on node cpu reading
// memory on node home: home's DRAM latency, plus the round trip over
// the socket links when home is another node.
func (s *Spec) LoadLatency(cpu, home int) sim.Time {
	return s.Nodes[home].DRAMLatency.V + 2*s.SocketLatency(cpu, home)
}

// ThreadRate is what one thread on node cpu that achieves local on its
// own node's memory achieves on memory of node home, by Little's law
// with a fixed number of line fills in flight: local × LoadLatency(cpu,
// cpu) / LoadLatency(cpu, home). It is local when home is cpu, or when
// the local latency is not given (0: no basis for the scaling).
func (s *Spec) ThreadRate(cpu, home int, local Rate) Rate {
	if cpu == home {
		return local
	}
	l, r := s.LoadLatency(cpu, cpu), s.LoadLatency(cpu, home)
	if l <= 0 || r <= l {
		return local
	}
	return Rate(float64(local) * float64(l) / float64(r))
}

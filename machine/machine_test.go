package machine

import (
	"strings"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

func build(t *testing.T, preset string) *Machine {
	t.Helper()
	spec, err := platform.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// hops renders a route as "link:dir" steps, with the weight when not 1.
func hops(r fabric.Route) string {
	var s []string
	for _, h := range r.Hops {
		step := h.Link.Name() + ":" + h.Dir.String()
		if h.Link.Sharing() == fabric.Shared {
			step = h.Link.Name()
		}
		if h.Weight != 1 {
			step += "×2"
		}
		s = append(s, step)
	}
	return strings.Join(s, " ")
}

func mustRoute(t *testing.T, m *Machine, a, b Endpoint) string {
	t.Helper()
	r, err := m.Route(a, b)
	if err != nil {
		t.Fatalf("Route(%v, %v): %v", a, b, err)
	}
	return hops(r)
}

func gpuByName(t *testing.T, m *Machine, name string) *GPU {
	t.Helper()
	for _, g := range m.GPUs {
		if g.Name == name {
			return g
		}
	}
	t.Fatalf("no GPU %s", name)
	return nil
}

func TestRoutesH200(t *testing.T) {
	m := build(t, "h200-pcie")
	host, _ := m.HostMemory(0)
	g := m.GPUs[0]
	cases := []struct {
		name     string
		src, dst Endpoint
		want     string
	}{
		{"h2d", host, g.Memory(), "node0.dram rc0:A→B gpu0.pcie:A→B gpu0.hbm"},
		{"d2h", g.Memory(), host, "gpu0.hbm gpu0.pcie:B→A rc0:B→A node0.dram"},
		{"d2d reads and writes VRAM", g.Memory(), g.Memory(), "gpu0.hbm×2"},
		{"host memcpy", host, host, "node0.dram×2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := mustRoute(t, m, c.src, c.dst); got != c.want {
				t.Errorf("route\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestRoutesTwoSockets checks the tree walk: peers behind one switch
// never touch the root complex; across sockets the socket link is
// crossed; far host memory adds the socket link to a host copy.
func TestRoutesTwoSockets(t *testing.T) {
	m := build(t, "2s-4gpu-pcie")
	spec := m.Spec
	g0, g1 := m.GPUs[0], m.GPUs[1]
	var far *GPU
	for _, g := range m.GPUs {
		if g.Node != g0.Node {
			far = g
			break
		}
	}
	if far == nil {
		t.Fatal("2s-4gpu-pcie has no GPU on the second socket")
	}
	sw0, _, err := spec.Uplink(g0.Name)
	if err != nil {
		t.Fatal(err)
	}
	p1, _, _ := spec.Uplink(g1.Name)
	if p1 != sw0 {
		t.Fatalf("gpu %s and %s are not behind one switch (%s, %s)", g0.Name, g1.Name, sw0, p1)
	}
	peer := mustRoute(t, m, g0.Memory(), g1.Memory())
	want := g0.Name + ".hbm " + g0.Name + ".pcie:B→A " + g1.Name + ".pcie:A→B " + g1.Name + ".hbm"
	if peer != want {
		t.Errorf("peer behind one switch\n got %s\nwant %s", peer, want)
	}
	cross := mustRoute(t, m, g0.Memory(), far.Memory())
	if !strings.Contains(cross, spec.SocketLinks[0].Name+":") || !strings.Contains(cross, sw0+".pcie:B→A") {
		t.Errorf("peer across sockets does not climb to the socket link: %s", cross)
	}
	h1, _ := m.HostMemory(1)
	h0, _ := m.HostMemory(0)
	local := mustRoute(t, m, h0, g0.Memory())
	remote := mustRoute(t, m, h1, g0.Memory())
	if strings.Contains(local, spec.SocketLinks[0].Name) || !strings.Contains(remote, spec.SocketLinks[0].Name+":B→A") {
		t.Errorf("local %s / remote %s: only the remote route should cross the socket link, from node1 to node0", local, remote)
	}
	// A route and its reverse cross the same links the other way.
	back, _ := m.Route(far.Memory(), g0.Memory())
	fwd, _ := m.Route(g0.Memory(), far.Memory())
	if len(back.Hops) != len(fwd.Hops) {
		t.Fatalf("route lengths differ: %d and %d", len(fwd.Hops), len(back.Hops))
	}
	for i, h := range fwd.Hops {
		r := back.Hops[len(back.Hops)-1-i]
		if r.Link != h.Link || (h.Link.Sharing() == fabric.FullDuplex && r.Dir != h.Dir.Reverse()) {
			t.Errorf("hop %d: %s:%s forward, %s:%s back", i, h.Link.Name(), h.Dir, r.Link.Name(), r.Dir)
		}
	}
	// A NIC reaches a GPU behind the same switch without the root complex.
	nic := m.Devices[0]
	if got := mustRoute(t, m, nic.Side(), g0.Memory()); strings.Contains(got, "rc") {
		t.Errorf("NIC to GPU behind one switch goes through a root complex: %s", got)
	}
}

func TestRoutesNVLink(t *testing.T) {
	m := build(t, "dgx-h100")
	a, b := m.GPUs[0], m.GPUs[7]
	got := mustRoute(t, m, a.Memory(), b.Memory())
	if !strings.Contains(got, "nvlink.") || strings.Contains(got, ".pcie") {
		t.Errorf("peer copy on an NVLink machine does not take NVLink only: %s", got)
	}
	if n := strings.Count(got, "nvlink."); n != 2 {
		t.Errorf("NVSwitch route has %d NVLink hops, want 2 (up to the switch, down to the peer): %s", n, got)
	}
	// Host traffic still takes PCIe.
	h, _ := m.HostMemory(a.Node)
	if got := mustRoute(t, m, h, a.Memory()); strings.Contains(got, "nvlink") {
		t.Errorf("host copy took NVLink: %s", got)
	}
}

func TestHostMemoryAndGPUErrors(t *testing.T) {
	m := build(t, "h200-pcie")
	if _, err := m.HostMemory(1); err == nil || !strings.Contains(err.Error(), "no node 1") {
		t.Errorf("HostMemory(1) = %v", err)
	}
	if _, err := m.GPU(1); err == nil || !strings.Contains(err.Error(), "no GPU 1") {
		t.Errorf("GPU(1) = %v", err)
	}
	if _, err := m.Route(Endpoint{}, m.GPUs[0].Memory()); err == nil {
		t.Error("Route from an unset endpoint succeeded")
	}
}

func TestInvalidSpecRejected(t *testing.T) {
	spec, _ := platform.Preset("h200-pcie")
	spec.GPUs[0].Parent = "nowhere"
	if _, err := New(spec, 1); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("New with a missing parent: %v", err)
	}
}

// TestCPUCopy: a memcpy is capped at the node's one-thread rate, crosses
// the DRAM bus twice (read and write), and is CPU time of its process.
func TestCPUCopy(t *testing.T) {
	m := build(t, "h200-pcie")
	var took, cpu sim.Time
	m.Engine.Spawn("memcpy", func(p *sim.Proc) {
		if err := m.CPUCopy(p, "c", 0, 1<<30); err != nil {
			t.Error(err)
		}
		took, cpu = p.Now(), p.CPUTime()
	})
	m.Engine.Run()
	rate := float64(m.Nodes[0].Spec.MemcpyRate.V)
	want := m.Nodes[0].Spec.DRAMLatency.V + sim.TransferTime(1<<30, rate)
	if took < want-sim.Nanosecond || took > want+sim.Nanosecond {
		t.Errorf("1 GiB memcpy took %v, want %v (latency + bytes at %.4g B/s)", took, want, rate)
	}
	if cpu != took {
		t.Errorf("CPU time %v, want the whole copy %v", cpu, took)
	}
	if st := m.Fabric.Stats(m.Nodes[0].DRAM); st.Bytes[0]+st.Bytes[1] < 2*(1<<30)-1 {
		t.Errorf("DRAM carried %v bytes, want twice the copy", st.Bytes)
	}
	m.Engine.Spawn("bad", func(p *sim.Proc) {
		if m.CPUCopy(p, "x", 3, 1) == nil || m.CPUCopy(p, "y", 0, -1) == nil {
			t.Error("bad node or size accepted")
		}
	})
	m.Engine.Run()
}

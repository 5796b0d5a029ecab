package machine

import (
	"fmt"
	"math"
	"testing"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// near says got is within rel of want.
func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestRemoteReadOneThread: one thread streaming another node's memory
// pays the idle remote latency once and then runs at its local rate ×
// local latency / remote latency (Little's law over a fixed number of
// line fills in flight); on its own node, at its local rate.
func TestRemoteReadOneThread(t *testing.T) {
	for _, preset := range []string{"2s-4gpu-pcie", "dgx-h100"} {
		t.Run(preset, func(t *testing.T) {
			m := build(t, preset)
			s := m.Spec
			local := float64(s.Nodes[0].MemcpyRate.V)
			lat0, lat1 := s.LoadLatency(0, 0), s.LoadLatency(0, 1)
			if want := s.Nodes[1].DRAMLatency.V + 2*s.SocketLinks[0].Latency.V; lat1 != want {
				t.Fatalf("remote load latency %v, want DRAM %v + 2 × link", lat1, want)
			}
			const size = 1 << 30
			var remote, near0 sim.Time
			m.Engine.Spawn("t", func(p *sim.Proc) {
				t0 := p.Now()
				if err := m.CPUAccess(p, "remote", 0, 1, size, false, local); err != nil {
					t.Error(err)
				}
				t1 := p.Now()
				if err := m.CPUAccess(p, "local", 0, 0, size, false, local); err != nil {
					t.Error(err)
				}
				remote, near0 = t1-t0, p.Now()-t1
			})
			m.Engine.Run()
			wantRate := local * float64(lat0) / float64(lat1)
			got := size / (remote - lat1).Seconds()
			if !near(got, wantRate, 1e-6) {
				t.Errorf("remote stream %.4g B/s, want local %.4g × %v / %v = %.4g", got, local, lat0, lat1, wantRate)
			}
			if got := size / (near0 - lat0).Seconds(); !near(got, local, 1e-6) {
				t.Errorf("local stream %.4g B/s, want %.4g", got, local)
			}
			if st := m.Fabric.Stats(m.socketLinks[0].link); !near(st.Bytes[0]+st.Bytes[1], size, 1e-6) {
				t.Errorf("socket link carried %v bytes, want the remote read's %d", st.Bytes, size)
			}
		})
	}
}

// TestRemoteReadsShareSocketLinkWithGPU: CPU threads reading node 1's
// memory from node 0 and a GPU on node 0 copying from node 1's memory
// cross the one socket link in the same direction and share it max-min
// fairly: few threads keep their Little's-law cap and the GPU its PCIe
// rate; many threads saturate the link and everyone gets an equal
// share.
func TestRemoteReadsShareSocketLinkWithGPU(t *testing.T) {
	for _, threads := range []int{4, 40} {
		t.Run(fmt.Sprint(threads, " threads"), func(t *testing.T) {
			m := build(t, "2s-4gpu-pcie")
			s := m.Spec
			local := float64(s.Nodes[0].MemcpyRate.V)
			upi := float64(s.SocketLinks[0].Rate())
			capThread := float64(s.ThreadRate(0, 1, s.Nodes[0].MemcpyRate.V))
			gpu := m.GPUs[0]
			if gpu.Node != 0 {
				t.Fatalf("gpu0 on node %d, want 0", gpu.Node)
			}
			pcie := float64(s.GPUs[0].Link.Rate())
			const size = 1 << 28
			src, _ := m.HostMemory(1)
			r, err := m.Route(src, gpu.Memory())
			if err != nil {
				t.Fatal(err)
			}
			took := make([]sim.Time, threads)
			var gpuFlow *fabric.Flow
			m.Engine.Spawn("main", func(p *sim.Proc) {
				gpuFlow = m.Fabric.Start("h2d", r, size)
				for i := range threads {
					p.Spawn(fmt.Sprint("reader", i), func(q *sim.Proc) {
						if err := m.CPUAccess(q, "read", 0, 1, size, false, local); err != nil {
							t.Error(err)
						}
						took[i] = q.Now()
					})
				}
			})
			m.Engine.Run()
			lat := s.LoadLatency(0, 1)
			gpuTook := gpuFlow.End() - gpuFlow.ActiveAt()
			if threads*int(capThread)+int(pcie) < int(upi) {
				// Under the link's capacity: everyone keeps its own cap.
				for i, d := range took {
					if got := size / (d - lat).Seconds(); !near(got, capThread, 1e-3) {
						t.Errorf("reader %d: %.4g B/s, want its cap %.4g", i, got, capThread)
					}
				}
				if got := size / gpuTook.Seconds(); !near(got, pcie, 1e-3) {
					t.Errorf("GPU copy %.4g B/s, want its PCIe rate %.4g", got, pcie)
				}
				return
			}
			// Saturated: threads + 1 equal shares of the link, below
			// every flow's own cap.
			share := upi / float64(threads+1)
			if share >= capThread || share >= pcie {
				t.Fatalf("test set-up: share %.4g not below the caps", share)
			}
			for i, d := range took {
				if got := size / (d - lat).Seconds(); !near(got, share, 2e-3) {
					t.Errorf("reader %d: %.4g B/s, want the link's share %.4g", i, got, share)
				}
			}
			if got := size / gpuTook.Seconds(); !near(got, share, 2e-3) {
				t.Errorf("GPU copy %.4g B/s, want the link's share %.4g", got, share)
			}
		})
	}
}

// TestMemAccessCostByNode: mem's CPU accesses on a machine cost by the
// accessing CPU's node and the memory's: local exactly as before (size
// at the memcpy rate), a small remote read at least the idle remote
// latency, a large one at the remote one-thread rate; a copy from
// remote memory crosses the socket link.
func TestMemAccessCostByNode(t *testing.T) {
	m := build(t, "dgx-h100")
	s := m.Spec
	rate := float64(s.Nodes[0].MemcpyRate.V)
	pa0, err := m.Mem.AllocPages(0, 1<<20, mem.ZoneNormal)
	if err != nil {
		t.Fatal(err)
	}
	pa1, err := m.Mem.AllocPages(1, 1<<20, mem.ZoneNormal)
	if err != nil {
		t.Fatal(err)
	}
	// A source no access has touched, so that the copy reads DRAM.
	fresh, err := m.Mem.AllocPages(1, 1<<19, mem.ZoneNormal)
	if err != nil {
		t.Fatal(err)
	}
	va0, va1 := m.Mem.PhysToVirt(pa0), m.Mem.PhysToVirt(pa1)
	var small0, small1, big1, w1, cp sim.Time
	m.Engine.Spawn("cpu", func(p *sim.Proc) {
		lap := func(f func()) sim.Time { t0 := p.Now(); f(); return p.Now() - t0 }
		small0 = lap(func() { m.Mem.Read(p, 0, va0, 64) })
		small1 = lap(func() { m.Mem.Read(p, 0, va1, 64) })
		big1 = lap(func() { m.Mem.Read(p, 0, va1+4096, 1<<19) })
		w1 = lap(func() { m.Mem.Write(p, 0, va1+(1<<19), 1<<19) })
		cp = lap(func() { m.Mem.CopyPhys(p, 0, pa0+(1<<19), fresh, 1<<19) })
	})
	m.Engine.Run()
	if want := sim.TransferTime(64, rate); small0 != want {
		t.Errorf("local 64 B read %v, want %v as before", small0, want)
	}
	lat := s.LoadLatency(0, 1)
	if small1 < lat || small1 > lat+sim.TransferTime(64, rate/2) {
		t.Errorf("remote 64 B read %v, want the remote latency %v and little more", small1, lat)
	}
	remoteRate := float64(s.ThreadRate(0, 1, s.Nodes[0].MemcpyRate.V))
	if want := lat + sim.TransferTime(1<<19, remoteRate); !near(float64(big1), float64(want), 1e-3) {
		t.Errorf("remote 512 KiB read %v, want %v", big1, want)
	}
	// A cached write's line fills come from node 1 as a read's do.
	if !near(float64(w1), float64(big1), 1e-3) {
		t.Errorf("remote 512 KiB write %v, want the read's %v", w1, big1)
	}
	if cp <= sim.TransferTime(1<<19, rate) {
		t.Errorf("copy from remote memory %v, want more than a local copy's %v", cp, sim.TransferTime(1<<19, rate))
	}
	st := m.Fabric.Stats(m.socketLinks[0].link)
	if got, want := st.Bytes[0]+st.Bytes[1], float64(64+2*(1<<19)+(1<<19)); !near(got, want, 1e-6) {
		t.Errorf("socket link carried %v bytes, want %v (two reads, a write's fills, a copy's source)", got, want)
	}
}

// TestRemoteCostDeterministic: the same contended run twice gives the
// same instants.
func TestRemoteCostDeterministic(t *testing.T) {
	run := func() []sim.Time {
		m := build(t, "2s-4gpu-pcie")
		local := float64(m.Spec.Nodes[0].MemcpyRate.V)
		var out []sim.Time
		for i := range 8 {
			m.Engine.Spawn(fmt.Sprint("r", i), func(p *sim.Proc) {
				if err := m.CPUCopyBetween(p, "c", i%2, 1-i%2, i%2, int64(1+i)<<24); err != nil {
					t.Error(err)
				}
				if err := m.CPUAccess(p, "a", i%2, 1-i%2, int64(1+i)<<22, i%3 == 0, local); err != nil {
					t.Error(err)
				}
				out = append(out, p.Now())
			})
		}
		m.Engine.Run()
		return out
	}
	a, b := run(), run()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("two runs differ:\n%v\n%v", a, b)
	}
}

// TestCPUCopyBetween: a copy within one node is CPUCopy; from a remote
// node it is capped by the mean of the two load latencies and crosses
// the socket link once.
func TestCPUCopyBetween(t *testing.T) {
	m := build(t, "2s-4gpu-pcie")
	s := m.Spec
	const size = 1 << 30
	var local, remote sim.Time
	m.Engine.Spawn("c", func(p *sim.Proc) {
		t0 := p.Now()
		if err := m.CPUCopyBetween(p, "l", 1, 1, 1, size); err != nil {
			t.Error(err)
		}
		t1 := p.Now()
		if err := m.CPUCopyBetween(p, "r", 0, 1, 0, size); err != nil {
			t.Error(err)
		}
		local, remote = t1-t0, p.Now()-t1
		if m.CPUCopyBetween(p, "x", 0, 5, 0, 1) == nil || m.CPUCopyBetween(p, "y", 0, 1, 0, -1) == nil {
			t.Error("bad node or size accepted")
		}
	})
	m.Engine.Run()
	rate := float64(s.Nodes[0].MemcpyRate.V)
	if want := s.Nodes[1].DRAMLatency.V + sim.TransferTime(size, rate); local != want {
		t.Errorf("local copy %v, want CPUCopy's %v", local, want)
	}
	l0, l1 := float64(s.LoadLatency(0, 0)), float64(s.LoadLatency(0, 1))
	wantRate := rate * l0 / ((l0 + l1) / 2)
	if got := size / remote.Seconds(); !near(got, wantRate, 1e-3) {
		t.Errorf("copy from remote memory %.4g B/s, want %.4g", got, wantRate)
	}
	if st := m.Fabric.Stats(m.socketLinks[0].link); !near(st.Bytes[0]+st.Bytes[1], size, 1e-6) {
		t.Errorf("socket link carried %v, want %d", st.Bytes, size)
	}
}

// TestLocalReadsShareDRAM: one thread reading its own node's memory
// takes bytes at its memcpy rate, as ever; 56 threads on one node (the
// 8480+'s cores) together get no more than the node's DRAM bandwidth,
// which they share with a GPU's DMA from the same memory.
func TestLocalReadsShareDRAM(t *testing.T) {
	const size = 4 << 20
	for _, tc := range []struct {
		threads int
		gpu     bool
	}{{1, false}, {56, false}, {56, true}} {
		t.Run(fmt.Sprintf("%d threads, gpu %v", tc.threads, tc.gpu), func(t *testing.T) {
			m := build(t, "2s-4gpu-pcie")
			n := m.Spec.Nodes[0]
			rate, dram := float64(n.MemcpyRate.V), float64(n.DRAMBandwidth.V)
			var end sim.Time
			for i := range tc.threads {
				pa, err := m.Mem.AllocPages(0, size, mem.ZoneNormal)
				if err != nil {
					t.Fatal(err)
				}
				va := m.Mem.PhysToVirt(pa)
				m.Engine.Spawn(fmt.Sprintf("t%d", i), func(p *sim.Proc) {
					if a := m.Mem.Read(p, 0, va, size); a.Err != nil {
						t.Error(a.Err)
					}
					end = max(end, p.Now())
				})
			}
			if tc.gpu {
				host, _ := m.HostMemory(0)
				r, err := m.Route(host, m.GPUs[0].Memory())
				if err != nil {
					t.Fatal(err)
				}
				m.Fabric.Start("dma", r, 1<<30)
			}
			m.Engine.Run()
			total := float64(tc.threads) * size
			got := total / end.Seconds()
			want := min(float64(tc.threads)*rate, dram)
			if tc.threads == 1 {
				if end != sim.TransferTime(size, rate) {
					t.Errorf("one thread took %v, want %v (its memcpy rate, unchanged)", end, sim.TransferTime(size, rate))
				}
				return
			}
			if got > dram*(1+1e-9) {
				t.Errorf("%d threads read %.4g B/s in aggregate, above node 0's DRAM %.4g B/s", tc.threads, got, dram)
			}
			if !tc.gpu && !near(got, want, 1e-6) {
				t.Errorf("%d threads read %.4g B/s, want the DRAM's %.4g", tc.threads, got, want)
			}
			// Max-min: the GPU's flow is one more sharer of the DRAM,
			// its fair share under what its PCIe link allows.
			if share := dram * float64(tc.threads) / float64(tc.threads+1); tc.gpu && !near(got, share, 1e-3) {
				t.Errorf("with a GPU's DMA from node 0, threads got %.4g B/s, want %.4g (%d of %d equal shares)", got, share, tc.threads, tc.threads+1)
			}
		})
	}
}

package mem

import (
	"testing"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// numaSpec is testSpec with two 1 GiB nodes, 100 ns DRAM latency each,
// joined by one 50 ns link of 2 links × 10 GB/s × 0.5 = 10 GB/s.
func numaSpec() *platform.Spec {
	s := testSpec(1<<30, 1<<30)
	for i := range s.Nodes {
		s.Nodes[i].DRAMLatency = platform.P(100*sim.Nanosecond, "test")
	}
	s.SocketLinks = []platform.SocketLink{{
		Name: "link", A: 0, B: 1, Protocol: "xgmi",
		Links:      platform.P(2, "test"),
		LinkRate:   platform.P[platform.Rate](10e9, "test"),
		Efficiency: platform.P(0.5, "test"),
		Latency:    platform.P(50*sim.Nanosecond, "test"),
	}}
	return s
}

// TestRemoteAccessClosedForm: without the machine's model, mem prices a
// CPU access by the CPU's node and the memory's: local bytes at the
// memcpy rate as always; remote ones the idle remote latency (100 ns +
// 2 × 50 ns) and then the one-thread rate scaled by 100/200 (10 GB/s →
// 5 GB/s), below the link's 10 GB/s; an uncached one scaled the same;
// an access straddling both nodes pays each part.
func TestRemoteAccessClosedForm(t *testing.T) {
	const size = 1 << 20
	tests := []struct {
		name   string
		node   int // of the memory
		cpu    int
		run    func(m *Memory, p *sim.Proc, va VirtAddr)
		want   sim.Time
		uncach bool
	}{
		{"local read", 0, 0, func(m *Memory, p *sim.Proc, va VirtAddr) { m.Read(p, 0, va, size) }, sim.TransferTime(size, 10e9), false},
		{"remote read", 1, 0, func(m *Memory, p *sim.Proc, va VirtAddr) { m.Read(p, 0, va, size) }, 200*sim.Nanosecond + sim.TransferTime(size, 5e9), false},
		{"remote write", 0, 1, func(m *Memory, p *sim.Proc, va VirtAddr) { m.Write(p, 1, va, size) }, 200*sim.Nanosecond + sim.TransferTime(size, 5e9), false},
		{"small remote read", 1, 0, func(m *Memory, p *sim.Proc, va VirtAddr) { m.Read(p, 0, va, 64) }, 200*sim.Nanosecond + sim.TransferTime(64, 5e9), false},
		{"remote uncached read", 1, 0, func(m *Memory, p *sim.Proc, va VirtAddr) { m.Read(p, 0, va, 4096) }, 200*sim.Nanosecond + sim.TransferTime(4096, 0.5e9), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(t, numaSpec(), Options{})
			pa, va := buf(t, m, tt.node, size)
			if tt.uncach {
				var err error
				if va, err = m.Remap(pa, size, Uncached); err != nil {
					t.Fatal(err)
				}
			}
			if got := inProc(m, func(p *sim.Proc) { tt.run(m, p, va) }); got != tt.want {
				t.Errorf("took %v, want %v", got, tt.want)
			}
		})
	}
}

// TestRemoteAccessStraddling: an access over memory of both nodes pays
// its local part at the local rate and its remote part as a remote
// access.
func TestRemoteAccessStraddling(t *testing.T) {
	m := newMem(t, numaSpec(), Options{})
	// Node 1's DRAM follows node 0's at 1 GiB: one range of the linear
	// map, 4 KiB on each side of the boundary.
	va := m.PhysToVirt(1<<30 - 4096)
	want := sim.TransferTime(4096, 10e9) + 200*sim.Nanosecond + sim.TransferTime(4096, 5e9)
	if got := inProc(m, func(p *sim.Proc) { m.Read(p, 0, va, 8192) }); got != want {
		t.Errorf("straddling read took %v, want %v", got, want)
	}
}

// TestRemoteAccessHook: with Options.RemoteTime, mem hands the remote
// part to it, per home node, with the direction and the local rate, and
// CopyPhys gives CopyTime the home nodes of both ends.
func TestRemoteAccessHook(t *testing.T) {
	type call struct {
		cpu, home int
		bytes     uint64
		toMemory  bool
		rate      float64
	}
	var calls []call
	var copies [][4]int
	m := newMem(t, numaSpec(), Options{
		RemoteTime: func(p *sim.Proc, cpu, home int, bytes uint64, toMemory bool, rate float64) {
			calls = append(calls, call{cpu, home, bytes, toMemory, rate})
		},
		CopyTime: func(p *sim.Proc, node, src, dst int, bytes uint64, cached bool) {
			copies = append(copies, [4]int{node, src, dst, int(bytes)})
		},
	})
	pa0, va0 := buf(t, m, 0, 8192)
	pa1, va1 := buf(t, m, 1, 8192)
	uc, err := m.Remap(pa1, 4096, Uncached)
	if err != nil {
		t.Fatal(err)
	}
	inProc(m, func(p *sim.Proc) {
		m.Read(p, 0, va0, 100) // local: no call
		m.Read(p, 0, va1, 100)
		m.Write(p, 0, uc, 8)
		m.CopyPhys(p, 1, pa0+4096, pa1+4096, 64)
	})
	want := []call{{0, 1, 100, false, 10e9}, {0, 1, 8, true, 1e9}}
	if len(calls) != len(want) || calls[0] != want[0] || calls[1] != want[1] {
		t.Errorf("RemoteTime calls %v, want %v", calls, want)
	}
	if len(copies) != 1 || copies[0] != [4]int{1, 1, 0, 64} {
		t.Errorf("CopyTime calls %v, want one (cpu 1, from node 1, to node 0, 64 B)", copies)
	}
}

// TestRemoteAccessConcurrent: a straddling access keeps its own remote
// part while another CPU's access runs during its local part (the
// counts are taken before it sleeps, not read back after from a scratch
// the other access has reused).
func TestRemoteAccessConcurrent(t *testing.T) {
	m := newMem(t, numaSpec(), Options{})
	va := m.PhysToVirt(1<<30 - 4096)
	_, local := buf(t, m, 1, 1<<20)
	want := sim.TransferTime(4096, 10e9) + 200*sim.Nanosecond + sim.TransferTime(4096, 5e9)
	var got sim.Time
	m.eng.Spawn("straddler", func(p *sim.Proc) {
		start := p.Now()
		m.Read(p, 0, va, 8192)
		got = p.Now() - start
	})
	// A node-1 CPU reading its own memory in the meantime.
	m.eng.Spawn("local", func(p *sim.Proc) { m.Read(p, 1, local, 64) })
	m.eng.Run()
	if got != want {
		t.Errorf("straddling read beside another access took %v, want %v", got, want)
	}
}

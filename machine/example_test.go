package machine_test

import (
	"fmt"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// The NUMA model on the two-socket presets, in the shape of Intel's
// Memory Latency Checker: the idle latency of one 64-byte load
// (pointer-chase style, one line at a time), one thread's stream
// bandwidth, all 56 cores of node 0 streaming node 1's memory, and a
// GPU on node 0 copying from node 1's memory alone and while those 56
// cores stream over the same UPI link.
func ExampleMachine_CPUAccess() {
	for _, name := range []string{"2s-4gpu-pcie", "dgx-h100"} {
		spec, err := platform.Preset(name)
		if err != nil {
			panic(err)
		}
		m, err := machine.New(spec, 1)
		if err != nil {
			panic(err)
		}
		local := float64(spec.Nodes[0].MemcpyRate.V)
		cores := spec.Nodes[0].Cores.V
		pa := [2]mem.PhysAddr{}
		for n := range pa {
			if pa[n], err = m.Mem.AllocPages(n, 1<<20, mem.ZoneNormal); err != nil {
				panic(err)
			}
		}
		var lat [2]sim.Time
		var bw [2]float64
		var all, gpuAlone, gpuShared, cpuShared float64
		m.Engine.Spawn("mlc", func(p *sim.Proc) {
			for n := range 2 {
				t0 := p.Now()
				m.Mem.Read(p, 0, m.Mem.PhysToVirt(pa[n]), 64)
				lat[n] = p.Now() - t0
				t0 = p.Now()
				if err := m.CPUAccess(p, "stream", 0, n, 1<<30, false, local); err != nil {
					panic(err)
				}
				bw[n] = (1 << 30) / (p.Now() - t0).Seconds()
			}
			// All cores of node 0 on node 1's memory.
			var threads []*sim.Proc
			t0 := p.Now()
			for i := range cores {
				threads = append(threads, p.Spawn(fmt.Sprint("t", i), func(q *sim.Proc) {
					if err := m.CPUAccess(q, "stream", 0, 1, 1<<28, false, local); err != nil {
						panic(err)
					}
				}))
			}
			for _, q := range threads {
				p.Join(q)
			}
			all = float64(cores) * (1 << 28) / (p.Now() - t0).Seconds()
			// A GPU copy from node 1's memory, alone, then shared.
			src, _ := m.HostMemory(1)
			r, err := m.Route(src, m.GPUs[0].Memory())
			if err != nil {
				panic(err)
			}
			fl := m.Fabric.Start("h2d", r, 1<<30)
			p.Wait(fl.Done())
			gpuAlone = (1 << 30) / (fl.End() - fl.ActiveAt()).Seconds()
			fl = m.Fabric.Start("h2d", r, 1<<34)
			threads = threads[:0]
			t0 = p.Now()
			rem := fl.Remaining()
			for i := range cores {
				threads = append(threads, p.Spawn(fmt.Sprint("u", i), func(q *sim.Proc) {
					if err := m.CPUAccess(q, "stream", 0, 1, 1<<28, false, local); err != nil {
						panic(err)
					}
				}))
			}
			for _, q := range threads {
				p.Join(q)
			}
			cpuShared = float64(cores) * (1 << 28) / (p.Now() - t0).Seconds()
			gpuShared = (rem - fl.Remaining()) / (p.Now() - t0).Seconds()
			p.Wait(fl.Done())
		})
		m.Engine.Run()
		m.Close()
		fmt.Printf("%s: UPI %.1f GB/s per direction\n", name, float64(spec.SocketLinks[0].Rate())/1e9)
		fmt.Printf("  idle latency (64 B load): local %v, remote %v (model's remote load latency %v)\n", lat[0], lat[1], spec.LoadLatency(0, 1))
		fmt.Printf("  one thread: local %.2f GB/s, remote %.2f GB/s\n", bw[0]/1e9, bw[1]/1e9)
		fmt.Printf("  %d threads on remote memory: %.1f GB/s\n", cores, all/1e9)
		fmt.Printf("  GPU copy from remote memory: alone %.1f GB/s, with %d threads %.1f GB/s (threads %.1f GB/s)\n", gpuAlone/1e9, cores, gpuShared/1e9, cpuShared/1e9)
	}
	// Output:
	// 2s-4gpu-pcie: UPI 113.8 GB/s per direction
	//   idle latency (64 B load): local 6.4ns, remote 201.055ns (model's remote load latency 190ns)
	//   one thread: local 10.00 GB/s, remote 5.79 GB/s
	//   56 threads on remote memory: 113.8 GB/s
	//   GPU copy from remote memory: alone 55.5 GB/s, with 56 threads 2.0 GB/s (threads 111.8 GB/s)
	// dgx-h100: UPI 113.8 GB/s per direction
	//   idle latency (64 B load): local 6.4ns, remote 201.055ns (model's remote load latency 190ns)
	//   one thread: local 10.00 GB/s, remote 5.79 GB/s
	//   56 threads on remote memory: 113.8 GB/s
	//   GPU copy from remote memory: alone 55.5 GB/s, with 56 threads 2.0 GB/s (threads 111.8 GB/s)
}

package numa_test

import (
	"os"

	"github.com/dmalab/dmalab/hw/numa"
	"github.com/dmalab/dmalab/hw/topo"
)

// A two-socket report (illustrative numbers), as probe --numa prints it: remote loads are slower
// and remote reads narrower, and first touch kept each node's pages local.
func ExampleReport_WriteTable() {
	pair := func(cpu, mem int, unit string, v float64) numa.Pair {
		return numa.Pair{CPUNode: cpu, MemNode: mem, CPUs: []int{cpu}, Unit: unit, Stat: numa.Stat{Median: v, Min: v, Max: v}}
	}
	rep := &numa.Report{
		Machine: numa.Machine{Hostname: "host", CPUModel: "Two-socket CPU", CPUs: 2, AllowedCPUs: "0-1", LLCBytes: 64 << 20, THP: "always", Kernel: "6.8"},
		Options: numa.ReportOpts{BufferBytes: 1 << 30, Samples: 3},
		Nodes: []topo.Node{
			{ID: 0, CPUList: "0", CPUs: 1, MemTotal: 64 << 30, MemFree: 60 << 30, Distance: []int{10, 21}},
			{ID: 1, CPUList: "1", CPUs: 1, MemTotal: 64 << 30, MemFree: 62 << 30, Distance: []int{21, 10}},
		},
		Latency:   []numa.Pair{pair(0, 0, "ns", 110.2), pair(1, 0, "ns", 181.5), pair(0, 1, "ns", 180.9), pair(1, 1, "ns", 109.8)},
		Bandwidth: []numa.Pair{pair(0, 0, "MB/s", 21000), pair(1, 0, "MB/s", 14000), pair(0, 1, "MB/s", 13900), pair(1, 1, "MB/s", 21100)},
		FirstTouch: []numa.FirstTouch{
			{Node: 0, CPU: 0, Pages: 1024, Local: 1024, Fraction: 1, ByNode: map[int]int{0: 1024}},
			{Node: 1, CPU: 1, Pages: 1024, Local: 1024, Fraction: 1, ByNode: map[int]int{1: 1024}},
		},
	}
	rep.WriteTable(os.Stdout)
	// Output:
	// NUMA probe of host: Two-socket CPU, 2 CPUs (this process may use 0-1), largest cache 64MiB, transparent huge pages "always", kernel 6.8
	// buffer 1GiB per memory node, 3 samples per measurement (median shown; min, max and every sample in --json)
	//
	// available: 2 nodes (0-1)
	// node 0 cpus: 0
	// node 0 size: 65536 MB
	// node 0 free: 61440 MB
	// node 1 cpus: 1
	// node 1 size: 65536 MB
	// node 1 free: 63488 MB
	// node distances:
	// node   0   1
	//   0:  10  21
	//   1:  21  10
	//
	// Idle latency (ns per load, pointer chase), CPU node (rows) reading memory node (columns):
	//            Numa node
	// Numa node          0         1
	//         0      110.2     180.9
	//         1      181.5     109.8
	//
	// Read bandwidth (MB/s, 1 MB/s = 1,000,000 bytes/s), CPU node (rows) reading memory node (columns):
	//            Numa node
	// Numa node          0         1
	//         0      21000     13900
	//         1      14000     21100
	//
	// First touch (default policy: a thread on the node writes each page of a new mapping):
	//   node 0 (CPU 0): 1024 of 1024 pages local (100.0%)
	//   node 1 (CPU 1): 1024 of 1024 pages local (100.0%)
}

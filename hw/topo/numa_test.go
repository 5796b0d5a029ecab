package topo

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/numactl"
)

// TestReadNUMAAlone: ReadNUMA reads the nodes alone from fake trees of one and two
// nodes and prints them as numactl -H.
func TestReadNUMAAlone(t *testing.T) {
	one := newFakeTree(t)
	one.file("sys/devices/system/node/node0/cpulist", "0-1\n")
	one.file("sys/devices/system/node/node0/meminfo", "Node 0 MemTotal:       23160608 kB\nNode 0 MemFree:        21391248 kB\n")
	one.file("sys/devices/system/node/node0/distance", "10\n")
	one.file("proc/sys/kernel/numa_balancing", "0\n")
	tests := []struct {
		name     string
		root     string
		cpus     [][]int
		balance  int
		numactlH string
	}{
		{"one node", one.root, [][]int{{0, 1}}, 0, `available: 1 nodes (0)
node 0 cpus: 0 1
node 0 size: 22617 MB
node 0 free: 20889 MB
node distances:
node   0
  0:  10
`},
		{"two sockets", twoSocket(t).root, [][]int{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}}, 1, `available: 2 nodes (0-1)
node 0 cpus: 0 1 2 3 8 9 10 11
node 0 size: 16384 MB
node 0 free: 8192 MB
node 1 cpus: 4 5 6 7 12 13 14 15
node 1 size: 16384 MB
node 1 free: 15872 MB
node distances:
node   0   1
  0:  10  21
  1:  21  10
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo, err := ReadNUMA(tt.root)
			if err != nil {
				t.Fatal(err)
			}
			if len(topo.Nodes) != len(tt.cpus) || topo.NUMABalancing != tt.balance || len(topo.Devices) != 0 {
				t.Fatalf("nodes %+v, numa_balancing %d, %d devices", topo.Nodes, topo.NUMABalancing, len(topo.Devices))
			}
			for i, n := range topo.Nodes {
				if got := n.CPUIDs(); !reflect.DeepEqual(got, tt.cpus[i]) {
					t.Errorf("node%d CPUIDs = %v, want %v", n.ID, got, tt.cpus[i])
				}
			}
			var sb strings.Builder
			if err := numactl.WriteHardware(&sb, NumactlNodes(topo.Nodes)); err != nil {
				t.Fatal(err)
			}
			if sb.String() != tt.numactlH {
				t.Errorf("numactl -H:\n%s\nwant\n%s", sb.String(), tt.numactlH)
			}
		})
	}
	if _, err := ReadNUMA(t.TempDir() + "/missing"); err == nil {
		t.Error("ReadNUMA of a missing root: no error")
	}
}

func TestNumactlNodesUnknownMemory(t *testing.T) {
	got := NumactlNodes([]Node{{ID: 3, CPUList: "5"}})
	want := []numactl.Node{{ID: 3, CPUs: []int{5}, Size: numactl.Unknown, Free: numactl.Unknown}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

package numactl_test

import (
	"fmt"
	"os"

	"github.com/dmalab/dmalab/numactl"
)

func ExampleWriteHardware() {
	numactl.WriteHardware(os.Stdout, []numactl.Node{
		{ID: 0, CPUs: []int{0, 1, 2, 3}, Size: 64 << 30, Free: 60 << 30, Distance: []int{10, 21}},
		{ID: 1, CPUs: []int{4, 5, 6, 7}, Size: 64 << 30, Free: 62 << 30, Distance: []int{21, 10}},
	})
	// Output:
	// available: 2 nodes (0-1)
	// node 0 cpus: 0 1 2 3
	// node 0 size: 65536 MB
	// node 0 free: 61440 MB
	// node 1 cpus: 4 5 6 7
	// node 1 size: 65536 MB
	// node 1 free: 63488 MB
	// node distances:
	// node   0   1
	//   0:  10  21
	//   1:  21  10
}

// Parse reads numactl's placement options as numactl(8) does, against
// the machine's nodes and CPUs; a refused word is named.
func ExampleParse() {
	top := numactl.Topology{Nodes: 2, CPUs: 112}
	a, _ := numactl.Parse("--cpunodebind=1 --membind=0", top)
	fmt.Println(a.Policy, a.Nodes, a.CPUNodes)
	a, _ = numactl.Parse("-i all -C !0-55", top)
	fmt.Println(a.Policy, a.Nodes, a)
	_, err := numactl.Parse("--membind=0 --interleave=2", top)
	fmt.Println(err)
	// Output:
	// membind [0] [1]
	// interleave [0 1] --interleave=0-1 --physcpubind=56-111
	// numactl "--interleave=2": conflicting policies: --membind=0 was given
}

package numactl_test

import (
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

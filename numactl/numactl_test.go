package numactl

import (
	"strings"
	"testing"
)

func TestWriteHardware(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		want  string
	}{
		{
			name:  "one node",
			nodes: []Node{{ID: 0, CPUs: []int{0, 1}, Size: 22617 << 20, Free: 20890 << 20, Distance: []int{10}}},
			want: `available: 1 nodes (0)
node 0 cpus: 0 1
node 0 size: 22617 MB
node 0 free: 20890 MB
node distances:
node   0
  0:  10
`,
		},
		{
			name: "two sockets, given out of order",
			nodes: []Node{
				{ID: 1, CPUs: []int{2, 3}, Size: 16 << 30, Free: Unknown, Distance: []int{21, 10}},
				{ID: 0, CPUs: []int{0, 1}, Size: 16 << 30, Free: 8 << 30, Distance: []int{10, 21}},
			},
			want: `available: 2 nodes (0-1)
node 0 cpus: 0 1
node 0 size: 16384 MB
node 0 free: 8192 MB
node 1 cpus: 2 3
node 1 size: 16384 MB
node 1 free: <not available>
node distances:
node   0   1
  0:  10  21
  1:  21  10
`,
		},
		{
			name: "memory-only node, gap in IDs, no distances",
			nodes: []Node{
				{ID: 0, CPUs: []int{0}, Size: 1 << 30, Free: 1 << 29, Distance: []int{10, 20}},
				{ID: 2, Size: 4 << 30, Free: 4 << 30},
			},
			want: `available: 2 nodes (0,2)
node 0 cpus: 0
node 0 size: 1024 MB
node 0 free: 512 MB
node 2 cpus:
node 2 size: 4096 MB
node 2 free: 4096 MB
No distance information available.
`,
		},
		{name: "no NUMA", want: "No NUMA available on this system\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sb strings.Builder
			if err := WriteHardware(&sb, tt.nodes); err != nil {
				t.Fatal(err)
			}
			if sb.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", sb.String(), tt.want)
			}
		})
	}
}

func TestRanges(t *testing.T) {
	for _, tt := range []struct {
		in   []int
		want string
	}{
		{nil, ""}, {[]int{0}, "0"}, {[]int{0, 1}, "0-1"}, {[]int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
	} {
		if got := Ranges(tt.in); got != tt.want {
			t.Errorf("Ranges(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

package numactl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	top := Topology{Nodes: 4, CPUs: 8}
	tests := []struct {
		line string
		want Args
	}{
		{"", Args{}},
		{"--cpunodebind=1 --membind=0", Args{Policy: Membind, Nodes: []int{0}, CPUNodes: []int{1}}},
		{"-N 1 -m 0", Args{Policy: Membind, Nodes: []int{0}, CPUNodes: []int{1}}},
		{"-N1 -m0,2", Args{Policy: Membind, Nodes: []int{0, 2}, CPUNodes: []int{1}}},
		{"--interleave all", Args{Policy: Interleave, Nodes: []int{0, 1, 2, 3}}},
		{"-i 0-1,3", Args{Policy: Interleave, Nodes: []int{0, 1, 3}}},
		{"--interleave=!1", Args{Policy: Interleave, Nodes: []int{0, 2, 3}}},
		{"--interleave=!+1-2", Args{Policy: Interleave, Nodes: []int{0, 3}}},
		{"--interleave=+1", Args{Policy: Interleave, Nodes: []int{1}}},
		{"--weighted-interleave=0,1", Args{Policy: WeightedInterleave, Nodes: []int{0, 1}}},
		{"-w 2-3", Args{Policy: WeightedInterleave, Nodes: []int{2, 3}}},
		{"--preferred=1", Args{Policy: Preferred, Nodes: []int{1}}},
		{"-p 2", Args{Policy: Preferred, Nodes: []int{2}}},
		{"--preferred-many=1-2", Args{Policy: PreferredMany, Nodes: []int{1, 2}}},
		{"-P 0,3", Args{Policy: PreferredMany, Nodes: []int{0, 3}}},
		{"--localalloc --cpunodebind=0", Args{Policy: LocalAlloc, CPUNodes: []int{0}}},
		{"-l", Args{Policy: LocalAlloc}},
		{"--physcpubind=0-2,7", Args{CPUs: []int{0, 1, 2, 7}}},
		{"-C !0-5", Args{CPUs: []int{6, 7}}},
		{"--cpunodebind=1 --physcpubind=3", Args{CPUs: []int{3}}},
		{"--physcpubind=3 --cpunodebind=1", Args{CPUNodes: []int{1}}},
		{"--cpunodebind=2 --membind=same", Args{Policy: Membind, Nodes: []int{2}, CPUNodes: []int{2}}},
		{"  --membind=1,1,0   ", Args{Policy: Membind, Nodes: []int{0, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			got, err := Parse(tc.line, top)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%q) = %+v, want %+v", tc.line, got, tc.want)
			}
			// The canonical form parses back to the same options.
			again, err := Parse(got.String(), top)
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("Parse(%q) = %+v, %v; want %+v", got.String(), again, err, got)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	top := Topology{Nodes: 2, CPUs: 4}
	tests := []struct {
		line, token, reason string
	}{
		{"--membind=2", "--membind=2", "node 2 out of range (nodes 0-1)"},
		{"--physcpubind=4", "--physcpubind=4", "cpu 4 out of range (cpus 0-3)"},
		{"--membind=0 --interleave=1", "--interleave=1", "conflicting policies: --membind=0 was given"},
		{"--localalloc --preferred 0", "--preferred 0", "conflicting policies"},
		{"--membind", "--membind", "needs a list"},
		{"--localalloc=0", "--localalloc=0", "takes no argument"},
		{"--interleave=x", "--interleave=x", `"x" is not a node number`},
		{"--interleave=1-0", "--interleave=1-0", "backwards"},
		{"--interleave=0,", "--interleave=0,", `"" is not a node number`},
		{"--interleave=!all", "--interleave=!all", "empty node list"},
		{"--preferred=0-1", "--preferred=0-1", "takes one node"},
		{"--membind=same", "--membind=same", "no list before it"},
		{"--hardware", "--hardware", "not a placement option"},
		{"-x 1", "-x", "not a placement option"},
		{"./a.out", "./a.out", "not an option"},
		{"--cpunodebind=-1", "--cpunodebind=-1", "not a node number"},
		{"--interleave=+all", "--interleave=+all", "not a list"},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			_, err := Parse(tc.line, top)
			var ae *ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("Parse(%q) = %v, want an *ArgError", tc.line, err)
			}
			if ae.Token != tc.token || !strings.Contains(ae.Reason, tc.reason) {
				t.Fatalf("Parse(%q): token %q reason %q, want %q containing %q", tc.line, ae.Token, ae.Reason, tc.token, tc.reason)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"--cpunodebind=1 --membind=0", "-i all", "--interleave=!+0-1", "-C 0-3 -l", "--membind=same"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		top := Topology{Nodes: 2, CPUs: 4}
		a, err := Parse(line, top)
		if err != nil {
			return
		}
		for _, n := range append(append([]int{}, a.Nodes...), a.CPUNodes...) {
			if n < 0 || n >= top.Nodes {
				t.Fatalf("Parse(%q): node %d", line, n)
			}
		}
		for _, c := range a.CPUs {
			if c < 0 || c >= top.CPUs {
				t.Fatalf("Parse(%q): cpu %d", line, c)
			}
		}
		if b, err := Parse(a.String(), top); err != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("Parse(%q) = %+v; its String %q parses to %+v, %v", line, a, a.String(), b, err)
		}
	})
}

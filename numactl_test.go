package dmalab

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
)

// TestBootNUMACtl: Options.NUMACtl gives every process numactl's policy
// and CPUs, names the run's params, and refuses bad options as usage
// errors naming the word.
func TestBootNUMACtl(t *testing.T) {
	for _, tc := range []struct {
		opts      string
		wantNode  int // the program's node
		wantMode  kernel.PolicyMode
		wantPages []int // where 4 pages it touches land
	}{
		{"", 0, kernel.MPOLDefault, []int{0, 0, 0, 0}},
		{"--membind=1", 0, kernel.MPOLBind, []int{1, 1, 1, 1}},
		{"--cpunodebind=1", 1, kernel.MPOLDefault, []int{1, 1, 1, 1}},
		{"-N 1   -m 0", 1, kernel.MPOLBind, []int{0, 0, 0, 0}},
		{"--physcpubind=60 --localalloc", 1, kernel.MPOLLocal, []int{1, 1, 1, 1}},
		{"--interleave=all", 0, kernel.MPOLInterleave, []int{0, 1, 0, 1}},
		{"--weighted-interleave=0,1", 0, kernel.MPOLWeightedInterleave, []int{0, 1, 0, 1}},
		{"--preferred=1", 0, kernel.MPOLPreferred, []int{1, 1, 1, 1}},
		{"--preferred-many=!0", 0, kernel.MPOLPreferredMany, []int{1, 1, 1, 1}},
	} {
		t.Run(tc.opts, func(t *testing.T) {
			s, err := Boot("2s-4gpu-pcie", Options{NUMACtl: tc.opts})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got []int
			err = s.Run("app", func(p *Process) error {
				if p.Node() != tc.wantNode || p.Policy.Mode != tc.wantMode {
					t.Errorf("process on node %d with policy %v, want node %d, %v", p.Node(), p.Policy.Mode, tc.wantNode, tc.wantMode)
				}
				va, err := p.MmapAnon(4 * mem.PageSize)
				if err != nil {
					return err
				}
				s.Mem.Write(p.Thread, p.ThreadNode(p.Thread), va, 4*mem.PageSize)
				for i := range 4 {
					n, _, _ := s.Mem.PageNode(va + mem.VirtAddr(i*mem.PageSize))
					got = append(got, n)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.wantPages) {
				t.Errorf("pages on %v, want %v", got, tc.wantPages)
			}
			want := strings.Join(strings.Fields(tc.opts), " ")
			if l, ok := s.Result.Params["numactl"]; l != want || ok != (want != "") {
				t.Errorf("params numactl = %q (%v), want %q", l, ok, want)
			}
		})
	}
	for _, bad := range []string{"--membind=2", "--interleave=0 --membind=1", "--cpunodebind", "foo"} {
		_, err := Boot("2s-4gpu-pcie", Options{NUMACtl: bad})
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), strings.Fields(bad)[len(strings.Fields(bad))-1]) {
			t.Errorf("Boot with --numactl %q: %v, want a usage error naming the word", bad, err)
		}
	}
}

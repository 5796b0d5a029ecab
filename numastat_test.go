package dmalab

import (
	"testing"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
)

// TestNUMAStatInResult: a run that places anonymous memory reports
// numastat per node; one that does not leaves the field out.
func TestNUMAStatInResult(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pages uint64
	}{{"no anonymous memory", 0}, {"16 pages interleaved", 16}} {
		t.Run(tc.name, func(t *testing.T) {
			s := testScenario(func(c *Context) error {
				return c.Run("app", func(p *Process) error {
					if tc.pages == 0 {
						return nil
					}
					if err := p.SetMemPolicy(kernel.MPOLInterleave, 0, 1); err != nil {
						return err
					}
					va, err := p.MmapAnon(tc.pages * mem.PageSize)
					if err != nil {
						return err
					}
					p.System.Mem.Write(p.Thread, p.ThreadNode(p.Thread), va, tc.pages*mem.PageSize)
					return nil
				})
			})
			s.Platform = "2s-4gpu-pcie"
			out, err := RunScenario(s, RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ns := out.Result.NUMAStat
			if tc.pages == 0 {
				if ns != nil {
					t.Errorf("numastat without anonymous memory: %+v", ns)
				}
				return
			}
			if len(ns) != 2 || ns[0].InterleaveHit != 8 || ns[1].InterleaveHit != 8 || ns[0].LocalNode != 8 || ns[1].OtherNode != 8 {
				t.Errorf("numastat %+v", ns)
			}
		})
	}
}

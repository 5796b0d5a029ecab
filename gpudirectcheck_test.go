package dmalab

import (
	"testing"

	"github.com/dmalab/dmalab/check/gpudirect"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A checking system attaches the GPUDirect pack when it loads
// nvidia_p2p: a persistent pin left when its process exits, and a peer
// mapped behind the platform's translating IOMMU, are reported; a pin
// whose free callback runs at exit, and the IOMMU off, are not.
func TestGPUDirectPackAttached(t *testing.T) {
	cases := []struct {
		name       string
		iommu      string
		persistent bool
		want       map[string]int
	}{
		{name: "persistent-pin-at-exit", iommu: platform.IOMMUOff, persistent: true, want: map[string]int{gpudirect.PinLeak: 1}},
		{name: "pin-revoked-at-exit", iommu: platform.IOMMUOff, want: map[string]int{}},
		{name: "iommu-strict", iommu: platform.IOMMUStrict, want: map[string]int{gpudirect.IOMMUTranslating: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec, err := platform.Preset("2s-4gpu-pcie")
			if err != nil {
				t.Fatal(err)
			}
			spec.IOMMU.Mode = c.iommu
			s, err := BootSpec(spec, Options{Check: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			p2p, err := s.NVP2P()
			if err != nil {
				t.Fatal(err)
			}
			err = s.Run("app", func(p *Process) error {
				pr, err := p.CUDA()
				if err != nil {
					return err
				}
				ctx, err := pr.PrimaryContext(0)
				if err != nil {
					return err
				}
				buf, err := ctx.MemAlloc(p.Thread, 2<<20)
				if err != nil {
					return err
				}
				if c.persistent {
					_, err := p2p.GetPagesPersistent(p.Thread, p.Process, buf, nvp2p.GPUPageSize, nvp2p.FlagsDefault)
					return err
				}
				var pt *nvp2p.PageTable
				pt, err = p2p.GetPages(p.Thread, p.Process, 0, 0, buf, nvp2p.GPUPageSize, func(t *sim.Proc, _ any) {
					_ = p2p.FreePageTable(t, pt)
				}, nil)
				if err != nil {
					return err
				}
				nic, err := s.Device("nic0")
				if err != nil {
					return err
				}
				_, _ = p2p.DMAMapPages(p.Thread, nic, pt)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, k := range gpudirect.Classes() {
				if n := s.Checker.Count(k.Code); n > 0 {
					got[k.Code] = n
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("diagnostics %v, want %v:\n%v", got, c.want, s.Diagnostics())
			}
			for k, n := range c.want {
				if got[k] != n {
					t.Errorf("%s: %d, want %d:\n%v", k, got[k], n, s.Diagnostics())
				}
			}
		})
	}
}

package gpudirect_test

import (
	"fmt"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/sim"
)

// A third-party driver's free callback calls nvidia_p2p_put_pages when
// the application frees the memory: the GPUDirect pack, which a
// checking system attaches with nvidia_p2p, reports it with the pin as
// its origin.
func Example() {
	s, err := dmalab.Boot("2s-4gpu-pcie", dmalab.Options{Check: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	p2p, _ := s.NVP2P()
	err = s.Run("app", func(p *dmalab.Process) error {
		pr, err := p.CUDA()
		if err != nil {
			return err
		}
		ctx, _ := pr.PrimaryContext(0)
		buf, err := ctx.MemAlloc(p.Thread, 2<<20)
		if err != nil {
			return err
		}
		var pt *nvp2p.PageTable
		pt, err = p2p.GetPages(p.Thread, p.Process, 0, 0, buf, 64<<10, func(t *sim.Proc, _ any) {
			_ = p2p.PutPages(t, 0, 0, pt.Addr(), pt) // wrong: free_page_table only
		}, nil)
		if err != nil {
			return err
		}
		return ctx.MemFree(p.Thread, buf)
	})
	if err != nil {
		fmt.Println(err)
	}
	for _, d := range s.Diagnostics() {
		fmt.Println(d.Class, d.Device, d.Origin != "")
	}
	// Output:
	// gpudirect-put-pages-in-callback gpu0 true
}

package nvp2p_test

import (
	"fmt"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A NIC's driver pins 1 MiB of an application's GPU memory, maps it for
// the NIC, and the NIC writes one 64 KiB page by DMA below the shared
// PCIe switch. When the application frees the memory the driver's free
// callback runs.
func Example() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	m, _ := machine.New(spec, 1)
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	cu, _ := cuda.New(sys)
	p2p, _ := nvp2p.New(cu, x)
	app, _ := cu.NewProcess("app", 0)
	ctx, _ := app.PrimaryContext(0)
	nic, _ := x.Device("nic0")
	m.Engine.Spawn("app", func(p *sim.Proc) {
		buf, _ := ctx.MemAlloc(p, 2<<20)
		var pt *nvp2p.PageTable
		pt, err := p2p.GetPages(p, app.KernelProcess(), 0, 0, buf, 1<<20, func(t *sim.Proc, _ any) {
			fmt.Println("free callback")
			p2p.FreePageTable(t, pt)
		}, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		mp, _ := p2p.DMAMapPages(p, nic, pt)
		fmt.Println(pt.Entries(), "pages of", pt.PageSize.Bytes(), "bytes")
		md := m.Devices[0]
		info, err := nic.Transfer(p, &dma.Transfer{
			Name: "rdma write", Master: md.DMA(), Src: md.Side(), Dst: m.GPUs[0].Memory(),
			Bytes: 64 << 10, Write: []dma.Span{dma.BusSpan(mp.DMAAddresses[0], 64<<10)},
		})
		fmt.Println(info.Peer.Path.Kind, info.Peer.Path.At, err)
		ctx.MemFree(p, buf)
		fmt.Println("revoked:", pt.Revoked())
	})
	m.Engine.Run()
	// Output:
	// 16 pages of 65536 bytes
	// switch sw0 <nil>
	// free callback
	// revoked: true
}

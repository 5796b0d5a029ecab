package gdr_test

import (
	"fmt"

	"github.com/dmalab/dmalab/cuda"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gdr"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/nvp2p"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// An application pins 64 KiB of its GPU memory with gdrcopy, maps it,
// writes a 64-byte flag by CPU stores and reads it back by CPU loads.
// The store costs a tenth of a microsecond; the load a PCIe round trip.
func Example() {
	spec, _ := platform.Preset("h200-pcie")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{Payload: true})
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	sys, _ := gpu.New(x)
	cu, _ := cuda.New(sys)
	p2p, _ := nvp2p.New(cu, x)
	g, _ := gdr.New(cu, p2p)
	app, _ := cu.NewProcess("app", 0)
	ctx, _ := app.PrimaryContext(0)
	m.Engine.Spawn("app", func(p *sim.Proc) {
		buf, _ := ctx.MemAlloc(p, 1<<20)
		h, _ := g.Open(p, app.KernelProcess())
		mh, err := h.PinBuffer(p, buf, 64<<10, 0, 0)
		if err != nil {
			fmt.Println(err)
			return
		}
		mp, _ := h.Map(p, mh, 64<<10)
		flag := []byte("ready")
		start := p.Now()
		_ = h.CopyToMapping(p, mp, 0, flag)
		fmt.Println("store:", p.Now()-start)
		got := make([]byte, len(flag))
		start = p.Now()
		_ = h.CopyFromMapping(p, mp, 0, got)
		rtt, _ := h.RoundTrip(mp)
		fmt.Printf("load: %s, one round trip: %v\n", got, p.Now()-start == rtt)
		_ = h.Unmap(p, mh, mp)
		_ = h.UnpinBuffer(p, mh)
		_ = h.Close(p)
	})
	m.Engine.Run()
	// Output:
	// store: 97.487ns
	// load: ready, one round trip: true
}

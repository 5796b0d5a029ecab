package dmabufcheck_test

import (
	"fmt"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/dmabufcheck"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A receive buffer shared by two NICs: nic0 writes a frame under a
// write fence in the buffer's reservation object, and nic1 reads the
// buffer before that fence signals. The pack reports the race, naming
// both devices, with the fence's creation as its origin.
func Example() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{})
	defer m.Close()
	d, _ := dma.New(m, m.Mem)
	k := kernel.New(m.Engine, m.Mem.Nodes())
	l := dmabuf.New(m.Engine)
	heap, _ := l.AddSystemHeap(m.Mem)

	chk := check.New(check.Options{})
	x := dmabufcheck.Attach(chk, l)
	x.WatchMemory(m.Mem)
	x.WatchKernel(k)

	app, _ := k.NewProcess("app", 0)
	nic0, _ := d.Device("nic0")
	nic1, _ := d.Device("nic1")
	m.Engine.Spawn("app", func(p *sim.Proc) {
		fd, _ := heap.Allocate(p, app, 4096, 0)
		b, _ := l.Get(p, app, fd)
		a0, _ := b.Attach(p, nic0, dmabuf.AttachOptions{})
		a1, _ := b.Attach(p, nic1, dmabuf.AttachOptions{})
		sg0, _ := a0.Map(p, dma.FromDevice)
		sg1, _ := a1.Map(p, dma.ToDevice)
		f := l.NewFence("nic", "nic0", l.ContextAlloc(1), 1)
		b.Resv().AddFence(p, f, dmabuf.UsageWrite)
		nic0.Write(sg0.SGL[0].DMAAddress, 4096)
		nic1.Read(sg1.SGL[0].DMAAddress, 4096) // too early
		f.Signal(nil)
	})
	m.Engine.Run()
	chk.Finish(m.Engine.Now())
	for _, d := range chk.Diagnostics() {
		fmt.Printf("%s %s %s\n  %s\n  made by %s\n", d.Severity, d.Class, d.Device, d.Message, d.Origin)
	}
	// Output:
	// error dmabuf-fence-race nic1
	//   device nic1 reads dmabuf:1 (pa:0x100000000 +4096) while nic:nic0 1:1, in its reservation object as DMA_RESV_USAGE_WRITE, has not signalled: nic1 is racing with the work of nic0; wait for it first (dma_resv_wait_timeout for DMA_RESV_USAGE_WRITE, or the fence's sync_file)
	//   made by dma_fence_init(nic:nic0 1:1) at 409.6ns
}

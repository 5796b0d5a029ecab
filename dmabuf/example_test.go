package dmabuf_test

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmabuf"
	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A camera process allocates a frame from the CMA heap and passes its
// descriptor to a display process over a Unix socket (SCM_RIGHTS); the
// display driver gets the buffer from the descriptor, attaches its
// device and maps the frame; the DMA address is the frame's physical
// address (no IOMMU). The descriptor's number sent as plain data means
// nothing in the display process.
func ExampleHeap_Allocate() {
	spec, _ := platform.Preset("zynq-7000")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{})
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	k := kernel.New(m.Engine, m.Mem.Nodes())
	l := dmabuf.New(m.Engine)
	l.AddCMAHeap(m.Mem, "reserved", 0, 0)
	cam, _ := k.NewProcess("camera", 0)
	disp, _ := k.NewProcess("display", 0)
	dev, _ := x.Device("axidma0")

	m.Engine.Spawn("camera", func(p *sim.Proc) {
		heap, _ := l.Heap("reserved")
		fd, _ := heap.Allocate(p, cam, 1920*1080*2, 0)
		_, err := l.Get(p, disp, fd)
		fmt.Println("fd as plain data:", errors.Is(err, syscall.EBADF))
		dfd, _ := cam.SendFD(disp, fd)
		cam.Close(p, fd)

		buf, _ := l.Get(p, disp, dfd)
		a, _ := buf.Attach(p, dev, dmabuf.AttachOptions{Contiguous: true})
		sgt, _ := a.Map(p, dma.ToDevice)
		fmt.Println(buf.FileName(), buf.ExpName(), buf.Size(), "bytes,", sgt.Nents, "segment")
		fmt.Println("at its physical address:", uint64(sgt.SGL[0].DMAAddress) == uint64(dmabuf.Pages(buf)[0].Start))
		a.Unmap(p, sgt, dma.ToDevice)
		a.Detach(p)
		buf.Put(p)
		disp.Close(p, dfd)
		fmt.Println("released:", buf.Released())
	})
	m.Engine.Run()
	// Output:
	// fd as plain data: true
	// dmabuf:1 reserved 4149248 bytes, 1 segment
	// at its physical address: true
	// released: true
}

// An ISP's fence, handed to the GPU's process as a sync file: a wait of
// 1 ms times out with ETIME, as libsync's sync_wait does; a wait without
// a timeout returns when the ISP signals, 2 ms in.
func ExampleSyncFile_Wait() {
	eng := sim.New(1)
	defer eng.Close()
	l := dmabuf.New(eng)
	isp := l.NewFence("isp", "out", l.ContextAlloc(1), 1)
	eng.Spawn("gpu", func(p *sim.Proc) {
		s := l.NewSyncFile("frame", isp)
		eng.After(2*sim.Millisecond, func() { isp.Signal(nil) })
		err := s.Wait(p, 1*sim.Millisecond)
		fmt.Println("after 1 ms:", errors.Is(err, syscall.ETIME))
		err = s.Wait(p, dmabuf.MaxScheduleTimeout)
		fmt.Println("signalled at", p.Now(), err)
	})
	eng.Run()
	// Output:
	// after 1 ms: true
	// signalled at 2ms <nil>
}

// A system-heap frame of 16 scattered pages, mapped for a NIC: under
// dma-direct the NIC sees 16 segments at the pages' physical addresses;
// behind an IOMMU, one range of IOVAs.
func ExampleAttachment_Map() {
	spec, _ := platform.Preset("2s-4gpu-pcie")
	m, _ := machine.NewWithOptions(spec, 1, machine.Options{})
	defer m.Close()
	x, _ := dma.New(m, m.Mem)
	l := dmabuf.New(m.Engine)
	heap, _ := l.AddSystemHeap(m.Mem)
	nic0, _ := x.Device("nic0")
	nic1, _ := x.Device("nic1")
	unit, _ := iommu.NewUnit("dmar0", m.Mem, m.Engine, 0, iommu.Strict, iommu.DefaultParams())
	dom, _ := unit.NewDomain()
	iommu.Attach(nic1, dom, iommu.AttachOptions{PCI: true})

	m.Engine.Spawn("driver", func(p *sim.Proc) {
		buf, _ := heap.Alloc(p, 0, 64<<10)
		for _, dev := range []*dma.Device{nic0, nic1} {
			a, _ := buf.Attach(p, dev, dmabuf.AttachOptions{})
			sgt, _ := a.Map(p, dma.FromDevice)
			fmt.Printf("%s (%s): %d segment(s), %d contiguous bytes\n", dev.Name(), dev.Translator().Name(), sgt.Nents, dmabuf.ContiguousSize(sgt))
			a.Unmap(p, sgt, dma.FromDevice)
			a.Detach(p)
		}
	})
	m.Engine.Run()
	// Output:
	// nic0 (direct): 16 segment(s), 4096 contiguous bytes
	// nic1 (iommu dmar0 domain 1): 1 segment(s), 65536 contiguous bytes
}

package dmalab_test

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
)

// receive is a NIC driver's receive path on a Zynq-7000, whose Cadence
// GEM (gem0) does not snoop the Cortex-A9's caches: the driver allocates
// a descriptor and an rx buffer of one cache line each, maps the buffer
// with dir, polls the descriptor while the device writes a packet into
// the buffer, unmaps the buffer and reads the packet. It prints what the
// CPU read and what the checker said.
func receive(dir dma.Direction) {
	sys, err := dmalab.Boot("zynq-7000", dmalab.Options{Check: true, Payload: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sys.Close()
	gem, err := sys.Device("gem0")
	if err != nil {
		fmt.Println(err)
		return
	}
	err = sys.Run("rx", func(p *dmalab.Process) error {
		line := sys.LineSize() // 32 bytes on the Cortex-A9
		desc, err := sys.Mem.Kmalloc(p.Node(), 2*line)
		if err != nil {
			return err
		}
		buf := desc + mem.VirtAddr(line)
		sys.Mem.WriteBytes(p.Thread, p.Node(), buf, []byte("old packet"))
		h := gem.MapSingle(p.Thread, buf, line, dir)
		if gem.MappingError(h) {
			return errors.New("dma_map_single failed")
		}
		// Polling the descriptor, the CPU's prefetcher pulls in the
		// next line: the rx buffer, which now holds the old packet.
		sys.Mem.Read(p.Thread, p.Node(), desc, line)
		if _, err := gem.WriteBytes(h, []byte("new packet")); err != nil {
			return err
		}
		gem.UnmapSingle(p.Thread, h, line, dir)
		got := make([]byte, 10)
		sys.Mem.ReadBytes(p.Thread, p.Node(), buf, got)
		fmt.Printf("%v: the CPU read %q\n", dir, got)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	for _, d := range sys.Diagnostics() {
		fmt.Printf("%s %s: %s\n", d.Severity, d.Class, d.Message)
	}
}

// A receive buffer mapped DMA_TO_DEVICE: neither the map nor the unmap
// invalidates what the prefetcher brought in while the device owned the
// buffer, so the line of the old packet survives the device's write and
// the CPU reads it. The checker proves the read
// stale by the content versions; the same driver mapping
// DMA_FROM_DEVICE reads the new packet and gets no diagnostic.
func Example_staleRead() {
	receive(dma.ToDevice)
	receive(dma.FromDevice)
	// Output:
	// DMA_TO_DEVICE: the CPU read "old packet"
	// error stale-read: CPU read of pa:0x100020 +10 obtained version 1 at pa:0x100020, but the latest write there is version 2 (gem0's DMA_TO_DEVICE single mapping dma:0x100020 +32 of it was unmapped at 145.001ns by rx)
	// DMA_FROM_DEVICE: the CPU read "new packet"
}

// A program on a GPU: the CUDA façade's state is the program's process's,
// and what it leaves allocated is freed at its exit.
func ExampleSystem_Run() {
	sys, err := dmalab.Boot("h200-pcie", dmalab.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sys.Close()
	err = sys.Run("app", func(p *dmalab.Process) error {
		pr, err := p.CUDA()
		if err != nil {
			return err
		}
		ctx, err := pr.PrimaryContext(0)
		if err != nil {
			return err
		}
		const n = 256 << 20
		host, err := ctx.MemAllocHost(p.Thread, n)
		if err != nil {
			return err
		}
		dev, err := ctx.MemAlloc(p.Thread, n)
		if err != nil {
			return err
		}
		t0 := p.Now()
		if err := ctx.Memcpy(p.Thread, dev, mem.GPUAddr(host), n); err != nil {
			return err
		}
		fmt.Printf("pinned h2d: %.1f GB/s\n", n/(p.Now()-t0).Seconds()/1e9)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// pinned h2d: 55.4 GB/s
}

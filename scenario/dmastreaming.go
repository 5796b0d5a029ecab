package scenario

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/dmaengine"
	"github.com/dmalab/dmalab/nic"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/report"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/xfer"
)

func init() {
	register(&Scenario{
		Name:     "dma-streaming",
		Summary:  "a NIC receiving into and transmitting from streaming DMA buffers, written correctly",
		Platform: "2s-4gpu-pcie",
		Doc: `A NIC driver as the DMA API wants it: receive buffers kmalloc'd and mapped
DMA_FROM_DEVICE (the mapping error checked), posted in a descriptor ring in
coherent memory; the NIC writes each packet from the wire into the next
buffer, writes the descriptor's status and raises an MSI; the interrupt
handler (NAPI-like, in batches) unmaps each buffer, or syncs it for the CPU,
before the CPU reads the packet, then maps and reposts it. Transmit: the CPU
writes the packet, maps it DMA_TO_DEVICE, posts it and rings the doorbell;
the NIC reads it and sends it; completion unmaps and frees it.

Under "dmalab check" it must report nothing, on coherent x86 PCIe and on the
non-coherent zynq-7000 alike. Rows: one per direction, with throughput,
per-packet latency percentiles (wire to driver for rx, driver to wire for tx)
and CPU time per packet.`,
		Params: []Param{
			{Name: "packets", Kind: dmalab.ParamInt, Min: 1, Max: maxPackets, Default: "10000", Help: "packets per direction"},
			{Name: "size", Kind: dmalab.ParamSize, Max: maxPacket, Default: "1500B", Help: "packet size"},
			{Name: "dir", Kind: dmalab.ParamEnum, Values: []string{"rx", "tx", "both"}, Default: "both", Help: "rx, tx or both"},
			{Name: "mode", Kind: dmalab.ParamEnum, Values: []string{"interrupt", "polling"}, Default: "interrupt", Help: "interrupt or polling (a busy-polling driver)"},
			{Name: "recycle", Kind: dmalab.ParamEnum, Values: []string{"unmap", "sync"}, Default: "unmap", Help: "how rx buffers return to the CPU: unmap (unmap and map again) or sync (dma_sync_single_for_cpu / _for_device)"},
			{Name: "ring", Kind: dmalab.ParamInt, Min: 1, Max: maxRing, Default: "256", Help: "descriptors per ring"},
			{Name: "device", Default: "", Help: "the NIC (default: the platform's first)"},
		},
		Run: runDMAStreaming,
	})
	register(&Scenario{
		Name:     "dma-vs-memcpy",
		Summary:  "copying memory with a DMA engine (interrupt or polling) against a CPU memcpy: time and CPU cost per size",
		Platform: "zynq-7000",
		Doc: `Copies a buffer of each size three ways on one DMA engine's node: the DMA
engine completing by interrupt, the same engine busy-polled, and a CPU
memcpy. The DMA paths pay the streaming mappings (map source DMA_TO_DEVICE,
destination DMA_FROM_DEVICE: on a non-coherent platform that is cache
maintenance line by line), the descriptor write and doorbell, the engine's
fetch and transfer, and completion. Each row gives the time of one copy and
the CPU time it cost (driver and interrupt handler; for polling the wait
itself). Where the CPU time of the DMA path falls below the memcpy's is
where offloading pays.`,
		Params: []Param{
			{Name: "sizes", Kind: dmalab.ParamSizes, Max: maxCopy, Default: "64B,1KiB,16KiB,256KiB,1MiB,4MiB", Help: "copy sizes"},
			{Name: "device", Default: "", Help: "the DMA engine (default: the platform's first device of kind dma, else its first NIC)"},
		},
		Run: runDMAVsMemcpy,
	})
}

// Bounds of the DMA scenarios' parameters, checked before anything is
// allocated: every rx descriptor holds a buffer of the packet size, so
// the ring and the size together decide the memory a run takes.
const (
	// maxRing is the largest descriptor ring: 65536 entries, a 16-bit
	// descriptor index, above any NIC's ethtool maximum (mlx5: 8192).
	maxRing = 1 << 16
	// maxPacket is the largest packet: 64 KiB, an IPv4 datagram's limit
	// and a TSO segment's.
	maxPacket = 64 << 10
	// maxPackets bounds a run's packets (the model's events grow with
	// them).
	maxPackets = 100_000_000
	// maxCopy is the largest copy of dma-vs-memcpy: both buffers are
	// kmalloc'd on one node.
	maxCopy = 1 << 30
)

func runDMAStreaming(c *Context) error {
	m := c.Machine
	size := c.Size("size")
	opt := nic.Options{
		Device:     c.Value("device"),
		PacketSize: uint64(size),
		Packets:    c.Int("packets"),
		Ring:       c.Int("ring"),
		Polling:    c.Value("mode") == "polling",
		Sync:       c.Value("recycle") == "sync",
	}
	switch c.Value("dir") {
	case "rx":
		opt.Dir = nic.Rx
	case "tx":
		opt.Dir = nic.Tx
	default:
		opt.Dir = nic.Both
	}
	// The named device must exist: an unknown name is bad input, said
	// with the devices there are.
	d, err := pickDevice(c, opt.Device)
	if err != nil {
		return err
	}
	opt.Device = d.Name()
	n, err := nic.Start(m, m.Mem, c.DMA, opt)
	if errors.Is(err, nic.ErrBadOption) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	guardErr := c.RunEngine("packets", "size")
	res, err := n.Result()
	if err != nil {
		return err
	}
	if guardErr != nil {
		return guardErr
	}
	for _, s := range []struct {
		dir string
		st  nic.Stream
	}{{string(xfer.Rx), res.Rx}, {string(xfer.Tx), res.Tx}} {
		if s.st.Packets == 0 {
			continue
		}
		secs := (s.st.End - s.st.Start).Seconds()
		c.Result.Results = append(c.Result.Results, report.Row{
			Name:       fmt.Sprintf("%s %s %s", res.Device, s.dir, report.FormatBytes(int64(size))),
			Path:       string(xfer.Streaming),
			Direction:  s.dir,
			Mode:       c.Value("mode"),
			Bytes:      int64(size),
			Ops:        int64(s.st.Packets),
			Seconds:    secs,
			GBps:       s.st.Throughput / 1e9,
			CPUSeconds: s.st.CPUPerPacket.Seconds(),
			P50Seconds: s.st.P50.Seconds(),
			P99Seconds: s.st.P99.Seconds(),
		})
	}
	return nil
}

// memcpyEngine picks the DMA engine: the named device, else the first of
// kind dma, else the first NIC.
func memcpyEngine(c *Context) (string, error) {
	if name := c.Value("device"); name != "" {
		return name, nil
	}
	for _, d := range c.Machine.Spec.Devices {
		if d.Kind == platform.DeviceDMA {
			return d.Name, nil
		}
	}
	d, err := pickDevice(c, "")
	if err != nil {
		return "", err
	}
	return d.Name(), nil
}

func runDMAVsMemcpy(c *Context) error {
	m := c.Machine
	sizes := c.Sizes("sizes")
	name, err := memcpyEngine(c)
	if err != nil {
		return err
	}
	ctl, err := dmaengine.New(m, m.Mem, c.DMA, name)
	if err != nil {
		return usagef("--set device=%s: %v", name, err)
	}
	dev, node := ctl.Device(), ctl.Node()
	cores := dmaengine.NewCores(max(m.Spec.Nodes[node].Cores.V, 2))
	var runErr error
	driver := m.Engine.Spawn("driver", func(p *sim.Proc) {
		runErr = copySweep(c, p, ctl, dev, node, cores, sizes)
	})
	cores.Attach(driver, 0)
	guardErr := c.RunEngine("sizes")
	if runErr != nil {
		return runErr
	}
	return guardErr
}

func copySweep(c *Context, p *sim.Proc, ctl *dmaengine.Controller, dev *dma.Device, node int, cores *dmaengine.Cores, sizes []int64) error {
	ch, err := ctl.NewChan(p, dmaengine.Config{Kind: dmaengine.MemToMem})
	if err != nil {
		return err
	}
	cores.Attach(ch.RequestIRQ(nil), 1)
	defer func() {
		ch.FreeIRQ(p)
		ch.Close(p)
	}()
	memory := c.Machine.Mem
	row := func(path xfer.Path, mode string, size int64, took, cpu sim.Time) {
		c.Result.Results = append(c.Result.Results, report.Row{
			Name: fmt.Sprintf("%s %s %s", path, mode, report.FormatBytes(size)), Path: string(path), Direction: string(xfer.Mem2Mem),
			Mode: mode, Bytes: size, Seconds: took.Seconds(), GBps: float64(size) / took.Seconds() / 1e9,
			CPUSeconds: cpu.Seconds(),
		})
	}
	for _, size := range sizes {
		n := uint64(size)
		src, err := memory.Kmalloc(node, n)
		if err != nil {
			return usagef("size %d: %v", size, err)
		}
		dst, err := memory.Kmalloc(node, n)
		if err != nil {
			return usagef("size %d: %v", size, err)
		}
		memory.Write(p, node, src, n)
		for _, mode := range []dmaengine.Mode{dmaengine.Interrupt, dmaengine.Polling} {
			t0, busy0 := p.Now(), cores.Total()
			s := dev.MapSingle(p, src, n, dma.ToDevice)
			if dev.MappingError(s) {
				return fmt.Errorf("dma_map_single of %d bytes failed", size)
			}
			d := dev.MapSingle(p, dst, n, dma.FromDevice)
			if dev.MappingError(d) {
				dev.UnmapSingle(p, s, n, dma.ToDevice)
				return fmt.Errorf("dma_map_single of %d bytes failed", size)
			}
			if _, err := ch.Copy(p, d, s, n, mode); err != nil {
				return err
			}
			dev.UnmapSingle(p, s, n, dma.ToDevice)
			dev.UnmapSingle(p, d, n, dma.FromDevice)
			// The interrupt handler's work lands on its own core.
			row(xfer.DMAEngine, mode.String(), size, p.Now()-t0, cores.Total()-busy0)
		}
		t0, busy0 := p.Now(), cores.Total()
		if err := dmaengine.CPUCopy(p, memory, node, dst, src, n); err != nil {
			return err
		}
		row(xfer.CPU, "memcpy", size, p.Now()-t0, cores.Total()-busy0)
		if err := errors.Join(memory.Kfree(src), memory.Kfree(dst)); err != nil {
			return err
		}
	}
	return nil
}

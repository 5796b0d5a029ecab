package scenario

import (
	"fmt"
	"strings"

	"github.com/dmalab/dmalab"
	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// A bug is one misuse of the DMA API or of streaming-buffer ownership, as
// a driver would commit it, named by the diagnostic class it triggers.
// Each cleans up after itself (as far as the misuse allows), so that one
// bug does not cause another's diagnostics; unbind-leak runs last.
type bug struct {
	class string
	doc   string
	run   func(b *bugRun) error
}

// bugRun is what a bug works with: the calling process, the device and
// the memory of its node.
type bugRun struct {
	p    *sim.Proc
	dev  *dma.Device
	mem  *mem.Memory
	node int
}

// buf allocates a kernel buffer (kmalloc) and writes it with the CPU, as
// a driver fills a packet.
func (b *bugRun) buf(size uint64) (mem.VirtAddr, error) {
	va, err := b.mem.Kmalloc(b.node, size)
	if err != nil {
		return 0, err
	}
	b.mem.Write(b.p, b.node, va, size)
	return va, nil
}

// mapChecked maps like a correct driver: dma_map_single, then
// dma_mapping_error.
func (b *bugRun) mapChecked(va mem.VirtAddr, size uint64, dir dma.Direction) (mem.DMAAddr, error) {
	h := b.dev.MapSingle(b.p, va, size, dir)
	if b.dev.MappingError(h) {
		return 0, fmt.Errorf("dma_map_single(%s, %v, %d) failed", b.dev.Name(), va, size)
	}
	return h, nil
}

// mapped is a buffer the CPU wrote, mapped correctly for dir.
func (b *bugRun) mapped(size uint64, dir dma.Direction) (mem.VirtAddr, mem.DMAAddr, error) {
	va, err := b.buf(size)
	if err != nil {
		return 0, 0, err
	}
	h, err := b.mapChecked(va, size, dir)
	return va, h, err
}

// sg builds an n-entry scatterlist over one kmalloc'd buffer, each entry
// part bytes long.
func (b *bugRun) sg(n int, part uint64) ([]dma.Scatterlist, error) {
	va, err := b.buf(uint64(n) * part)
	if err != nil {
		return nil, err
	}
	sgl := make([]dma.Scatterlist, n)
	for i := range sgl {
		if err := sgl[i].SetBuf(b.mem, va+mem.VirtAddr(uint64(i)*part), part); err != nil {
			return nil, err
		}
	}
	return sgl, nil
}

const pkt = 1500

var bugs = []bug{
	{"unmap-unknown", "dma_unmap_single twice: the second unmaps nothing", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.ToDevice)
		if err != nil {
			return err
		}
		b.dev.UnmapSingle(b.p, h, pkt, dma.ToDevice)
		b.dev.UnmapSingle(b.p, h, pkt, dma.ToDevice)
		return nil
	}},
	{"unmap-size", "unmap with a size other than the mapped one", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.ToDevice)
		if err != nil {
			return err
		}
		b.dev.UnmapSingle(b.p, h, 1000, dma.ToDevice)
		return nil
	}},
	{"unmap-type", "dma_map_single undone with dma_unmap_resource", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.ToDevice)
		if err != nil {
			return err
		}
		b.dev.UnmapResource(b.p, h, pkt, dma.ToDevice)
		return nil
	}},
	{"free-coherent-address", "dma_free_coherent with another CPU address than alloc returned", func(b *bugRun) error {
		va, h, err := b.dev.AllocCoherent(b.p, 4096)
		if err != nil {
			return err
		}
		b.dev.FreeCoherent(b.p, 4096, va+64, h)
		return nil
	}},
	{"unmap-sg-count", "dma_unmap_sg with fewer entries than were mapped", func(b *bugRun) error {
		sgl, err := b.sg(4, 1024)
		if err != nil {
			return err
		}
		if b.dev.MapSG(b.p, sgl, 4, dma.ToDevice) == 0 {
			return fmt.Errorf("dma_map_sg failed")
		}
		b.dev.UnmapSG(b.p, sgl, 3, dma.ToDevice)
		return nil
	}},
	{"unmap-direction", "mapped DMA_TO_DEVICE, unmapped DMA_FROM_DEVICE", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.ToDevice)
		if err != nil {
			return err
		}
		b.dev.UnmapSingle(b.p, h, pkt, dma.FromDevice)
		return nil
	}},
	{"map-error-unchecked", "dma_mapping_error() never called on the handle", func(b *bugRun) error {
		va, err := b.buf(pkt)
		if err != nil {
			return err
		}
		h := b.dev.MapSingle(b.p, va, pkt, dma.ToDevice)
		b.dev.UnmapSingle(b.p, h, pkt, dma.ToDevice)
		return nil
	}},
	{"sync-unknown", "dma_sync_single_for_cpu of a handle already unmapped", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.FromDevice)
		if err != nil {
			return err
		}
		b.dev.UnmapSingle(b.p, h, pkt, dma.FromDevice)
		b.dev.SyncSingleForCPU(b.p, h, pkt, dma.FromDevice)
		return nil
	}},
	{"sync-range", "sync of 4096 bytes of a 1500-byte mapping", func(b *bugRun) error {
		va, err := b.buf(4096)
		if err != nil {
			return err
		}
		h, err := b.mapChecked(va, pkt, dma.FromDevice)
		if err != nil {
			return err
		}
		b.dev.SyncSingleForCPU(b.p, h, 4096, dma.FromDevice)
		b.dev.UnmapSingle(b.p, h, pkt, dma.FromDevice)
		return nil
	}},
	{"sync-direction", "mapped DMA_FROM_DEVICE, synced for the CPU as DMA_TO_DEVICE", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.FromDevice)
		if err != nil {
			return err
		}
		b.dev.SyncSingleForCPU(b.p, h, pkt, dma.ToDevice)
		b.dev.UnmapSingle(b.p, h, pkt, dma.FromDevice)
		return nil
	}},
	{"sync-cpu-to-device-buffer", "a DMA_TO_DEVICE buffer synced for the CPU as DMA_FROM_DEVICE", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.ToDevice)
		if err != nil {
			return err
		}
		b.dev.SyncSingleForCPU(b.p, h, pkt, dma.FromDevice)
		b.dev.UnmapSingle(b.p, h, pkt, dma.ToDevice)
		return nil
	}},
	{"sync-device-from-device-buffer", "a DMA_FROM_DEVICE buffer synced for the device as DMA_TO_DEVICE", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.FromDevice)
		if err != nil {
			return err
		}
		b.dev.SyncSingleForCPU(b.p, h, pkt, dma.FromDevice)
		b.dev.SyncSingleForDevice(b.p, h, pkt, dma.ToDevice)
		b.dev.UnmapSingle(b.p, h, pkt, dma.FromDevice)
		return nil
	}},
	{"sync-sg-count", "dma_sync_sg_for_cpu with fewer entries than were mapped", func(b *bugRun) error {
		sgl, err := b.sg(4, 1024)
		if err != nil {
			return err
		}
		if b.dev.MapSG(b.p, sgl, 4, dma.FromDevice) == 0 {
			return fmt.Errorf("dma_map_sg failed")
		}
		b.dev.SyncSGForCPU(b.p, sgl, 3, dma.FromDevice)
		b.dev.UnmapSG(b.p, sgl, 4, dma.FromDevice)
		return nil
	}},
	{"map-illegal-memory", "dma_map_single of a buffer on the kernel stack", func(b *bugRun) error {
		h := b.dev.MapSingle(b.p, b.mem.StackAddr(b.p.Name()), 64, dma.ToDevice)
		if !b.dev.MappingError(h) {
			b.dev.UnmapSingle(b.p, h, 64, dma.ToDevice)
		}
		return nil
	}},
	{"map-resource-ram", "dma_map_resource of RAM instead of a device's MMIO", func(b *bugRun) error {
		va, err := b.buf(4096)
		if err != nil {
			return err
		}
		pa, err := b.mem.VirtToPhys(va)
		if err != nil {
			return err
		}
		h := b.dev.MapResource(b.p, pa, 4096, dma.Bidirectional)
		if !b.dev.MappingError(h) {
			b.dev.UnmapResource(b.p, h, 4096, dma.Bidirectional)
		}
		return nil
	}},
	{"sg-segment", "one scatter-gather segment longer than the device's max_seg_size", func(b *bugRun) error {
		size := b.dev.MaxSegmentSize() * 2
		sgl, err := b.sg(1, size)
		if err != nil {
			return err
		}
		if b.dev.MapSG(b.p, sgl, 1, dma.ToDevice) == 0 {
			return fmt.Errorf("dma_map_sg failed")
		}
		b.dev.UnmapSG(b.p, sgl, 1, dma.ToDevice)
		return nil
	}},
	{"cacheline-overlap", "two receive buffers that share a cache line, both mapped DMA_FROM_DEVICE", func(b *bugRun) error {
		half := uint64(b.mem.LineSize(b.node)) / 2
		va, err := b.buf(4 * half)
		if err != nil {
			return err
		}
		h1, err := b.mapChecked(va, half, dma.FromDevice)
		if err != nil {
			return err
		}
		h2, err := b.mapChecked(va+mem.VirtAddr(half), half, dma.FromDevice)
		if err != nil {
			return err
		}
		b.dev.UnmapSingle(b.p, h2, half, dma.FromDevice)
		b.dev.UnmapSingle(b.p, h1, half, dma.FromDevice)
		return nil
	}},
	{"cacheline-overflow", "the same buffer mapped DMA_BIDIRECTIONAL nine times at once (how a leak looks; each extra mapping is also an overlap)", func(b *bugRun) error {
		va, err := b.buf(pkt)
		if err != nil {
			return err
		}
		var hs []mem.DMAAddr
		for range 9 {
			h, err := b.mapChecked(va, pkt, dma.Bidirectional)
			if err != nil {
				return err
			}
			hs = append(hs, h)
		}
		for _, h := range hs {
			b.dev.UnmapSingle(b.p, h, pkt, dma.Bidirectional)
		}
		return nil
	}},
	{"cpu-access-device-owned", "the CPU reads a receive buffer while the device owns it", func(b *bugRun) error {
		va, h, err := b.mapped(pkt, dma.FromDevice)
		if err != nil {
			return err
		}
		if _, err := b.dev.Write(h, pkt); err != nil {
			return err
		}
		b.mem.Read(b.p, b.node, va, 64) // peeks before dma_unmap_single
		b.dev.UnmapSingle(b.p, h, pkt, dma.FromDevice)
		return nil
	}},
	{"stale-read", "a transmit buffer mapped DMA_FROM_DEVICE: the invalidate discards the CPU's packet and the device sends old bytes (non-coherent platforms)", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.FromDevice)
		if err != nil {
			return err
		}
		if _, err := b.dev.Read(h, pkt); err != nil {
			return err
		}
		b.dev.UnmapSingle(b.p, h, pkt, dma.FromDevice)
		return nil
	}},
	{"device-access-unmapped", "the device writes a receive buffer after the driver unmapped it", func(b *bugRun) error {
		_, h, err := b.mapped(pkt, dma.FromDevice)
		if err != nil {
			return err
		}
		b.dev.UnmapSingle(b.p, h, pkt, dma.FromDevice)
		_, err = b.dev.Write(h, pkt)
		return err
	}},
	{"unbind-leak", "the driver is unbound with a mapping still live", func(b *bugRun) error {
		va, err := b.buf(pkt)
		if err != nil {
			return err
		}
		if _, err := b.mapChecked(va, pkt, dma.ToDevice); err != nil {
			return err
		}
		b.dev.Unbind(b.p)
		return nil
	}},
}

func bugNames() []string {
	var n []string
	for _, b := range bugs {
		n = append(n, b.class)
	}
	return n
}

func init() {
	var doc strings.Builder
	doc.WriteString(`Commits DMA API misuses on one DMA-capable device, each named by the
diagnostic class it triggers. Run it under the checker: "dmalab check
dma-bugs" reports every class; --set bug=NAME runs one. The misuses are done
through the real model: a stale read is really stale (on a non-coherent
platform such as the default zynq-7000; on coherent x86 PCIe the hardware
hides the direction mistake and there is nothing stale to report).

Bugs:
`)
	for _, b := range bugs {
		fmt.Fprintf(&doc, "  %-31s %s\n", b.class, b.doc)
	}
	register(&Scenario{
		Name:     "dma-bugs",
		Summary:  "DMA API misuses, one per diagnostic class (run it with dmalab check)",
		Platform: "zynq-7000",
		Doc:      strings.TrimRight(doc.String(), "\n"),
		Params: []Param{
			{Name: "bug", Kind: dmalab.ParamEnum, Item: "bug", Values: append([]string{"all"}, bugNames()...), Default: "all", Help: "the misuse to commit: all, or one of " + strings.Join(bugNames(), ", ")},
			{Name: "device", Default: "", Help: "the device to misuse (default: the platform's first NIC, else its first DMA device)"},
		},
		Run: runDMABugs,
	})
}

// pickDevice is the device a DMA scenario drives: the named one, else the
// first NIC, else the first device of another kind that is not a video
// device (cameras, ISPs and display controllers have their own drivers,
// packages v4l2 and drm).
func pickDevice(c *Context, name string) (*dma.Device, error) {
	devs := c.Machine.Spec.Devices
	if name == "" {
		for _, d := range devs {
			if d.Kind == "nic" {
				name = d.Name
				break
			}
		}
		for _, d := range devs {
			if name == "" && d.Kind != platform.DeviceCamera && d.Kind != platform.DeviceISP && d.Kind != platform.DeviceDisplay {
				name = d.Name
			}
		}
	}
	if name == "" {
		return nil, usagef("platform %s has no DMA-capable device", c.Machine.Spec.Name)
	}
	d, err := c.DMA.Device(name)
	if err != nil {
		var names []string
		for _, d := range devs {
			names = append(names, d.Name)
		}
		return nil, usagef("--set device=%s: %v (devices: %s)", name, err, strings.Join(names, ", "))
	}
	return d, nil
}

func runDMABugs(c *Context) error {
	dev, err := pickDevice(c, c.Value("device"))
	if err != nil {
		return err
	}
	which := c.Value("bug")
	m := c.Machine
	var runErr error
	m.Engine.Spawn("driver", func(p *sim.Proc) {
		b := &bugRun{p: p, dev: dev, mem: m.Mem, node: dev.Node()}
		for _, bg := range bugs {
			if which != "all" && which != bg.class {
				continue
			}
			if err := bg.run(b); err != nil {
				runErr = fmt.Errorf("bug %s: %w", bg.class, err)
				return
			}
		}
	})
	guardErr := c.RunEngine()
	if runErr != nil {
		return runErr
	}
	return guardErr
}

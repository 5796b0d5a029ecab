package dma

import (
	"fmt"
	"syscall"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// Device is one device as the DMA API sees it: struct device with its
// dma_mask, coherent_dma_mask, dma_parms (max_segment_size,
// segment_boundary_mask), dma_coherent and NUMA node. Methods that
// mirror DMA API calls take the calling process first; p must be the
// process that is running, since cache maintenance and bounce copies
// cost it time.
type Device struct {
	dma  *DMA
	name string
	node int
	// coherent: the device snoops the CPU caches (dev_is_dma_coherent).
	coherent bool
	// mask is both dma_mask and coherent_dma_mask
	// (dma_set_mask_and_coherent).
	mask uint64
	// maxSeg is dma_parms->max_segment_size; segBoundary
	// dma_parms->segment_boundary_mask.
	maxSeg, segBoundary uint64
	// forceBounce is is_swiotlb_force_bounce: every streaming mapping
	// bounces (swiotlb=force, confidential-computing guests).
	forceBounce bool
	// userDMA: the device is owned by user space (VFIO), SetUserDMA.
	userDMA bool
	// tr is the device's translation (Translator); direct says it is
	// Direct{}, so that an access translates without the interface's
	// calls (the identity at no cost, as Direct.ToPhys).
	tr     Translator
	direct bool
	// mapper is tr when it is a Mapper (an IOMMU domain), else nil.
	mapper Mapper
	// scratch holds the ranges of an access being made.
	scratch []mem.PhysRange
}

// newDevice takes the limits from the spec (a GPU passes the zero
// Device: the spec gives GPUs no DMA limits, so a 64-bit mask and the PCI
// core's defaults).
func newDevice(x *DMA, name string, node int, s platform.Device) *Device {
	return &Device{
		dma: x, name: name, node: node,
		mask:        bitMask(s.MaskBits()),
		maxSeg:      uint64(s.MaxSeg()),
		segBoundary: uint64(s.SegBoundary()) - 1,
		tr:          Direct{},
		direct:      true,
	}
}

// Name is the device's name in the platform.
func (d *Device) Name() string { return d.name }

// Node is the NUMA node of the device (dev_to_node): where its coherent
// buffers are allocated and whose CPUs do its bounce copies.
func (d *Device) Node() int { return d.node }

// Coherent reports whether the device's DMA snoops the CPU caches
// (dev_is_dma_coherent): if so, no streaming call does cache maintenance.
func (d *Device) Coherent() bool { return d.coherent }

// Mask is the DMA mask: the highest bus address the device can drive.
func (d *Device) Mask() uint64 { return d.mask }

// MaxSegmentSize is dma_get_max_seg_size.
func (d *Device) MaxSegmentSize() uint64 { return d.maxSeg }

// SegmentBoundary is dma_get_seg_boundary: a segment may not cross a
// multiple of SegmentBoundary()+1.
func (d *Device) SegmentBoundary() uint64 { return d.segBoundary }

// SetMask is dma_set_mask_and_coherent(dev, DMA_BIT_MASK(bits)). As
// dma_direct_supported, it refuses (EIO) a mask that cannot reach the
// lowest zone; the model has no ZONE_DMA, so that is 32 bits, or less
// when all of DRAM lies below it. A mask that does not reach all of DRAM
// reserves the bounce pool if it is not there yet.
func (d *Device) SetMask(bits int) error {
	if bits < 1 || bits > 64 {
		return fmt.Errorf("dma_set_mask_and_coherent(%s, DMA_BIT_MASK(%d)): %w", d.name, bits, syscall.EIO)
	}
	mask := bitMask(bits)
	if mask < min(uint64(d.dma.dramTop), 1<<32-1) {
		return fmt.Errorf("dma_set_mask_and_coherent(%s, DMA_BIT_MASK(%d)): below ZONE_DMA32: %w", d.name, bits, syscall.EIO)
	}
	if mask < uint64(d.dma.dramTop) {
		if err := d.dma.ensureSwiotlb(); err != nil {
			return err
		}
	}
	d.mask = mask
	return nil
}

// SetMaxSegmentSize is dma_set_max_seg_size.
func (d *Device) SetMaxSegmentSize(size uint64) { d.maxSeg = size }

// SetSegmentBoundary is dma_set_seg_boundary (mask is the boundary minus
// one).
func (d *Device) SetSegmentBoundary(mask uint64) { d.segBoundary = mask }

// SetUserDMA marks the device as given to a user-space driver (VFIO
// took its DMA ownership) or back to the kernel. While it is, its
// accesses reach memory its user pinned and mapped through VFIO, which
// the DMA API never sees: they are reported as Pinned accesses (not
// the DMA API's business); the IOMMU still judges them.
func (d *Device) SetUserDMA(on bool) { d.userDMA = on }

// SetForceBounce makes every streaming mapping of the device bounce
// through swiotlb, as swiotlb=force or a confidential-computing guest
// does; it reserves the pool if needed.
func (d *Device) SetForceBounce(on bool) error {
	if on {
		if err := d.dma.ensureSwiotlb(); err != nil {
			return err
		}
	}
	d.forceBounce = on
	return nil
}

// capable is dma_capable: [addr, addr+size) lies under the mask.
func (d *Device) capable(addr mem.DMAAddr, size uint64) bool {
	if addr == MappingErrorAddr {
		return false
	}
	if size == 0 {
		return uint64(addr) <= d.mask
	}
	end := uint64(addr) + size - 1
	return end >= uint64(addr) && end <= d.mask
}

// MappingError is dma_mapping_error: whether addr is the handle of a
// failed mapping. The check is an event (with no Proc: the call takes
// no process): dma-debug reports mappings whose handle was never
// checked.
func (d *Device) MappingError(addr mem.DMAAddr) bool {
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpMappingError, Header: sim.Header{Time: d.dma.eng.Now()}, Device: d.name, Addr: addr,
			Call: d.dma.call.begin("dma_mapping_error", d.name).hex("dma:", uint64(addr)).end(),
		}
		d.dma.fire()
	}
	return addr == MappingErrorAddr
}

// Unbind reports that the driver was unbound from the device
// (device_release_driver): mappings still pending then are leaks.
func (d *Device) Unbind(p *sim.Proc) {
	if d.dma.observed() {
		d.dma.ev = Event{
			Op: OpUnbind, Header: sim.Header{Time: p.Now(), Proc: p.Name()}, Device: d.name,
			Call: d.dma.call.begin("device_release_driver", d.name).end(),
		}
		d.dma.fire()
	}
}

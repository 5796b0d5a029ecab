package gpu

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/mem"
)

// MapExternal enters memory another driver owns in the unified address
// map, as device memory of d at a new address of d's window: what
// cuExternalMemoryGetMappedBuffer does with memory cuImportExternalMemory
// imported. phys are the pages, in the order of the range: another
// allocation's VRAM (an opaque export of the same GPU), or pages of the
// integrated GPU's DRAM (a dma-buf imported on Tegra). Kernels and copies
// reach them as they reach d's own memory, through the DMA layer. The
// pages are not d's: Free (cuMemFree of the mapped pointer) gives back
// the address range only. Empty or short phys is ErrInvalidValue, no
// address space left ErrOutOfMemory.
func (d *Device) MapExternal(phys []mem.PhysRange, size uint64) (Allocation, error) {
	var total uint64
	for _, r := range phys {
		total += r.Size
	}
	n, ok := alignUp(size, LargePageSize)
	switch {
	case size == 0 || total < size:
		return Allocation{}, fmt.Errorf("gpu: map external %#x bytes over %#x: %w", size, total, ErrInvalidValue)
	case !ok:
		return Allocation{}, fmt.Errorf("gpu: map external %#x bytes: %w", size, ErrOutOfMemory)
	}
	va, ok := d.va.alloc(n, LargePageSize)
	if !ok {
		return Allocation{}, fmt.Errorf("gpu: map external %#x bytes: %s's address window is full: %w", size, d.Name, ErrOutOfMemory)
	}
	b := &buffer{
		a: Allocation{
			Addr: mem.GPUAddr(va), Size: size, Type: MemoryDevice,
			Device: d.Index, BufferID: d.sys.newID(), Mapped: true,
		},
		dev: d, phys: slices.Clone(phys), external: n,
	}
	d.sys.insert(b)
	return b.a, nil
}

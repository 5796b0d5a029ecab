package dma

import (
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// cacheOp is the CPU cache maintenance one side of a streaming transfer
// needs on a non-coherent device (arch_sync_dma_for_device /
// arch_sync_dma_for_cpu).
type cacheOp uint8

const (
	// noCacheOp leaves the caches as they are.
	noCacheOp cacheOp = iota
	// invalidate discards the lines covering the buffer, dirty or not
	// (mem.Invalidate, DC IVAC): the CPU's next read comes from DRAM.
	invalidate
	// flush writes dirty lines back and discards them (mem.Flush, DC
	// CIVAC): DRAM holds the CPU's data and the cache holds none.
	flush
)

func (op cacheOp) String() string {
	switch op {
	case invalidate:
		return "invalidate"
	case flush:
		return "flush"
	}
	return "none"
}

// cacheOps is the direction table: which cache operation each direction
// implies when the buffer passes to the device (dma_map_*,
// dma_sync_*_for_device) and when it comes back to the CPU
// (dma_unmap_*, dma_sync_*_for_cpu). It applies to non-coherent devices
// only; a coherent device gets no cache operation at all.
//
// The model keeps one conservative table on every non-coherent device,
// whatever its architecture. At for_device, a buffer the device will
// read (TO_DEVICE, BIDIRECTIONAL) is flushed: written back and
// invalidated, as arch/microblaze/kernel/dma.c does, so the device sees
// every CPU update; one it will only write (FROM_DEVICE) is invalidated,
// so no dirty line can later be written back over the device's data.
// At for_cpu, every direction but TO_DEVICE is invalidated again, so the
// CPU reads what the device wrote and not lines it fetched
// speculatively meanwhile: the table in arch/arc/mm/dma.c (after Russell
// King's "dma_sync_*_for_cpu and direction=TO_DEVICE",
// lore.kernel.org/lkml/20180518175004.GF17671@n2100.armlinux.org.uk).
// Documentation/core-api/dma-api-howto.rst gives the ownership rule the
// table serves: between map and unmap the buffer is the device's.
//
// How real architectures differ: arm64 (arch/arm64/mm/dma-mapping.c)
// cleans (writes back, keeps the lines) for every direction at
// for_device, because an invalidate there would discard CPU data sharing
// a cache line with the buffer, and the for_cpu invalidate follows
// anyway ("arm64: mm: Don't invalidate FROM_DEVICE buffers at start of
// DMA transfer", Linux 5.19); at for_cpu it invalidates unless the
// direction is DMA_TO_DEVICE, as here. 32-bit Arm (__dma_page_cpu_to_dev)
// cleans for TO_DEVICE and BIDIRECTIONAL and invalidates for
// FROM_DEVICE. x86 is coherent and does nothing. Under the model's table
// a clean copy of a TO_DEVICE buffer does not survive the map; under
// arm64's (and ARC's) it does.
var cacheOps = [...]struct{ forDevice, forCPU cacheOp }{
	Bidirectional: {forDevice: flush, forCPU: invalidate},
	ToDevice:      {forDevice: flush, forCPU: noCacheOp},
	FromDevice:    {forDevice: invalidate, forCPU: invalidate},
}

// opForDevice and opForCPU look the table up; an invalid direction
// (DMA_NONE, or out of range) gets no operation: the kernel would BUG()
// before reaching the cache code, dmalab carries on and the checker
// reports the direction.
func opForDevice(dir Direction) cacheOp {
	if !dir.valid() {
		return noCacheOp
	}
	return cacheOps[dir].forDevice
}

func opForCPU(dir Direction) cacheOp {
	if !dir.valid() {
		return noCacheOp
	}
	return cacheOps[dir].forCPU
}

// apply performs op on [pa, pa+size) in every CPU cache, charging p the
// time mem charges for it.
func (op cacheOp) apply(m *mem.Memory, p *sim.Proc, pa mem.PhysAddr, size uint64) {
	switch op {
	case invalidate:
		m.Invalidate(p, pa, size)
	case flush:
		m.Flush(p, pa, size)
	}
}

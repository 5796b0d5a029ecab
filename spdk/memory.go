package spdk

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// ErrNoMemory is returned when the driver's DMA region is full
// (spdk_dma_zmalloc returning NULL).
var ErrNoMemory = errors.New("spdk: DMA region exhausted")

// Memory is a region of DMA-able memory: the CPU reaches it at VA (on
// NUMA node Node), the device at IOVA, contiguously in both. SPDK
// carves its queues and buffers out of hugepages that are physically
// scattered but mapped at one contiguous IOVA range; the model's
// region is the same.
type Memory struct {
	Mem  *mem.Memory
	Node int
	VA   mem.VirtAddr
	IOVA mem.DMAAddr
	Size uint64
	used uint64
}

// Buf is a piece of a Memory: Size bytes at VA for the CPU and IOVA
// for the device.
type Buf struct {
	VA   mem.VirtAddr
	IOVA mem.DMAAddr
	Size uint64
}

// Alloc carves size bytes aligned to align (a power of two) out of the
// region (spdk_dma_zmalloc; the model never frees: a driver allocates
// its queues and buffers once).
func (m *Memory) Alloc(size, align uint64) (Buf, error) {
	if size == 0 || align == 0 || align&(align-1) != 0 {
		return Buf{}, fmt.Errorf("spdk: alloc of %d bytes aligned to %d: %w", size, align, mem.ErrInvalid)
	}
	off := (m.used + align - 1) &^ (align - 1)
	if off+size > m.Size || off+size < off {
		return Buf{}, fmt.Errorf("spdk: alloc of %d bytes with %d of %d used: %w", size, m.used, m.Size, ErrNoMemory)
	}
	m.used = off + size
	return Buf{VA: m.VA + mem.VirtAddr(off), IOVA: m.IOVA + mem.DMAAddr(off), Size: size}, nil
}

// Used is how much of the region is allocated.
func (m *Memory) Used() uint64 { return m.used }

func (m *Memory) write(p *sim.Proc, va mem.VirtAddr, b []byte) { m.Mem.WriteBytes(p, m.Node, va, b) }

func (m *Memory) read(p *sim.Proc, va mem.VirtAddr, b []byte) { m.Mem.ReadBytes(p, m.Node, va, b) }

// Write stores data at byte off of b with the CPU.
func (m *Memory) Write(p *sim.Proc, b Buf, off uint64, data []byte) error {
	if off+uint64(len(data)) > b.Size {
		return fmt.Errorf("spdk: write of %d bytes at %d of a %d-byte buffer: %w", len(data), off, b.Size, mem.ErrInvalid)
	}
	m.write(p, b.VA+mem.VirtAddr(off), data)
	return nil
}

// Read loads n bytes at byte off of b with the CPU.
func (m *Memory) Read(p *sim.Proc, b Buf, off, n uint64) ([]byte, error) {
	if off+n > b.Size {
		return nil, fmt.Errorf("spdk: read of %d bytes at %d of a %d-byte buffer: %w", n, off, b.Size, mem.ErrInvalid)
	}
	out := make([]byte, n)
	m.read(p, b.VA+mem.VirtAddr(off), out)
	return out, nil
}

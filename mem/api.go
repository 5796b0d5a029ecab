package mem

// This file is the contract of package mem: the signatures other packages
// (dma, scenarios) are written against. Bodies marked "contract stub" are
// replaced by the implementation; signatures and documented semantics stay.

import (
	"errors"

	"github.com/dmalab/dmalab/platform"
	"github.com/dmalab/dmalab/sim"
)

// PageSize is the CPU's base page (4 KiB).
const PageSize = 4096

// Errors.
var (
	ErrNoMemory  = errors.New("out of memory")
	ErrBadAddr   = errors.New("bad address")
	ErrNoPayload = errors.New("payload mode is off")
)

// Options configure a Memory.
type Options struct {
	// Payload keeps the real bytes of every write, so that readers get
	// bytes, not only versions. Costs memory proportional to bytes
	// written; off for large runs.
	Payload bool
}

// Zone is where an allocation may come from (Linux's ZONE_DMA32 and
// ZONE_NORMAL).
type Zone int

const (
	// ZoneNormal prefers memory above 4 GiB and falls back below.
	ZoneNormal Zone = iota
	// ZoneDMA32 is memory below 4 GiB only (GFP_DMA32).
	ZoneDMA32
)

// Attr is the CPU's memory type for a mapping.
type Attr int

const (
	// Cached is normal write-back memory: accesses go through the CPU
	// caches.
	Cached Attr = iota
	// Uncached bypasses the caches at the node's UncachedRate (coherent
	// DMA buffers on a non-coherent platform, pgprot_dmacoherent).
	Uncached
)

// Class is what a kernel virtual address points at.
type Class int

const (
	ClassInvalid Class = iota // not mapped
	ClassLinear               // the linear map (kmalloc, page allocator)
	ClassVmalloc              // vmalloc area, page-scattered
	ClassStack                // a kernel stack (VMAP_STACK)
	ClassText                 // kernel text and rodata
	ClassRemap                // a remapped range (vmap with attributes: uncached coherent buffers)
)

// Memory is a machine's physical memory, kernel address space, CPU caches
// and the content of every byte (by version, and with payload, the bytes).
type Memory struct {
	spec *platform.Spec
	eng  *sim.Engine
	opt  Options
}

const stub = "mem: contract stub, not implemented yet"

// New builds the memory of spec: one DRAM range per NUMA node, a cache per
// node with the node's cache parameters, an empty kernel address space.
func New(spec *platform.Spec, eng *sim.Engine, opt Options) (*Memory, error) {
	return &Memory{spec: spec, eng: eng, opt: opt}, nil
}

// Observe registers fn for every access (CPU and device), in order.
func (m *Memory) Observe(fn func(Access)) { panic(stub) }

// Payload reports whether payload mode is on.
func (m *Memory) Payload() bool { return m.opt.Payload }

// ---- physical memory ----

// NodeRange is node's DRAM: [base, base+size).
func (m *Memory) NodeRange(node int) (base PhysAddr, size uint64) { panic(stub) }

// NodeOf is the NUMA node whose DRAM holds pa; false if pa is not DRAM.
func (m *Memory) NodeOf(pa PhysAddr) (int, bool) { panic(stub) }

// AllocPages allocates size bytes (rounded up to whole pages), physically
// contiguous, on node, from zone. ErrNoMemory when none is left.
func (m *Memory) AllocPages(node int, size uint64, zone Zone) (PhysAddr, error) { panic(stub) }

// FreePages frees what AllocPages returned (same size).
func (m *Memory) FreePages(pa PhysAddr, size uint64) error { panic(stub) }

// ---- kernel virtual addresses ----

// Kmalloc allocates size bytes in the linear map on node, aligned to the
// node's cache line at least (ARCH_DMA_MINALIGN), physically contiguous.
func (m *Memory) Kmalloc(node int, size uint64) (VirtAddr, error) { panic(stub) }

// Kfree frees a Kmalloc allocation.
func (m *Memory) Kfree(va VirtAddr) error { panic(stub) }

// Vmalloc allocates size bytes virtually contiguous, backed by pages
// that need not be physically contiguous.
func (m *Memory) Vmalloc(node int, size uint64) (VirtAddr, error) { panic(stub) }

// Vfree frees a Vmalloc allocation.
func (m *Memory) Vfree(va VirtAddr) error { panic(stub) }

// Remap maps [pa, pa+size) at a new kernel virtual address with attr
// (vmap/ioremap-style); the range stays mapped until Unremap.
func (m *Memory) Remap(pa PhysAddr, size uint64, attr Attr) (VirtAddr, error) { panic(stub) }

// Unremap removes a Remap mapping.
func (m *Memory) Unremap(va VirtAddr) error { panic(stub) }

// StackAddr is an address on the kernel stack of the process named proc
// (for the "DMA from the stack" bug); it is mapped and backed by RAM.
func (m *Memory) StackAddr(proc string) VirtAddr { panic(stub) }

// TextAddr is an address in kernel text/rodata.
func (m *Memory) TextAddr() VirtAddr { panic(stub) }

// Classify says what va points at, and its physical address and memory
// type when it is mapped.
func (m *Memory) Classify(va VirtAddr) (c Class, pa PhysAddr, attr Attr) { panic(stub) }

// VirtToPhys is virt_to_phys: valid for the linear map only.
func (m *Memory) VirtToPhys(va VirtAddr) (PhysAddr, error) { panic(stub) }

// PhysToVirt is the linear-map address of pa (phys_to_virt).
func (m *Memory) PhysToVirt(pa PhysAddr) VirtAddr { panic(stub) }

// ---- CPU accesses (cost virtual time on p) ----

// Read is a CPU on node reading [va, va+size) through its mapping
// (cached or uncached), costing size/MemcpyRate (cached) or
// size/UncachedRate (uncached) of p's time. The Access says what the CPU
// obtained (Stale when some byte is older than the latest write).
func (m *Memory) Read(p *sim.Proc, node int, va VirtAddr, size uint64) Access { panic(stub) }

// Write is a CPU on node writing [va, va+size): a new version, in the
// cache (write-allocate, lines dirty) or straight to DRAM when uncached.
func (m *Memory) Write(p *sim.Proc, node int, va VirtAddr, size uint64) Version { panic(stub) }

// ReadBytes is Read that also returns the bytes (payload mode; bytes of
// a write made without payload read as zeros).
func (m *Memory) ReadBytes(p *sim.Proc, node int, va VirtAddr, buf []byte) Access { panic(stub) }

// WriteBytes is Write with the bytes (kept in payload mode).
func (m *Memory) WriteBytes(p *sim.Proc, node int, va VirtAddr, data []byte) Version { panic(stub) }

// CopyPhys is a CPU on node copying size bytes from src to dst through
// the caches (a memcpy in the linear map: swiotlb bouncing, staging).
func (m *Memory) CopyPhys(p *sim.Proc, node int, dst, src PhysAddr, size uint64) { panic(stub) }

// ---- cache maintenance (all nodes' caches; cost on p, per line of the range) ----

// Clean writes dirty lines of [pa, pa+size) back to DRAM and keeps them,
// clean (arm64 DC CVAC).
func (m *Memory) Clean(p *sim.Proc, pa PhysAddr, size uint64) { panic(stub) }

// Invalidate discards the lines of [pa, pa+size), dirty or not (DC IVAC):
// dirty data not yet written back is lost.
func (m *Memory) Invalidate(p *sim.Proc, pa PhysAddr, size uint64) { panic(stub) }

// Flush writes back and discards the lines of [pa, pa+size) (DC CIVAC).
func (m *Memory) Flush(p *sim.Proc, pa PhysAddr, size uint64) { panic(stub) }

// ---- device accesses (no CPU time: the bytes move over the fabric separately) ----

// DeviceRead is dev reading [pa, pa+size). Coherent (snooping): it
// obtains the latest bytes, dirty cache lines included. Non-coherent: it
// reads DRAM, missing dirty lines (Stale when DRAM is behind).
func (m *Memory) DeviceRead(dev string, coherent bool, pa PhysAddr, size uint64) Access {
	panic(stub)
}

// DeviceWrite is dev writing [pa, pa+size): a new version in DRAM.
// Coherent: cache lines covering the range are invalidated (dirty ones
// written back first, as a snoop does). Non-coherent: caches are left as
// they are, so lines there become stale.
func (m *Memory) DeviceWrite(dev string, coherent bool, pa PhysAddr, size uint64) Version {
	panic(stub)
}

// DeviceReadBytes and DeviceWriteBytes are the payload forms.
func (m *Memory) DeviceReadBytes(dev string, coherent bool, pa PhysAddr, buf []byte) Access {
	panic(stub)
}

// DeviceWriteBytes is DeviceWrite with the bytes.
func (m *Memory) DeviceWriteBytes(dev string, coherent bool, pa PhysAddr, data []byte) Version {
	panic(stub)
}

// ---- inspection (tests, reports) ----

// Latest is the version of the latest write to pa.
func (m *Memory) Latest(pa PhysAddr) Version { panic(stub) }

// Footprint is the number of spans the content maps hold (versions of
// DRAM, latest writes and caches): what memory use grows with.
func (m *Memory) Footprint() int { panic(stub) }

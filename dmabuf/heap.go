package dmabuf

import (
	"fmt"
	"math/bits"
	"syscall"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// DefaultCMASize is the size of a CMA area when none is given:
// CONFIG_CMA_SIZE_MBYTES in arch/arm64/configs/defconfig (32 MiB); the
// cma= kernel parameter sets it on real systems.
const DefaultCMASize = 32 << 20

// cmaMaxAlignOrder is CONFIG_CMA_ALIGNMENT's default: an allocation is
// aligned to its own order, at most 2^8 pages (1 MiB).
const cmaMaxAlignOrder = 8

// Heap is a DMA-BUF heap (struct dma_heap, /dev/dma_heap/<name>): an
// allocator whose allocations are dma-bufs. The system heap
// (drivers/dma-buf/heaps/system_heap.c) gives pages from anywhere,
// physically scattered; the CMA heap (heaps/cma_heap.c) gives one
// physically contiguous run from a reserved area of limited size.
type Heap struct {
	l    *Layer
	name string
	mem  *mem.Memory
	cma  *cmaArea
}

// cmaArea is struct cma: a physically contiguous range reserved for
// contiguous allocations, with a bitmap of its pages in use.
type cmaArea struct {
	node int
	size uint64
	// base is the area's start; reserved says it is taken from the
	// page allocator (on first use: see AddCMAHeap).
	base     mem.PhysAddr
	reserved bool
	used     []bool
}

// AddSystemHeap adds /dev/dma_heap/system over memory m.
func (l *Layer) AddSystemHeap(m *mem.Memory) (*Heap, error) {
	return l.addHeap(&Heap{l: l, name: "system", mem: m})
}

// AddCMAHeap adds a CMA heap called name (Linux names the default
// area's heap "reserved", or after its device-tree node) over size
// bytes of node's memory below 4 GiB (0 means DefaultCMASize). Linux
// reserves the area at boot (cma_declare_contiguous); the model takes
// it from the page allocator at the heap's first allocation, so that a
// system that never uses the heap keeps the memory layout it had
// without it.
func (l *Layer) AddCMAHeap(m *mem.Memory, name string, node int, size uint64) (*Heap, error) {
	if size == 0 {
		size = DefaultCMASize
	}
	if size%mem.PageSize != 0 || node < 0 || node >= m.Nodes() {
		return nil, fmt.Errorf("dmabuf: CMA heap %s: %#x bytes on node %d: %w", name, size, node, syscall.EINVAL)
	}
	return l.addHeap(&Heap{l: l, name: name, mem: m, cma: &cmaArea{node: node, size: size}})
}

func (l *Layer) addHeap(h *Heap) (*Heap, error) {
	if _, err := l.Heap(h.name); err == nil {
		return nil, fmt.Errorf("dmabuf: heap %s exists: %w", h.name, syscall.EEXIST)
	}
	l.heaps = append(l.heaps, h)
	return h, nil
}

// Heap opens /dev/dma_heap/<name>: ENOENT if there is no such heap.
func (l *Layer) Heap(name string) (*Heap, error) {
	for _, h := range l.heaps {
		if h.name == name {
			return h, nil
		}
	}
	return nil, fmt.Errorf("open /dev/dma_heap/%s: %w", name, syscall.ENOENT)
}

// Heaps lists the heaps' names, in the order they were added.
func (l *Layer) Heaps() []string {
	var out []string
	for _, h := range l.heaps {
		out = append(out, h.name)
	}
	return out
}

// Name is the heap's name (its node in /dev/dma_heap).
func (h *Heap) Name() string { return h.name }

// Contiguous reports whether the heap's buffers are physically
// contiguous.
func (h *Heap) Contiguous() bool { return h.cma != nil }

// Allocate is DMA_HEAP_IOCTL_ALLOC by thread p of process proc: a new
// buffer of size bytes (rounded up to the page) and a descriptor of
// proc for it. The system heap takes pages from proc's node. Heap
// flags must be 0 (EINVAL otherwise, as DMA_HEAP_VALID_HEAP_FLAGS is
// empty); a heap without the memory fails with ENOMEM.
func (h *Heap) Allocate(p *sim.Proc, proc *kernel.Process, size uint64, heapFlags uint64) (int, error) {
	if heapFlags != 0 {
		return -1, fmt.Errorf("DMA_HEAP_IOCTL_ALLOC(%s, %d, heap_flags %#x): %w", h.name, size, heapFlags, syscall.EINVAL)
	}
	b, err := h.Alloc(p, proc.Node(), size)
	if err != nil {
		return -1, err
	}
	fd, err := b.FD(proc)
	if err != nil {
		// dma_buf_fd failed: the buffer goes with its last (only)
		// reference, as dma_buf_put does there.
		_ = b.info.Ops.Release(p, b)
		b.released = true
		return -1, fmt.Errorf("DMA_HEAP_IOCTL_ALLOC(%s, %d): %w", h.name, size, err)
	}
	return fd, nil
}

// Alloc is the heap's allocate operation without a descriptor (what a
// kernel driver calls, dma_heap_buffer_alloc): a buffer of size bytes
// rounded up to the page, zeroed by p as both heaps do (the system
// heap's pages come with __GFP_ZERO, the CMA heap clears its pages),
// which costs p a CPU write of the whole buffer.
func (h *Heap) Alloc(p *sim.Proc, node int, size uint64) (*Buffer, error) {
	call := fmt.Sprintf("DMA_HEAP_IOCTL_ALLOC(%s, %d)", h.name, size)
	if size == 0 || size > 1<<62 {
		return nil, fmt.Errorf("%s: %w", call, syscall.EINVAL)
	}
	size = (size + mem.PageSize - 1) &^ (mem.PageSize - 1)
	hb := &heapBuffer{h: h, node: node}
	var err error
	if h.cma != nil {
		hb.node = h.cma.node
		err = hb.allocCMA(size)
	} else {
		err = hb.allocSystem(size)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	h.mem.Write(p, hb.node, hb.va, size)
	b, err := h.l.Export(p, ExportInfo{ExpName: h.name, Ops: hb, Size: size, Priv: hb})
	if err != nil {
		_ = hb.free()
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	return b, nil
}

// heapBuffer is a heap's buffer and its exporter (struct
// system_heap_buffer, struct cma_heap_buffer): its pages and the
// kernel address at which the model reaches them.
type heapBuffer struct {
	h    *Heap
	node int
	// va is the buffer's kernel address: a vmalloc area over the
	// system heap's scattered pages, the linear map of a CMA run.
	va    mem.VirtAddr
	pages []mem.PhysRange
	// first and n are a CMA buffer's pages in its area's bitmap.
	first, n int
}

// allocSystem takes scattered single pages (vmalloc's allocator, which
// never gives two virtually consecutive pages that are physically
// adjacent; Linux's system heap tries 1 MiB and 64 KiB blocks first,
// so real buffers are less scattered than these), and records them.
func (hb *heapBuffer) allocSystem(size uint64) error {
	m := hb.h.mem
	va, err := m.Vmalloc(hb.node, size)
	if err != nil {
		return fmt.Errorf("%w: %w", err, syscall.ENOMEM)
	}
	r, _, _, err := m.Translate(va, size)
	if err != nil {
		_ = m.Vfree(va)
		return err
	}
	hb.va, hb.pages = va, r
	return nil
}

// allocCMA is cma_alloc: the first free run of the area's bitmap
// aligned to the allocation's order (at most cmaMaxAlignOrder), the
// area reserved on first use. A full area is ENOMEM, as cma_heap_allocate
// returns.
func (hb *heapBuffer) allocCMA(size uint64) error {
	c, m := hb.h.cma, hb.h.mem
	if !c.reserved {
		base, err := m.AllocPagesAligned(c.node, c.size, 2<<20, mem.ZoneDMA32)
		if err != nil {
			return fmt.Errorf("reserving the CMA area (%d bytes on node %d): %w: %w", c.size, c.node, err, syscall.ENOMEM)
		}
		c.base, c.reserved, c.used = base, true, make([]bool, c.size/mem.PageSize)
	}
	n := int(size / mem.PageSize)
	order := min(bits.Len(uint(n-1)), cmaMaxAlignOrder)
	align := 1 << order
	for first := 0; first+n <= len(c.used); first += align {
		free := true
		for i := first; i < first+n; i++ {
			if c.used[i] {
				free = false
				break
			}
		}
		if !free {
			continue
		}
		for i := first; i < first+n; i++ {
			c.used[i] = true
		}
		pa := c.base + mem.PhysAddr(uint64(first)*mem.PageSize)
		hb.first, hb.n = first, n
		hb.pages = []mem.PhysRange{{Start: pa, Size: size}}
		hb.va = m.PhysToVirt(pa)
		return nil
	}
	return fmt.Errorf("CMA area %s: no free run of %d pages: %w", hb.h.name, n, syscall.ENOMEM)
}

// free gives the buffer's memory back.
func (hb *heapBuffer) free() error {
	if c := hb.h.cma; c != nil {
		for i := hb.first; i < hb.first+hb.n; i++ {
			c.used[i] = false
		}
		return nil
	}
	return hb.h.mem.Vfree(hb.va)
}

// table is the buffer's sg table: one entry per physical run.
func (hb *heapBuffer) table() *dma.SGTable {
	sgt := dma.SGAllocTable(len(hb.pages))
	for i, r := range hb.pages {
		sgt.SGL[i].SetPage(r.Start, r.Size, 0)
	}
	return sgt
}

// Attach has nothing to check: any device may import heap memory.
func (hb *heapBuffer) Attach(*sim.Proc, *Attachment) error { return nil }

// Detach has nothing to undo.
func (hb *heapBuffer) Detach(*sim.Proc, *Attachment) {}

// MapDMABuf is system_heap_map_dma_buf / cma_heap_map_dma_buf:
// dma_map_sgtable of the buffer's pages for the importer (through its
// IOMMU domain, where the pages merge into one IOVA range; else
// dma-direct, one segment per run, bounced if the device cannot reach
// them).
func (hb *heapBuffer) MapDMABuf(p *sim.Proc, a *Attachment, dir dma.Direction) (*dma.SGTable, error) {
	sgt := hb.table()
	if err := a.Device().MapSGTable(p, sgt, dir); err != nil {
		return nil, err
	}
	return sgt, nil
}

// UnmapDMABuf is dma_unmap_sgtable.
func (hb *heapBuffer) UnmapDMABuf(p *sim.Proc, a *Attachment, sgt *dma.SGTable, dir dma.Direction) {
	a.Device().UnmapSGTable(p, sgt, dir)
}

// BeginCPUAccess is system_heap_dma_buf_begin_cpu_access: a sync for the
// CPU of every mapped attachment, which on a non-coherent importer is
// the cache maintenance (an invalidate) that makes the CPU read what the
// device wrote.
func (hb *heapBuffer) BeginCPUAccess(p *sim.Proc, b *Buffer, dir dma.Direction) error {
	for _, a := range b.attachments {
		if a.sgt != nil {
			a.Device().SyncSGTableForCPU(p, a.sgt, dir)
		}
	}
	return nil
}

// EndCPUAccess is system_heap_dma_buf_end_cpu_access: a sync for the
// device of every mapped attachment (on a non-coherent importer, the
// write-back of what the CPU wrote).
func (hb *heapBuffer) EndCPUAccess(p *sim.Proc, b *Buffer, dir dma.Direction) error {
	for _, a := range b.attachments {
		if a.sgt != nil {
			a.Device().SyncSGTableForDevice(p, a.sgt, dir)
		}
	}
	return nil
}

// Mmap maps the buffer's pages cached, as both heaps do.
func (hb *heapBuffer) Mmap(*sim.Proc, *Buffer) (mem.VirtAddr, error) { return hb.va, nil }

// Vmap is the buffer's kernel address (vmap of its pages).
func (hb *heapBuffer) Vmap(*sim.Proc, *Buffer) (mem.VirtAddr, error) { return hb.va, nil }

// Vunmap keeps the model's mapping, which the buffer owns until release.
func (hb *heapBuffer) Vunmap(*sim.Proc, *Buffer, mem.VirtAddr) {}

// Release frees the pages (system_heap_dma_buf_release,
// cma_heap_dma_buf_release).
func (hb *heapBuffer) Release(*sim.Proc, *Buffer) error { return hb.free() }

// Pages are the physical runs of a buffer's memory, in address order
// of the buffer: a heap buffer's, or what an exporter that implements
// Paged gives; nil for others (memory the model does not address
// physically, as a GPU's VRAM).
func Pages(b *Buffer) []mem.PhysRange {
	if hb, ok := b.info.Priv.(*heapBuffer); ok {
		return append([]mem.PhysRange(nil), hb.pages...)
	}
	if pg, ok := b.info.Ops.(Paged); ok {
		return pg.Pages(b)
	}
	return nil
}

// Paged is an Exporter that says which physical memory its buffers
// are (a V4L2 driver's MMAP buffers exported by VIDIOC_EXPBUF): the
// export event then carries it, so that the checker can tell which
// device and CPU accesses touch the buffer.
type Paged interface {
	Pages(b *Buffer) []mem.PhysRange
}

package cuda

import (
	"errors"
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/gpu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// Managed memory's system-memory pages behind an IOMMU. The
// unified-memory driver keeps managed pages resident on the CPU in CPU
// chunks of up to 2 MiB and maps each chunk for the GPUs of the VA space
// through the DMA API (open-gpu-kernel-modules, kernel-open/nvidia-uvm:
// uvm_cpu_chunk_map_gpu → uvm_gpu_map_cpu_pages → dma_map_page), so
// that their copy engines migrate pages to and from it and their SMs
// access it remotely at the IOVAs the mapping gave. The model follows
// no content of managed memory and gives its CPU pages no physical
// address under dma-direct, where the bus address would cost nothing; a
// GPU behind an IOMMU domain gets, for each 2 MiB VA block whose system
// memory one of its transfers reads or writes, a 2 MiB chunk of DRAM
// (2 MiB-aligned: UVM allocates 2 MiB CPU chunks where it can) mapped
// for every discrete GPU behind a domain when the chunk is made, and
// unmapped and freed with the managed allocation.

// umChunk is the system memory of one VA block of managed memory.
type umChunk struct {
	pa mem.PhysAddr
	// maps are the chunk's mappings, one per GPU behind an IOMMU
	// domain, by GPU index.
	maps []umChunkMap
}

type umChunkMap struct {
	gpu  int
	mp   dma.Mapper
	iova mem.DMAAddr
}

// translated reports whether GPU g's DMA goes through an IOMMU domain.
func (d *Driver) translated(g int) bool {
	if d.integrated(g) {
		return false
	}
	_, ok := d.sys.Devices[g].DMA().Translator().(dma.Mapper)
	return ok
}

// umChunkOf is the system-memory chunk of the VA block at block, made
// and mapped now if it is not there yet (p pays the mapping, as the
// faulting or prefetching thread does in UVM), on node.
func (d *Driver) umChunkOf(p *sim.Proc, block uvm.Addr, node int) (*umChunk, error) {
	if c := d.umChunks[block]; c != nil {
		return c, nil
	}
	m := d.m.Mem
	pa, err := m.AllocPagesAligned(node, uvm.BlockSize, uvm.BlockSize, mem.ZoneNormal)
	if err != nil {
		return nil, fmt.Errorf("cuda: uvm: a CPU chunk for the VA block at %#x: %w", uint64(block), err)
	}
	c := &umChunk{pa: pa}
	for g := range d.sys.Devices {
		if !d.translated(g) {
			continue
		}
		mp := d.sys.Devices[g].DMA().Translator().(dma.Mapper)
		iova, err := mp.Map(p, pa, uvm.BlockSize, dma.Bidirectional)
		if err != nil {
			err = fmt.Errorf("cuda: uvm: dma_map_page of the CPU chunk at %v for %s: %w", pa, d.sys.Devices[g].Name, err)
			return nil, errors.Join(err, d.releaseUMChunk(p, c))
		}
		c.maps = append(c.maps, umChunkMap{gpu: g, mp: mp, iova: iova})
		p.Sleep(gpu.IOMMUMapCallCost + sim.Time(gpu.IOMMULeaves(iova, pa, uvm.BlockSize))*gpu.IOMMUMapLeafCost)
	}
	if d.umChunks == nil {
		d.umChunks = map[uvm.Addr]*umChunk{}
	}
	d.umChunks[block] = c
	return c, nil
}

// releaseUMChunk unmaps c from every GPU and frees its pages.
func (d *Driver) releaseUMChunk(p *sim.Proc, c *umChunk) error {
	for _, cm := range c.maps {
		cm.mp.Unmap(p, cm.iova, uvm.BlockSize, dma.Bidirectional)
	}
	c.maps = nil
	return d.m.Mem.FreePages(c.pa, uvm.BlockSize)
}

// releaseUMChunks releases the chunks of managed allocation a's blocks
// (at cuMemFree, after the unified-memory driver freed it).
func (d *Driver) releaseUMChunks(p *sim.Proc, a *uvm.Allocation) error {
	var blocks []uvm.Addr
	for b := range d.umChunks {
		if b >= a.Base && b < a.Base+uvm.Addr(a.Size) {
			blocks = append(blocks, b)
		}
	}
	// In address order: the unmaps' IOVAs and costs the same every run.
	slices.Sort(blocks)
	var errs []error
	for _, b := range blocks {
		errs = append(errs, d.releaseUMChunk(p, d.umChunks[b]))
		delete(d.umChunks, b)
	}
	return errors.Join(errs...)
}

// umSpans are GPU g's spans of the pages in mask of the VA block at
// block in system memory: runs of pages at the IOVAs of the block's
// chunk for g; nil when g's DMA is not translated.
func (d *Driver) umSpans(p *sim.Proc, g int, block uvm.Addr, mask uvm.PageMask) ([]dma.Span, error) {
	if !d.translated(g) {
		return nil, nil
	}
	c, err := d.umChunkOf(p, block, d.m.GPUs[g].Node)
	if err != nil {
		return nil, err
	}
	var iova mem.DMAAddr
	found := false
	for _, cm := range c.maps {
		if cm.gpu == g {
			iova, found = cm.iova, true
		}
	}
	if !found {
		return nil, fmt.Errorf("cuda: uvm: the CPU chunk of the VA block at %#x is not mapped for %s", uint64(block), d.sys.Devices[g].Name)
	}
	var spans []dma.Span
	for pg := mask.First(); pg >= 0; {
		end := pg + 1
		for end < uvm.PagesPerBlock && mask.Test(end) {
			end++
		}
		spans = append(spans, dma.PinnedSpan(iova+mem.DMAAddr(pg*uvm.PageSize), uint64(end-pg)*uvm.PageSize))
		if end >= uvm.PagesPerBlock {
			break
		}
		pg = mask.Next(end)
	}
	return spans, nil
}

// remoteSpans are GPU g's spans of n bytes of managed memory from
// address ua on, read or written remotely in system memory: the pages
// of their blocks' chunks. Which of an access's pages are remote is not
// known here (uvm reports a count), so the first n bytes stand for them;
// the IOTLB sees the same 2 MiB leaves either way.
func (d *Driver) remoteSpans(p *sim.Proc, g int, ua uvm.Addr, n uint64) ([]dma.Span, error) {
	var spans []dma.Span
	for n > 0 {
		block := ua &^ (uvm.BlockSize - 1)
		first := int((ua - block) / uvm.PageSize)
		k := min(n, uint64(block+uvm.BlockSize-ua))
		last := int((ua - block + uvm.Addr(k) + uvm.PageSize - 1) / uvm.PageSize)
		var mask uvm.PageMask
		mask.SetRange(first, last)
		s, err := d.umSpans(p, g, block, mask)
		if err != nil || s == nil {
			return nil, err
		}
		// The pages' spans, trimmed to the bytes.
		off := uint64(ua-block) - uint64(first)*uvm.PageSize
		s[0].Bus += mem.DMAAddr(off)
		s[0].Len -= off
		s[len(s)-1].Len -= uint64(last-first)*uvm.PageSize - off - k
		spans = append(spans, s...)
		ua += uvm.Addr(k)
		n -= k
	}
	return spans, nil
}

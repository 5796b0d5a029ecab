package gpu

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// Pinned host memory behind an IOMMU. The NVIDIA driver maps the pages of
// pinned and registered host memory through the DMA API for each GPU
// that may access them, when they are allocated or registered
// (open-gpu-kernel-modules, kernel-open/nvidia/nv-dma.c:
// nv_dma_map_pages and nv_dma_map_sgt, dma_map_sg_attrs with
// DMA_BIDIRECTIONAL), and unmaps them when they are freed or
// unregistered. Under dma-direct the bus address is the physical address
// and the mapping costs nothing, so the model skips it; a GPU whose DMA
// device is attached to an IOMMU domain (its Translator is a dma.Mapper)
// gets the pages mapped in its domain: one contiguous IOVA range per
// buffer (dma-iommu merges an sg list into one range), 2 MiB or 1 GiB
// leaves where the IOVA and the pages are aligned for them
// (iommu_pgsize), the rest in 4 KiB leaves.

// The host's cost of mapping pinned memory for a GPU behind an IOMMU,
// on top of pinning it (platform.GPU.Pin).
const (
	// IOMMUMapCallCost is one mapping of a buffer for one GPU: the IOVA
	// allocation (a range this large misses the per-CPU IOVA caches and
	// searches the domain's tree) and iommu_iotlb_sync_map. Assumed:
	// a microsecond, the order of the allocations and syncs Peleg et al.
	// time in "Utilizing the IOMMU scalably" (USENIX ATC 2015).
	IOMMUMapCallCost = 1 * sim.Microsecond
	// IOMMUMapLeafCost is one leaf entry the mapping writes: the store
	// and, on a unit that does not snoop its tables, the flush of its
	// cache line (domain_flush_cache in drivers/iommu/intel/iommu.c).
	// Assumed: 50 ns, a cache-line flush to DRAM.
	IOMMUMapLeafCost = 50 * sim.Nanosecond
)

// hostMap is one physical range of pinned host memory mapped for a GPU:
// its bus address (IOVA) in the GPU's domain.
type hostMap struct {
	pa   mem.PhysAddr
	size uint64
	bus  mem.DMAAddr
}

// dmaMapping is a pinned buffer's mapping for one GPU, for the unmap.
type dmaMapping struct {
	dev  *Device
	mp   dma.Mapper
	iova mem.DMAAddr
	size uint64
	maps []hostMap
}

// mapper is the GPU's DMA device's translation when it allocates bus
// addresses (an IOMMU domain), else nil. An integrated GPU reaches DRAM
// through its own MMU in the model (Spans gives LocalSpans), so it maps
// nothing.
func (d *Device) mapper() dma.Mapper {
	if d.integrated {
		return nil
	}
	mp, _ := d.dma.Translator().(dma.Mapper)
	return mp
}

// granuleRanges are ranges widened to whole granules, adjacent ones
// merged: what the driver's sg table of whole pages holds.
func granuleRanges(ranges []mem.PhysRange, g uint64) []mem.PhysRange {
	var out []mem.PhysRange
	for _, r := range ranges {
		s := uint64(r.Start) &^ (g - 1)
		e := (uint64(r.Start) + r.Size + g - 1) &^ (g - 1)
		if k := len(out); k > 0 && uint64(out[k-1].Start)+out[k-1].Size >= s {
			last := &out[k-1]
			last.Size = max(uint64(last.Start)+last.Size, e) - uint64(last.Start)
			continue
		}
		out = append(out, mem.PhysRange{Start: mem.PhysAddr(s), Size: e - s})
	}
	return out
}

// IOMMULeaves is how many leaf entries mapping [pa, pa+size) at iova
// writes, as iommu_pgsize picks page sizes: at each step the largest of
// 1 GiB, 2 MiB and 4 KiB that the IOVA and the physical address are both
// aligned to and that the rest covers. iova, pa and size are 4 KiB
// multiples.
func IOMMULeaves(iova mem.DMAAddr, pa mem.PhysAddr, size uint64) int {
	n := 0
	for done := uint64(0); done < size; n++ {
		a, p, rem := uint64(iova)+done, uint64(pa)+done, size-done
		step := uint64(mem.PageSize)
		for _, ps := range []uint64{1 << 30, 2 << 20} {
			if ps <= rem && (a|p)&(ps-1) == 0 {
				step = ps
				break
			}
		}
		done += step
	}
	return n
}

// mapHost maps b's pages for every GPU behind an IOMMU domain, p paying
// IOMMUMapCallCost per GPU and IOMMUMapLeafCost per leaf; a failure
// undoes what was mapped.
func (s *System) mapHost(p *sim.Proc, b *buffer) error {
	for _, d := range s.Devices {
		mp := d.mapper()
		if mp == nil {
			continue
		}
		ranges := granuleRanges(b.phys, mp.Granule())
		iova, err := mp.MapSG(p, ranges, dma.Bidirectional)
		if err != nil {
			s.unmapHost(p, b)
			return fmt.Errorf("%s: dma_map_sg: %w", d.Name, err)
		}
		m := dmaMapping{dev: d, mp: mp, iova: iova}
		leaves := 0
		for _, r := range ranges {
			bus := iova + mem.DMAAddr(m.size)
			m.maps = append(m.maps, hostMap{pa: r.Start, size: r.Size, bus: bus})
			leaves += IOMMULeaves(bus, r.Start, r.Size)
			m.size += r.Size
		}
		b.dmaMaps = append(b.dmaMaps, m)
		d.addHostMaps(m.maps)
		p.Sleep(IOMMUMapCallCost + sim.Time(leaves)*IOMMUMapLeafCost)
	}
	return nil
}

// unmapHost unmaps b's pages from every GPU they were mapped for (p pays
// the invalidation of a strict domain).
func (s *System) unmapHost(p *sim.Proc, b *buffer) {
	for _, m := range b.dmaMaps {
		m.dev.removeHostMaps(m.maps)
		m.mp.Unmap(p, m.iova, m.size, dma.Bidirectional)
	}
	b.dmaMaps = nil
}

// addHostMaps enters maps in the GPU's table of pinned memory, sorted by
// physical address.
func (d *Device) addHostMaps(maps []hostMap) {
	for _, m := range maps {
		i, _ := slices.BinarySearchFunc(d.hostMaps, m.pa, func(x hostMap, pa mem.PhysAddr) int { return cmpPhys(x.pa, pa) })
		d.hostMaps = slices.Insert(d.hostMaps, i, m)
	}
}

func (d *Device) removeHostMaps(maps []hostMap) {
	for _, m := range maps {
		if i := slices.Index(d.hostMaps, m); i >= 0 {
			d.hostMaps = slices.Delete(d.hostMaps, i, i+1)
		}
	}
}

func cmpPhys(a, b mem.PhysAddr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// hostBus is the bus address of pinned memory at pa for the GPU and how
// many bytes from pa its mapping covers; false when no mapping of the
// GPU covers pa. Two buffers may map the same page (registrations of
// neighbouring ranges share their boundary page), each at its own IOVA:
// either serves.
func (d *Device) hostBus(pa mem.PhysAddr) (mem.DMAAddr, uint64, bool) {
	i, _ := slices.BinarySearchFunc(d.hostMaps, pa, func(x hostMap, pa mem.PhysAddr) int {
		if x.pa <= pa {
			return -1
		}
		return 1
	})
	// d.hostMaps[:i] start at or below pa; the nearest usually covers it.
	for j := i - 1; j >= 0; j-- {
		m := d.hostMaps[j]
		if pa < m.pa+mem.PhysAddr(m.size) {
			return m.bus + mem.DMAAddr(pa-m.pa), uint64(m.pa) + m.size - uint64(pa), true
		}
		if i-j > 8 {
			break
		}
	}
	for _, m := range d.hostMaps {
		if m.pa <= pa && pa < m.pa+mem.PhysAddr(m.size) {
			return m.bus + mem.DMAAddr(pa-m.pa), uint64(m.pa) + m.size - uint64(pa), true
		}
	}
	return 0, 0, false
}

// hostSpans are the pinned spans of host range r for a GPU behind an
// IOMMU: the IOVAs its mappings gave. A part no mapping covers keeps its
// physical address, which the domain does not translate: the access
// faults, as a real GPU's would on memory its driver never mapped.
func (d *Device) hostSpans(out []dma.Span, r mem.PhysRange) []dma.Span {
	for r.Size > 0 {
		bus, n, ok := d.hostBus(r.Start)
		if !ok {
			return append(out, dma.PinnedSpan(mem.DMAAddr(r.Start), r.Size))
		}
		n = min(n, r.Size)
		if k := len(out); k > 0 && out[k-1].Pinned && !out[k-1].Local && out[k-1].Bus+mem.DMAAddr(out[k-1].Len) == bus {
			out[k-1].Len += n
		} else {
			out = append(out, dma.PinnedSpan(bus, n))
		}
		r.Start += mem.PhysAddr(n)
		r.Size -= n
	}
	return out
}

// HostIOVAs are the bus addresses and sizes of the mappings of pinned
// host memory at va for each GPU behind an IOMMU domain, by GPU index
// (absent: that GPU's DMA is not translated). For tests and reports.
func (s *System) HostIOVAs(va mem.VirtAddr) (map[int]mem.DMAAddr, error) {
	b := s.lookup(mem.GPUAddr(va))
	if b == nil || b.a.Type != MemoryHost {
		return nil, fmt.Errorf("gpu: host IOVAs of %v: %w", va, ErrHostMemoryNotRegistered)
	}
	out := map[int]mem.DMAAddr{}
	for _, m := range b.dmaMaps {
		out[m.dev.Index] = m.iova + mem.DMAAddr(uint64(b.phys[0].Start)&(m.mp.Granule()-1))
	}
	return out, nil
}

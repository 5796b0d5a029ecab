package nvp2p

import (
	"syscall"

	"github.com/dmalab/dmalab/dma"
	kern "github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// The Tegra flavour (Jetson: NVIDIA's GPUDirect RDMA guide, "Porting
// to Tegra"). An integrated GPU has no BAR1 and its memory is the SoC's
// DRAM, so what a third-party driver pins is pinned host memory
// (cudaHostAlloc) in 4 KiB pages, and maps for its device through the
// Linux DMA API (struct device, a direction), which an SMMU may
// translate. The calls take other arguments (nv-p2p.h for Tegra):
//
//	nvidia_p2p_get_pages(u64 vaddr, u64 size, **page_table, free_callback, data)
//	nvidia_p2p_dma_map_pages(struct device *, page_table, **map, enum dma_data_direction)
//	nvidia_p2p_dma_unmap_pages(map), nvidia_p2p_put_pages(page_table)
//
// and there are no persistent pins and no tokens.

// GetPagesTegra is the Tegra nvidia_p2p_get_pages: pin [vaddr,
// vaddr+size) of caller's pinned host memory in 4 KiB pages; the
// range must be 4 KiB aligned (-EINVAL), caller's own (-EINVAL), and
// a free callback is required. On a discrete GPU: -ENOTSUPP.
func (d *Driver) GetPagesTegra(t *sim.Proc, caller *kern.Process, vaddr mem.GPUAddr, size uint64, cb FreeCallback, data any) (*PageTable, error) {
	const call = "nvidia_p2p_get_pages"
	ev := Event{Op: OpGetPages, Call: call, Addr: vaddr, Size: size, Tegra: true, Process: procName(caller), Device: -1}
	t.Sleep(CallCost)
	switch {
	case !d.tegra:
		return nil, d.errno(t, ev, call, ENOTSUPP, "the Tegra get_pages on a discrete GPU")
	case cb == nil:
		return nil, d.errno(t, ev, call, syscall.EINVAL, "no free callback")
	case uint64(vaddr)%TegraPageSize != 0 || size%TegraPageSize != 0 || size == 0:
		return nil, d.errno(t, ev, call, syscall.EINVAL, "address %v or size %#x not aligned to 4 KiB", vaddr, size)
	}
	r, phys, err := d.cu.HostRange(vaddr, size)
	if err != nil {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "%v", err)
	}
	ev.BufferID = r.Alloc.BufferID
	if r.Owner != caller {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "%v is not in %s's address space", vaddr, procName(caller))
	}
	pt := &PageTable{
		Version: PageTableVersion, PageSize: PageSize4KB, GPUUUID: d.cu.System().Devices[0].Name,
		d: d, owner: r.Owner, addr: vaddr, length: size, bufferID: r.Alloc.BufferID,
		tegra: true, phys: phys, cb: cb, data: data,
	}
	for _, pr := range phys {
		for off := uint64(0); off < pr.Size; off += TegraPageSize {
			pt.Pages = append(pt.Pages, Page{PhysicalAddress: pr.Start + mem.PhysAddr(off)})
		}
	}
	t.Sleep(sim.Time(len(pt.Pages)) * PinCostPerPage / 16)
	d.tables = append(d.tables, pt)
	ev.Pages = len(pt.Pages)
	d.emit(t, &ev)
	return pt, nil
}

// PutPagesTegra is the Tegra nvidia_p2p_put_pages(page_table).
func (d *Driver) PutPagesTegra(t *sim.Proc, pt *PageTable) error {
	const call = "nvidia_p2p_put_pages"
	ev := Event{Op: OpPutPages, Call: call, Tegra: true}
	if pt == nil || !pt.tegra {
		return d.errno(t, ev, call, syscall.EINVAL, "not a Tegra page table")
	}
	ev.fill(pt)
	if pt.inCallback {
		ev.InCallback = true
		return d.errno(t, ev, call, syscall.EDEADLK, "called from the free callback")
	}
	t.Sleep(CallCost)
	if pt.revoked {
		d.emit(t, &ev)
		return nil
	}
	if pt.put {
		return d.errno(t, ev, call, syscall.EINVAL, "page table already put")
	}
	d.release(t, pt)
	pt.put = true
	d.emit(t, &ev)
	return nil
}

// DMAMapPagesTegra is the Tegra nvidia_p2p_dma_map_pages: each page
// mapped for dev by the DMA API (dma_map_page: an IOVA when an SMMU
// domain translates, the physical address otherwise) for dir.
func (d *Driver) DMAMapPagesTegra(t *sim.Proc, dev *dma.Device, pt *PageTable, dir dma.Direction) (*DMAMapping, error) {
	const call = "nvidia_p2p_dma_map_pages"
	ev := Event{Op: OpDMAMapPages, Call: call, Tegra: true}
	if dev == nil || pt == nil || !pt.tegra || !pt.Live() {
		return nil, d.errno(t, ev, call, syscall.EINVAL, "no device, or not a live Tegra page table")
	}
	ev.fill(pt)
	ev.Peer = dev.Name()
	m := &DMAMapping{Version: DMAMappingVersion, PageSizeType: PageSize4KB, Peer: dev, pt: pt, dir: dir, live: true}
	for _, p := range pt.Pages {
		a := dev.MapPage(t, p.PhysicalAddress, 0, TegraPageSize, dir)
		if dev.MappingError(a) {
			for _, b := range m.DMAAddresses {
				dev.UnmapPage(t, b, TegraPageSize, dir)
			}
			return nil, d.errno(t, ev, call, syscall.ENOMEM, "dma_map_page of %v for %s failed", p.PhysicalAddress, dev.Name())
		}
		m.DMAAddresses = append(m.DMAAddresses, a)
	}
	pt.maps = append(pt.maps, m)
	d.emit(t, &ev)
	return m, nil
}

// DMAUnmapPagesTegra is the Tegra nvidia_p2p_dma_unmap_pages(map).
func (d *Driver) DMAUnmapPagesTegra(t *sim.Proc, m *DMAMapping) error {
	const call = "nvidia_p2p_dma_unmap_pages"
	ev := Event{Op: OpDMAUnmapPages, Call: call, Tegra: true}
	if m == nil || !m.pt.tegra {
		return d.errno(t, ev, call, syscall.EINVAL, "not a Tegra mapping")
	}
	ev.fill(m.pt)
	ev.Peer = m.Peer.Name()
	if m.live {
		d.unmapTegra(t, m)
		m.pt.dropMap(m)
	}
	d.emit(t, &ev)
	return nil
}

func (d *Driver) unmapTegra(t *sim.Proc, m *DMAMapping) {
	m.live = false
	for _, a := range m.DMAAddresses {
		m.Peer.UnmapPage(t, a, TegraPageSize, m.dir)
	}
}

package gpu

import (
	"fmt"
	"math/bits"

	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
)

// BAR1, the window through which GPU memory is visible on PCIe.
const (
	// BARPageSize is the BAR1 mapping granule: GPU memory is pinned and
	// mapped in 64 KiB pages (NVIDIA's "Developing a Linux Kernel Module
	// using GPUDirect RDMA": "the GPU BAR space is typically mapped using
	// 64KB pages"; nv-p2p.h's NVIDIA_P2P_PAGE_SIZE_64KB).
	BARPageSize = 64 << 10
	// BAR1DriverReserved is the BAR1 space the driver keeps for its own
	// mappings, counted as used from the start: 5056 KiB on the H200
	// (measured here 2026-11-21: `dmalab probe` read "BAR1 256GiB,
	// 5056KiB used" through NVML with one context open;
	// docs/measurements/2026-11-21-h200-cli-probe.txt). NVIDIA's
	// GPUDirect RDMA guide ("PCI BAR sizes") gives Kepler's 32 MB of
	// 256 MB; the model takes what the measured machine shows, and
	// never more than the aperture.
	BAR1DriverReserved = 5056 << 10
	// BARWindowBase is where the model places the first GPU's BAR1 in the
	// physical address space: above all memory (mem puts DRAM from 0 and
	// VRAM at the next TiB boundaries), each aperture aligned to its
	// size rounded up to a power of two, as PCI requires of a BAR.
	BARWindowBase mem.PhysAddr = 0x4000_0000_0000
)

// Aperture is a GPU's BAR1: a window of Size bytes of PCIe address space
// through which 64 KiB pages of VRAM are mapped, for third-party devices
// (GPUDirect RDMA: nvidia_p2p_get_pages) and for the CPU (gdrcopy). Its
// real counterpart is the BAR1 that nvidia-smi -q reports under "BAR1
// Memory Usage" and nvmlDeviceGetBAR1MemoryInfo returns.
//
// The size is the spec's BAR1. With resizable BAR (PCIe ReBAR, "large
// BAR" in NVIDIA's "Developing a Linux Kernel Module using GPUDirect
// RDMA") the BIOS sizes BAR1 to cover all of VRAM, as the H200's 256
// GiB does its 141 GiB: any allocation can be mapped at once. Without
// it BAR1 is small (256 MiB on Kepler) and mappings compete for it:
// exhaustion is the error GPUDirect users meet.
//
// Overlapping mappings share BAR pages (CUDA 7.0 and later, NVIDIA's
// GPUDirect RDMA guide: "when pinning overlapping or duplicate device
// memory ranges ... GPU BAR space might be shared"): each BAR page is
// counted once per VRAM page however many mappings hold it, and returns
// to the free space when the last of them is unmapped.
//
// An integrated GPU has no BAR1 (no PCIe link, no VRAM): its Aperture
// is empty, and Map and Unmap are ErrNotSupported (noAperture).
type Aperture struct {
	dev      *Device
	none     bool // an integrated GPU's: no BAR1
	base     mem.PhysAddr
	size     uint64 // whole pages
	reserved uint64 // whole pages, at the start
	end      uint64 // the next aperture may start here

	slots *extents // free page slots
	// byVRAM and bySlot index the mapped pages by VRAM page number and
	// by slot (never iterated, so determinism does not depend on them).
	byVRAM map[uint64]*barPage
	bySlot map[uint64]*barPage
}

// barPage is one mapped 64 KiB page.
type barPage struct {
	slot uint64
	vram mem.PhysAddr
	refs int
}

func newAperture(d *Device, lowest uint64) (*Aperture, error) {
	size := alignDown(uint64(max(d.GPU.Spec.BAR1.V, 0)), BARPageSize)
	if size == 0 {
		return nil, fmt.Errorf("%s: BAR1 of %d bytes holds no 64 KiB page", d.Name, d.GPU.Spec.BAR1.V)
	}
	align := uint64(1) << (64 - bits.LeadingZeros64(size-1))
	base, ok := alignUp(lowest, align)
	if !ok || base+size < base {
		return nil, fmt.Errorf("%s: BAR1 does not fit the physical address space", d.Name)
	}
	res, _ := alignUp(BAR1DriverReserved, BARPageSize)
	res = min(res, size)
	return &Aperture{
		dev: d, base: mem.PhysAddr(base), size: size, reserved: res, end: base + size,
		slots:  newExtents(res/BARPageSize, size/BARPageSize),
		byVRAM: map[uint64]*barPage{}, bySlot: map[uint64]*barPage{},
	}, nil
}

// Base is the aperture's physical (bus) address.
func (a *Aperture) Base() mem.PhysAddr { return a.base }

// Size is the aperture's size (BAR1 Total).
func (a *Aperture) Size() uint64 { return a.size }

// Reserved is the part the driver keeps (BAR1DriverReserved).
func (a *Aperture) Reserved() uint64 { return a.reserved }

// CoversVRAM reports whether the aperture can map all of VRAM at once
// (resizable or large BAR).
func (a *Aperture) CoversVRAM() bool { return !a.none && a.size-a.reserved >= a.dev.total }

// BAR1MemoryInfo is nvmlDeviceGetBAR1MemoryInfo's answer (nvidia-smi
// -q, "BAR1 Memory Usage"): Used counts the driver's reserve and every
// mapped 64 KiB page once.
type BAR1MemoryInfo struct {
	Total, Used, Free uint64
}

// Info is the aperture's accounting.
func (a *Aperture) Info() BAR1MemoryInfo {
	if a.none {
		return BAR1MemoryInfo{}
	}
	free := a.slots.size * BARPageSize
	return BAR1MemoryInfo{Total: a.size, Used: a.size - free, Free: free}
}

// BARPage is one 64 KiB page of a mapping: the GPU address it maps, the
// VRAM behind it and its address in the aperture (what
// nvidia_p2p_page_table's physical_address holds).
type BARPage struct {
	GPU  mem.GPUAddr
	VRAM mem.PhysAddr
	BAR  mem.PhysAddr
}

// BARMapping is one mapping of GPU memory through BAR1: Addr and Size
// are the request rounded out to whole 64 KiB pages.
type BARMapping struct {
	ap    *Aperture
	Addr  mem.GPUAddr
	Size  uint64
	Pages []BARPage
	live  bool
}

// Map maps the 64 KiB pages covering [addr, addr+size) of the GPU's
// device memory: the range must start in a device allocation of this
// GPU and stay in it; rounding out to pages may reach neighbouring
// memory of the same 2 MiB chunk, as on the hardware. Pages already
// mapped (for any mapping of the same VRAM) are shared; new ones take
// free BAR space, and if there is not enough, nothing is mapped and the
// error is ErrBARExhausted. An integrated GPU has no BAR1:
// ErrNotSupported. The cost of pinning is the caller's
// (GPUDirect's nvidia_p2p_get_pages, gdrcopy's pin).
func (a *Aperture) Map(addr mem.GPUAddr, size uint64) (*BARMapping, error) {
	d := a.dev
	if a.none {
		return nil, fmt.Errorf("gpu: %s: BAR1 map [%v +%#x]: an integrated GPU has no BAR1: %w", d.Name, addr, size, ErrNotSupported)
	}
	b, err := d.sys.resolve(addr, size)
	if err != nil {
		return nil, fmt.Errorf("gpu: %s: BAR1 map: %w", d.Name, err)
	}
	if b.dev != d {
		return nil, fmt.Errorf("gpu: %s: BAR1 map [%v +%#x]: %v memory, not this GPU's: %w", d.Name, addr, size, b.a.Type, ErrInvalidValue)
	}
	start := alignDown(uint64(addr), BARPageSize)
	end, _ := alignUp(uint64(addr)+size, BARPageSize)
	n := (end - start) / BARPageSize
	vram := make([]mem.PhysAddr, n)
	var fresh uint64
	for i := range n {
		va := mem.GPUAddr(start + i*BARPageSize)
		c := d.chunkAt(va)
		if c == nil {
			return nil, fmt.Errorf("gpu: %s: BAR1 map: page %v is not mapped VRAM: %w", d.Name, va, ErrInvalidValue)
		}
		vram[i] = c.pa + mem.PhysAddr(va-c.va)
		if a.byVRAM[uint64(vram[i])/BARPageSize] == nil {
			fresh++
		}
	}
	// Two pages of the request can be one VRAM page only if the request
	// repeats itself, which a linear range cannot: fresh counts each
	// once.
	slots, ok := a.slots.takeAny(fresh)
	if fresh > 0 && !ok {
		return nil, fmt.Errorf("gpu: %s: BAR1 map [%v +%#x]: %d new 64 KiB pages, %d free: %w", d.Name, addr, size, fresh, a.slots.size, ErrBARExhausted)
	}
	m := &BARMapping{ap: a, Addr: mem.GPUAddr(start), Size: end - start, live: true}
	for i, v := range vram {
		key := uint64(v) / BARPageSize
		pg := a.byVRAM[key]
		if pg == nil {
			pg = &barPage{slot: slots[0].start, vram: v}
			if slots[0].start++; slots[0].start == slots[0].end {
				slots = slots[1:]
			}
			a.byVRAM[key], a.bySlot[pg.slot] = pg, pg
		}
		pg.refs++
		m.Pages = append(m.Pages, BARPage{
			GPU: mem.GPUAddr(start + uint64(i)*BARPageSize), VRAM: v,
			BAR: a.base + mem.PhysAddr(pg.slot*BARPageSize),
		})
	}
	t := d.sys.m.Engine.Now()
	d.sys.emit(Activity{Kind: ActivityBARMap, Name: "bar1 map", Device: d.Index, Stream: -1, Start: t, End: t, Addr: m.Addr, Size: m.Size, BufferID: b.a.BufferID})
	return m, nil
}

// Unmap releases m's pages; those no other mapping holds return to the
// free space. Unmapping twice is ErrInvalidValue; on an integrated GPU
// every Unmap is ErrNotSupported.
func (a *Aperture) Unmap(m *BARMapping) error {
	if a.none {
		return fmt.Errorf("gpu: %s: BAR1 unmap: an integrated GPU has no BAR1: %w", a.dev.Name, ErrNotSupported)
	}
	if m == nil || m.ap != a || !m.live {
		return fmt.Errorf("gpu: %s: BAR1 unmap: not a live mapping of this aperture: %w", a.dev.Name, ErrInvalidValue)
	}
	m.live = false
	for _, p := range m.Pages {
		key := uint64(p.VRAM) / BARPageSize
		pg := a.byVRAM[key]
		if pg.refs--; pg.refs == 0 {
			delete(a.byVRAM, key)
			delete(a.bySlot, pg.slot)
			a.slots.release(pg.slot, pg.slot+1)
		}
	}
	t := a.dev.sys.m.Engine.Now()
	a.dev.sys.emit(Activity{Kind: ActivityBARUnmap, Name: "bar1 unmap", Device: a.dev.Index, Stream: -1, Start: t, End: t, Addr: m.Addr, Size: m.Size})
	return nil
}

// Live reports whether m is still mapped.
func (m *BARMapping) Live() bool { return m.live }

// Translate is the VRAM behind BAR address pa: what a peer's write to
// the aperture reaches. False for the driver's reserve and for pages
// not mapped now.
func (a *Aperture) Translate(pa mem.PhysAddr) (mem.PhysAddr, bool) {
	if a.none {
		return 0, false
	}
	if pa < a.base || uint64(pa-a.base) >= a.size {
		return 0, false
	}
	off := uint64(pa - a.base)
	pg := a.bySlot[off/BARPageSize]
	if pg == nil {
		return 0, false
	}
	return pg.vram + mem.PhysAddr(off%BARPageSize), true
}

// The aperture as a window of the DMA layer (dma.PeerMemory): a
// third-party device's access to a BAR1 address lands in the VRAM page
// mapped there (GPUDirect RDMA). Package nvp2p registers the apertures
// with dma.DMA.AddPeerMemory.

// Name is "gpuN BAR1".
func (a *Aperture) Name() string { return a.dev.Name + " BAR1" }

// Contains says whether pa lies in the aperture.
func (a *Aperture) Contains(pa mem.PhysAddr) bool {
	return !a.none && pa >= a.base && uint64(pa-a.base) < a.size
}

// Resolve appends the VRAM behind [pa, pa+size), page by page (adjacent
// VRAM merged); an unmapped page, or the driver's reserve, is
// ErrInvalidValue: on the hardware the GPU answers the request with
// Unsupported Request.
func (a *Aperture) Resolve(out []mem.PhysRange, pa mem.PhysAddr, size uint64) ([]mem.PhysRange, error) {
	for size > 0 {
		v, ok := a.Translate(pa)
		if !ok {
			return out, fmt.Errorf("BAR1 page at %v is not mapped: %w", pa, ErrInvalidValue)
		}
		n := min(size, BARPageSize-uint64(pa-a.base)%BARPageSize)
		if k := len(out); k > 0 && out[k-1].Start+mem.PhysAddr(out[k-1].Size) == v {
			out[k-1].Size += n
		} else {
			out = append(out, mem.PhysRange{Start: v, Size: n})
		}
		pa += mem.PhysAddr(n)
		size -= n
	}
	return out, nil
}

// Endpoint is the GPU's VRAM, the end of a peer's route.
func (a *Aperture) Endpoint() machine.Endpoint { return a.dev.GPU.Memory() }

package gpu

import (
	"errors"
	"fmt"
	"github.com/dmalab/dmalab/dma"
	"slices"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// VRAM allocation, as cuMemAlloc does it.
const (
	// MinAlign is the granule of small allocations: each starts on a
	// multiple of 512 B and takes a multiple of it. The CUDA
	// Programming Guide guarantees 256 B ("any address ... returned by
	// one of the memory allocation routines from the driver or runtime
	// API is always aligned to at least 256 bytes"); successive small
	// cudaMalloc results are commonly seen 512 B apart on recent GPUs,
	// which the model follows (assumed: not measured here).
	MinAlign = 512
	// LargePageSize is the GPU's big page (2 MiB): allocations of at
	// least this size get their own 2 MiB-aligned pages, rounded up to
	// whole pages; smaller ones share 2 MiB chunks, so two small buffers
	// may sit in one 64 KiB BAR page (NVIDIA's "Developing a Linux
	// Kernel Module using GPUDirect RDMA": "two memory areas which
	// are in the same 64KB boundary would allocate and return the same
	// BAR mapping"). UVM's VA blocks are 2 MiB for the same reason.
	LargePageSize = 2 << 20
	// AllocCost and FreeCost are the host time of one cuMemAlloc and
	// one cuMemFree: 57 µs for cudaMalloc + cudaFree of 2 MiB, measured
	// on the H200 machine 2026-11-21. The split is assumed even: each
	// is one trip into the kernel driver that edits the GPU's page
	// tables (map on alloc; unmap and a TLB invalidate on free).
	// Measure them apart to replace it.
	AllocCost = 28500 * sim.Nanosecond
	FreeCost  = 28500 * sim.Nanosecond
)

// Device is one GPU as the CUDA driver drives it: its device-memory
// allocator, its BAR1 aperture, its copy engines and its streams, on the
// machine's GPU (the counterpart of a CUdevice with its primary
// context).
type Device struct {
	sys   *System
	Index int
	Name  string
	GPU   *machine.GPU
	// coherent says the GPU's DMA snoops the CPU caches (x86 PCIe;
	// Tegra from Xavier on).
	coherent bool
	// dma is the GPU as a bus master of the DMA layer: its copy engines
	// and SMs move bytes through dma.Device.Transfer.
	dma *dma.Device
	// integrated says the GPU is part of an SoC (Tegra) and has no VRAM:
	// its device memory is pages of its node's DRAM (integrated.go).
	integrated bool

	// vaBase..vaEnd is the GPU's device-memory window; va allocates
	// chunks in it.
	vaBase, vaEnd uint64
	va            *extents
	// chunks are the VRAM chunks (2 MiB or large allocations), by VA.
	chunks []*chunk
	// used is the VRAM the chunks hold; total the device memory m.Mem
	// gives the GPU (an integrated GPU's node's DRAM).
	used, total uint64

	bar *Aperture

	legacy     *Stream
	streams    []*Stream // every stream but the legacy one, by creation
	nextStream int
	peers      []bool // peers[i]: kernels may access GPU i's memory

	// hostMaps are the pinned host memory mapped for the GPU through
	// its IOMMU domain, by physical address (iommu.go); empty under
	// dma-direct.
	hostMaps []hostMap

	// sm is the GPU's SMs in System.compute: one link of 1e12 units per
	// second, each kernel's compute a flow of Compute picoseconds.
	sm *fabric.Link
}

// chunk is one piece of VRAM with its VA: a 2 MiB chunk shared by small
// allocations (small != nil: the free offsets in it) or one large
// allocation.
type chunk struct {
	va    mem.GPUAddr
	pa    mem.PhysAddr
	size  uint64
	small *extents
	live  int
}

func newDevice(s *System, i int, g *machine.GPU, vaBase, barBase uint64) (*Device, error) {
	coherent, err := s.m.Spec.DeviceCoherent(g.Name)
	if err != nil {
		return nil, err
	}
	dd, err := s.dma.Device(g.Name)
	if err != nil {
		return nil, err
	}
	total, err := deviceMemory(s.m, g)
	if err != nil {
		return nil, err
	}
	win, _ := alignUp(total, VAWindowAlign)
	d := &Device{
		sys: s, Index: i, Name: g.Name, GPU: g, dma: dd, coherent: coherent, integrated: g.Spec.Integrated,
		vaBase: vaBase, vaEnd: vaBase + win, va: newExtents(vaBase, vaBase+win),
		total: total, peers: make([]bool, len(s.m.GPUs)),
	}
	d.sm = s.compute.Connect(g.Name+".sm", s.compute.Node(g.Name+".frontend"), s.compute.Node(g.Name+".sms"), smUnits, 0, fabric.Shared)
	if d.integrated {
		d.bar = noAperture(d, barBase)
	} else if d.bar, err = newAperture(d, barBase); err != nil {
		return nil, err
	}
	d.legacy = &Stream{dev: d, name: g.Name + ".stream0"}
	return d, nil
}

// smUnits is the SM link's capacity: a kernel's Compute picoseconds of
// whole-GPU work go through in Compute when it runs alone.
const smUnits = float64(sim.Second)

// System is the system the device belongs to.
func (d *Device) System() *System { return d.sys }

// BAR1 is the device's BAR1 aperture.
func (d *Device) BAR1() *Aperture { return d.bar }

// MemGetInfo is cuMemGetInfo: free and total device memory. Total is
// the VRAM of the spec; free counts whole chunks, so a small allocation
// takes 2 MiB from it until its chunk is full. An integrated GPU reports
// its node's DRAM instead (integratedMemInfo).
func (d *Device) MemGetInfo() (free, total uint64) {
	if d.integrated {
		return d.integratedMemInfo()
	}
	return d.total - d.used, d.total
}

// Alloc is cuMemAlloc: size bytes of VRAM at a new address of the GPU's
// window, backed by device memory in m.Mem (so copies and kernels
// create content versions there); on an integrated GPU, by pages of its
// node's DRAM (integrated.go). It costs p AllocCost. A zero size is
// ErrInvalidValue; no VRAM left is ErrOutOfMemory.
func (d *Device) Alloc(p *sim.Proc, size uint64) (Allocation, error) {
	p.Sleep(AllocCost)
	start := p.Now()
	a, err := d.alloc(size)
	if err != nil {
		return Allocation{}, fmt.Errorf("gpu: cuMemAlloc(%s, %#x): %w", d.Name, size, err)
	}
	d.sys.emit(Activity{Kind: ActivityAlloc, Name: "cuMemAlloc", Device: d.Index, Stream: -1, Start: start, End: start, Addr: a.Addr, Size: a.Size, BufferID: a.BufferID})
	return a, nil
}

func (d *Device) alloc(size uint64) (Allocation, error) {
	if size == 0 {
		return Allocation{}, ErrInvalidValue
	}
	var c *chunk
	var off uint64
	if size >= LargePageSize {
		n, ok := alignUp(size, LargePageSize)
		if !ok {
			return Allocation{}, ErrOutOfMemory
		}
		var err error
		if c, err = d.newChunk(n); err != nil {
			return Allocation{}, err
		}
	} else {
		r, _ := alignUp(size, MinAlign)
		for _, ch := range d.chunks {
			if ch.small == nil {
				continue
			}
			if o, ok := ch.small.alloc(r, MinAlign); ok {
				c, off = ch, o
				break
			}
		}
		if c == nil {
			var err error
			if c, err = d.newChunk(LargePageSize); err != nil {
				return Allocation{}, err
			}
			c.small = newExtents(0, LargePageSize)
			off, _ = c.small.alloc(r, MinAlign)
		}
	}
	c.live++
	b := &buffer{
		a: Allocation{
			Addr: c.va + mem.GPUAddr(off), Size: size, Type: MemoryDevice,
			Device: d.Index, BufferID: d.sys.newID(), Mapped: true,
		},
		dev: d, phys: []mem.PhysRange{{Start: c.pa + mem.PhysAddr(off), Size: size}},
		chunk: c, off: off,
	}
	d.sys.insert(b)
	return b.a, nil
}

// newChunk maps n bytes of VRAM (a multiple of LargePageSize) at a new
// VA.
func (d *Device) newChunk(n uint64) (*chunk, error) {
	va, ok := d.va.alloc(n, LargePageSize)
	if !ok {
		return nil, ErrOutOfMemory
	}
	pa, err := d.allocBacking(n)
	if err != nil {
		d.va.release(va, va+n)
		if errors.Is(err, mem.ErrNoMemory) {
			free, _ := d.MemGetInfo()
			return nil, fmt.Errorf("%w: %d bytes free", ErrOutOfMemory, free)
		}
		return nil, err
	}
	c := &chunk{va: mem.GPUAddr(va), pa: pa, size: n}
	i, _ := slices.BinarySearchFunc(d.chunks, c.va, func(x *chunk, v mem.GPUAddr) int {
		return cmpAddr(x.va, v)
	})
	d.chunks = slices.Insert(d.chunks, i, c)
	d.used += n
	return c, nil
}

func cmpAddr(a, b mem.GPUAddr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// chunkAt is the chunk holding va, or nil.
func (d *Device) chunkAt(va mem.GPUAddr) *chunk {
	i, found := slices.BinarySearchFunc(d.chunks, va, func(x *chunk, v mem.GPUAddr) int {
		return cmpAddr(x.va, v)
	})
	if found {
		return d.chunks[i]
	}
	if i == 0 {
		return nil
	}
	if c := d.chunks[i-1]; va < c.va+mem.GPUAddr(c.size) {
		return c
	}
	return nil
}

// release frees b's part of its chunk, and the chunk when that was its
// last allocation.
func (d *Device) release(b *buffer) {
	if b.external > 0 {
		d.va.release(uint64(b.a.Addr), uint64(b.a.Addr)+b.external)
		return
	}
	c := b.chunk
	if c.small != nil {
		r, _ := alignUp(b.a.Size, MinAlign)
		c.small.release(b.off, b.off+r)
	}
	c.live--
	if c.live > 0 {
		return
	}
	if err := d.freeBacking(c.pa, c.size); err != nil {
		panic(fmt.Sprintf("gpu: %s: freeing chunk %v: %v", d.Name, c.pa, err))
	}
	d.va.release(uint64(c.va), uint64(c.va)+c.size)
	if i := slices.Index(d.chunks, c); i >= 0 {
		d.chunks = slices.Delete(d.chunks, i, i+1)
	}
	d.used -= c.size
}

// EnablePeerAccess is cuCtxEnablePeerAccess: kernels on d may then
// access peer's device memory (over NVLink, or PCIe through the switch
// or root complexes, whichever route the machine gives). Copies between
// the two need no peer access. Enabling it twice is
// ErrPeerAccessAlreadyEnabled; d itself is ErrInvalidValue; an
// integrated GPU on either side ErrNotSupported.
func (d *Device) EnablePeerAccess(peer *Device) error {
	switch {
	case peer == nil || peer == d || peer.sys != d.sys:
		return fmt.Errorf("gpu: %s: enable peer access to itself or another system: %w", d.Name, ErrInvalidValue)
	case d.integrated || peer.integrated:
		// CUDA for Tegra, "CUDA Features Not Supported on Tegra":
		// peer-to-peer communication calls are not supported.
		return fmt.Errorf("gpu: %s: peer access to %s: an integrated GPU has no peers: %w", d.Name, peer.Name, ErrNotSupported)
	case d.peers[peer.Index]:
		return fmt.Errorf("gpu: %s: peer access to %s: %w", d.Name, peer.Name, ErrPeerAccessAlreadyEnabled)
	}
	d.peers[peer.Index] = true
	return nil
}

// Free is cuMemFree (device memory) or the free of managed memory: addr
// must be an allocation's base. Like cudaFree, it first waits for the
// work of the GPU that owns the memory (all GPUs for managed memory), so
// a kernel still using the buffer finishes; then the OnFree hooks run
// (GPUDirect's free callback), and the memory goes. It costs p FreeCost.
// Anything else (host memory, an inner address, a second free) is
// ErrInvalidValue.
func (s *System) Free(p *sim.Proc, addr mem.GPUAddr) error {
	b := s.lookup(addr)
	if b == nil || b.a.Addr != addr || b.a.Type == MemoryHost {
		p.Sleep(FreeCost)
		return fmt.Errorf("gpu: cuMemFree(%v): not the base of a device or managed allocation: %w", addr, ErrInvalidValue)
	}
	if b.dev != nil {
		b.dev.Synchronize(p)
	} else {
		s.Synchronize(p)
	}
	if s.lookup(addr) != b {
		p.Sleep(FreeCost)
		return fmt.Errorf("gpu: cuMemFree(%v): freed meanwhile: %w", addr, ErrInvalidValue)
	}
	for _, fn := range s.onFree {
		fn(p, b.a)
	}
	s.remove(b)
	if b.dev != nil {
		b.dev.release(b)
	} else {
		n, _ := alignUp(b.a.Size, LargePageSize)
		s.mva.release(uint64(b.a.Addr), uint64(b.a.Addr)+n)
		if b.managed > 0 {
			if err := s.m.Mem.FreePages(b.phys[0].Start, b.managed); err != nil {
				panic(fmt.Sprintf("gpu: freeing managed memory %v: %v", b.a.Addr, err))
			}
		}
	}
	t := p.Now()
	s.emit(Activity{Kind: ActivityFree, Name: "cuMemFree", Device: b.a.Device, Stream: -1, Start: t, End: t, Addr: b.a.Addr, Size: b.a.Size, BufferID: b.a.BufferID})
	p.Sleep(FreeCost)
	return nil
}

// AllocManaged is cuMemAllocManaged's address-space part: a range of
// the managed window (2 MiB VA blocks) entered in the unified address
// map as managed memory. Where its pages are, and moving them, is the
// unified-memory driver's (ManagedHandler). On a system with an
// integrated GPU managed memory is one allocation in the SoC's DRAM
// (NVIDIA's "How does NVIDIA implement unified memory on PCIe GPUs and
// Tegra platforms?"): the range is backed now by pages of the GPU's
// node (Resolve gives them; kernels read and write them through mem),
// and no DRAM left is ErrOutOfMemory. It costs p AllocCost (assumed the
// same as cuMemAlloc's).
func (s *System) AllocManaged(p *sim.Proc, size uint64) (Allocation, error) {
	p.Sleep(AllocCost)
	n, ok := alignUp(size, LargePageSize)
	if size == 0 || !ok {
		return Allocation{}, fmt.Errorf("gpu: cuMemAllocManaged(%#x): %w", size, ErrInvalidValue)
	}
	va, ok := s.mva.alloc(n, LargePageSize)
	if !ok {
		return Allocation{}, fmt.Errorf("gpu: cuMemAllocManaged(%#x): managed window full: %w", size, ErrOutOfMemory)
	}
	b := &buffer{a: Allocation{Addr: mem.GPUAddr(va), Size: size, Type: MemoryManaged, Device: -1, Mapped: true}}
	if pa, ok, err := s.managedBacking(n); ok {
		if err != nil {
			s.mva.release(va, va+n)
			return Allocation{}, fmt.Errorf("gpu: cuMemAllocManaged(%#x): %w: %w", size, ErrOutOfMemory, err)
		}
		b.phys, b.managed = []mem.PhysRange{{Start: pa, Size: size}}, n
	}
	b.a.BufferID = s.newID()
	s.insert(b)
	t := p.Now()
	s.emit(Activity{Kind: ActivityAlloc, Name: "cuMemAllocManaged", Device: -1, Stream: -1, Start: t, End: t, Addr: b.a.Addr, Size: size, BufferID: b.a.BufferID})
	return b.a, nil
}

// RegisterHost enters pinned host memory [va, va+size) in the unified
// address map at its own address (UVA), with the DRAM behind it
// (mem.Translate): what cuMemHostAlloc and cuMemHostRegister do after
// pinning. For every GPU whose DMA goes through an IOMMU domain it then
// maps the pages (iommu.go: nv_dma_map_sgt), p paying IOMMUMapCallCost
// and IOMMUMapLeafCost per leaf; p may be nil when no GPU is behind one.
// The pinning itself, and its cost (35 ms per GiB measured on the H200
// machine 2026-11-21), are the caller's. An unmapped range is
// ErrInvalidValue; one that overlaps the map is
// ErrHostMemoryAlreadyRegistered; a mapping the IOMMU refuses (IOVA
// space exhausted) ErrOutOfMemory.
func (s *System) RegisterHost(p *sim.Proc, va mem.VirtAddr, size uint64, flags HostFlags) (Allocation, error) {
	addr := mem.GPUAddr(va)
	end, ok := addr.Add(size)
	if size == 0 || !ok {
		return Allocation{}, fmt.Errorf("gpu: register host [%v +%#x]: %w", va, size, ErrInvalidValue)
	}
	if s.overlaps(addr, end) {
		return Allocation{}, fmt.Errorf("gpu: register host [%v +%#x]: %w", va, size, ErrHostMemoryAlreadyRegistered)
	}
	phys, _, _, err := s.m.Mem.Translate(va, size)
	if err != nil {
		return Allocation{}, fmt.Errorf("gpu: register host [%v +%#x]: %w: %w", va, size, ErrInvalidValue, err)
	}
	for _, r := range phys {
		if _, ok := s.m.Mem.NodeOf(r.Start); !ok {
			return Allocation{}, fmt.Errorf("gpu: register host [%v +%#x]: %v is not DRAM: %w", va, size, r.Start, ErrInvalidValue)
		}
	}
	b := &buffer{
		a: Allocation{
			Addr: addr, Size: size, Type: MemoryHost, Device: -1,
			HostVA: va, Flags: flags, Mapped: flags&HostRegistered == 0 || flags&HostDeviceMap != 0,
		},
		phys: phys,
	}
	if err := s.mapHost(p, b); err != nil {
		return Allocation{}, fmt.Errorf("gpu: register host [%v +%#x]: %w: %w", va, size, ErrOutOfMemory, err)
	}
	b.a.BufferID = s.newID()
	s.insert(b)
	return b.a, nil
}

// UnregisterHost removes the host memory registered at va (its base)
// from the map, after the OnFree hooks, and unmaps it from the GPUs it
// was mapped for through an IOMMU (p waits for a strict domain's
// invalidation). Anything else is ErrHostMemoryNotRegistered.
func (s *System) UnregisterHost(p *sim.Proc, va mem.VirtAddr) error {
	b := s.lookup(mem.GPUAddr(va))
	if b == nil || b.a.Type != MemoryHost || b.a.HostVA != va {
		return fmt.Errorf("gpu: unregister host %v: %w", va, ErrHostMemoryNotRegistered)
	}
	for _, fn := range s.onFree {
		fn(p, b.a)
	}
	if s.lookup(mem.GPUAddr(va)) != b {
		return fmt.Errorf("gpu: unregister host %v: unregistered meanwhile: %w", va, ErrHostMemoryNotRegistered)
	}
	s.remove(b)
	s.unmapHost(p, b)
	return nil
}

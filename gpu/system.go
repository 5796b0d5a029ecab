package gpu

import (
	"fmt"
	"slices"

	"github.com/dmalab/dmalab/dma"
	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// The unified address space (UVA) as the model lays it out. Real drivers
// place allocations elsewhere; what matters, and what the model keeps, is
// that one pointer value names one place on every GPU and on the host.
const (
	// DeviceVABase is where the first GPU's device-memory window starts.
	// Each GPU gets a window of its VRAM rounded up to VAWindowAlign,
	// the next GPU's following it, as cuMemAlloc's VA ranges are
	// per-device parts of the CUDA-managed VA range (NVIDIA's
	// "Developing a Linux Kernel Module using GPUDirect RDMA", "Basics
	// of UVA CUDA Memory Management").
	DeviceVABase mem.GPUAddr = 0x10_0000_0000
	// VAWindowAlign is the alignment and rounding of each window
	// (1 TiB), so that a GPU's addresses are recognisable by their high
	// bits in a trace.
	VAWindowAlign = 1 << 40
	// ManagedVASize is the size of the managed-memory window placed after
	// the device windows (cuMemAllocManaged's addresses); managed
	// allocations are 2 MiB VA blocks, as UVM's uvm_va_block_t are.
	ManagedVASize = 16 << 40
)

// Pinned host memory keeps its CPU virtual address on the GPU (UVA: "a
// page backed by CPU memory ... accessible from both the host and the
// GPU at the same VA", NVIDIA's GPUDirect RDMA guide): the model's host
// addresses are kernel addresses (package mem has no user address
// space), far above every window here, so they never collide.

// MemoryType is what a unified address points at: the values of CUDA's
// cudaMemoryType (CU_POINTER_ATTRIBUTE_MEMORY_TYPE has HOST and DEVICE;
// managed memory is CU_POINTER_ATTRIBUTE_IS_MANAGED there).
type MemoryType uint8

const (
	// MemoryUnregistered is an address the map does not know (pageable
	// host memory, or nothing).
	MemoryUnregistered MemoryType = iota
	// MemoryHost is pinned host memory (cuMemHostAlloc,
	// cuMemHostRegister).
	MemoryHost
	// MemoryDevice is a GPU's VRAM (cuMemAlloc).
	MemoryDevice
	// MemoryManaged is managed memory (cuMemAllocManaged), whose pages
	// the unified-memory driver moves.
	MemoryManaged
)

func (t MemoryType) String() string {
	switch t {
	case MemoryUnregistered:
		return "unregistered"
	case MemoryHost:
		return "host"
	case MemoryDevice:
		return "device"
	case MemoryManaged:
		return "managed"
	}
	return fmt.Sprintf("MemoryType(%d)", int(t))
}

// HostFlags are the flags of pinned host memory: cuMemHostAlloc's
// CU_MEMHOSTALLOC_* and cuMemHostRegister's CU_MEMHOSTREGISTER_*.
type HostFlags uint8

const (
	// HostPortable: pinned for every context (PORTABLE). The model has
	// one context per GPU and treats all pinned memory as portable; the
	// flag is kept for the attributes.
	HostPortable HostFlags = 1 << iota
	// HostDeviceMap: mapped into the GPUs' address space (DEVICEMAP).
	// Under UVA, memory from cuMemHostAlloc is mapped whether or not it
	// is given; registered memory is mapped only with it.
	HostDeviceMap
	// HostWriteCombined: write-combined on the CPU (WRITECOMBINED):
	// fast to write, slow to read from the CPU; for the GPU, the same.
	HostWriteCombined
	// HostRegistered: the memory was registered (cuMemHostRegister)
	// rather than allocated by the driver (cuMemHostAlloc).
	HostRegistered
)

// Allocation is one range of the unified address map, as the driver
// knows it.
type Allocation struct {
	// Addr is the range's base on every GPU (and, for host memory, on
	// the CPU: UVA); Size its requested size.
	Addr mem.GPUAddr
	Size uint64
	Type MemoryType
	// Device is the GPU whose VRAM backs device memory; -1 for host and
	// managed memory.
	Device int
	// BufferID is unique per allocation in a System and never reused:
	// freeing and allocating again at the same address gives a new one
	// (CU_POINTER_ATTRIBUTE_BUFFER_ID; the H200 machine showed 907 → 913
	// on 2026-11-21, the probe 913 → 914,
	// docs/measurements/2026-11-21-h200-cli-probe.txt).
	BufferID uint64
	// HostVA is host memory's CPU address (equal to Addr).
	HostVA mem.VirtAddr
	// Flags are host memory's flags.
	Flags HostFlags
	// Mapped says GPU kernels may access the range: always for device and
	// managed memory; for host memory, see HostDeviceMap.
	Mapped bool
}

// End is the first address after the allocation.
func (a Allocation) End() mem.GPUAddr { return a.Addr + mem.GPUAddr(a.Size) }

// PointerAttributes is what cuPointerGetAttributes says about an
// address.
type PointerAttributes struct {
	Type MemoryType
	// Device is CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: the GPU of device
	// memory; -1 for host and managed memory (the model has no contexts
	// to attribute them to).
	Device   int
	BufferID uint64
	// RangeStart and RangeSize are the whole allocation
	// (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, RANGE_SIZE;
	// cuMemGetAddressRange).
	RangeStart mem.GPUAddr
	RangeSize  uint64
	// HostPointer is the CPU address of host memory.
	HostPointer mem.VirtAddr
	IsManaged   bool
	// Mapped is CU_POINTER_ATTRIBUTE_MAPPED: GPU kernels may access it.
	Mapped bool
}

// buffer is one entry of the unified address map.
type buffer struct {
	a   Allocation
	dev *Device // device memory
	// phys backs the range: one range for device memory, mem.Translate's
	// pieces for host memory, none for managed memory (but one range of
	// the node's DRAM on a system with an integrated GPU, whose pages
	// managed is: whole 2 MiB pages, given back with the range).
	phys    []mem.PhysRange
	managed uint64
	chunk   *chunk // device memory
	off     uint64 // offset in chunk
	// external is the address range of imported memory (MapExternal):
	// its pages belong to another driver, and it has no chunk.
	external uint64
	// dmaMaps are host memory's mappings for the GPUs behind an IOMMU
	// domain (iommu.go).
	dmaMaps []dmaMapping
}

// System is the GPUs of one machine and the unified virtual address
// space the CUDA driver lays over them and the host (UVA): one per
// machine, as the driver has one per process. Its Devices share the
// address map, the buffer-ID counter and the managed-memory handler.
type System struct {
	m       *machine.Machine
	dma     *dma.DMA
	Devices []*Device

	// bufs is the unified address map, sorted by address, disjoint.
	bufs    []*buffer
	nextID  uint64
	managed ManagedHandler
	mva     *extents // managed window

	// compute shares each GPU's SMs among concurrent kernels (a private
	// fabric: its units are picoseconds of whole-GPU work, not bytes, so
	// they stay out of the machine's link statistics).
	compute *fabric.Fabric

	// Hooks receives every Activity when it ends; it is valid only
	// during the call.
	Hooks     sim.Hooks[Activity]
	ev        Activity
	onFree    []func(*sim.Proc, Allocation)
	nextEvent int
}

// New builds the GPU model of machine m: a Device for each of its GPUs,
// with a VA window, a VRAM allocator over the GPU's device memory in
// m.Mem, a BAR1 aperture, the copy engines and the default stream.
func New(x *dma.DMA) (*System, error) {
	m := x.Machine()
	s := &System{m: m, dma: x, nextID: 1, compute: fabric.New(m.Engine, fabric.Factors{})}
	va := uint64(DeviceVABase)
	barBase := uint64(BARWindowBase)
	for n := range m.Mem.Nodes() {
		b, size := m.Mem.NodeRange(n)
		barBase = max(barBase, uint64(b)+size)
	}
	for _, g := range m.GPUs {
		if b, size, ok := m.Mem.DeviceRange(g.Name); ok {
			barBase = max(barBase, uint64(b)+size)
		}
	}
	barBase, _ = alignUp(barBase, VAWindowAlign)
	for i, g := range m.GPUs {
		d, err := newDevice(s, i, g, va, barBase)
		if err != nil {
			return nil, fmt.Errorf("gpu: %w", err)
		}
		s.Devices = append(s.Devices, d)
		va = d.vaEnd
		barBase = d.bar.end
		if !d.integrated {
			// A third-party device's access to a mapped BAR1 page lands
			// in the VRAM behind it (GPUDirect RDMA, dma-buf importers).
			x.AddPeerMemory(d.bar)
		}
	}
	s.mva = newExtents(va, va+ManagedVASize)
	return s, nil
}

// Machine is the machine the GPUs are part of.
func (s *System) Machine() *machine.Machine { return s.m }

// DMA is the DMA layer the GPUs' transfers go through.
func (s *System) DMA() *dma.DMA { return s.dma }

// Device returns GPU i, or an error naming how many there are.
func (s *System) Device(i int) (*Device, error) {
	if i < 0 || i >= len(s.Devices) {
		return nil, fmt.Errorf("gpu: machine %s has %d GPU(s); there is no GPU %d: %w", s.m.Spec.Name, len(s.Devices), i, ErrInvalidValue)
	}
	return s.Devices[i], nil
}

// SetManagedHandler installs the unified-memory driver that kernels'
// accesses to managed memory go through (package uvm).
func (s *System) SetManagedHandler(h ManagedHandler) { s.managed = h }

// Observe registers fn to receive every Activity, in the order they end.

// OnFree registers fn to run when an allocation is freed or host memory
// unregistered, in the freeing process, before the memory is released:
// where GPUDirect's free callback and a registration cache's
// invalidation hook in. fn may block p briefly (GPUDirect's free
// callback may: "Developing a Linux Kernel Module using GPUDirect
// RDMA").
func (s *System) OnFree(fn func(p *sim.Proc, a Allocation)) { s.onFree = append(s.onFree, fn) }

func (s *System) emit(a Activity) {
	if !s.Hooks.Active() {
		return
	}
	s.ev = a
	s.ev.Time, s.ev.Component, s.ev.Cause = s.m.Engine.Now(), "gpu", sim.CauseCall
	if a.Kind == ActivityMemcpy || a.Kind == ActivityKernel {
		s.ev.Cause = sim.CauseTransfer
	}
	s.Hooks.Emit(&s.ev)
}

func (s *System) newID() uint64 {
	id := s.nextID
	s.nextID++
	return id
}

// find is the index of the first buffer that ends after addr.
func (s *System) find(addr mem.GPUAddr) int {
	lo, hi := 0, len(s.bufs)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if s.bufs[h].a.End() <= addr {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// lookup is the buffer holding addr, or nil.
func (s *System) lookup(addr mem.GPUAddr) *buffer {
	if i := s.find(addr); i < len(s.bufs) && s.bufs[i].a.Addr <= addr {
		return s.bufs[i]
	}
	return nil
}

// overlaps reports whether any buffer overlaps [addr, end).
func (s *System) overlaps(addr, end mem.GPUAddr) bool {
	i := s.find(addr)
	return i < len(s.bufs) && s.bufs[i].a.Addr < end
}

func (s *System) insert(b *buffer) {
	i := s.find(b.a.Addr)
	s.bufs = slices.Insert(s.bufs, i, b)
}

func (s *System) remove(b *buffer) {
	if i := s.find(b.a.Addr); i < len(s.bufs) && s.bufs[i] == b {
		s.bufs = slices.Delete(s.bufs, i, i+1)
	}
}

// resolve is the buffer holding all of [addr, addr+size).
func (s *System) resolve(addr mem.GPUAddr, size uint64) (*buffer, error) {
	end, ok := addr.Add(size)
	if size == 0 || !ok {
		return nil, fmt.Errorf("[%v +%#x]: %w", addr, size, ErrInvalidValue)
	}
	b := s.lookup(addr)
	if b == nil {
		return nil, fmt.Errorf("%v is in no allocation: %w", addr, ErrInvalidValue)
	}
	if end > b.a.End() {
		return nil, fmt.Errorf("[%v +%#x] runs past its allocation [%v +%#x]: %w", addr, size, b.a.Addr, b.a.Size, ErrInvalidValue)
	}
	return b, nil
}

// Resolve is the allocation holding all of [addr, addr+size) and the
// physical memory behind that range, in address order: VRAM for device
// memory (an integrated GPU's: its node's DRAM), DRAM pieces for host
// memory, none for managed memory (its pages move; package uvm knows
// where) except on a system with an integrated GPU, where managed memory
// is one range of DRAM that never moves.
func (s *System) Resolve(addr mem.GPUAddr, size uint64) (Allocation, []mem.PhysRange, error) {
	b, err := s.resolve(addr, size)
	if err != nil {
		return Allocation{}, nil, fmt.Errorf("gpu: resolve: %w", err)
	}
	return b.a, b.physOf(addr, size), nil
}

// physOf is the physical memory behind [addr, addr+size) of b.
func (b *buffer) physOf(addr mem.GPUAddr, size uint64) []mem.PhysRange {
	off := uint64(addr - b.a.Addr)
	var out []mem.PhysRange
	for _, r := range b.phys {
		if size == 0 {
			break
		}
		if off >= r.Size {
			off -= r.Size
			continue
		}
		n := min(r.Size-off, size)
		out = append(out, mem.PhysRange{Start: r.Start + mem.PhysAddr(off), Size: n})
		size -= n
		off = 0
	}
	return out
}

// PointerAttributes is cuPointerGetAttributes for addr: any address
// inside an allocation gives the allocation's attributes. An address
// the map does not know is ErrInvalidValue (the driver's answer for
// pageable memory it has not seen).
func (s *System) PointerAttributes(addr mem.GPUAddr) (PointerAttributes, error) {
	b := s.lookup(addr)
	if b == nil {
		return PointerAttributes{}, fmt.Errorf("gpu: pointer attributes of %v: not in the unified address map: %w", addr, ErrInvalidValue)
	}
	a := b.a
	return PointerAttributes{
		Type: a.Type, Device: a.Device, BufferID: a.BufferID,
		RangeStart: a.Addr, RangeSize: a.Size, HostPointer: a.HostVA,
		IsManaged: a.Type == MemoryManaged, Mapped: a.Mapped,
	}, nil
}

// Allocations lists the unified address map in address order.
func (s *System) Allocations() []Allocation {
	out := make([]Allocation, len(s.bufs))
	for i, b := range s.bufs {
		out[i] = b.a
	}
	return out
}

// Synchronize blocks p until every stream of every GPU has drained the
// work enqueued so far.
func (s *System) Synchronize(p *sim.Proc) {
	for _, d := range s.Devices {
		d.Synchronize(p)
	}
}

// delay blocks p for d without charging CPU time: time the GPU, not the
// calling software, spends.
func delay(p *sim.Proc, d sim.Time) {
	if d <= 0 {
		return
	}
	e := p.Engine()
	c := e.NewNamedCompletion("gpu delay")
	e.After(d, c.Complete)
	p.Wait(c)
}

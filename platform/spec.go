package platform

import "github.com/dmalab/dmalab/sim"

// Bytes is a size in bytes (memory capacities, apertures).
type Bytes int64

// Rate is a bandwidth in bytes per second (decimal: 1 GB/s = 1e9 B/s).
type Rate float64

// Number is what a Param may hold.
type Number interface {
	~int | ~int64 | ~float64
}

// Param is one numeric model parameter and where its value comes from:
// "measured here 2026-11-21 (H200, docs/measurements/...)", "datasheet: ...",
// "open-gpu-kernel-modules: uvm_perf_prefetch.c". In YAML it is written
// either as a bare value ("55.5 GB/s") or as {value: ..., source: ...}.
type Param[T Number] struct {
	V      T
	Source string
}

// P makes a Param.
func P[T Number](v T, source string) Param[T] { return Param[T]{V: v, Source: source} }

// Spec describes one machine: what the hardware is, never what it is doing.
// A Spec is immutable once validated; machine.New builds running state
// from it. Names are unique across root complexes, switches, GPUs, devices
// and NVSwitches, since routes and --set paths refer to them.
type Spec struct {
	Name        string
	Description string

	// Nodes are the NUMA nodes (one per socket, or more with SNC/NPS).
	Nodes []Node
	// Distances is the ACPI SLIT matrix, Distances[i][j] for node IDs i, j
	// (10 = local). Empty means 10 on the diagonal and 21 elsewhere.
	Distances [][]int
	// SocketLinks connect NUMA nodes (UPI, xGMI/Infinity Fabric).
	SocketLinks []SocketLink

	RootComplexes []RootComplex
	Switches      []Switch
	GPUs          []GPU
	// Devices are DMA-capable devices other than GPUs (NICs, NVMe drives,
	// DMA engines).
	Devices    []Device
	NVSwitches []NVSwitch
	NVLinks    []NVLink

	// Fabric holds the flow model's global factors.
	Fabric FabricFactors
	// SWIOTLB is the size of the bounce-buffer pool in low memory
	// (swiotlb=, Linux default 64 MiB); zero means that default.
	SWIOTLB Param[Bytes]
	// IOMMU is the platform's IOMMU hardware and how the kernel runs it;
	// left out, the platform has none in use (mode off).
	IOMMU IOMMU
	// NUMABalancing is the kernel's /proc/sys/kernel/numa_balancing:
	// 0 (the default, and every preset's, so that outputs without it
	// stay as they were) leaves placed pages where they are; 1
	// (NUMA_BALANCING_NORMAL) runs automatic NUMA balancing, the
	// scanner and NUMA hinting faults that migrate pages towards the
	// threads that use them (kernel/sched/fair.c task_numa_work). The
	// memory-tiering mode (2) is not modelled.
	NUMABalancing Param[int]
}

// IOMMU modes, as the kernel sets them (iommu=off or intel_iommu=off,
// iommu=pt, iommu.strict=1, iommu.strict=0).
const (
	IOMMUOff         = "off"
	IOMMUPassthrough = "passthrough"
	IOMMUStrict      = "strict"
	IOMMULazy        = "lazy"
)

// IOMMU profiles: the hardware families the iommu package has parameter
// sets for.
const (
	IOMMUVTd    = "vtd"
	IOMMUAMDVi  = "amd-vi"
	IOMMUSMMUv3 = "smmuv3"
)

var (
	iommuModes    = []string{IOMMUOff, IOMMUPassthrough, IOMMUStrict, IOMMULazy}
	iommuProfiles = []string{IOMMUVTd, IOMMUAMDVi, IOMMUSMMUv3}
)

// IOMMU describes the platform's IOMMU: one unit of the given profile
// for the whole platform. Real x86 machines have a DMAR unit per root
// complex, but they share one profile and one mode (the kernel's
// command line sets the mode for all), and the model's IOTLB contention
// across root complexes is not yet a question anyone asks of it, so one
// unit is the simpler faithful choice.
type IOMMU struct {
	// Profile is the hardware family: vtd, amd-vi or smmuv3.
	Profile string
	// Mode is off (no translation; the default), passthrough (identity
	// domains), strict or lazy (translated DMA domains, invalidating at
	// every unmap or through a flush queue).
	Mode string
}

// Enabled says the IOMMU is in use: a mode other than off.
func (i IOMMU) Enabled() bool { return i.Mode != "" && i.Mode != IOMMUOff }

// Translated says DMA goes through translated domains: strict or lazy.
func (i IOMMU) Translated() bool { return i.Mode == IOMMUStrict || i.Mode == IOMMULazy }

// Node is a NUMA node: cores and the DRAM attached to them.
type Node struct {
	ID    int
	Cores Param[int]
	// DRAM is the node's memory capacity.
	DRAM Param[Bytes]
	// DRAMBandwidth is the node's total DRAM bandwidth, shared by reads
	// and writes of every agent (CPU and DMA).
	DRAMBandwidth Param[Rate]
	// DRAMLatency is a load-to-use latency from a local core.
	DRAMLatency Param[sim.Time]
	// CopyEfficiency is the share of DRAMBandwidth a DMA copy that reads
	// and writes this node's DRAM keeps (1 when unset): the bus turns
	// around between the copy's reads and writes, and each turnaround
	// and the bank conflicts between the two streams cost data cycles.
	// The copy's bytes cross the bus twice whatever its value.
	CopyEfficiency Param[float64]
	// MemcpyRate is what one CPU thread achieves copying between two
	// large buffers in this node (pageable staging copies pay it).
	MemcpyRate Param[Rate]
	// StreamRate is what one CPU thread achieves copying out of a small
	// buffer that stays in its caches into a large one in DRAM with
	// non-temporal stores: a write-bound copy, such as the CUDA driver's
	// copy out of a pinned staging buffer into pageable memory
	// (MemcpyRate when unset).
	StreamRate Param[Rate]
	// Cache is the CPU cache of the node's cores as the coherency model
	// sees it.
	Cache CPUCache
}

// CPUCache describes a node's CPU caches for the coherency model: lines
// that hold a copy of memory, clean or dirty, which DMA on a non-coherent
// path does not see and does not update. Zero values take the defaults
// noted (a 64-byte line; the rest must be given when a device on the node
// is non-coherent, since cache maintenance then costs time).
type CPUCache struct {
	// LineSize is the coherency granule (64 B on x86 and most Arm cores).
	LineSize Param[Bytes]
	// Size is the capacity the model keeps lines for (the last-level
	// cache); beyond it the least recently filled lines are evicted,
	// dirty ones written back.
	Size Param[Bytes]
	// Prefetch is how many following lines of the same page a read miss
	// also fills (a next-line/stream prefetcher); 0 turns it off.
	Prefetch Param[int]
	// WritebackCost and InvalidateCost are the CPU time of cache
	// maintenance per line (clean to memory; discard), as dma_map_* and
	// dma_sync_* spend it on a non-coherent device.
	WritebackCost  Param[sim.Time]
	InvalidateCost Param[sim.Time]
	// UncachedRate is what a CPU achieves reading or writing uncached
	// memory (coherent DMA buffers on a non-coherent platform).
	UncachedRate Param[Rate]
}

// SocketLink is the inter-socket connection (Intel UPI, AMD Infinity
// Fabric's xGMI) between nodes A and B: full duplex, its capacity per
// direction. It is described either by its structure, Links × LinkRate
// × Efficiency (a Sapphire Rapids pair: 4 UPI 2.0 links), or by one
// fixed Bandwidth; not both. Every remote access of a CPU and every DMA
// between a device and the other socket's memory crosses it and shares
// it.
type SocketLink struct {
	Name string
	A, B int
	// Protocol names the link layer, for the reader: "upi" (Intel Ultra
	// Path Interconnect) or "xgmi" (AMD socket-to-socket Infinity
	// Fabric); empty when not said.
	Protocol string
	// Links is the number of parallel links between the two sockets.
	Links Param[int]
	// LinkRate is one link's rate per direction before the link layer's
	// overhead (lanes × transfer rate).
	LinkRate Param[Rate]
	// Efficiency is the share of LinkRate left for data after the
	// protocol's headers and flit framing.
	Efficiency Param[float64]
	// Bandwidth is a fixed capacity per direction, for a link described
	// by what it delivers rather than by its structure.
	Bandwidth Param[Rate]
	// Latency is one way across the link, socket to socket (a request
	// or its data; an idle remote load crosses it twice).
	Latency Param[sim.Time]
}

// Rate is the link's capacity per direction: Links × LinkRate ×
// Efficiency when the structure is given, else Bandwidth.
func (l SocketLink) Rate() Rate {
	if l.Bandwidth.V > 0 {
		// A fixed bandwidth replaces the structure (validate.go).
		return l.Bandwidth.V
	}
	if l.Links.V > 0 {
		return Rate(float64(l.Links.V) * float64(l.LinkRate.V) * l.Efficiency.V)
	}
	return l.Bandwidth.V
}

// RootComplex is a CPU's PCIe root complex (host bridge) on a NUMA node.
// Switches and endpoints hang below it.
type RootComplex struct {
	Name string
	Node int
	// Bandwidth, when non-zero, caps the traffic through the root complex
	// per direction (all its root ports together). Zero: no cap.
	Bandwidth Param[Rate]
	// Latency is the traversal latency of the root complex.
	Latency Param[sim.Time]
	// NonCoherentDMA says DMA through this root complex does not snoop
	// the CPU caches (many Arm SoCs); x86 PCIe snoops, so false.
	NonCoherentDMA bool
	// P2PEfficiency is the share of the slower link's rate that
	// peer-to-peer traffic forwarded between two of its root ports gets
	// (DefaultP2PEfficiency when unset). Root complexes are built for
	// traffic to memory; NVIDIA's GPUDirect RDMA guide says P2P through
	// one "may be degraded" and gives no number.
	P2PEfficiency Param[float64]
}

// P2P is the root complex's peer-to-peer efficiency.
func (rc RootComplex) P2P() float64 { return orDefault(rc.P2PEfficiency.V, DefaultP2PEfficiency) }

// DefaultP2PEfficiency is assumed: half the link rate for peer-to-peer
// traffic a root complex forwards, an order that published P2P
// measurements through Intel and AMD root complexes show (the GPUDirect
// RDMA guide, "Supported Systems", only says it is worse than through a
// switch); set p2p_efficiency per root complex from a measurement.
const DefaultP2PEfficiency = 0.5

// PCIeLink is the link from a switch or endpoint up to its parent.
type PCIeLink struct {
	// Gen is the PCIe generation 1..6; it fixes the transfer rate and the
	// line encoding (8b/10b for 1-2, 128b/130b for 3-5, 1b/1b FLIT for 6).
	Gen int
	// Width is the lane count: 1, 2, 4, 8, 16 or 32.
	Width int
	// Efficiency is the share of the encoded rate left for payload after
	// TLP/DLLP overheads (header, sequence, CRC, flow-control updates).
	Efficiency Param[float64]
	// Latency is the one-way latency of the link and its ports.
	Latency Param[sim.Time]
	// Bandwidth, when given, is the link's payload rate per direction in
	// place of Gen × Width × Efficiency, which are then left out: the
	// link is an on-chip port that is not PCIe (a Zynq AXI HP port, 64
	// bits at 150 MHz), whose rate no PCIe generation describes.
	Bandwidth Param[Rate]
	// MaxPayload is the negotiated Max_Payload_Size (Device Control
	// register): the largest data payload of one TLP. Efficiency is the
	// payload share at this size; a requester that moves smaller TLPs
	// (a GPU's SMs, 128 B) spends more of the link on headers.
	// DefaultMaxPayload when unset.
	MaxPayload Param[Bytes]
	// MaxReadRequest is Max_Read_Request_Size: one read request TLP asks
	// for at most this much data, and travels the other way from the
	// data (DefaultMaxReadRequest when unset).
	MaxReadRequest Param[Bytes]
	// TLPOverhead is the bytes a TLP occupies on the wire besides its
	// payload: framing, sequence number, header and LCRC
	// (DefaultTLPOverhead when unset). A read request is this much
	// without payload.
	TLPOverhead Param[Bytes]
	// AckOverhead is what acknowledging one TLP puts on the link's other
	// direction: the Ack DLLP (DefaultAckOverhead when unset). Idle in a
	// one-way copy, it competes with data when both directions carry
	// some.
	AckOverhead Param[Bytes]
}

// Payload returns the Max_Payload_Size, DefaultMaxPayload when unset.
func (l PCIeLink) Payload() Bytes { return orDefault(l.MaxPayload.V, DefaultMaxPayload) }

// ReadRequest returns the Max_Read_Request_Size, DefaultMaxReadRequest
// when unset.
func (l PCIeLink) ReadRequest() Bytes { return orDefault(l.MaxReadRequest.V, DefaultMaxReadRequest) }

// Ack returns the per-TLP acknowledgement overhead, DefaultAckOverhead
// when unset.
func (l PCIeLink) Ack() Bytes { return orDefault(l.AckOverhead.V, DefaultAckOverhead) }

// Overhead returns the per-TLP wire overhead, DefaultTLPOverhead when
// unset.
func (l PCIeLink) Overhead() Bytes { return orDefault(l.TLPOverhead.V, DefaultTLPOverhead) }

// Switch is a PCIe switch below Parent (a root complex or another switch).
type Switch struct {
	Name   string
	Parent string
	Link   PCIeLink
	// Latency is the switch's cut-through traversal latency.
	Latency Param[sim.Time]
	// ACS says the switch's downstream ports have PCIe Access Control
	// Services (source validation, request and completion redirect), so
	// peer-to-peer traffic between them goes up to the root complex and
	// the IOMMU can tell its devices apart: without it, every device
	// below the switch shares one IOMMU group.
	ACS bool
}

// GPU is a GPU: a discrete one on PCIe (and possibly NVLink), or an
// integrated one that shares its SoC's DRAM (Tegra: Jetson TX2, Xavier,
// Orin), which has no PCIe link, no VRAM and no BAR1 of its own.
type GPU struct {
	Name string
	// Model is the marketing name, e.g. "H200".
	Model string
	// Arch is the GPU generation: kepler, maxwell, pascal, volta, turing,
	// ampere, ada, hopper, blackwell. Unified-memory rules depend on it.
	Arch string
	// Integrated says the GPU is part of an SoC and allocates from the
	// DRAM of NUMA node Node (cudaDeviceProp::integrated). Its unified
	// memory is one allocation in that DRAM, kept coherent by cache
	// maintenance at kernel launch rather than migrated by faults, and
	// neither processor may touch it while the other does (NVIDIA's
	// "How does NVIDIA implement unified memory on PCIe GPUs and Tegra
	// platforms?").
	Integrated bool
	// Node is the NUMA node whose DRAM an integrated GPU shares; only an
	// integrated GPU has one of its own (a discrete GPU's is its root
	// complex's).
	Node int
	// Parent and Link place a discrete GPU in the PCIe tree; an
	// integrated GPU has neither.
	Parent string
	Link   PCIeLink
	// NonCoherentDMA says the GPU's accesses to host memory do not snoop
	// the CPU caches: Tegra before Xavier, which has no I/O coherence,
	// so that pinned memory is mapped uncached on the CPU as well as on
	// the GPU. From Xavier on the GPU snoops the CPU caches (one-way I/O
	// coherence: the CPU does not snoop the GPU's) and pinned memory is
	// cacheable on the CPU. A discrete GPU is also non-coherent below a
	// non-coherent root complex.
	NonCoherentDMA bool

	// VRAM is the GPU's own memory; an integrated GPU has none.
	VRAM Param[Bytes]
	// VRAMBandwidth is what the GPU reaches in its own memory. For an
	// integrated GPU it is optional: the most the GPU's port into the
	// memory controller carries, at most its node's DRAM bandwidth, which
	// it shares with the CPUs and every other DMA agent; left out, the
	// GPU may take all of it (Spec.GPUMemoryBandwidth).
	VRAMBandwidth Param[Rate]
	// BAR1 is the size of the BAR1 aperture through which GPU memory is
	// exposed on PCIe (GPUDirect RDMA, CPU mappings); an integrated GPU
	// has none.
	BAR1 Param[Bytes]
	// CopyEngines is the number of asynchronous copy engines.
	CopyEngines Param[int]
	// CopyOverhead is the fixed cost of one memcpy call (driver, push
	// buffer, doorbell, completion), not counting link latency and data.
	CopyOverhead Param[sim.Time]
	// CopyCompletion is the share of CopyOverhead that comes after the
	// engine's last write: the semaphore release the driver appends to
	// the copy's push buffer and the host's wait that observes it. A
	// synchronous copy from pageable memory to the device returns once
	// its data is staged, before its DMA completes (CUDA Runtime API,
	// "API synchronization behavior"), so it does not pay it; a
	// pageable copy from the device pays it once per staged chunk, each
	// chunk's DMA being waited for before the CPU copies it out. At most
	// CopyOverhead; zero when unset.
	CopyCompletion Param[sim.Time]
	// SMRequest is the data one request of the GPU's SMs carries over
	// PCIe when a kernel loads or stores host memory (zero-copy, remote
	// mappings): DefaultSMRequest when unset. Copy engines use the
	// link's Max_Payload_Size and Max_Read_Request_Size instead.
	SMRequest Param[Bytes]
	// KernelLaunch is the host-side cost of launching an empty kernel
	// and seeing it complete (DefaultKernelLaunch when unset).
	KernelLaunch Param[sim.Time]
	// AllocCost is the cost of one cudaMalloc and cudaFree pair of a
	// 2 MiB buffer (DefaultAllocCost when unset).
	AllocCost Param[sim.Time]
	// PinCost and UnpinCost are what cuMemHostRegister and
	// cuMemHostUnregister cost per 4 KiB page of resident pageable
	// memory (DefaultPinCost, DefaultUnpinCost when unset).
	PinCost   Param[sim.Time]
	UnpinCost Param[sim.Time]
	// PinCallCost and UnpinCallCost are what one cuMemHostRegister and
	// one cuMemHostUnregister (and cuMemHostAlloc, cuMemFreeHost) cost
	// besides their pages: the ioctl into the kernel driver, the memory
	// descriptor it creates or destroys, and the GPU's page-table update
	// with its TLB invalidate (DefaultPinCallCost, DefaultUnpinCallCost
	// when unset). A small registration is mostly this.
	PinCallCost   Param[sim.Time]
	UnpinCallCost Param[sim.Time]
	// StagingRate is the driver's copy of pageable memory into its
	// pinned staging buffers before their DMA to the GPU (one thread,
	// local memory); unset, the node's MemcpyRate. Which copy routine
	// the driver runs is not public, and a C library's memcpy of a large
	// buffer (non-temporal stores past a size threshold) need not be it.
	StagingRate Param[Rate]
	// VRAMLatency is the load-to-use latency of one SM's dependent read
	// of its own VRAM that misses the L2: what a pointer chase through
	// device memory takes per hop. It is also the far end of a peer's
	// read over NVLink. Zero when unset: no latency.
	VRAMLatency Param[sim.Time]
	// HubLatency is the GPU's own share of a read that leaves the chip:
	// from the SMs or a copy engine through the L2 and the GPU's host
	// interface to its PCIe or NVLink port, and the completion back in,
	// both ways together. A read's round trip is this, twice the one-way
	// latency of every link and component between the port and the
	// memory, and the memory's latency (machine.RoundTrip). Zero when
	// unset.
	HubLatency Param[sim.Time]
	// OutstandingReads is how many read requests one of the GPU's
	// masters (its copy engines, its SMs) may have in flight on PCIe:
	// the transaction tags it may use (DefaultOutstandingReads when
	// unset). A read stream gets at most OutstandingReads × request
	// size / round trip (Little's law).
	OutstandingReads Param[int]
	// PageableChunk is the size of the pinned staging buffers the driver
	// copies pageable memory through: a pageable copy is a CPU memcpy
	// into one chunk, then DMA from it, chunk after chunk
	// (DefaultPageableChunk when unset).
	PageableChunk Param[Bytes]
	// UVM holds the unified-memory driver's parameters.
	UVM UVM
}

// UVM holds the parameters of NVIDIA's unified-memory driver (the
// nvidia_uvm module of open-gpu-kernel-modules, kernel-open/nvidia-uvm)
// for one GPU, and the cost of one fault. Zero fields take the driver's
// defaults (the Default constants), which are also what the H200 machine
// measured here runs with.
type UVM struct {
	// FaultBatch is how many fault-buffer entries the driver fetches and
	// services as one batch (uvm_perf_fault_batch_count).
	FaultBatch Param[int]
	// MaxBatches is how many batches one run of the fault handler's
	// bottom half services before it yields
	// (uvm_perf_fault_max_batches_per_service).
	MaxBatches Param[int]
	// PrefetchThreshold is the percentage of a region of a 2 MiB VA
	// block that must be resident or faulted for the tree prefetcher to
	// migrate the whole region (uvm_perf_prefetch_threshold).
	PrefetchThreshold Param[int]
	// ThrashingThreshold is how many consecutive migrations of a page,
	// each within ThrashingLapse of the last, count as thrashing
	// (uvm_perf_thrashing_threshold).
	ThrashingThreshold Param[int]
	// ThrashingLapse is that window (uvm_perf_thrashing_lapse_usec).
	ThrashingLapse Param[sim.Time]
	// ThrashingPinLapses is how long a thrashing page stays pinned to
	// one processor, mapped remotely by the others, in lapses
	// (uvm_perf_thrashing_pin).
	ThrashingPinLapses Param[int]
	// ThrashingEpochLapses is how long without thrashing events, in
	// lapses, before a block is no longer considered thrashing
	// (uvm_perf_thrashing_epoch).
	ThrashingEpochLapses Param[int]
	// FaultLatency is the round trip of one isolated GPU fault on
	// managed memory: the fault is raised, serviced by the driver
	// (migration of one small region included) and replayed.
	FaultLatency Param[sim.Time]
	// FaultEntryCost is the fault service's cost per fault-buffer entry
	// fetched (decode, VA-space and block lookup, the sort:
	// fetch_fault_buffer_entries and preprocess_fault_batch in
	// uvm_gpu_replayable_faults.c).
	FaultEntryCost Param[sim.Time]
	// FaultPageCost is the fault service's cost per page it makes
	// resident on the faulting GPU, faulted or prefetched
	// (uvm_va_block_service_locked's per-page work in uvm_va_block.c).
	FaultPageCost Param[sim.Time]
	// CPUMapCost is what one 4 KiB page made resident in system memory
	// by a migration costs the driver beyond the copy: its share of the
	// CPU chunk's allocation and DMA mapping for the copying GPU, and
	// its insertion into the process's page table, which UVM does one
	// page at a time (block_map_cpu_page_to in uvm_va_block.c:
	// vm_insert_page under the VMA wrapper's lock).
	CPUMapCost Param[sim.Time]
}

// Device is a DMA-capable device other than a GPU: on PCIe, or on an
// SoC's interconnect.
type Device struct {
	Name string
	// Kind is "nic", "nvme", "dma" (a generic DMA engine such as Xilinx
	// AXI DMA), "camera" (a CSI receiver and video input unit, or a PCIe
	// capture card), "isp" (a memory-to-memory image signal processor)
	// or "display" (a display controller scanning out framebuffers).
	Kind   string
	Parent string
	Link   PCIeLink
	// LineRate is the device's external rate (a NIC's port speed, an
	// NVMe drive's media bandwidth, a camera's CSI lanes or a capture
	// card's video inputs), per direction; zero if unlimited. A camera
	// must have one: it bounds how fast a frame's bytes arrive.
	LineRate Param[Rate]
	// PixelRate is what an ISP processes or a display controller scans
	// out, in pixels per second; only for kinds isp and display, which
	// must have it.
	PixelRate Param[float64]
	// DMAEngines is the number of independent DMA queues the model gives it.
	DMAEngines Param[int]
	// OutstandingReads is how many read requests the device's DMA
	// engine keeps in flight (its PCIe tags in use); zero: no limit but
	// the links. A read stream gets at most OutstandingReads × request
	// size / round trip.
	OutstandingReads Param[int]
	// NonCoherentDMA says the device's DMA does not snoop the CPU caches
	// even where its root complex would (PCIe No Snoop). A device is
	// non-coherent if it or its root complex is.
	NonCoherentDMA bool
	// ATS says the device has PCIe Address Translation Services and the
	// kernel enables them (pci_enable_ats): behind a translating IOMMU
	// it caches translations in its own ATC and sends translated
	// requests the IOMMU does not check. Linux refuses ATS to untrusted
	// (external-facing) devices; true here means the device is trusted.
	ATS bool
	// DMAMaskBits is the width of the addresses the device can drive
	// (dma_set_mask): 64, or 32 for a legacy device, whose mappings of
	// memory above 4 GiB bounce through swiotlb. Zero means 64.
	DMAMaskBits Param[int]
	// MaxSegment is dma_set_max_seg_size (zero: Linux's default 64 KiB)
	// and SegmentBoundary dma_set_seg_boundary's mask plus one (zero:
	// 4 GiB): no scatter-gather segment may be longer, or cross a
	// multiple of the boundary.
	MaxSegment      Param[Bytes]
	SegmentBoundary Param[Bytes]
	// Slot names the physical PCI device this device is a function of
	// (PCI_SLOT of its devfn): the devices of one slot are the functions
	// of one multifunction device, below one parent. Empty: a device of
	// its own. Only the functions that do DMA are listed; the model still
	// gives each its own link (a two-port NIC's functions share lanes in
	// reality).
	Slot string
	// Function is the device's function number in its slot (PCI_FUNC,
	// 0..7); written only with slot. A slot has a function 0: Linux finds
	// a multifunction device's other functions through it
	// (pci_scan_slot, drivers/pci/probe.c).
	Function int
	// ACS says this function of a multifunction device isolates itself
	// from its sibling functions: it has ACS with source validation,
	// request and completion redirect and upstream forwarding
	// (REQ_ACS_FLAGS, drivers/iommu/iommu.c), or a quirk the kernel
	// trusts to the same effect (pci_dev_acs_enabled,
	// drivers/pci/quirks.c). The functions of a slot without it share
	// one IOMMU group (get_pci_function_alias_group). Only with slot.
	ACS bool
	// DMAAliases are functions of the same slot whose requester ID this
	// function also uses for its DMA (pci_add_dma_alias, as the quirks of
	// drivers/pci/quirks.c record for devices that use function 1's ID):
	// the IOMMU cannot tell them apart, so they share its group whatever
	// ACS says (get_pci_alias_group). Only with slot.
	DMAAliases []int
}

// NVSwitch is an NVLink switch (or the set of switch chips of one NVLink
// domain, modelled as one non-blocking crossbar).
type NVSwitch struct {
	Name    string
	Latency Param[sim.Time]
}

// NVLink is a bundle of NVLink links between A and B (GPU or NVSwitch
// names); full duplex.
type NVLink struct {
	A, B string
	// Links is the number of NVLink links in the bundle.
	Links Param[int]
	// LinkRate is the per-direction rate of one link (NVLink4: 25 GB/s).
	LinkRate Param[Rate]
	// Efficiency, when given, is the share of LinkRate left for
	// payload. Left out, the share follows from the packets: Payload
	// data bytes behind one Header of flits (Rate).
	Efficiency Param[float64]
	// Payload is the data one NVLink packet carries and Header the
	// flits in front of it (DefaultNVLinkPayload and
	// DefaultNVLinkHeader when unset). A read sends one header-only
	// request packet the other way per Payload bytes.
	Payload Param[Bytes]
	Header  Param[Bytes]
	Latency Param[sim.Time]
}

// Defaults of NVLink's packets. A packet is one to eighteen 128-bit
// (16 B) flits: a header flit, optional address-extension and
// byte-enable flits, and up to 16 data flits (Foley and Danskin,
// "Ultra-Performance Pascal GPU and NVLink Interconnect", IEEE Micro
// 37(2), 2017; en.wikichip.org/wiki/NVLink). The GPU's requests are its
// L2's 128-byte lines (CUDA C++ Best Practices Guide): one header flit
// and eight data flits, 128/144 of the raw rate for data.
const (
	DefaultNVLinkPayload Bytes = 128
	DefaultNVLinkHeader  Bytes = 16
)

// PacketPayload returns the data bytes per packet, DefaultNVLinkPayload
// when unset.
func (l NVLink) PacketPayload() Bytes { return orDefault(l.Payload.V, DefaultNVLinkPayload) }

// PacketHeader returns the header bytes per packet, DefaultNVLinkHeader
// when unset.
func (l NVLink) PacketHeader() Bytes { return orDefault(l.Header.V, DefaultNVLinkHeader) }

// Share is the share of the raw rate left for data: Efficiency when
// given, else Payload / (Payload + Header).
func (l NVLink) Share() float64 {
	if l.Efficiency.V != 0 {
		return l.Efficiency.V
	}
	p, h := float64(l.PacketPayload()), float64(l.PacketHeader())
	return p / (p + h)
}

// Rate is the bundle's data rate per direction: RawRate × Share.
func (l NVLink) Rate() Rate { return l.RawRate() * Rate(l.Share()) }

// FabricFactors are the flow model's global factors (SimGrid's LV08 names):
// every link's capacity is multiplied by BandwidthFactor, every latency by
// LatencyFactor, and each flow also loads the reverse direction of its
// route with CrossTraffic times its rate (acknowledgements, read requests).
// The zero value means 1, 1, 0 and plain max-min sharing.
type FabricFactors struct {
	BandwidthFactor Param[float64]
	LatencyFactor   Param[float64]
	CrossTraffic    Param[float64]
	// Sharing is how flows share a bottleneck: "max-min" (or empty, the
	// default) gives every flow on it an equal share, as the round-robin
	// arbitration of PCIe, NVLink and memory controllers does; "lv08" is
	// SimGrid's LV08 weighted max-min, where a flow's share is inversely
	// proportional to its route's latency plus WeightS over each link's
	// bandwidth (TCP's RTT unfairness).
	Sharing string
	// WeightS is LV08's network/weight-S in bytes, used by "lv08" sharing
	// only; unset means SimGrid's 20537.
	WeightS Param[float64]
}

// DefaultWeightS is SimGrid's network/weight-S for LV08, in bytes
// (surf_network_model_init_LegrandVelho in src/surf/network_cm02.cpp,
// SimGrid 3.32).
const DefaultWeightS = 20537

// LV08WeightS returns the weight-S that the fabric's sharing uses: 0 for
// plain max-min, WeightS (DefaultWeightS when unset) for "lv08".
func (f FabricFactors) LV08WeightS() float64 {
	if f.Sharing != "lv08" {
		return 0
	}
	return orDefault(f.WeightS.V, DefaultWeightS)
}

// Bandwidth returns the bandwidth factor, 1 when unset.
func (f FabricFactors) Bandwidth() float64 { return orDefault(f.BandwidthFactor.V, 1) }

// Latency returns the latency factor, 1 when unset.
func (f FabricFactors) Latency() float64 { return orDefault(f.LatencyFactor.V, 1) }

// Cross returns the cross-traffic factor, 0 when unset.
func (f FabricFactors) Cross() float64 { return f.CrossTraffic.V }

// Defaults of the PCIe transaction-layer parameters.
const (
	// DefaultMaxPayload is the Max_Payload_Size most x86 root ports and
	// GPUs settle on (256 B; the PCIe Base Specification allows 128 B to
	// 4 KiB, the smaller end of a link wins).
	DefaultMaxPayload Bytes = 256
	// DefaultMaxReadRequest is the Max_Read_Request_Size Linux leaves a
	// device at unless its driver or pcie_bus_perf changes it (512 B, the
	// PCIe Base Specification's reset value).
	DefaultMaxReadRequest Bytes = 512
	// DefaultTLPOverhead is a memory TLP with a 64-bit address on a
	// 128b/130b link (PCIe Base Specification 3.0-5.0): 4 B STP framing
	// token with sequence number, 16 B 4-DW header, 4 B LCRC.
	DefaultTLPOverhead Bytes = 24
	// DefaultAckOverhead is one Ack DLLP per TLP, 6 B plus 2 B of framing
	// on a 128b/130b link (PCIe Base Specification). A receiver may
	// acknowledge several TLPs with one Ack, so this is the most the
	// acknowledgements take.
	DefaultAckOverhead Bytes = 8
	// DefaultSMRequest is one 128-byte L2 cache line per request: the SMs
	// reach memory through the L2, whose lines are 128 B of four 32-byte
	// sectors (CUDA C++ Best Practices Guide, coalesced access), and a
	// warp's coalesced 4-byte accesses make one such line.
	DefaultSMRequest Bytes = 128
	// DefaultOutstandingReads is what PCIe's 10-bit tags allow one
	// function: 768 outstanding non-posted requests (PCI Express Base
	// Specification 4.0, 2.2.6.2: 10-bit tag values whose two upper bits
	// are 00b are not used, so 1024 - 256). That GPUs enable 10-bit tags
	// is assumed (Hopper is a Gen5 device, where they are required for
	// full rate on long round trips).
	DefaultOutstandingReads = 768
)

// Defaults of the optional DMA parameters, as Linux has them.
const (
	// DefaultLineSize is the coherency granule of x86 and most Arm cores.
	DefaultLineSize Bytes = 64
	// DefaultDMAMaskBits is a device that drives 64-bit addresses.
	DefaultDMAMaskBits = 64
	// DefaultMaxSegment and DefaultSegmentBoundary are what the PCI core
	// gives every device it adds (drivers/pci/probe.c:
	// dma_set_max_seg_size 65536, dma_set_seg_boundary 0xffffffff).
	DefaultMaxSegment      Bytes = 64 << 10
	DefaultSegmentBoundary Bytes = 1 << 32
	// DefaultSWIOTLB is the bounce-buffer pool without swiotlb= on the
	// kernel command line (IO_TLB_DEFAULT_SIZE).
	DefaultSWIOTLB Bytes = 64 << 20
	// IOTLBSlot is swiotlb's slot size (IO_TLB_SIZE, 1 << IO_TLB_SHIFT):
	// the pool is a whole number of slots.
	IOTLBSlot Bytes = 2 << 10
)

// Defaults of the optional GPU parameters. The unified-memory ones are the
// nvidia_uvm module's own defaults (open-gpu-kernel-modules,
// kernel-open/nvidia-uvm), which the H200 machine measured here also
// runs with; the costs are what was measured on that machine.
const (
	// DefaultKernelLaunch: an empty kernel launch, measured on the H200
	// machine 2026-11-21.
	DefaultKernelLaunch = 3200 * sim.Nanosecond
	// DefaultAllocCost: cudaMalloc and cudaFree of 2 MiB, measured on the
	// H200 machine 2026-11-21.
	DefaultAllocCost = 57 * sim.Microsecond
	// DefaultPinCost and DefaultUnpinCost: cuMemHostRegister and
	// cuMemHostUnregister of resident pageable memory on the H200
	// machine, 35 and 14 ms per GiB (measured 2026-11-21; dmalab probe
	// measured 35.8 and 15.0 ms the same day,
	// docs/measurements/2026-11-21-h200-final/probe.txt), per 4 KiB page.
	DefaultPinCost   = 133500 * sim.Picosecond
	DefaultUnpinCost = 53400 * sim.Picosecond
	// DefaultPinCallCost and DefaultUnpinCallCost: the same run's
	// registration and unregistration of 2 MiB (171.0 and 73.05 us, dmalab
	// probe on the H200 machine 2026-11-21,
	// docs/measurements/2026-11-21-h200-final/probe.txt) less their 512
	// pages at DefaultPinCost and DefaultUnpinCost: 102.6 and 45.7 us a
	// call. The line through them gives that run's 64 MiB within 12 %
	// (2.290 ms against 2.041 registering, 0.921 against 1.002
	// unregistering), where the pages alone gave 68.4 us for 2 MiB.
	DefaultPinCallCost   = 102600 * sim.Nanosecond
	DefaultUnpinCallCost = 45700 * sim.Nanosecond
	// DefaultPageableChunk is assumed: NVIDIA does not document the size
	// of the driver's pinned staging buffers.
	DefaultPageableChunk Bytes = 2 << 20
	// DefaultFaultBatch is UVM_PERF_FAULT_BATCH_COUNT_DEFAULT
	// (uvm_gpu_replayable_faults.c).
	DefaultFaultBatch = 256
	// DefaultMaxBatches is UVM_PERF_FAULT_MAX_BATCHES_PER_SERVICE_DEFAULT
	// (uvm_gpu_replayable_faults.c).
	DefaultMaxBatches = 20
	// DefaultPrefetchThreshold is UVM_PREFETCH_THRESHOLD_DEFAULT, in
	// percent (uvm_perf_prefetch.c).
	DefaultPrefetchThreshold = 51
	// DefaultThrashingThreshold, DefaultThrashingLapse,
	// DefaultThrashingPinLapses and DefaultThrashingEpochLapses are
	// UVM_PERF_THRASHING_THRESHOLD_DEFAULT, _LAPSE_USEC_DEFAULT,
	// _PIN_DEFAULT and _EPOCH_DEFAULT (uvm_perf_thrashing.c).
	DefaultThrashingThreshold   = 3
	DefaultThrashingLapse       = 500 * sim.Microsecond
	DefaultThrashingPinLapses   = 300
	DefaultThrashingEpochLapses = 2000
	// DefaultFaultLatency: the isolated-fault round trip measured by
	// dmalab probe on the H200 machine, one GPU thread at 2 MiB stride
	// (docs/measurements/2026-11-21-h200-cli-probe.txt).
	DefaultFaultLatency = 21920 * sim.Nanosecond
	// DefaultFaultEntryCost: calibrated on the H200 machine from the
	// many-thread managed-fault read (13.49 GB/s), which needs less than
	// 1 ns per fault entry once DefaultFaultPageCost is set; 1 ns is
	// calibrate's lower bound (docs/measurements/2026-11-25-um-fidelity.md).
	DefaultFaultEntryCost = 1 * sim.Nanosecond
	// DefaultFaultPageCost: calibrated on the H200 machine from the
	// probe's single GPU thread at 4 KiB stride (29.42 us median slow
	// touch, faults of 32 and 64 pages about the median) against 2 MiB
	// stride (21.92 us, 16 pages): 234 ns a page, less the 74 ns its
	// transfer takes at 55.5 GB/s
	// (docs/measurements/2026-11-21-h200-cli-probe.txt,
	// docs/measurements/2026-11-25-um-fidelity.md).
	DefaultFaultPageCost = 160 * sim.Nanosecond
	// DefaultCPUMapCost: assumed equal to pinning one 4 KiB page
	// (cuMemHostRegister, 35 ms per GiB measured on the H200 machine
	// 2026-11-21), the same kind of per-page kernel work; a platform
	// calibrates it from the probe's device-to-host prefetch.
	DefaultCPUMapCost = 133 * sim.Nanosecond
	// HostPage is the page size PinCost and UnpinCost are counted in.
	HostPage Bytes = 4 << 10
)

// Limits of the unified-memory parameters, as the driver checks them: the
// thrashing threshold is a 3-bit counter (UVM_PERF_THRASHING_THRESHOLD_MAX)
// and the module parameters are unsigned ints.
const (
	MaxThrashingThreshold = 7
	maxUint               = 1<<32 - 1
)

// Launch returns the kernel launch cost, DefaultKernelLaunch when unset.
func (g GPU) Launch() sim.Time { return orDefault(g.KernelLaunch.V, DefaultKernelLaunch) }

// Alloc returns the cost of an allocation and free, DefaultAllocCost when
// unset.
func (g GPU) Alloc() sim.Time { return orDefault(g.AllocCost.V, DefaultAllocCost) }

// Pin returns the cost of registering one 4 KiB page, DefaultPinCost when
// unset.
func (g GPU) Pin() sim.Time { return orDefault(g.PinCost.V, DefaultPinCost) }

// Unpin returns the cost of unregistering one 4 KiB page,
// DefaultUnpinCost when unset.
func (g GPU) Unpin() sim.Time { return orDefault(g.UnpinCost.V, DefaultUnpinCost) }

// PinCall returns the fixed cost of one registration,
// DefaultPinCallCost when unset.
func (g GPU) PinCall() sim.Time { return orDefault(g.PinCallCost.V, DefaultPinCallCost) }

// UnpinCall returns the fixed cost of one unregistration,
// DefaultUnpinCallCost when unset.
func (g GPU) UnpinCall() sim.Time { return orDefault(g.UnpinCallCost.V, DefaultUnpinCallCost) }

// Chunk returns the pageable staging chunk, DefaultPageableChunk when
// unset.
func (g GPU) Chunk() Bytes { return orDefault(g.PageableChunk.V, DefaultPageableChunk) }

// SMRequestSize returns the SMs' PCIe request size, DefaultSMRequest when
// unset.
func (g GPU) SMRequestSize() Bytes { return orDefault(g.SMRequest.V, DefaultSMRequest) }

// CopyShare returns the node's DRAM copy efficiency, 1 when unset.
func (n Node) CopyShare() float64 { return orDefault(n.CopyEfficiency.V, 1) }

// Outstanding returns the reads one master of the GPU may have in
// flight, DefaultOutstandingReads when unset.
func (g GPU) Outstanding() int { return orDefault(g.OutstandingReads.V, DefaultOutstandingReads) }

// Batch returns the fault batch size, DefaultFaultBatch when unset.
func (u UVM) Batch() int { return orDefault(u.FaultBatch.V, DefaultFaultBatch) }

// Batches returns the batches per service, DefaultMaxBatches when unset.
func (u UVM) Batches() int { return orDefault(u.MaxBatches.V, DefaultMaxBatches) }

// Prefetch returns the prefetch threshold in percent,
// DefaultPrefetchThreshold when unset.
func (u UVM) Prefetch() int { return orDefault(u.PrefetchThreshold.V, DefaultPrefetchThreshold) }

// Thrashing returns the thrashing threshold, DefaultThrashingThreshold
// when unset.
func (u UVM) Thrashing() int { return orDefault(u.ThrashingThreshold.V, DefaultThrashingThreshold) }

// Lapse returns the thrashing lapse, DefaultThrashingLapse when unset.
func (u UVM) Lapse() sim.Time { return orDefault(u.ThrashingLapse.V, DefaultThrashingLapse) }

// PinLapses returns how many lapses a thrashing page stays pinned,
// DefaultThrashingPinLapses when unset.
func (u UVM) PinLapses() int { return orDefault(u.ThrashingPinLapses.V, DefaultThrashingPinLapses) }

// EpochLapses returns the thrashing epoch in lapses,
// DefaultThrashingEpochLapses when unset.
func (u UVM) EpochLapses() int {
	return orDefault(u.ThrashingEpochLapses.V, DefaultThrashingEpochLapses)
}

// PinTime is how long a thrashing page stays pinned: PinLapses × Lapse,
// as the driver computes pin_ns (sim.Forever rather than overflowing).
func (u UVM) PinTime() sim.Time { return lapses(u.Lapse(), u.PinLapses()) }

// EpochTime is the thrashing epoch: EpochLapses × Lapse (sim.Forever
// rather than overflowing).
func (u UVM) EpochTime() sim.Time { return lapses(u.Lapse(), u.EpochLapses()) }

// Fault returns the isolated-fault round trip, DefaultFaultLatency when
// unset.
func (u UVM) Fault() sim.Time { return orDefault(u.FaultLatency.V, DefaultFaultLatency) }

// EntryCost returns the per-entry fault cost, DefaultFaultEntryCost
// when unset.
func (u UVM) EntryCost() sim.Time { return orDefault(u.FaultEntryCost.V, DefaultFaultEntryCost) }

// PageCost returns the per-page fault service cost,
// DefaultFaultPageCost when unset.
func (u UVM) PageCost() sim.Time { return orDefault(u.FaultPageCost.V, DefaultFaultPageCost) }

// MapCost returns the per-page cost of making a page resident in system
// memory, DefaultCPUMapCost when unset.
func (u UVM) MapCost() sim.Time { return orDefault(u.CPUMapCost.V, DefaultCPUMapCost) }

func lapses(lapse sim.Time, n int) sim.Time {
	if lapse > 0 && sim.Time(n) > sim.Forever/lapse {
		return sim.Forever
	}
	return lapse * sim.Time(n)
}

// StreamCopyRate returns the node's StreamRate, its MemcpyRate when
// unset.
func (n Node) StreamCopyRate() Rate { return orDefault(n.StreamRate.V, n.MemcpyRate.V) }

// Line returns the cache line size, DefaultLineSize when unset.
func (c CPUCache) Line() Bytes { return orDefault(c.LineSize.V, DefaultLineSize) }

// MaskBits returns the width of the device's DMA addresses,
// DefaultDMAMaskBits when unset.
func (d Device) MaskBits() int { return orDefault(d.DMAMaskBits.V, DefaultDMAMaskBits) }

// MaxSeg returns the longest scatter-gather segment the device takes,
// DefaultMaxSegment when unset.
func (d Device) MaxSeg() Bytes { return orDefault(d.MaxSegment.V, DefaultMaxSegment) }

// SegBoundary returns the alignment no segment may cross,
// DefaultSegmentBoundary when unset.
func (d Device) SegBoundary() Bytes { return orDefault(d.SegmentBoundary.V, DefaultSegmentBoundary) }

// SwiotlbSize returns the bounce-buffer pool size, DefaultSWIOTLB when
// unset.
func (s *Spec) SwiotlbSize() Bytes { return orDefault(s.SWIOTLB.V, DefaultSWIOTLB) }

func orDefault[T Number](v, d T) T {
	if v == 0 {
		return d
	}
	return v
}

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
}

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
	// MemcpyRate is what one CPU thread achieves copying between two
	// large buffers in this node (pageable staging copies pay it).
	MemcpyRate Param[Rate]
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

// SocketLink is an inter-socket link (Intel UPI, AMD xGMI) between nodes
// A and B; full duplex, Bandwidth per direction.
type SocketLink struct {
	Name      string
	A, B      int
	Bandwidth Param[Rate]
	Latency   Param[sim.Time]
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
}

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
}

// Switch is a PCIe switch below Parent (a root complex or another switch).
type Switch struct {
	Name   string
	Parent string
	Link   PCIeLink
	// Latency is the switch's cut-through traversal latency.
	Latency Param[sim.Time]
}

// GPU is a discrete GPU on PCIe (and possibly NVLink).
type GPU struct {
	Name string
	// Model is the marketing name, e.g. "H200".
	Model string
	// Arch is the GPU generation: kepler, maxwell, pascal, volta, turing,
	// ampere, ada, hopper, blackwell. Unified-memory rules depend on it.
	Arch   string
	Parent string
	Link   PCIeLink

	VRAM          Param[Bytes]
	VRAMBandwidth Param[Rate]
	// BAR1 is the size of the BAR1 aperture through which GPU memory is
	// exposed on PCIe (GPUDirect RDMA, CPU mappings).
	BAR1 Param[Bytes]
	// CopyEngines is the number of asynchronous copy engines.
	CopyEngines Param[int]
	// CopyOverhead is the fixed cost of one memcpy call (driver, push
	// buffer, doorbell, completion), not counting link latency and data.
	CopyOverhead Param[sim.Time]
}

// Device is a DMA-capable device other than a GPU: on PCIe, or on an
// SoC's interconnect.
type Device struct {
	Name string
	// Kind is "nic", "nvme" or "dma" (a generic DMA engine such as Xilinx
	// AXI DMA).
	Kind   string
	Parent string
	Link   PCIeLink
	// LineRate is the device's external rate (a NIC's port speed, an
	// NVMe drive's media bandwidth), per direction; zero if unlimited.
	LineRate Param[Rate]
	// DMAEngines is the number of independent DMA queues the model gives it.
	DMAEngines Param[int]
	// NonCoherentDMA says the device's DMA does not snoop the CPU caches
	// even where its root complex would (PCIe No Snoop). A device is
	// non-coherent if it or its root complex is.
	NonCoherentDMA bool
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
	// Efficiency is the share of LinkRate left for payload.
	Efficiency Param[float64]
	Latency    Param[sim.Time]
}

// FabricFactors are the flow model's global factors (SimGrid's LV08 names):
// every link's capacity is multiplied by BandwidthFactor, every latency by
// LatencyFactor, and each flow also loads the reverse direction of its
// route with CrossTraffic times its rate (acknowledgements, read requests).
// The zero value means 1, 1, 0.
type FabricFactors struct {
	BandwidthFactor Param[float64]
	LatencyFactor   Param[float64]
	CrossTraffic    Param[float64]
}

// Bandwidth returns the bandwidth factor, 1 when unset.
func (f FabricFactors) Bandwidth() float64 { return orDefault(f.BandwidthFactor.V, 1) }

// Latency returns the latency factor, 1 when unset.
func (f FabricFactors) Latency() float64 { return orDefault(f.LatencyFactor.V, 1) }

// Cross returns the cross-traffic factor, 0 when unset.
func (f FabricFactors) Cross() float64 { return f.CrossTraffic.V }

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

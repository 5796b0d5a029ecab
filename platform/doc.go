// Package platform describes machines as data: NUMA nodes, their CPU
// caches and distances, inter-socket links, the PCIe tree (root complexes,
// switches, GPUs, NICs, NVMe drives, DMA engines) or an SoC's interconnect
// in its place, GPUs integrated into an SoC that share its DRAM, which DMA
// snoops the CPU caches and which does not, what each device's driver
// tells the DMA API (address mask, segment limits), the swiotlb pool, the
// CUDA driver's per-call costs and the unified-memory driver's parameters
// of each GPU, NVLink and NVSwitches, the IOMMU (its hardware profile and
// the kernel's mode, which switches have ACS, and which devices are
// functions of one multifunction device), and the flow model's
// global factors. A Spec is what the hardware is, never what it is doing;
// package machine builds the running state from one. Like Akita's specs,
// a Spec is immutable once validated: Set and Clone return new ones.
//
// Its real-world counterparts are the firmware and driver views of a
// machine: the ACPI SRAT (which cores and memory form which NUMA node) and
// SLIT (Spec.Distances), the PCI topology under /sys/bus/pci (parents,
// link generation and width, BAR sizes), and `nvidia-smi topo -m` (which
// GPUs share a switch, a root complex, a socket, or NVLink).
//
// Every numeric value is a Param that carries its source: "measured here
// ...", "datasheet: ...", "calibrated: ...", or an honest "assumed". The
// sources are printed with results, so a prediction can always be traced
// to the numbers it came from.
//
// # File format
//
// Specs are written in YAML (Parse, Load, Marshal). Field names are the
// snake_case of the Go names; unknown fields, duplicate keys and values of
// the wrong kind are errors, reported as "file:line: field.path: reason".
// A parameter is a bare value or {value: ..., source: ...}; a flag
// (noncoherent_dma) is a plain true or false:
//
//	name: h200-pcie
//	nodes:
//	  - id: 0
//	    cores: 16
//	    dram: {value: 128 GiB, source: "measured here"}
//	    dram_bandwidth: 307.2 GB/s
//	    memcpy_rate: 10 GB/s
//	root_complexes:
//	  - {name: rc0, node: 0, latency: 150ns}
//	gpus:
//	  - name: gpu0
//	    arch: hopper
//	    parent: rc0
//	    link: {gen: 5, width: 16, efficiency: 0.8807373046875, latency: 100ns}
//	    vram: 143771 MiB
//	    vram_bandwidth: 4384 GB/s
//	    bar1: 256 GiB
//	    copy_engines: 3
//	    copy_overhead: 6.24us
//
// Sizes take B, KB, MB, GB, TB, PB (decimal) and KiB..PiB (binary) and must
// be whole bytes; rates take B/s, KB/s .. TB/s, KiB/s .. TiB/s, or bits
// (Gb/s, Gbps: "400 Gb/s" is 50 GB/s), a plain number being bytes per
// second; durations take ps, ns, us, ms, s (sim.ParseTime). Anchors and
// aliases may share values; merge keys (<<) are not supported. Latencies,
// a root complex's bandwidth cap, a device's line rate, dma_mask_bits,
// max_segment and segment_boundary, a GPU's model, kernel_launch,
// alloc_cost, pin_cost, unpin_cost, pageable_chunk and uvm (the nvidia_uvm
// module parameters and the cost of one fault), a node's cache, swiotlb,
// the iommu section (mode off when absent), a switch's acs (false), a
// device's slot, function, acs and dma_aliases, and the fabric factors
// are optional (zero, or the documented default:
// DefaultDMAMaskBits, DefaultKernelLaunch, DefaultPrefetchThreshold and
// the other Default constants; where zero means a default, writing 0 is
// an error rather than a silent default); every other parameter is
// required. A link is
// gen, width and efficiency, or, for a port that is not PCIe (an AXI port
// of an SoC), a bandwidth instead.
//
// # Socket links and NUMA cost
//
// A socket link (UPI, AMD's xGMI) is described by its structure, links
// × link_rate × efficiency per direction, or by a fixed bandwidth
// instead; protocol (upi or xgmi) is optional and only names it:
//
//	socket_links:
//	  - {name: upi, a: 0, b: 1, protocol: upi, links: 4, link_rate: 32 GB/s, efficiency: 0.8888888888888888, latency: 40ns}
//	  - name: xgmi            # an AMD pair; numbers for illustration only
//	    a: 2
//	    b: 3
//	    protocol: xgmi
//	    links: 4
//	    link_rate: {value: 64 GB/s, source: "assumed: x16 at 32 Gb/s a lane"}
//	    efficiency: {value: 0.9, source: "assumed"}
//	    latency: {value: 50ns, source: "assumed"}
//
// No preset uses xGMI; the format takes its link count and rate as it
// takes UPI's.
//
// latency is one way; a node's dram_latency is the idle load latency
// from its own cores. They give a CPU's cost on another node's memory:
// LoadLatency (DRAM plus the round trip over the links on the way) and
// ThreadRate (one thread's rate scaled by local over remote latency:
// Little's law over the line fills a core keeps in flight).
//
// # Multifunction devices
//
// The devices that are functions of one physical PCI device name it as
// their slot and give their function number (0..7, function 0 present):
//
//	devices:
//	  - name: nic0        # with kind, parent, link, dma_engines as always
//	    slot: cx7
//	    function: 0
//	  - name: nic1
//	    slot: cx7
//	    function: 1
//	    acs: true
//
// A function's acs says it isolates itself from its siblings (ACS, or a
// kernel quirk to that effect); dma_aliases lists the functions of its
// slot whose requester ID it also uses. Both decide IOMMU groups only:
// the functions of a slot without ACS, and functions that alias each
// other, share one. The three fields are errors on a device without a
// slot, and all of a slot's functions have one parent. A file without
// them reads as before: every device is a slot of its own.
//
// # Video devices
//
// A device of kind camera writes frames into memory: an SoC's CSI
// receiver and video input unit (Tegra's NVCSI and VI) or a PCIe capture
// card. Its line_rate is required: the input link's rate (CSI lanes times
// the lane rate, a card's SDI or HDMI inputs), which bounds how fast a
// frame's bytes arrive. Kinds isp (a memory-to-memory image signal
// processor) and display (a display controller) require pixel_rate, in
// pixels per second (1.85e9); no other kind may have one:
//
//	devices:
//	  - {name: vi0, kind: camera, parent: soc, link: {bandwidth: 16 GB/s}, line_rate: 10 Gb/s, dma_engines: 1}
//	  - {name: isp0, kind: isp, parent: soc, link: {bandwidth: 16 GB/s}, pixel_rate: 1.85e9, dma_engines: 2}
//
// jetson-orin has vi0, isp0 and dc0 (a display controller) on its SoC
// fabric; h200-pcie has cap0, a PCIe capture card, and no ISP or display.
//
// # Integrated GPUs
//
// A GPU with integrated: true is part of an SoC (Tegra: Jetson TX2,
// Xavier, Orin). It names the node whose DRAM it shares and has no parent,
// link, vram or bar1, which are errors if written; its vram_bandwidth is
// optional, a cap on its share of that node's DRAM bandwidth
// (GPUMemoryBandwidth). Its unified memory is one allocation in that DRAM,
// made coherent by cache maintenance at kernel launch, never migrated by
// faults and never touched by the CPU while a kernel runs.
//
// # Coherency
//
// x86 PCIe DMA snoops the CPU caches. Where it does not (the AXI ports of
// many Arm SoCs, or a device using PCIe No Snoop), the root complex, the
// device or the GPU says noncoherent_dma: true, and DeviceCoherent reports
// false for it and every device and GPU below it. An integrated GPU is
// coherent from Tegra Xavier on (I/O coherence: the GPU snoops the CPU
// caches, so pinned memory is cacheable on the CPU) and non-coherent
// before (pinned memory uncached on the CPU as on the GPU). The node of
// such a device must then give its cache's size, writeback_cost,
// invalidate_cost and uncached_rate: streaming DMA costs cache maintenance
// per line, and coherent buffers are uncached.
//
// Names of root complexes, switches, GPUs, devices, NVSwitches and socket
// links share one namespace, since routes and --set paths refer to them.
//
// # Presets
//
// Presets lists the built-in machines (h200-pcie, the measured machine;
// 2s-4gpu-pcie; dgx-h100; zynq-7000, a non-coherent SoC; jetson-orin and
// jetson-tx2, integrated GPUs after and before Tegra's I/O coherence). Resolve takes
// what a user typed: a preset name or a file path.
package platform

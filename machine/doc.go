// Package machine builds a running machine from a platform spec: a
// sim.Engine, a fabric with a link for every bandwidth-limited piece of
// hardware (each NUMA node's DRAM, socket links, root complexes, PCIe
// links of switches and endpoints, GPU VRAM, NVLink bundles, device
// wires), DMA engines (GPU copy engines, device DMA queues), and routes
// between any two endpoints.
//
// Its real-world counterpart is the machine itself as the kernel sees it
// after enumeration: the NUMA nodes of ACPI SRAT/SLIT, the PCI hierarchy
// below each host bridge, and the GPUs' copy engines and NVLinks. The
// spec is immutable; Machine holds the state.
//
// Routes follow the hardware: the PCIe tree is walked up to the lowest
// common ancestor and down again (peer-to-peer through a switch never
// touches the root complex); traffic between root complexes on different
// sockets crosses the socket links; GPU peer traffic takes NVLink when
// there is one. Host memory and VRAM are links too (shared by both
// directions), so every transfer competes with every other user of the
// memory it reads or writes.
//
// CPU threads take part too. A copy within one node (CPUCopy) is a flow
// over the node's DRAM at the node's one-thread memcpy rate. An access
// to another node's memory (CPUAccess, and CPUCopyBetween for a copy
// between nodes; package mem hands its remote accesses and copies to
// them) pays the idle remote load latency, the socket links' round
// trip on top of DRAM's, and is then a flow from that node's DRAM over
// the socket links, capped at the rate a core's line fills in flight
// allow over that latency (Little's law; platform.Spec.ThreadRate).
// The socket link is one fabric link for CPUs and devices alike, so a
// thread reading remote memory and a GPU copying from it share it max-min
// fairly.
package machine

package platform

import "fmt"

// Upper bounds on the counts a platform may give. The model builds
// something for every unit counted (an engine per copy engine or DMA
// queue, a fabric vertex and routes per component, a CPU-time slot per
// core), so an unbounded count in a file or a --set is gigabytes of
// memory before any error; copy_engines=1e8 took 14 GB. Each bound is the
// limit of the real thing the count describes, or far above any machine
// where the real thing has no such limit.
const (
	// MaxNodes is MAX_NUMNODES at its largest: 1 << CONFIG_NODES_SHIFT,
	// which x86-64 caps at 10 (arch/x86/Kconfig, NODES_SHIFT).
	MaxNodes = 1024
	// MaxCores is the most CPUs a node may have: NR_CPUS at its largest,
	// CONFIG_NR_CPUS with MAXSMP on x86-64 (arch/x86/Kconfig).
	MaxCores = 8192
	// MaxGPUs is NV_MAX_DEVICES, "the maximum number of GPUs supported
	// in a single system" (open-gpu-kernel-modules, nvlimits.h).
	MaxGPUs = 32
	// MaxCopyEngines is NV2080_ENGINE_TYPE_COPY_SIZE, the copy engines
	// one GPU's engine list can name (open-gpu-kernel-modules,
	// cl2080_notification.h).
	MaxCopyEngines = 64
	// MaxDMAEngines is NVMe's limit on a controller's queues: 65535 I/O
	// submission queues (the 16-bit, zero-based count of the Number of
	// Queues feature, NVM Express Base Specification) and the admin
	// queue. No NIC offers more queue pairs.
	MaxDMAEngines = 65536
	// MaxNVLinkLinks bounds the links of one NVLink bundle: a GPU has at
	// most 18 (NVLink4 and NVLink5), an NVLink4 NVSwitch chip 64 ports.
	MaxNVLinkLinks = 64
	// MaxComponents bounds each list of components (socket links, root
	// complexes, PCIe switches, devices, NVSwitches, NVLink bundles): far
	// beyond any machine, while a hostile file stays cheap to reject.
	MaxComponents = 4096
)

// bounds checks every count against its bound. It runs first, so that
// the checks after it never iterate over a list longer than a bound
// allows for anything but reporting.
func (v *validator) bounds() {
	s := v.s
	for _, l := range []struct {
		path string
		n    int
		max  int
		what string
	}{
		{"nodes", len(s.Nodes), MaxNodes, "NUMA nodes (MAX_NUMNODES)"},
		{"socket_links", len(s.SocketLinks), MaxComponents, "socket links"},
		{"root_complexes", len(s.RootComplexes), MaxComponents, "root complexes"},
		{"switches", len(s.Switches), MaxComponents, "PCIe switches"},
		{"gpus", len(s.GPUs), MaxGPUs, "GPUs (NV_MAX_DEVICES)"},
		{"devices", len(s.Devices), MaxComponents, "devices"},
		{"nvswitches", len(s.NVSwitches), MaxComponents, "NVSwitches"},
		{"nvlinks", len(s.NVLinks), MaxComponents, "NVLink bundles"},
	} {
		if l.n > l.max {
			v.add(l.path, "%d entries: want at most %d %s", l.n, l.max, l.what)
		}
	}
	count := func(path string, n, max int, what string) {
		if n > max {
			v.add(path, "want at most %d %s, got %d", max, what, n)
		}
	}
	for i, n := range s.Nodes {
		count(fmt.Sprintf("nodes[%d].cores", i), n.Cores.V, MaxCores, "cores (NR_CPUS)")
	}
	for i, g := range s.GPUs {
		count(fmt.Sprintf("gpus[%d].copy_engines", i), g.CopyEngines.V, MaxCopyEngines, "copy engines (NV2080_ENGINE_TYPE_COPY_SIZE)")
	}
	for i, d := range s.Devices {
		count(fmt.Sprintf("devices[%d].dma_engines", i), d.DMAEngines.V, MaxDMAEngines, "DMA queues (NVMe's 65535 I/O queues and the admin queue)")
	}
	for i, l := range s.NVLinks {
		count(fmt.Sprintf("nvlinks[%d].links", i), l.Links.V, MaxNVLinkLinks, "links in a bundle")
	}
}

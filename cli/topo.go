package cli

import (
	"encoding/json"
	"strings"

	"github.com/dmalab/dmalab/hw/nvml"
	"github.com/dmalab/dmalab/hw/topo"
)

func init() {
	register(&command{
		name:    "topo",
		summary: "show this machine's NUMA nodes, PCI tree, IOMMU, GPUs and connection matrix",
		run:     runTopo,
	})
}

const topoDescription = `
Topo reads the real machine from sysfs and procfs: NUMA nodes with their
CPUs, memory and distances (as numactl -H); numa_balancing; the IOMMU:
its units, each group's domain type and devices, the kernel command
line's IOMMU words, and the mode DMA runs in (off, passthrough, strict,
lazy, or mixed where groups differ) with the evidence; the PCI tree with
class, vendor, link speed and width, NUMA node, IOMMU group and BAR sizes
(as lspci -tv); the NVIDIA GPUs with their NUMA affinity and BAR1; and a
connection matrix among GPUs and NICs (as nvidia-smi topo -m). Files that
are missing, as on virtual machines, show as "?".

--root reads a copy of a machine's /sys and /proc instead of this one.
--json prints the same as JSON with stable snake_case field names.`

func runTopo(e *env, args []string) int {
	fs := newFlags(e, "topo", "topo [--json] [--root DIR]", topoDescription)
	asJSON := fs.Bool("json", false, "print the topology as JSON")
	root := fs.String("root", "/", "read the tree under `DIR` (a copy of /sys and /proc) instead of this machine")
	pos, exit, stop := parseArgs(e, fs, args)
	if stop {
		return exit
	}
	if len(pos) > 0 {
		return usageError(e, "topo", "unexpected argument %q (topo takes only flags)", pos[0])
	}
	// NVML, when the driver is there, names GPUs and reports BAR1 use and
	// NVLinks; without it sysfs alone answers. A --root other than / is a
	// copied tree: the local driver knows nothing about its devices.
	var opts topo.Options
	if *root == "/" {
		if gi, err := newNVMLGPUInfo(); err == nil {
			defer nvml.Shutdown()
			opts.GPUInfo = gi
		}
	}
	t, err := topo.ReadWith(*root, opts)
	if err != nil {
		return usageError(e, "topo", "%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(t); err != nil {
			return usageError(e, "topo", "write: %v", err)
		}
		return exitOK
	}
	if err := topo.Format(e.stdout, t); err != nil {
		return usageError(e, "topo", "write: %v", err)
	}
	return exitOK
}

// nvmlGPUInfo answers topo.GPUInfo from NVML.
type nvmlGPUInfo struct {
	links map[string][]nvml.NVLink // by normalised bus ID, filled lazily
}

func newNVMLGPUInfo() (*nvmlGPUInfo, error) {
	if err := nvml.Init(); err != nil {
		return nil, err
	}
	return &nvmlGPUInfo{links: map[string][]nvml.NVLink{}}, nil
}

func (n *nvmlGPUInfo) GPU(busID string) (topo.GPUDetails, bool) {
	d, err := nvml.DeviceByPCIBusID(topo.BDF(busID).NVMLBusID())
	if err != nil {
		return topo.GPUDetails{}, false
	}
	name, err := d.Name()
	if err != nil {
		return topo.GPUDetails{}, false
	}
	det := topo.GPUDetails{Name: name}
	if bar, err := d.BAR1(); err == nil {
		det.BAR1Total, det.BAR1Used = topo.Bytes(bar.Total), topo.Bytes(bar.Used)
	}
	return det, true
}

func (n *nvmlGPUInfo) NVLinks(a, b string) int {
	c, _ := countNVLinks(n.linksOf(a), n.linksOf(b), b)
	return c
}

// NVLinksSwitched says whether the links NVLinks counts between a and b
// end at NVSwitches both attach to (topo.NVSwitchInfo).
func (n *nvmlGPUInfo) NVLinksSwitched(a, b string) bool {
	_, switched := countNVLinks(n.linksOf(a), n.linksOf(b), b)
	return switched
}

func (n *nvmlGPUInfo) linksOf(busID string) []nvml.NVLink {
	key := normBusID(busID)
	if l, ok := n.links[key]; ok {
		return l
	}
	var links []nvml.NVLink
	if d, err := nvml.DeviceByPCIBusID(topo.BDF(busID).NVMLBusID()); err == nil {
		links, _ = d.NVLinks()
	}
	n.links[key] = links
	return links
}

// countNVLinks is how many of a's active NVLinks join it to the GPU b:
// links whose far end is b, or, where a's links end at NVSwitches, links
// into a switch that b is attached to too (nvidia-smi topo -m reports
// NV18 between any two GPUs of a DGX H100 this way); switched says the
// count is of the latter.
func countNVLinks(a, b []nvml.NVLink, bBus string) (n int, switched bool) {
	direct, shared := 0, 0
	bRemotes := map[string]bool{}
	for _, l := range b {
		bRemotes[normBusID(l.RemoteBusID)] = true
	}
	for _, l := range a {
		r := normBusID(l.RemoteBusID)
		switch {
		case r == normBusID(bBus):
			direct++
		case bRemotes[r]:
			shared++
		}
	}
	if direct > 0 {
		return direct, false
	}
	return shared, shared > 0
}

// normBusID puts a PCI bus ID in one form whatever the domain width and
// case: "00000000:1A:00.0" and "0000:1a:00.0" both become "0:1a:00.0".
func normBusID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	dom, rest, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	dom = strings.TrimLeft(dom, "0")
	if dom == "" {
		dom = "0"
	}
	return dom + ":" + rest
}

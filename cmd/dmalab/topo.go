package main

import (
	"encoding/json"

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
CPUs, memory and distances (as numactl -H); numa_balancing; whether an
IOMMU is present and the domain type of its groups; the PCI tree with
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
	// The NVML binding (hw/nvml) plugs in here through
	// topo.Options.GPUInfo once it exists.
	t, err := topo.Read(*root)
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

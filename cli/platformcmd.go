package cli

import (
	"fmt"
	"strings"

	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/numactl"
	"github.com/dmalab/dmalab/platform"
)

func init() {
	register(&command{name: "platform", summary: "show or check a platform description", run: runPlatform})
}

func runPlatform(e *env, args []string) int {
	// from-topo has flags of its own.
	if len(args) > 0 && args[0] == "from-topo" {
		return runFromTopo(e, args[1:])
	}
	fs := newFlags(e, "platform", "platform show NAME|FILE | platform numa NAME|FILE | platform check FILE... | platform list | platform from-topo TOPO.json [-o FILE]",
		`show prints a preset (or a platform file) as YAML; the output loads back to
an identical platform, so it is the way to start a description of your own
machine: dmalab platform show h200-pcie > mine.yaml, edit, then
dmalab run --platform mine.yaml. check validates files and reports every
error as file:line: field: reason. list names the presets. Where the
platform has an IOMMU, show ends with its IOMMU groups as a comment block
(the devices that share a group can only be isolated, or passed to VFIO,
together): the devices below a switch without ACS share one, and so do
the functions of one multifunction device (slot) that lack ACS.
from-topo writes a platform skeleton from "dmalab topo --json" (see
"dmalab platform from-topo --help"). numa prints the platform's NUMA nodes as numactl -H prints a real
machine's (and as "dmalab topo" prints this one's): each node's CPUs,
numbered from node 0 on, its DRAM as size and as free (nothing is
allocated before a run), and the SLIT distances (10 on the diagonal and
21 elsewhere where the platform gives none).`)
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) == 0 {
		return usageError(e, "platform", "want a subcommand: show NAME|FILE, check FILE..., or list")
	}
	switch pos[0] {
	case "list":
		for _, n := range platform.Presets() {
			fmt.Fprintln(e.stdout, n)
		}
		return exitOK
	case "show":
		if len(pos) != 2 {
			return usageError(e, "platform show", "want one platform name or file")
		}
		spec, err := platform.Resolve(pos[1])
		if err != nil {
			return usageError(e, "platform show", "%v", err)
		}
		out, err := platform.Marshal(spec)
		if err != nil {
			fmt.Fprintf(e.stderr, "dmalab platform show: %v\n", err)
			return exitFindings
		}
		e.stdout.Write(out)
		writeGroups(e, spec)
		return exitOK
	case "numa":
		if len(pos) != 2 {
			return usageError(e, "platform numa", "want one platform name or file")
		}
		spec, err := platform.Resolve(pos[1])
		if err != nil {
			return usageError(e, "platform numa", "%v", err)
		}
		if err := numactl.WriteHardware(e.stdout, numactlNodes(spec)); err != nil {
			fmt.Fprintf(e.stderr, "dmalab platform numa: %v\n", err)
			return exitFindings
		}
		return exitOK
	case "check":
		if len(pos) < 2 {
			return usageError(e, "platform check", "want one or more files")
		}
		bad := false
		for _, f := range pos[1:] {
			if _, err := platform.Load(f); err != nil {
				fmt.Fprintln(e.stderr, err)
				bad = true
				continue
			}
			fmt.Fprintf(e.stdout, "%s: ok\n", f)
		}
		if bad {
			return exitUsage
		}
		return exitOK
	}
	return usageError(e, "platform", "unknown subcommand %q (want show, numa, check, list or from-topo)", pos[0])
}

// writeGroups ends show's output with the platform's IOMMU groups, as
// YAML comments so that the output still loads back unchanged.
func writeGroups(e *env, spec *platform.Spec) {
	groups := iommu.Groups(spec)
	if spec.IOMMU.Profile == "" || len(groups) == 0 {
		return
	}
	fmt.Fprintf(e.stdout, "# IOMMU groups (computed from the topology: the devices below a switch\n# whose ports lack ACS share one group, as do the functions of one\n# device without ACS or with DMA aliases):\n")
	for _, g := range groups {
		fmt.Fprintf(e.stdout, "#   group %d: %s (%s)\n", g.ID, strings.Join(g.Devices, ", "), g.Why)
	}
}

// numactlNodes is the model's numactl -H view: CPUs numbered node after
// node (node 0 has 0 to cores-1) and every byte free, as at boot.
func numactlNodes(spec *platform.Spec) []numactl.Node {
	var out []numactl.Node
	cpu := 0
	for _, n := range spec.Nodes {
		v := numactl.Node{ID: n.ID, Size: int64(n.DRAM.V), Free: int64(n.DRAM.V)}
		for range n.Cores.V {
			v.CPUs = append(v.CPUs, cpu)
			cpu++
		}
		for _, m := range spec.Nodes {
			v.Distance = append(v.Distance, spec.Distance(n.ID, m.ID))
		}
		out = append(out, v)
	}
	return out
}

package dmalab

import (
	"strings"

	"github.com/dmalab/dmalab/kernel"
	"github.com/dmalab/dmalab/numactl"
)

// numactlModes maps numactl's policy options to set_mempolicy's modes.
var numactlModes = map[numactl.Policy]kernel.PolicyMode{
	numactl.NoPolicy:           kernel.MPOLDefault,
	numactl.Interleave:         kernel.MPOLInterleave,
	numactl.Preferred:          kernel.MPOLPreferred,
	numactl.PreferredMany:      kernel.MPOLPreferredMany,
	numactl.WeightedInterleave: kernel.MPOLWeightedInterleave,
	numactl.Membind:            kernel.MPOLBind,
	numactl.LocalAlloc:         kernel.MPOLLocal,
}

// launcher parses numactl's options against the machine's nodes and
// CPUs and makes the kernel give them to every new process; the options
// go in the result's params as "numactl", so that the JSON says how to
// run it again. Empty options change nothing.
func (s *System) launcher(line string) error {
	line = strings.Join(strings.Fields(line), " ")
	if line == "" {
		return nil
	}
	k := s.Kernel
	a, err := numactl.Parse(line, numactl.Topology{Nodes: k.Nodes(), CPUs: k.CPUs()})
	if err != nil {
		return Usagef("--numactl: %v", err)
	}
	l := kernel.Launcher{Mode: numactlModes[a.Policy], Nodes: a.Nodes, CPUs: a.CPUs}
	for _, n := range a.CPUNodes {
		l.CPUs = append(l.CPUs, k.CPUsOfNode(n)...)
	}
	if err := k.SetLauncher(l); err != nil {
		return Usagef("--numactl %q: %v", line, err)
	}
	s.Result.Params["numactl"] = line
	return nil
}

package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dmalab/dmalab/calib"
	"github.com/dmalab/dmalab/hw/topo"
	"github.com/dmalab/dmalab/platform"
)

// runFromTopo is "platform from-topo": a platform skeleton from a topo
// report.
func runFromTopo(e *env, args []string) int {
	fs := newFlags(e, "platform from-topo", "platform from-topo TOPO.json [--host NAME] [--date DATE] [--base PRESET] [-o FILE]",
		`Writes a platform file skeleton of the machine that "dmalab topo --json"
described: its NUMA nodes (CPUs, memory, SLIT distances), a root complex per
PCI host bridge, a PCIe switch per bridge below a root port, the GPUs with
their link generation and width and BAR1, the NVLinks between them, and the
NICs that show a PCIe link. What topo saw has the source "from dmalab topo on
HOST, DATE"; everything topo cannot know (link efficiencies, latencies, DRAM
and VRAM rates, VRAM size, copy costs, unified-memory parameters, socket
links) is BASE's value with the source "assumed: BASE's value (calibrate to
replace)". Notes on stderr say what was guessed or left out. The file loads
as any platform (dmalab platform show FILE, dmalab run --platform FILE);
"dmalab calibrate PROBE.json --platform FILE" then replaces the calibration
subset with measured values.`)
	host := fs.String("host", "", "the machine's `name` in sources (default: the topo file's name)")
	date := fs.String("date", "", "the topo run's `date` in sources (default: the file's modification date)")
	baseName := fs.String("base", "h200-pcie", "the `preset` whose values stand in for what topo cannot know")
	out := fs.String("o", "", "write the platform to `FILE` instead of stdout")
	pos, code, stop := parseArgs(e, fs, args)
	if stop {
		return code
	}
	if len(pos) != 1 {
		return usageError(e, "platform from-topo", "want one topo report (dmalab topo --json), got %d arguments", len(pos))
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return usageError(e, "platform from-topo", "%v", err)
	}
	var t topo.Topology
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return usageError(e, "platform from-topo", "%s: not a dmalab topo --json report: %v", pos[0], err)
	}
	if len(t.Nodes) == 0 && len(t.Devices) == 0 && len(t.GPUs) == 0 {
		return usageError(e, "platform from-topo", "%s: the report has no NUMA node, PCI device or GPU", pos[0])
	}
	if *host == "" {
		*host = strings.TrimSuffix(filepath.Base(pos[0]), filepath.Ext(pos[0]))
	}
	if *date == "" {
		if st, err := os.Stat(pos[0]); err == nil {
			*date = st.ModTime().UTC().Format("2006-01-02")
		}
	}
	base, err := platform.Resolve(*baseName)
	if err != nil {
		return usageError(e, "platform from-topo", "--base: %v", err)
	}
	spec, notes, err := calib.FromTopo(&t, *host, *date, base)
	if err != nil {
		return usageError(e, "platform from-topo", "%v", err)
	}
	yaml, err := platform.Marshal(spec)
	if err != nil {
		fmt.Fprintf(e.stderr, "dmalab platform from-topo: %v\n", err)
		return exitUsage
	}
	for _, n := range notes {
		fmt.Fprintf(e.stderr, "note: %s\n", n)
	}
	if *out == "" {
		e.stdout.Write(yaml)
		return exitOK
	}
	if err := os.WriteFile(*out, yaml, 0o644); err != nil {
		return usageError(e, "platform from-topo", "-o: %v", err)
	}
	return exitOK
}

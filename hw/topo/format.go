package topo

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dmalab/dmalab/numactl"
)

// Format writes t for people: the NUMA nodes and distances (as
// "numactl -H"), numa_balancing, the IOMMU, the PCI tree (as "lspci -tv",
// one column per attribute), the GPUs and the connection matrix (as
// "nvidia-smi topo -m"). Unknown values print as "?".
func Format(w io.Writer, t *Topology) error {
	p := &printer{w: w}
	src := "sysfs; NVML not available"
	if t.NVML {
		src = "sysfs and NVML"
	}
	p.printf("Topology of %s (%s)\n", t.Root, src)
	formatNUMA(p, t)
	formatIOMMU(p, t)
	formatPCI(p, t)
	formatGPUs(p, t)
	formatMatrix(p, t)
	if len(t.Warnings) > 0 {
		p.printf("\nWarnings:\n")
		for _, s := range t.Warnings {
			p.printf("  %s\n", s)
		}
	}
	return p.err
}

// printer keeps the first write error, so the formatters need not check
// each write.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}

// table writes aligned columns through the printer.
func (p *printer) table(rows [][]string) { p.tableAt("  ", rows) }

// tableAt writes aligned columns, each line after indent.
func (p *printer) tableAt(indent string, rows [][]string) {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	for line := range strings.SplitSeq(strings.TrimSuffix(sb.String(), "\n"), "\n") {
		p.printf("%s%s\n", indent, strings.TrimRight(line, " "))
	}
}

func orUnknown(v int) string {
	if v == Unknown {
		return "?"
	}
	return strconv.Itoa(v)
}

func orQuestion(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func sizeOrUnknown(b Bytes) string {
	if b == 0 {
		return "?"
	}
	return b.String()
}

// NUMABalancingMeaning says what a numa_balancing value does.
func NUMABalancingMeaning(v int) string {
	switch v {
	case Unknown:
		return "unknown"
	case 0:
		return "off"
	case 1:
		return "on: the kernel migrates pages toward the CPUs using them"
	case 2:
		return "memory tiering: hot pages are promoted to faster nodes"
	case 3:
		return "on, with memory tiering"
	}
	return "unknown mode"
}

func formatNUMA(p *printer, t *Topology) {
	p.printf("\nNUMA: %d node(s); numa_balancing %s (%s)\n",
		len(t.Nodes), orUnknown(t.NUMABalancing), NUMABalancingMeaning(t.NUMABalancing))
	if len(t.Nodes) == 0 {
		p.printf("  no NUMA information (no sys/devices/system/node)\n")
		return
	}
	// The nodes as numactl -H prints them, so that the machine reads
	// like the tool people check it with, and like "dmalab platform numa".
	var sb strings.Builder
	if err := numactl.WriteHardware(&sb, NumactlNodes(t.Nodes)); err != nil {
		p.err = err
		return
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(sb.String(), "\n"), "\n") {
		p.printf("  %s\n", line)
	}
}

func formatIOMMU(p *printer, t *Topology) {
	m := &t.IOMMU
	state := "unknown (no sys/class/iommu)"
	switch {
	case m.Present:
		state = "present (" + strings.Join(m.Units, ", ") + ")"
	case m.Known:
		state = "absent (no unit in sys/class/iommu)"
	}
	p.printf("\nIOMMU: %s; %d group(s)", state, m.Groups)
	if m.DefaultDomain != "" {
		p.printf("; default domain %s (%s)", m.DefaultDomain, DomainTypeMeaning(m.DefaultDomain))
	}
	p.printf("\n")
	if len(m.GroupTypes) > 1 {
		var parts []string
		for _, typ := range slices.Sorted(maps.Keys(m.GroupTypes)) {
			parts = append(parts, fmt.Sprintf("%s %d", typ, m.GroupTypes[typ]))
		}
		p.printf("  group types: %s\n", strings.Join(parts, ", "))
	}
	if len(m.Cmdline) > 0 {
		p.printf("  kernel command line: %s\n", strings.Join(m.Cmdline, " "))
	}
	p.printf("  mode: %s (%s)\n", orQuestion(m.Mode), ModeMeaning(m.Mode))
	for _, w := range m.ModeWhy {
		p.printf("    %s\n", w)
	}
	if len(m.UnitList) > 0 {
		p.printf("  units:\n")
		rows := [][]string{{"UNIT", "KIND", "VERSION", "DEVICES"}}
		for _, u := range m.UnitList {
			kind := UnitKindName(u.Kind)
			if u.Kind == "" {
				kind = "?"
			}
			rows = append(rows, []string{u.Name, kind, orDash(u.Version), orUnknown(u.Devices)})
		}
		p.tableAt("    ", rows)
	}
	if len(m.GroupList) > 0 {
		p.printf("  groups:\n")
		rows := [][]string{{"GROUP", "TYPE", "DEVICES"}}
		for _, g := range m.GroupList {
			rows = append(rows, []string{strconv.Itoa(g.ID), orQuestion(g.Type), orDash(strings.Join(g.Devices, " "))})
		}
		p.tableAt("    ", rows)
	}
}

// linkString writes "16GT/s x16 / 32GT/s x16" (current / max), or "-"
// when nothing is known.
func linkString(d *PCIDevice) string {
	if d.CurLinkSpeed == 0 && d.MaxLinkSpeed == 0 && d.CurLinkWidth == 0 && d.MaxLinkWidth == 0 {
		return "-"
	}
	width := func(w int) string {
		if w == 0 {
			return "x?"
		}
		return "x" + strconv.Itoa(w)
	}
	s := d.CurLinkSpeed.String() + " " + width(d.CurLinkWidth) + " / " + d.MaxLinkSpeed.String() + " " + width(d.MaxLinkWidth)
	if d.CurLinkSpeed != 0 && d.CurLinkSpeed < d.MaxLinkSpeed || d.CurLinkWidth != 0 && d.CurLinkWidth < d.MaxLinkWidth {
		s += " (below max)"
	}
	return s
}

func barsString(d *PCIDevice) string {
	var parts []string
	for _, b := range d.BARs {
		s := strconv.Itoa(b.Index) + ":" + b.Size.String()
		if b.IO {
			s += "(io)"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func formatPCI(p *printer, t *Topology) {
	p.printf("\nPCI: %d device(s) under %d host bridge(s); LINK is current / max\n", len(t.Devices), len(t.HostBridges))
	if len(t.Devices) == 0 {
		p.printf("  no PCI devices (no sys/bus/pci/devices)\n")
		return
	}
	head := []string{"DEVICE", "CLASS", "VENDOR", "ID", "NAME", "DRIVER", "LINK", "NUMA", "GROUP", "BARS"}
	rows := [][]string{head}
	// A host bridge's row has every cell, empty, so that tabwriter keeps
	// one column block through the whole tree.
	bridgeRow := func(name string) []string {
		r := make([]string, len(head))
		r[0] = name
		return r
	}
	var walk func(host string, parent BDF, depth int)
	walk = func(host string, parent BDF, depth int) {
		for _, d := range t.Children(host, parent) {
			class := d.ClassName
			if d.Port != "" {
				class += " (" + strings.ReplaceAll(d.Port, "_", " ") + ")"
			}
			name := d.DeviceName
			if len(d.Interfaces) > 0 {
				name = strings.TrimSpace(name + " " + strings.Join(d.Interfaces, ","))
			}
			rows = append(rows, []string{
				strings.Repeat("  ", depth) + string(d.BDF),
				class,
				orQuestion(d.VendorName),
				fmt.Sprintf("%04x:%04x", uint16(d.Vendor), uint16(d.Device)),
				orDash(name),
				orDash(d.Driver),
				linkString(d),
				orUnknown(d.NUMANode),
				orUnknown(d.IOMMUGroup),
				barsString(d),
			})
			if depth < 64 {
				walk(host, d.BDF, depth+1)
			}
		}
	}
	for _, h := range t.HostBridges {
		rows = append(rows, bridgeRow("["+h+"]"))
		walk(h, "", 1)
	}
	// Devices with no host bridge in their path (a tree copied without
	// sys/devices) are listed flat at the end.
	if orphans := t.Children("", ""); len(orphans) > 0 {
		rows = append(rows, bridgeRow("[unknown host bridge]"))
		walk("", "", 1)
	}
	p.table(rows)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func formatGPUs(p *printer, t *Topology) {
	if len(t.GPUs) == 0 {
		p.printf("\nGPUs: none (no NVIDIA display or 3D controller on the PCI bus)\n")
		return
	}
	how := "from NVML"
	if !t.NVML {
		how = "NVML not available: names from PCI IDs, BAR1 from sysfs"
	}
	p.printf("\nGPUs: %d (%s)\n", len(t.GPUs), how)
	rows := [][]string{{"GPU", "BUS ID", "NAME", "NUMA", "CPUS", "BAR1", "BAR1 USED"}}
	for _, g := range t.GPUs {
		used := "-"
		if g.Source == "nvml" {
			used = g.BAR1Used.String()
		}
		rows = append(rows, []string{"GPU" + strconv.Itoa(g.Index), string(g.BDF), g.Name,
			orUnknown(g.NUMANode), orQuestion(g.CPUList), sizeOrUnknown(g.BAR1), used})
	}
	p.table(rows)
}

func formatMatrix(p *printer, t *Topology) {
	if len(t.Matrix) == 0 {
		p.printf("\nConnection matrix: no GPUs or NICs\n")
		return
	}
	p.printf("\nConnection matrix (as nvidia-smi topo -m):\n")
	head := []string{""}
	for _, r := range t.Matrix {
		head = append(head, r.Label)
	}
	rows := [][]string{append(head, "CPU Affinity", "NUMA Affinity")}
	for _, r := range t.Matrix {
		row := []string{r.Label}
		for _, l := range r.Links {
			row = append(row, string(l))
		}
		cpus := r.CPUList
		if cpus == "" {
			cpus = "N/A"
		}
		numa := "N/A"
		if r.NUMANode != Unknown {
			numa = strconv.Itoa(r.NUMANode)
		}
		rows = append(rows, append(row, cpus, numa))
	}
	p.table(rows)
	p.printf("\nLegend:\n")
	p.printf("  X    = self\n")
	p.printf("  SYS  = across NUMA nodes (the SMP interconnect: UPI, xGMI)\n")
	p.printf("  NODE = between PCIe host bridges within one NUMA node\n")
	p.printf("  PHB  = through a PCIe host bridge (the CPU's root complex)\n")
	p.printf("  PXB  = through several PCIe bridges, no host bridge\n")
	p.printf("  PIX  = through at most one PCIe bridge or switch\n")
	if t.NVML {
		p.printf("  NV#  = a bonded set of # NVLinks\n")
	} else {
		p.printf("  NV#  = NVLinks: needs NVML, not available, so none shown\n")
	}
	p.printf("\n")
	for _, r := range t.Matrix {
		p.printf("  %s: %s %s\n", r.Label, r.BDF, r.Name)
	}
}

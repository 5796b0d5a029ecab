package calib

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/dmalab/dmalab/hw/topo"
	"github.com/dmalab/dmalab/platform"
)

// FromTopo is a platform skeleton of the machine t describes (dmalab topo
// --json): its NUMA nodes (CPUs, memory, SLIT), root complexes (one per
// host bridge), PCIe switches (the upstream ports of bridges below a root
// port), GPUs with their link generation and width, BAR1, NVLinks, and
// NICs that show a PCIe link. What topo saw has the source "from dmalab
// topo on HOST, DATE"; what it cannot know (rates, latencies, VRAM, copy
// costs, the unified-memory driver's parameters) is base's value with
// the source "assumed: ... (calibrate to replace)". The notes say what
// was guessed or left out.
func FromTopo(t *topo.Topology, host, date string, base *platform.Spec) (*platform.Spec, []string, error) {
	if len(base.Nodes) == 0 || len(base.GPUs) == 0 || len(base.RootComplexes) == 0 {
		return nil, nil, fmt.Errorf("from-topo: base platform %s has no node, root complex or GPU to take defaults from", base.Name)
	}
	b := &skeleton{t: t, base: base, seen: fmt.Sprintf("from dmalab topo on %s, %s", host, date), rcOf: map[string]string{}, swOf: map[topo.BDF]string{}}
	b.spec = &platform.Spec{
		Name:        "from-topo-" + sanitize(host),
		Description: fmt.Sprintf("skeleton of %s from dmalab topo (%s); assumed values are %s's, to be replaced by dmalab calibrate", host, date, base.Name),
		Fabric:      base.Fabric,
	}
	assume(&b.spec.Fabric, base.Name)
	b.nodes()
	b.rootComplexes()
	b.switches()
	b.gpus()
	b.nvlinks()
	b.nics()
	b.iommu()
	out, err := platform.Marshal(b.spec)
	if err != nil {
		return nil, nil, fmt.Errorf("from-topo: %w", err)
	}
	// Parsing the YAML back validates the skeleton exactly as a file.
	spec, err := platform.Parse(b.spec.Name+".yaml", out)
	if err != nil {
		return nil, nil, fmt.Errorf("from-topo: the skeleton does not validate: %w", err)
	}
	return spec, b.notes, nil
}

type skeleton struct {
	t     *topo.Topology
	base  *platform.Spec
	seen  string
	spec  *platform.Spec
	notes []string
	// rcOf names the root complex of each host bridge; swOf the switch
	// of each upstream port.
	rcOf map[string]string
	swOf map[topo.BDF]string
}

func (b *skeleton) notef(format string, a ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, a...))
}

// assume replaces the source of every parameter in v (a pointer) with
// an assumption taken from the base platform.
func assume(v any, base string) {
	src := fmt.Sprintf("assumed: the value in %s (calibrate to replace)", base)
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			if f := v.FieldByName("Source"); f.IsValid() && f.Kind() == reflect.String && v.FieldByName("V").IsValid() {
				if f.String() != "" {
					f.SetString(src)
				}
				return
			}
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(v))
}

func (b *skeleton) nodes() {
	tmpl := b.base.Nodes[0]
	assume(&tmpl, b.base.Name)
	if len(b.t.Nodes) == 0 {
		b.spec.Nodes = []platform.Node{tmpl}
		b.spec.Nodes[0].ID = 0
		b.notef("topo shows no NUMA node: one node 0 with %s's cores and memory", b.base.Name)
		return
	}
	full := true
	for _, tn := range b.t.Nodes {
		n := tmpl
		n.ID = tn.ID
		n.Cores = platform.P(tn.CPUs, fmt.Sprintf("%s: node%d cpulist %s", b.seen, tn.ID, tn.CPUList))
		if tn.CPUs == 0 {
			n.Cores = tmpl.Cores
			b.notef("node%d has no CPU (a memory-only node): the model needs cores, so it has %s's", tn.ID, b.base.Name)
		}
		if tn.MemTotal > 0 {
			n.DRAM = platform.P(platform.Bytes(tn.MemTotal), fmt.Sprintf("%s: node%d MemTotal", b.seen, tn.ID))
		} else {
			b.notef("node%d: memory size unknown: %s's", tn.ID, b.base.Name)
		}
		b.spec.Nodes = append(b.spec.Nodes, n)
		full = full && len(tn.Distance) == len(b.t.Nodes)
	}
	if full && len(b.t.Nodes) > 1 {
		for _, tn := range b.t.Nodes {
			b.spec.Distances = append(b.spec.Distances, append([]int(nil), tn.Distance...))
		}
	}
	if len(b.spec.Nodes) > 1 {
		b.socketLinks()
	}
}

// socketLinks joins every pair of nodes with the base's socket link, or
// an assumed UPI link when the base has none: topo does not see them.
func (b *skeleton) socketLinks() {
	var tmpl platform.SocketLink
	if len(b.base.SocketLinks) > 0 {
		tmpl = b.base.SocketLinks[0]
	} else if p, err := platform.Preset("dgx-h100"); err == nil && len(p.SocketLinks) > 0 {
		tmpl = p.SocketLinks[0]
	}
	assume(&tmpl, b.base.Name+" (or dgx-h100)")
	for i, a := range b.spec.Nodes {
		for _, c := range b.spec.Nodes[i+1:] {
			l := tmpl
			l.Name = fmt.Sprintf("link%d-%d", a.ID, c.ID)
			l.A, l.B = a.ID, c.ID
			b.spec.SocketLinks = append(b.spec.SocketLinks, l)
		}
	}
	b.notef("socket links: topo does not see them; every pair of nodes has an assumed %s link", tmpl.Protocol)
}

func (b *skeleton) nodeOf(numa int) int {
	for _, n := range b.spec.Nodes {
		if n.ID == numa {
			return numa
		}
	}
	return b.spec.Nodes[0].ID
}

func (b *skeleton) rootComplexes() {
	tmpl := b.base.RootComplexes[0]
	assume(&tmpl, b.base.Name)
	for i, hb := range b.t.HostBridges {
		rc := tmpl
		rc.Name = fmt.Sprintf("rc%d", i)
		rc.Node = b.spec.Nodes[0].ID
		for _, d := range b.t.Devices {
			if d.HostBridge == hb && d.NUMANode >= 0 {
				rc.Node = b.nodeOf(d.NUMANode)
				break
			}
		}
		b.rcOf[hb] = rc.Name
		b.spec.RootComplexes = append(b.spec.RootComplexes, rc)
	}
	if len(b.spec.RootComplexes) == 0 {
		rc := tmpl
		rc.Name, rc.Node = "rc0", b.spec.Nodes[0].ID
		b.spec.RootComplexes = []platform.RootComplex{rc}
		b.notef("topo shows no host bridge: one root complex rc0 on node %d", rc.Node)
	}
}

func (b *skeleton) device(bdf topo.BDF) *topo.PCIDevice {
	for i := range b.t.Devices {
		if b.t.Devices[i].BDF == bdf {
			return &b.t.Devices[i]
		}
	}
	return nil
}

// isSwitch says whether a bridge is a switch's upstream port: a bridge
// below another bridge (a root port, or a port of a switch above).
func (b *skeleton) isSwitch(d *topo.PCIDevice) bool {
	if !d.IsBridge() || d.Parent == "" {
		return false
	}
	p := b.device(d.Parent)
	return p != nil && p.IsBridge() && !b.isSwitch(p)
}

// parentOf is the platform parent of a device: the nearest switch above
// it, else its host bridge's root complex.
func (b *skeleton) parentOf(d *topo.PCIDevice) string {
	for p := b.device(d.Parent); p != nil; p = b.device(p.Parent) {
		if name, ok := b.swOf[p.BDF]; ok {
			return name
		}
	}
	if rc, ok := b.rcOf[d.HostBridge]; ok {
		return rc
	}
	return b.spec.RootComplexes[0].Name
}

// link is a device's PCIe link: generation and width as topo saw them,
// efficiency and latency assumed.
func (b *skeleton) link(d *topo.PCIDevice, what string) platform.PCIeLink {
	l := b.base.GPUs[0].Link
	assume(&l, b.base.Name)
	if gen := d.CurLinkSpeed.Gen(); gen > 0 && d.CurLinkWidth > 0 {
		l.Gen, l.Width = gen, d.CurLinkWidth
	} else {
		b.notef("%s (%s): link speed or width unknown to topo (a virtual machine hides them): %s's Gen%d x%d", what, d.BDF, b.base.Name, l.Gen, l.Width)
	}
	l.Bandwidth = platform.Param[platform.Rate]{}
	return l
}

// Links are plain fields (gen, width) without a source: the sources of
// the link's parameters say where the rest came from; the note names the
// topo run for gen and width.
func (b *skeleton) switches() {
	// Upstream ports in BDF order, so that a switch's parent switch
	// (higher in the tree, a smaller bus number) is named first.
	n := 0
	for i := range b.t.Devices {
		d := &b.t.Devices[i]
		if !b.isSwitch(d) {
			continue
		}
		name := fmt.Sprintf("sw%d", n)
		n++
		sw := platform.Switch{Name: name, Parent: b.parentOf(d), Link: b.link(d, name)}
		if len(b.base.Switches) > 0 {
			sw.Latency = b.base.Switches[0].Latency
		} else if p, err := platform.Preset("dgx-h100"); err == nil && len(p.Switches) > 0 {
			sw.Latency = p.Switches[0].Latency
		}
		assume(&sw.Latency, b.base.Name+" (or dgx-h100)")
		b.swOf[d.BDF] = name
		b.spec.Switches = append(b.spec.Switches, sw)
	}
	if n > 0 {
		b.notef("%d PCIe switch(es) from the bridges below root ports; ACS on their ports is not in topo's report: off", n)
	}
}

// archOf guesses a GPU's architecture from its name.
func archOf(name string) string {
	for _, a := range []struct{ arch, keys string }{
		{"hopper", "H100 H200 H800 H20 GH200"},
		{"blackwell", "B100 B200 B300 GB200 RTX 50 RTX PRO"},
		{"ada", "L4 L40 RTX 40 RTX 6000 Ada"},
		{"ampere", "A100 A800 A10 A16 A30 A40 RTX 30 A6000"},
		{"turing", "T4 RTX 20 Quadro RTX"},
		{"volta", "V100"},
		{"pascal", "P100 P40 P4 GTX 10"},
	} {
		for _, k := range strings.Fields(a.keys) {
			if strings.Contains(name, k) {
				return a.arch
			}
		}
	}
	return ""
}

func (b *skeleton) gpus() {
	tmpl := b.base.GPUs[0]
	assume(&tmpl, b.base.Name)
	for _, tg := range b.t.GPUs {
		g := tmpl
		g.Name = fmt.Sprintf("gpu%d", tg.Index)
		g.Model = strings.TrimSpace(strings.TrimPrefix(tg.Name, "NVIDIA "))
		if g.Arch = archOf(tg.Name); g.Arch == "" {
			g.Arch = tmpl.Arch
			b.notef("%s (%s): architecture unknown from its name: %s's, %s", g.Name, tg.Name, b.base.Name, tmpl.Arch)
		}
		if d := b.device(tg.BDF); d != nil {
			g.Parent = b.parentOf(d)
			g.Link = b.link(d, g.Name)
		} else {
			g.Parent = b.spec.RootComplexes[0].Name
			b.notef("%s: not in topo's PCI tree: below %s", g.Name, g.Parent)
		}
		if tg.BAR1 > 0 {
			g.BAR1 = platform.P(platform.Bytes(tg.BAR1), fmt.Sprintf("%s: %s BAR1 (%s)", b.seen, g.Name, tg.Source))
		}
		b.spec.GPUs = append(b.spec.GPUs, g)
	}
	if len(b.spec.GPUs) > 0 {
		b.notef("GPUs: VRAM size and bandwidth, copy engines and every cost are %s's (%s): topo does not report them", b.base.Name, tmpl.Model)
	}
}

func (b *skeleton) gpuName(bdf topo.BDF) string {
	for _, g := range b.t.GPUs {
		if g.BDF == bdf {
			return fmt.Sprintf("gpu%d", g.Index)
		}
	}
	return ""
}

func (b *skeleton) nvlinks() {
	if len(b.t.NVLinks) == 0 {
		return
	}
	var tmpl platform.NVLink
	if len(b.base.NVLinks) > 0 {
		tmpl = b.base.NVLinks[0]
	} else if p, err := platform.Preset("dgx-h100"); err == nil && len(p.NVLinks) > 0 {
		tmpl = p.NVLinks[0]
	}
	assume(&tmpl, b.base.Name+" (or dgx-h100, NVLink4)")
	// Links through NVSwitches: each GPU's bundle goes to one crossbar
	// (the switch chips of the baseboard, as dgx-h100 models them), so
	// that a GPU's traffic to all its peers shares its own links, as it
	// does on the machine (nvidia-smi topo -m says NV18 for every pair
	// of an HGX H100/H200, though each GPU has 18 links in all).
	switched := map[string]int{} // GPU name -> its links into the switches
	var order []string
	for _, nl := range b.t.NVLinks {
		a, c := b.gpuName(nl.A), b.gpuName(nl.B)
		if a == "" || c == "" {
			b.notef("NVLink %s-%s: not between two GPUs topo listed: left out", nl.A, nl.B)
			continue
		}
		if nl.NVSwitch {
			for _, g := range []string{a, c} {
				if _, ok := switched[g]; !ok {
					order = append(order, g)
				}
				switched[g] = max(switched[g], nl.Links)
			}
			continue
		}
		l := tmpl
		l.A, l.B = a, c
		l.Links = platform.P(nl.Links, fmt.Sprintf("%s: NVML, %d links between %s and %s", b.seen, nl.Links, a, c))
		b.spec.NVLinks = append(b.spec.NVLinks, l)
	}
	if len(order) > 0 {
		sw := platform.NVSwitch{Name: "nvswitch"}
		if p, err := platform.Preset("dgx-h100"); err == nil && len(p.NVSwitches) > 0 {
			sw.Latency = p.NVSwitches[0].Latency
		}
		sw.Latency.Source = "assumed: the value in dgx-h100 (calibrate to replace)"
		b.spec.NVSwitches = append(b.spec.NVSwitches, sw)
		for _, g := range order {
			l := tmpl
			l.A, l.B = g, sw.Name
			l.Links = platform.P(switched[g], fmt.Sprintf("%s: NVML, %d links of %s into NVSwitches its peers attach to", b.seen, switched[g], g))
			b.spec.NVLinks = append(b.spec.NVLinks, l)
		}
		b.notef("NVLinks of %d GPUs end at NVSwitches: one crossbar (nvswitch), each GPU's links to it", len(order))
	}
	b.notef("NVLinks: link rate, packet sizes and latency are assumed (NVLink4, as dgx-h100); calibrate from a peer copy")
}

func (b *skeleton) nics() {
	k := 0
	for i := range b.t.Devices {
		d := &b.t.Devices[i]
		if !d.IsNIC() {
			continue
		}
		if d.CurLinkSpeed.Gen() == 0 || d.CurLinkWidth == 0 {
			b.notef("NIC %s (%s %s): no PCIe link in sysfs (a virtual device): left out", d.BDF, d.VendorName, d.Driver)
			continue
		}
		name := fmt.Sprintf("nic%d", k)
		k++
		dev := platform.Device{Name: name, Kind: "nic", Parent: b.parentOf(d), Link: b.link(d, name),
			DMAEngines: platform.P(1, "assumed: one DMA queue (calibrate to replace)")}
		b.spec.Devices = append(b.spec.Devices, dev)
	}
}

// iommu keeps the base's profile where topo saw units of the same kind,
// and mode off: the model's outputs are those of dma-direct until the
// user says otherwise.
func (b *skeleton) iommu() {
	io := b.t.IOMMU
	if !io.Present || len(io.UnitList) == 0 {
		return
	}
	kind := io.UnitList[0].Kind
	switch kind {
	case "vtd", "amd-vi", "smmuv3":
		b.spec.IOMMU = platform.IOMMU{Profile: kind, Mode: platform.IOMMUOff}
		b.notef("IOMMU: %s units seen, mode %q on the machine; the skeleton keeps mode off (set iommu.mode to model translation)", kind, io.Mode)
	default:
		b.notef("IOMMU: units of kind %q have no profile in the model: left out", kind)
	}
}

// sanitize keeps a host name usable in a platform name.
func sanitize(s string) string {
	var out strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			out.WriteRune(r)
		} else {
			out.WriteByte('-')
		}
	}
	if out.Len() == 0 {
		return "machine"
	}
	return out.String()
}

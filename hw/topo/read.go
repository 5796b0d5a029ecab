package topo

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Read reads the topology of the tree under root ("/" for this machine)
// without a GPU driver. See ReadWith.
func Read(root string) (*Topology, error) { return ReadWith(root, Options{}) }

// ReadWith reads the topology of the tree under root: root/sys and
// root/proc as Linux lays them out. Missing files leave values unknown;
// the only error is a root that cannot be read.
func ReadWith(root string, o Options) (*Topology, error) {
	if _, err := os.ReadDir(root); err != nil {
		return nil, fmt.Errorf("read topology under %s: %w", root, err)
	}
	r := &reader{root: root, t: &Topology{
		Root:          root,
		NUMABalancing: Unknown,
		Nodes:         []Node{},
		HostBridges:   []string{},
		Devices:       []PCIDevice{},
		GPUs:          []GPU{},
		NVLinks:       []NVLink{},
		Matrix:        []MatrixRow{},
		Warnings:      []string{},
	}}
	if _, err := os.Stat(r.path("sys")); err != nil {
		r.warnf("no sys directory under %s: nothing is known", root)
	}
	r.readNodes()
	r.readNUMABalancing()
	r.readIOMMU()
	r.readPCI()
	r.groupDevicesFromPCI()
	r.readPCINames()
	r.readGPUs(o.GPUInfo)
	r.t.Matrix = r.t.buildMatrix()
	return r.t, nil
}

// reader reads one tree into t.
type reader struct {
	root string
	t    *Topology
}

// path returns the path of rel (slash-separated, relative to the root).
func (r *reader) path(rel ...string) string {
	return filepath.Join(append([]string{r.root}, rel...)...)
}

// rel returns p relative to the root, for warnings that read the same
// whatever the root.
func (r *reader) rel(p string) string {
	if s, err := filepath.Rel(r.root, p); err == nil {
		return filepath.ToSlash(s)
	}
	return p
}

func (r *reader) warnf(format string, a ...any) {
	r.t.Warnings = append(r.t.Warnings, fmt.Sprintf(format, a...))
}

// readFile returns the trimmed content of a file, or false when it cannot
// be read: sysfs attributes are absent or unreadable on many machines, and
// either way the value is unknown.
func readFile(p string) (string, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// readInt reads a decimal integer file; Unknown when absent, with a
// warning when present but not a number.
func (r *reader) readInt(p string) int {
	s, ok := readFile(p)
	if !ok {
		return Unknown
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		r.warnf("%s: %v", r.rel(p), err)
		return Unknown
	}
	return v
}

// readLinkBase returns the last element of a symlink's target ("nvidia"
// for a driver link, "17" for an iommu_group link), or "".
func readLinkBase(p string) string {
	t, err := os.Readlink(p)
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}

// numbered returns the entries of dir named prefix followed by a decimal
// number, with their numbers, in numeric order.
func numbered(dir, prefix string) (names []string, ids []int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil
	}
	type ent struct {
		name string
		id   int
	}
	var es []ent
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		id, err := strconv.Atoi(n)
		if err != nil || id < 0 {
			continue
		}
		es = append(es, ent{e.Name(), id})
	}
	slices.SortFunc(es, func(a, b ent) int { return cmp.Compare(a.id, b.id) })
	for _, e := range es {
		names = append(names, e.name)
		ids = append(ids, e.id)
	}
	return names, ids
}

// readNodes reads sys/devices/system/node/nodeN.
func (r *reader) readNodes() {
	dir := r.path("sys", "devices", "system", "node")
	names, ids := numbered(dir, "node")
	for i, name := range names {
		n := Node{ID: ids[i]}
		p := filepath.Join(dir, name)
		if s, ok := readFile(filepath.Join(p, "cpulist")); ok {
			list, count, err := parseCPUList(s)
			if err != nil {
				r.warnf("%s: %v", r.rel(filepath.Join(p, "cpulist")), err)
				list = s
			}
			n.CPUList, n.CPUs = list, count
		}
		if s, ok := readFile(filepath.Join(p, "meminfo")); ok {
			n.MemTotal, n.MemFree = parseNodeMeminfo(s)
		}
		if s, ok := readFile(filepath.Join(p, "distance")); ok {
			d, err := parseInts(s)
			if err != nil {
				r.warnf("%s: %v", r.rel(filepath.Join(p, "distance")), err)
			}
			n.Distance = d
		}
		r.t.Nodes = append(r.t.Nodes, n)
	}
	for _, n := range r.t.Nodes {
		if n.Distance != nil && len(n.Distance) != len(r.t.Nodes) {
			r.warnf("node%d: %d distances for %d nodes", n.ID, len(n.Distance), len(r.t.Nodes))
		}
	}
}

// parseCPUList parses the kernel's cpulist format ("0-3,8,10-11") and
// returns it in canonical form with the number of CPUs it names.
func parseCPUList(s string) (canonical string, count int, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", 0, nil
	}
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return "", 0, fmt.Errorf("cpulist %q: bad CPU %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return "", 0, fmt.Errorf("cpulist %q: bad range %q", s, part)
			}
		}
		if b-a > 1<<20 {
			return "", 0, fmt.Errorf("cpulist %q: range %q too large", s, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	cpus = slices.Compact(cpus)
	return formatCPUList(cpus), len(cpus), nil
}

// formatCPUList writes sorted, distinct CPUs as a cpulist.
func formatCPUList(cpus []int) string {
	var sb strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return sb.String()
}

// parseNodeMeminfo reads MemTotal and MemFree from a node's meminfo
// ("Node 0 MemTotal:  3631316 kB"); zero for what it lacks.
func parseNodeMeminfo(s string) (total, free Bytes) {
	for line := range strings.SplitSeq(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "Node" {
			continue
		}
		v, err := strconv.ParseUint(f[3], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 4 && f[4] == "kB" {
			v *= 1024
		}
		switch f[2] {
		case "MemTotal:":
			total = Bytes(v)
		case "MemFree:":
			free = Bytes(v)
		}
	}
	return total, free
}

// parseInts parses space-separated decimal integers.
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.FieldsSeq(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("not a number: %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func (r *reader) readNUMABalancing() {
	r.t.NUMABalancing = r.readInt(r.path("proc", "sys", "kernel", "numa_balancing"))
}

// isBDF reports whether s looks like a PCI address, domain:bus:dev.fn
// ("0000:17:00.0"; VMD and Hyper-V use domains longer than 4 digits).
func isBDF(s string) bool {
	dom, rest, ok := strings.Cut(s, ":")
	if !ok || len(dom) < 4 || !isHex(dom) || len(rest) != 7 {
		return false
	}
	return isHex(rest[0:2]) && rest[2] == ':' && isHex(rest[3:5]) && rest[5] == '.' && rest[6] >= '0' && rest[6] <= '7'
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// bdfKey orders addresses numerically, so domain 10000 sorts after 0000.
func bdfKey(b BDF) [4]uint64 {
	var k [4]uint64
	s := string(b)
	dom, rest, _ := strings.Cut(s, ":")
	k[0], _ = strconv.ParseUint(dom, 16, 64)
	if len(rest) == 7 {
		k[1], _ = strconv.ParseUint(rest[0:2], 16, 8)
		k[2], _ = strconv.ParseUint(rest[3:5], 16, 8)
		k[3], _ = strconv.ParseUint(rest[6:], 16, 8)
	}
	return k
}

func compareBDF(a, b BDF) int {
	ka, kb := bdfKey(a), bdfKey(b)
	if c := slices.Compare(ka[:], kb[:]); c != 0 {
		return c
	}
	return strings.Compare(string(a), string(b))
}

// readPCI reads sys/bus/pci/devices: each entry links to the device's
// directory under sys/devices, whose path names the bridges above it.
func (r *reader) readPCI() {
	busDir := r.path("sys", "bus", "pci", "devices")
	ents, err := os.ReadDir(busDir)
	if err != nil {
		return
	}
	devRoot := r.path("sys", "devices")
	// above[bdf] lists the address-shaped path elements above a device,
	// nearest first, to find its parent once every device is known.
	above := map[BDF][]BDF{}
	for _, e := range ents {
		if !isBDF(e.Name()) {
			continue
		}
		bdf := BDF(e.Name())
		dir := filepath.Join(busDir, e.Name())
		if target, err := os.Readlink(dir); err == nil {
			if filepath.IsAbs(target) {
				// A link copied from a real /sys points into the real
				// tree; follow it inside the root instead.
				dir = r.path(target)
			} else {
				dir = filepath.Join(busDir, target)
			}
		}
		d := PCIDevice{BDF: bdf}
		if rel, err := filepath.Rel(devRoot, dir); err == nil && !strings.HasPrefix(rel, "..") {
			comps := strings.Split(filepath.ToSlash(rel), "/")
			comps = comps[:len(comps)-1]
			top := slices.IndexFunc(comps, isBDF)
			if top < 0 {
				top = len(comps)
			}
			if top > 0 {
				d.HostBridge = comps[top-1]
			}
			for i := len(comps) - 1; i >= top; i-- {
				if isBDF(comps[i]) {
					above[bdf] = append(above[bdf], BDF(comps[i]))
				}
			}
		}
		r.readPCIDevice(&d, dir)
		r.t.Devices = append(r.t.Devices, d)
	}
	slices.SortFunc(r.t.Devices, func(a, b PCIDevice) int { return compareBDF(a.BDF, b.BDF) })
	known := map[BDF]bool{}
	bridges := map[string]bool{}
	for _, d := range r.t.Devices {
		known[d.BDF] = true
		if d.HostBridge != "" {
			bridges[d.HostBridge] = true
		}
	}
	for i := range r.t.Devices {
		d := &r.t.Devices[i]
		for _, a := range above[d.BDF] {
			if known[a] {
				d.Parent = a
				break
			}
		}
	}
	r.t.HostBridges = slices.Sorted(maps.Keys(bridges))
	if r.t.HostBridges == nil {
		r.t.HostBridges = []string{}
	}
	for i := range r.t.Devices {
		r.t.Devices[i].Port = r.t.portRole(&r.t.Devices[i], 0)
	}
}

// portRole infers which PCIe port a bridge is from its place in the tree:
// sysfs does not say, and the port type in config space is beyond the 64
// bytes unprivileged users may read.
func (t *Topology) portRole(d *PCIDevice, depth int) string {
	if !d.IsBridge() || depth > 64 {
		return ""
	}
	if d.Parent == "" {
		return "root_port"
	}
	p := t.Device(d.Parent)
	if p == nil {
		return ""
	}
	switch t.portRole(p, depth+1) {
	case "root_port", "switch_downstream":
		return "switch_upstream"
	case "switch_upstream":
		return "switch_downstream"
	}
	return ""
}

// readPCIDevice reads one device's attributes from its sysfs directory.
func (r *reader) readPCIDevice(d *PCIDevice, dir string) {
	f := func(name string) string { return filepath.Join(dir, name) }
	if s, ok := readFile(f("class")); ok {
		if err := d.Class.UnmarshalText([]byte(s)); err != nil {
			r.warnf("%s: %v", r.rel(f("class")), err)
		}
	}
	d.ClassName = ClassName(d.Class)
	for _, id := range []struct {
		name string
		p    *PCIID
	}{{"vendor", &d.Vendor}, {"device", &d.Device}} {
		if s, ok := readFile(f(id.name)); ok {
			if err := id.p.UnmarshalText([]byte(s)); err != nil {
				r.warnf("%s: %v", r.rel(f(id.name)), err)
			}
		}
	}
	d.VendorName = VendorName(d.Vendor)
	d.Driver = readLinkBase(f("driver"))
	d.Interfaces = readInterfaces(dir)
	d.BARs = []BAR{}

	d.CurLinkSpeed = r.readLinkSpeed(f("current_link_speed"))
	d.MaxLinkSpeed = r.readLinkSpeed(f("max_link_speed"))
	d.CurLinkWidth = max(r.readInt(f("current_link_width")), 0)
	d.MaxLinkWidth = max(r.readInt(f("max_link_width")), 0)

	d.NUMANode = r.readInt(f("numa_node"))
	if d.NUMANode < 0 {
		d.NUMANode = Unknown
	}
	if s, ok := readFile(f("local_cpulist")); ok {
		list, _, err := parseCPUList(s)
		if err != nil {
			r.warnf("%s: %v", r.rel(f("local_cpulist")), err)
			list = s
		}
		d.LocalCPUList = list
	}
	d.IOMMUGroup = Unknown
	if g := readLinkBase(f("iommu_group")); g != "" {
		if v, err := strconv.Atoi(g); err == nil && v >= 0 {
			d.IOMMUGroup = v
		}
	}
	if s, ok := readFile(f("resource")); ok {
		bars, err := parseResource(s)
		if err != nil {
			r.warnf("%s: %v", r.rel(f("resource")), err)
		}
		d.BARs = append(d.BARs, bars...)
	}
}

// readInterfaces lists the kernel objects a driver made for a device:
// net/eth0, infiniband/mlx5_0, nvme/nvme0, and a virtio device's
// virtioN/net/eth0.
func readInterfaces(dir string) []string {
	out := []string{}
	add := func(d string) {
		ents, err := os.ReadDir(d)
		if err != nil {
			return
		}
		for _, e := range ents {
			out = append(out, e.Name())
		}
	}
	for _, sub := range []string{"net", "infiniband", "nvme"} {
		add(filepath.Join(dir, sub))
	}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "virtio") && e.IsDir() {
				add(filepath.Join(dir, e.Name(), "net"))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// readLinkSpeed reads current_link_speed or max_link_speed.
func (r *reader) readLinkSpeed(p string) LinkSpeed {
	s, ok := readFile(p)
	if !ok {
		return 0
	}
	v, err := parseLinkSpeed(s)
	if err != nil {
		r.warnf("%s: %v", r.rel(p), err)
	}
	return v
}

// parseLinkSpeed parses "16.0 GT/s PCIe" (older kernels: "8 GT/s");
// "Unknown" and "Unknown speed" are zero.
func parseLinkSpeed(s string) (LinkSpeed, error) {
	if strings.HasPrefix(s, "Unknown") {
		return 0, nil
	}
	num, rest, ok := strings.Cut(s, " ")
	if !ok || !strings.HasPrefix(rest, "GT/s") {
		return 0, fmt.Errorf("link speed %q: want \"N GT/s\"", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v > 0 && v <= 1e4) { // NaN fails too
		return 0, fmt.Errorf("link speed %q: bad rate", s)
	}
	return LinkSpeed(v), nil
}

// parseResource parses a device's resource file: one line per resource,
// "start end flags" in hex. Lines 0-5 are the BARs (6 is the expansion
// ROM, then SR-IOV and bridge windows); an all-zero line is a BAR that is
// not implemented, or the upper half of a 64-bit BAR.
func parseResource(s string) ([]BAR, error) {
	var bars []BAR
	for i, line := range strings.Split(s, "\n") {
		if i > 5 {
			break
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return bars, fmt.Errorf("resource line %d: want 3 fields, got %q", i, line)
		}
		var v [3]uint64
		for j := range f {
			x, err := strconv.ParseUint(strings.TrimPrefix(f[j], "0x"), 16, 64)
			if err != nil {
				return bars, fmt.Errorf("resource line %d: %q is not hex", i, f[j])
			}
			v[j] = x
		}
		start, end, flags := v[0], v[1], v[2]
		if start == 0 && end == 0 {
			continue
		}
		if end < start || end-start == ^uint64(0) {
			return bars, fmt.Errorf("resource line %d: bad range %#x-%#x", i, start, end)
		}
		bars = append(bars, BAR{
			Index:        i,
			Size:         Bytes(end - start + 1),
			IO:           flags&ioresourceIO != 0,
			Mem64:        flags&ioresourceMem64 != 0,
			Prefetchable: flags&ioresourcePrefetch != 0,
		})
	}
	return bars, nil
}

// readPCINames names devices (and vendors this package does not know)
// from the first PCI ID database found under the root.
func (r *reader) readPCINames() {
	want := map[[2]PCIID]bool{}
	for _, d := range r.t.Devices {
		want[[2]PCIID{d.Vendor, d.Device}] = true
	}
	if len(want) == 0 {
		return
	}
	for _, p := range pciIDPaths {
		f, err := os.Open(r.path(p))
		if err != nil {
			continue
		}
		names := parsePCIIDs(f, want)
		f.Close()
		for i := range r.t.Devices {
			d := &r.t.Devices[i]
			d.DeviceName = names.devices[[2]PCIID{d.Vendor, d.Device}]
			if d.VendorName == "" {
				d.VendorName = names.vendors[d.Vendor]
			}
		}
		return
	}
}

// readGPUs lists the NVIDIA GPUs and asks gi, when there is one, about
// them and the NVLinks between them.
func (r *reader) readGPUs(gi GPUInfo) {
	for i := range r.t.Devices {
		d := &r.t.Devices[i]
		if !d.IsGPU() {
			continue
		}
		g := GPU{
			Index:    len(r.t.GPUs),
			BDF:      d.BDF,
			NUMANode: d.NUMANode,
			CPUList:  r.t.cpuAffinity(d),
			Source:   "sysfs",
		}
		switch {
		case d.DeviceName != "":
			g.Name = d.VendorName + " " + d.DeviceName
		default:
			g.Name = fmt.Sprintf("NVIDIA 0x%04x", uint16(d.Device))
		}
		if b, ok := nvidiaBAR1(d); ok {
			g.BAR1 = b.Size
		}
		if gi != nil {
			if det, ok := gi.GPU(string(d.BDF)); ok {
				r.t.NVML = true
				g.Source = "nvml"
				if det.Name != "" {
					g.Name = det.Name
				}
				if det.BAR1Total != 0 {
					g.BAR1 = det.BAR1Total
				}
				g.BAR1Used = det.BAR1Used
			}
		}
		r.t.GPUs = append(r.t.GPUs, g)
	}
	if gi == nil {
		return
	}
	for i, a := range r.t.GPUs {
		for _, b := range r.t.GPUs[i+1:] {
			if n := gi.NVLinks(string(a.BDF), string(b.BDF)); n > 0 {
				nl := NVLink{A: a.BDF, B: b.BDF, Links: n}
				if si, ok := gi.(NVSwitchInfo); ok {
					nl.NVSwitch = si.NVLinksSwitched(string(a.BDF), string(b.BDF))
				}
				r.t.NVLinks = append(r.t.NVLinks, nl)
			}
		}
	}
}

// cpuAffinity returns the CPUs near a device: its local_cpulist, else
// its node's CPUs, else "".
func (t *Topology) cpuAffinity(d *PCIDevice) string {
	if d.LocalCPUList != "" {
		return d.LocalCPUList
	}
	if n := t.Node(d.NUMANode); n != nil {
		return n.CPUList
	}
	return ""
}

// nvidiaBAR1 is what NVIDIA calls BAR1: the GPU's second memory BAR. Its
// sysfs resource index depends on the width of BAR0: 1 when BAR0 is a
// 32-bit BAR, 2 when BAR0 is 64-bit and takes two BAR registers (as on
// the H200 measured here: resources 0: 16 MiB, 2: 256 GiB, 4: 32 MiB).
func nvidiaBAR1(d *PCIDevice) (BAR, bool) {
	n := 0
	for _, b := range d.BARs {
		if b.Index > 5 || b.IO {
			continue
		}
		if n++; n == 2 {
			return b, true
		}
	}
	return BAR{}, false
}

package topo

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// IOMMU is what sysfs and procfs say about DMA remapping: the units in
// /sys/class/iommu (dmar0 for Intel VT-d, ivhd0 for AMD-Vi, smmu3.* on
// Arm, virtio-iommu in a guest), the groups in /sys/kernel/iommu_groups
// with their domain types, the kernel command line's IOMMU words, and
// from all three the mode the machine's DMA runs in.
type IOMMU struct {
	// Known is false when /sys/class/iommu is missing, so Present means
	// nothing.
	Known bool `json:"known"`
	// Present reports whether any IOMMU unit is registered.
	Present bool `json:"present"`
	// Units are the names in /sys/class/iommu, sorted.
	Units []string `json:"units"`
	// Groups is how many IOMMU groups exist.
	Groups int `json:"groups"`
	// GroupTypes counts the groups by their domain type (the group's
	// "type" file): "DMA", "DMA-FQ", "identity", "unmanaged", "blocked".
	GroupTypes map[string]int `json:"group_types"`
	// DefaultDomain is the type most groups have (ties go to the name
	// that sorts first), which is the kernel's default unless many groups
	// were changed by hand; empty when there are no groups.
	DefaultDomain string `json:"default_domain"`
	// Cmdline are the kernel command-line words that choose IOMMU
	// behaviour (iommu=, intel_iommu=, amd_iommu=, iommu.passthrough=,
	// iommu.strict=), in command-line order.
	Cmdline []string `json:"cmdline"`

	// UnitList describes each unit of Units, in the same order.
	UnitList []IOMMUUnit `json:"unit_list"`
	// GroupList describes each group, by ID.
	GroupList []IOMMUGroup `json:"group_list"`
	// KernelRelease is /proc/sys/kernel/osrelease: kernels before 5.15
	// name strict and lazy domains alike ("DMA"); empty when unknown.
	KernelRelease string `json:"kernel_release"`
	// CmdlineMode is the mode the command line asks for (IOMMUOff,
	// IOMMUPassthrough, IOMMUStrict, IOMMULazy, or IOMMUTranslated for
	// translation without a word on invalidation), empty when it says
	// nothing; the kernel's built-in default then applies.
	CmdlineMode string `json:"cmdline_mode"`
	// Mode is the machine's IOMMU mode (IOMMUOff, IOMMUPassthrough,
	// IOMMUStrict, IOMMULazy, IOMMUMixed, IOMMUTranslated, IOMMUUnknown)
	// and ModeWhy the evidence, most telling first.
	Mode    string   `json:"mode"`
	ModeWhy []string `json:"mode_why"`
}

// IOMMU modes: the values of IOMMU.Mode and IOMMU.CmdlineMode. The first
// four are those of the platform format's iommu section.
const (
	// IOMMUOff: no unit translates; devices reach physical memory (or
	// swiotlb bounces) directly.
	IOMMUOff = "off"
	// IOMMUPassthrough: every group has an identity domain (iommu=pt):
	// the IOMMU is on, DMA is not translated.
	IOMMUPassthrough = "passthrough"
	// IOMMUStrict: translated, and every unmap invalidates the IOTLB
	// before it returns (domain type DMA, iommu.strict=1).
	IOMMUStrict = "strict"
	// IOMMULazy: translated, with invalidations batched by the flush
	// queue (domain type DMA-FQ, iommu.strict=0).
	IOMMULazy = "lazy"
	// IOMMUMixed: the groups differ: some translated and some passed
	// through, strict beside lazy, or groups owned by user space (VFIO,
	// whose unmaps are synchronous) beside the kernel's.
	IOMMUMixed = "mixed"
	// IOMMUTranslated: translated, but neither the kernel (before 5.15
	// both are "DMA") nor the command line says strict or lazy.
	IOMMUTranslated = "translated"
	// IOMMUUnknown: the tree shows too little (no /sys/class/iommu and no
	// groups, or only groups owned by user space and a silent command
	// line).
	IOMMUUnknown = "unknown"
)

// ModeMeaning says what an IOMMU mode means for a device's DMA.
func ModeMeaning(mode string) string {
	switch mode {
	case IOMMUOff:
		return "no translation: devices reach all of memory"
	case IOMMUPassthrough:
		return "the IOMMU is on, DMA is not translated"
	case IOMMUStrict:
		return "translated; every unmap invalidates the IOTLB before it returns"
	case IOMMULazy:
		return "translated; invalidations batched, an unmapped page stays reachable until the flush"
	case IOMMUMixed:
		return "groups differ"
	case IOMMUTranslated:
		return "translated; strict or lazy not visible"
	}
	return "not visible here"
}

// IOMMUUnit is one IOMMU: /sys/class/iommu/NAME, struct iommu_device.
type IOMMUUnit struct {
	Name string `json:"name"`
	// Kind is the hardware family, named as the platform format's iommu
	// profiles are: "vtd" (an intel-iommu directory, or dmarN), "amd-vi"
	// (amd-iommu, or ivhdN), "smmuv3" (smmu3.*), "smmu" (Arm SMMUv1/v2),
	// "virtio" (virtio-iommu); empty when unrecognised.
	Kind string `json:"kind"`
	// Version, Cap and ECap are the registers the driver exposes:
	// intel-iommu/version, cap and ecap for VT-d; amd-iommu/cap and
	// features (as ECap) for AMD-Vi; empty when absent.
	Version string `json:"version"`
	Cap     string `json:"cap"`
	ECap    string `json:"ecap"`
	// Devices is how many devices the unit translates (its devices
	// directory); Unknown when the directory is absent.
	Devices int `json:"devices"`
}

// IOMMUGroup is one group: /sys/kernel/iommu_groups/N.
type IOMMUGroup struct {
	ID int `json:"id"`
	// Type is the group's default domain type (its type file: "DMA",
	// "DMA-FQ", "identity", "unmanaged", "blocked"); empty when absent
	// (kernels before 5.2).
	Type string `json:"type"`
	// Meaning is DomainTypeMeaning(Type).
	Meaning string `json:"meaning"`
	// Devices are the group's devices (PCI addresses, or the names of
	// platform devices on an SoC), PCI addresses first in BDF order.
	Devices []string `json:"devices"`
}

// DomainTypeMeaning says what an IOMMU group domain type means for DMA.
func DomainTypeMeaning(typ string) string {
	switch typ {
	case "DMA":
		return "translated, strict invalidation"
	case "DMA-FQ":
		return "translated, lazy invalidation (flush queue)"
	case "identity":
		return "passthrough (IOVA = physical address)"
	case "unmanaged":
		return "owned by a user such as VFIO"
	case "blocked":
		return "DMA blocked"
	case "auto":
		return "kernel's choice"
	}
	return "unknown type"
}

// ReadIOMMU reads only the IOMMU part of the tree under root ("/" for
// this machine): what the probe records of a machine. A group's devices
// come from its devices directory alone.
func ReadIOMMU(root string) (IOMMU, error) {
	if _, err := os.ReadDir(root); err != nil {
		return IOMMU{}, fmt.Errorf("read IOMMU under %s: %w", root, err)
	}
	r := &reader{root: root, t: &Topology{Root: root, Warnings: []string{}}}
	r.readIOMMU()
	return r.t.IOMMU, nil
}

// iommuCmdlinePrefixes are the kernel parameters that choose whether DMA
// is remapped and how.
var iommuCmdlinePrefixes = []string{"iommu=", "intel_iommu=", "amd_iommu=", "iommu.passthrough=", "iommu.strict=", "iommu.forcedac="}

// readIOMMU reads sys/class/iommu, sys/kernel/iommu_groups, the IOMMU
// words of proc/cmdline and the kernel release, and decides the mode.
func (r *reader) readIOMMU() {
	m := &r.t.IOMMU
	m.Units, m.GroupTypes, m.Cmdline = []string{}, map[string]int{}, []string{}
	m.UnitList, m.GroupList, m.ModeWhy = []IOMMUUnit{}, []IOMMUGroup{}, []string{}
	cdir := r.path("sys", "class", "iommu")
	if ents, err := os.ReadDir(cdir); err == nil {
		m.Known = true
		for _, e := range ents {
			m.Units = append(m.Units, e.Name())
			m.UnitList = append(m.UnitList, readUnit(filepath.Join(cdir, e.Name())))
		}
		m.Present = len(m.Units) > 0
	}
	gdir := r.path("sys", "kernel", "iommu_groups")
	names, ids := numbered(gdir, "")
	m.Groups = len(names)
	for i, g := range names {
		grp := IOMMUGroup{ID: ids[i], Devices: []string{}}
		if typ, ok := readFile(filepath.Join(gdir, g, "type")); ok && typ != "" {
			m.GroupTypes[typ]++
			grp.Type = typ
		}
		grp.Meaning = DomainTypeMeaning(grp.Type)
		if ents, err := os.ReadDir(filepath.Join(gdir, g, "devices")); err == nil {
			for _, e := range ents {
				grp.Devices = append(grp.Devices, e.Name())
			}
		}
		sortDeviceNames(grp.Devices)
		m.GroupList = append(m.GroupList, grp)
	}
	best := 0
	for _, typ := range slices.Sorted(maps.Keys(m.GroupTypes)) {
		if m.GroupTypes[typ] > best {
			m.DefaultDomain, best = typ, m.GroupTypes[typ]
		}
	}
	if s, ok := readFile(r.path("proc", "cmdline")); ok {
		for w := range strings.FieldsSeq(s) {
			if w == "--" {
				break // the rest is for init
			}
			for _, p := range iommuCmdlinePrefixes {
				if strings.HasPrefix(w, p) {
					m.Cmdline = append(m.Cmdline, w)
				}
			}
		}
	}
	m.KernelRelease, _ = readFile(r.path("proc", "sys", "kernel", "osrelease"))
	m.CmdlineMode = cmdlineMode(m.Cmdline)
	m.Mode, m.ModeWhy = decideMode(m)
}

// groupDevicesFromPCI adds to each group the PCI devices whose
// iommu_group link names it, for trees whose group directories list no
// devices (a partial copy of sysfs).
func (r *reader) groupDevicesFromPCI() {
	for i := range r.t.IOMMU.GroupList {
		g := &r.t.IOMMU.GroupList[i]
		for _, d := range r.t.Devices {
			if d.IOMMUGroup == g.ID && !slices.Contains(g.Devices, string(d.BDF)) {
				g.Devices = append(g.Devices, string(d.BDF))
			}
		}
		sortDeviceNames(g.Devices)
	}
}

// sortDeviceNames sorts PCI addresses in BDF order ahead of other names.
func sortDeviceNames(names []string) {
	slices.SortFunc(names, func(a, b string) int {
		switch pa, pb := isBDF(a), isBDF(b); {
		case pa && pb:
			return compareBDF(BDF(a), BDF(b))
		case pa != pb:
			if pa {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
}

// readUnit reads one /sys/class/iommu entry.
func readUnit(dir string) IOMMUUnit {
	name := filepath.Base(dir)
	u := IOMMUUnit{Name: name, Devices: Unknown}
	read := func(rel string) string {
		s, _ := readFile(filepath.Join(dir, rel))
		return s
	}
	switch {
	case isDir(filepath.Join(dir, "intel-iommu")) || strings.HasPrefix(name, "dmar"):
		u.Kind = "vtd"
		u.Version, u.Cap, u.ECap = read("intel-iommu/version"), read("intel-iommu/cap"), read("intel-iommu/ecap")
	case isDir(filepath.Join(dir, "amd-iommu")) || strings.HasPrefix(name, "ivhd"):
		u.Kind = "amd-vi"
		u.Cap, u.ECap = read("amd-iommu/cap"), read("amd-iommu/features")
	case strings.HasPrefix(name, "smmu3."):
		u.Kind = "smmuv3"
	case strings.HasPrefix(name, "smmu."):
		u.Kind = "smmu"
	case strings.HasPrefix(name, "virtio"):
		u.Kind = "virtio"
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "devices")); err == nil {
		u.Devices = len(ents)
	}
	return u
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// UnitKindName names a unit kind for people.
func UnitKindName(kind string) string {
	switch kind {
	case "vtd":
		return "Intel VT-d"
	case "amd-vi":
		return "AMD-Vi"
	case "smmuv3":
		return "Arm SMMUv3"
	case "smmu":
		return "Arm SMMU"
	case "virtio":
		return "virtio-iommu"
	}
	return "unknown kind"
}

// cmdlineMode is the mode the IOMMU words ask for, as the kernel reads
// them: in order, a later word overriding an earlier one of the same
// meaning. iommu=off (x86's no_iommu), intel_iommu=off and amd_iommu=off
// turn the IOMMU off; iommu=pt and iommu.passthrough=1 ask for identity
// domains, iommu=nopt and iommu.passthrough=0 for translation;
// iommu.strict=1, intel_iommu=strict and amd_iommu=fullflush (both
// deprecated aliases of iommu.strict=1) ask for strict invalidation,
// iommu.strict=0 for lazy (drivers/iommu/iommu.c, intel/iommu.c,
// amd/init.c, Documentation/admin-guide/kernel-parameters.txt).
func cmdlineMode(words []string) string {
	var off bool
	var pass, strict *bool
	yes, no := true, false
	for _, w := range words {
		key, val, _ := strings.Cut(w, "=")
		switch key {
		case "iommu":
			switch val {
			case "off":
				off = true
			case "pt":
				pass = &yes
			case "nopt":
				pass = &no
			}
		case "intel_iommu", "amd_iommu":
			for o := range strings.SplitSeq(val, ",") {
				switch o {
				case "off":
					off = true
				case "on":
					off = false
				case "strict", "fullflush":
					strict = &yes
				}
			}
		case "iommu.passthrough", "iommu.strict":
			b, ok := kernelBool(val)
			if !ok {
				continue
			}
			if key == "iommu.passthrough" {
				pass = &b
			} else {
				strict = &b
			}
		}
	}
	switch {
	case off:
		return IOMMUOff
	case pass != nil && *pass:
		return IOMMUPassthrough
	case strict != nil && *strict:
		return IOMMUStrict
	case strict != nil:
		return IOMMULazy
	case pass != nil:
		return IOMMUTranslated
	}
	return ""
}

// kernelBool reads a boolean kernel parameter as kstrtobool does: its
// first character 1, y, Y or 0, n, N, or on / off.
func kernelBool(s string) (v, ok bool) {
	switch {
	case s == "":
		return false, false
	case strings.EqualFold(s, "on"):
		return true, true
	case strings.EqualFold(s, "off"):
		return false, true
	}
	switch s[0] {
	case '1', 'y', 'Y':
		return true, true
	case '0', 'n', 'N':
		return false, true
	}
	return false, false
}

// fqRelease is the first kernel whose lazy domains have their own type,
// DMA-FQ (commit "iommu: Introduce explicit type for non-strict DMA
// domains"); before it "DMA" was strict or lazy alike.
var fqRelease = [2]int{5, 15}

// releaseBefore reports whether a kernel release ("6.8.0-45-generic")
// is known to be older than v.
func releaseBefore(release string, v [2]int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor := strings.TrimLeftFunc(parts[1], func(r rune) bool { return r >= '0' && r <= '9' })
	minorN, err2 := strconv.Atoi(parts[1][:len(parts[1])-len(minor)])
	if err1 != nil || err2 != nil {
		return false
	}
	return major < v[0] || major == v[0] && minorN < v[1]
}

// noUnit says why a kernel may see no IOMMU unit. A guest's DMA may
// still be translated by the host's IOMMU (a passed-through GPU is), but
// nothing in the guest shows it.
const noUnit = "the firmware has no DMAR/IVRS/IORT table, it is disabled in firmware, the kernel lacks the driver, " +
	"or this is a virtual machine without a virtual IOMMU (the host's, if any, is invisible here)"

// decideMode reads the mode from the groups' domain types, which say
// what the kernel did, and the command line, which says what was asked;
// the units tell off from unknown where there are no groups.
func decideMode(m *IOMMU) (string, []string) {
	var why []string
	asked := ""
	if len(m.Cmdline) > 0 {
		asked = "the command line (" + strings.Join(m.Cmdline, " ") + ")"
		if m.CmdlineMode != "" {
			asked += " asks for " + m.CmdlineMode
		} else {
			asked += " does not choose a mode"
		}
	}
	if m.Groups == 0 {
		switch {
		case m.Present:
			why = append(why, fmt.Sprintf("units %s registered but no IOMMU group: no device is behind them", strings.Join(m.Units, ", ")))
		case m.Known:
			why = append(why, "no IOMMU unit in /sys/class/iommu")
		default:
			why = append(why, "no /sys/class/iommu and no /sys/kernel/iommu_groups: sysfs shows nothing (a container, or a tree without them)")
			if asked != "" {
				why = append(why, asked)
			}
			return IOMMUUnknown, why
		}
		switch {
		case m.CmdlineMode == IOMMUOff:
			why = append(why, asked)
		case asked != "":
			why = append(why, asked+", but no unit translates: "+noUnit)
		default:
			why = append(why, noUnit)
		}
		return IOMMUOff, why
	}

	// What each group's type says of its DMA.
	old := releaseBefore(m.KernelRelease, fqRelease)
	kinds := map[string]bool{}
	user := 0
	for _, typ := range slices.Sorted(maps.Keys(m.GroupTypes)) {
		n := m.GroupTypes[typ]
		line := fmt.Sprintf("%d group(s) %s: %s", n, typ, DomainTypeMeaning(typ))
		switch typ {
		case "DMA":
			if old {
				kinds[IOMMUTranslated] = true
				line = fmt.Sprintf("%d group(s) DMA: translated; kernel %s is older than %d.%d, where lazy domains are DMA too", n, m.KernelRelease, fqRelease[0], fqRelease[1])
			} else {
				kinds[IOMMUStrict] = true
			}
		case "DMA-FQ":
			kinds[IOMMULazy] = true
		case "identity":
			kinds[IOMMUPassthrough] = true
		case "unmanaged":
			user += n
			line += " (user space maps its IOVAs; VFIO unmaps synchronously)"
		default:
			line += " (no DMA through the kernel's DMA API)"
		}
		why = append(why, line)
	}
	if untyped := m.Groups - sum(m.GroupTypes); untyped > 0 {
		why = append(why, fmt.Sprintf("%d group(s) without a type file (kernels before 5.2)", untyped))
	}
	mode := ""
	switch {
	case len(kinds) > 1 || len(kinds) == 1 && user > 0:
		mode = IOMMUMixed
	case len(kinds) == 1:
		for k := range kinds {
			mode = k
		}
		if mode == IOMMUTranslated && (m.CmdlineMode == IOMMUStrict || m.CmdlineMode == IOMMULazy) {
			mode = m.CmdlineMode
		}
	case m.CmdlineMode != "" && m.CmdlineMode != IOMMUOff:
		mode = m.CmdlineMode
		why = append(why, "no group shows the kernel's own mode: taken from the command line")
	default:
		mode = IOMMUUnknown
		why = append(why, "no group shows the kernel's own mode, and the command line does not say")
	}
	if asked != "" {
		if m.CmdlineMode != "" && m.CmdlineMode != mode && mode != IOMMUMixed {
			asked += ", but the groups say otherwise (a group's type can be changed through its type file, and a driver may ask for its own domain)"
		}
		why = append(why, asked)
	} else if mode != IOMMUUnknown {
		why = append(why, "the command line says nothing of the IOMMU: the kernel's built-in default (CONFIG_IOMMU_DEFAULT_*)")
	}
	return mode, why
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

package iommu

import (
	"fmt"

	"github.com/dmalab/dmalab/platform"
)

// Group is an IOMMU group: the devices the IOMMU cannot tell apart, which
// therefore share one domain and can only be assigned (to VFIO) together.
// It mirrors the kernel's struct iommu_group.
type Group struct {
	// ID numbers the groups from 0 in the platform's order (GPUs, then
	// devices), each group at its first member.
	ID int
	// Devices are the names of the group's GPUs and devices.
	Devices []string
	// Why says what isolates the group or what its devices share.
	Why string
}

// Groups computes the IOMMU groups of s's GPUs and devices as Linux's
// pci_device_group (drivers/iommu/iommu.c) does:
//
//   - Walking up from a device, the first bridge whose path to the root
//     lacks ACS (pci_acs_path_enabled, drivers/pci/pci.c) is where
//     isolation ends, and every device below it shares its group. Here
//     that bridge is the topmost switch without ACS on the device's path:
//     a switch's downstream ports either all have ACS or all lack it
//     (Switch.ACS). Root ports are assumed to have ACS (the platform
//     format has none of its own).
//   - Where the walk stops at the device itself, the functions of one
//     multifunction device (Device.Slot) that lack ACS share a group
//     (get_pci_function_alias_group); a function with ACS keeps its own.
//   - Functions that use each other's requester ID (Device.DMAAliases)
//     share a group whatever ACS says (get_pci_alias_group).
//
// A device directly below a root complex, or an SoC device, with none of
// these is alone.
func Groups(s *platform.Spec) []Group {
	switches := map[string]platform.Switch{}
	for _, sw := range s.Switches {
		switches[sw.Name] = sw
	}
	// top is the topmost switch without ACS above parent, or "".
	top := func(parent string) string {
		found := ""
		for sw, ok := switches[parent]; ok; sw, ok = switches[sw.Parent] {
			if !sw.ACS {
				found = sw.Name
			}
		}
		return found
	}

	// Every GPU and device is a member; members joined by a shared switch,
	// a shared slot without ACS or a DMA alias end in one group.
	type member struct {
		name, parent, sw string
		dev              *platform.Device // nil for a GPU
	}
	var ms []member
	for _, g := range s.GPUs {
		ms = append(ms, member{name: g.Name, parent: g.Parent, sw: top(g.Parent)})
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		ms = append(ms, member{name: d.Name, parent: d.Parent, sw: top(d.Parent), dev: d})
	}
	link := make([]int, len(ms)) // union-find: the member each points to
	for i := range link {
		link[i] = i
	}
	find := func(i int) int {
		for link[i] != i {
			link[i] = link[link[i]]
			i = link[i]
		}
		return i
	}
	union := func(a, b int) {
		if ra, rb := find(a), find(b); ra != rb {
			link[max(ra, rb)] = min(ra, rb) // the root is the first member
		}
	}
	bySwitch := map[string]int{}
	bySlot := map[string]map[int]int{} // slot → function → member
	for i, m := range ms {
		if m.sw != "" {
			if j, ok := bySwitch[m.sw]; ok {
				union(j, i)
			} else {
				bySwitch[m.sw] = i
			}
		}
		if m.dev != nil && m.dev.Slot != "" {
			if bySlot[m.dev.Slot] == nil {
				bySlot[m.dev.Slot] = map[int]int{}
			}
			bySlot[m.dev.Slot][m.dev.Function] = i
		}
	}
	// Within a slot, the functions below a switch without ACS are grouped
	// already (the kernel's walk stops at that switch and looks no
	// further); the others join by ACS and aliases.
	byACS, byAlias := map[int]bool{}, map[int]bool{}
	for i, m := range ms {
		if m.dev == nil || m.dev.Slot == "" || m.sw != "" {
			continue
		}
		fns := bySlot[m.dev.Slot]
		if !m.dev.ACS {
			for _, j := range fns {
				if j != i && !ms[j].dev.ACS {
					union(i, j)
					byACS[i], byACS[j] = true, true
				}
			}
		}
		for _, f := range m.dev.DMAAliases {
			if j, ok := fns[f]; ok {
				union(i, j)
				byAlias[i], byAlias[j] = true, true
			}
		}
	}

	var groups []Group
	index := map[int]int{} // root member → index in groups
	for i, m := range ms {
		r := find(i)
		if k, ok := index[r]; ok {
			groups[k].Devices = append(groups[k].Devices, m.name)
			continue
		}
		index[r] = len(groups)
		groups = append(groups, Group{ID: len(groups), Devices: []string{m.name}})
	}
	for i, m := range ms {
		g := &groups[index[find(i)]]
		if g.Why != "" {
			continue
		}
		switch {
		case m.sw != "":
			g.Why = fmt.Sprintf("below %s, whose ports lack ACS", m.sw)
		case len(g.Devices) > 1 && byACS[i] && byAlias[i]:
			g.Why = fmt.Sprintf("functions of slot %s without ACS or with DMA aliases", m.dev.Slot)
		case len(g.Devices) > 1 && byACS[i]:
			g.Why = fmt.Sprintf("functions of slot %s, which lack ACS", m.dev.Slot)
		case len(g.Devices) > 1:
			g.Why = fmt.Sprintf("functions of slot %s that share requester IDs (DMA aliases)", m.dev.Slot)
		default:
			g.Why = aloneWhy(m.parent, switches, m.dev)
		}
	}
	return groups
}

// aloneWhy says what isolates a device that is alone in its group.
func aloneWhy(parent string, switches map[string]platform.Switch, d *platform.Device) string {
	why := "alone: no PCIe parent, its own stream or source ID"
	switch _, below := switches[parent]; {
	case below:
		why = "alone: every switch above it has ACS"
	case parent != "":
		why = "alone: directly below root complex " + parent
	}
	switch {
	case d == nil || d.Slot == "":
	case d.ACS:
		why += fmt.Sprintf("; function %d of slot %s, with ACS", d.Function, d.Slot)
	default:
		why += fmt.Sprintf("; the only function of slot %s without ACS", d.Slot)
	}
	return why
}

// GroupOf is the group of the GPU or device named name among groups.
func GroupOf(groups []Group, name string) (Group, bool) {
	for _, g := range groups {
		for _, d := range g.Devices {
			if d == name {
				return g, true
			}
		}
	}
	return Group{}, false
}

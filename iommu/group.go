package iommu

import (
	"fmt"

	"github.com/dmalab/dmalab/platform"
)

// Group is an IOMMU group: the devices the IOMMU cannot tell apart, which
// therefore share one domain and can only be assigned (to VFIO) together.
type Group struct {
	// ID numbers the groups from 0 in the platform's order (GPUs, then
	// devices).
	ID int
	// Devices are the names of the group's GPUs and devices.
	Devices []string
	// Why says what isolates the group or what its devices share.
	Why string
}

// Groups computes the IOMMU groups of s's GPUs and devices as Linux's
// pci_device_group (drivers/iommu/iommu.c) does: walking up from a
// device, the first bridge whose path to the root lacks ACS
// (pci_acs_path_enabled, drivers/pci/pci.c) is where isolation ends, and
// every device below it shares its group. Here that bridge is the
// topmost switch without ACS on the device's path: a switch's downstream
// ports either all have ACS or all lack it (Switch.ACS). Root ports are
// assumed to have ACS (the platform format has none of its own), so a
// device directly below a root complex, and an SoC device, is alone.
// The format has no PCI functions, so multifunction devices, whose
// functions would share a group, are not modelled.
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
	var groups []Group
	shared := map[string]int{} // switch name to index in groups
	add := func(name, parent string) {
		sw := top(parent)
		if sw == "" {
			why := "alone: no PCIe parent, its own stream or source ID"
			switch _, below := switches[parent]; {
			case below:
				why = "alone: every switch above it has ACS"
			case parent != "":
				why = "alone: directly below root complex " + parent
			}
			groups = append(groups, Group{ID: len(groups), Devices: []string{name}, Why: why})
			return
		}
		if i, ok := shared[sw]; ok {
			groups[i].Devices = append(groups[i].Devices, name)
			return
		}
		shared[sw] = len(groups)
		groups = append(groups, Group{ID: len(groups), Devices: []string{name}, Why: fmt.Sprintf("below %s, whose ports lack ACS", sw)})
	}
	for _, g := range s.GPUs {
		add(g.Name, g.Parent)
	}
	for _, d := range s.Devices {
		add(d.Name, d.Parent)
	}
	return groups
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

package iommu_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/dmalab/dmalab/iommu"
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/platform"
)

// TestGroups: devices below a switch without ACS share a group; with ACS
// on the switch each is alone; a device below a root complex is alone.
func TestGroups(t *testing.T) {
	tests := []struct {
		preset string
		sets   [][2]string
		want   [][]string
	}{
		{"2s-4gpu-pcie", nil, [][]string{{"gpu0", "gpu1", "nic0", "nic2"}, {"gpu2", "gpu3", "nic1"}, {"nvme0"}}},
		{"2s-4gpu-pcie", [][2]string{{"switches.sw0.acs", "true"}},
			[][]string{{"gpu0"}, {"gpu1"}, {"gpu2", "gpu3", "nic1"}, {"nic0"}, {"nic2"}, {"nvme0"}}},
		{"2s-4gpu-pcie", [][2]string{{"switches.sw0.acs", "true"}, {"switches.sw1.acs", "true"}},
			[][]string{{"gpu0"}, {"gpu1"}, {"gpu2"}, {"gpu3"}, {"nic0"}, {"nic1"}, {"nic2"}, {"nvme0"}}},
		{"dgx-h100", nil, [][]string{
			{"gpu0", "gpu1", "nic0", "nic1"}, {"gpu2", "gpu3", "nic2", "nic3"},
			{"gpu4", "gpu5", "nic4", "nic5"}, {"gpu6", "gpu7", "nic6", "nic7"}}},
		{"dgx-h100", [][2]string{{"switches.pcie0.acs", "true"}, {"switches.pcie1.acs", "true"}, {"switches.pcie2.acs", "true"}, {"switches.pcie3.acs", "true"}},
			[][]string{{"gpu0"}, {"gpu1"}, {"gpu2"}, {"gpu3"}, {"gpu4"}, {"gpu5"}, {"gpu6"}, {"gpu7"},
				{"nic0"}, {"nic1"}, {"nic2"}, {"nic3"}, {"nic4"}, {"nic5"}, {"nic6"}, {"nic7"}}},
		{"h200-pcie", nil, [][]string{{"gpu0"}}},
		{"zynq-7000", nil, [][]string{{"axidma0"}, {"gem0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.preset, func(t *testing.T) {
			s, err := platform.Preset(tt.preset)
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range tt.sets {
				if s, err = platform.Set(s, kv[0], kv[1]); err != nil {
					t.Fatal(err)
				}
			}
			groups := iommu.Groups(s)
			var got [][]string
			for i, g := range groups {
				if g.ID != i || g.Why == "" {
					t.Errorf("group %d: id %d, why %q", i, g.ID, g.Why)
				}
				got = append(got, g.Devices)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("groups %v, want %v", got, tt.want)
			}
		})
	}
}

// TestGroupsNestedSwitch: below a switch without ACS, a switch with ACS
// does not isolate its devices (pci_acs_path_enabled needs ACS on the
// whole path to the root).
func TestGroupsNestedSwitch(t *testing.T) {
	s, err := platform.Preset("2s-4gpu-pcie")
	if err != nil {
		t.Fatal(err)
	}
	s.Switches = append(s.Switches, platform.Switch{Name: "sw2", Parent: "sw1", Link: s.Switches[1].Link, ACS: true})
	s.Devices[1].Parent = "sw2"
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	g, ok := iommu.GroupOf(iommu.Groups(s), "nic1")
	if !ok || !reflect.DeepEqual(g.Devices, []string{"gpu2", "gpu3", "nic1"}) {
		t.Errorf("nic1's group %v (found %v), want gpu2, gpu3, nic1", g.Devices, ok)
	}
	s.Switches[1].ACS = true
	g, _ = iommu.GroupOf(iommu.Groups(s), "nic1")
	if !reflect.DeepEqual(g.Devices, []string{"nic1"}) {
		t.Errorf("with ACS on both switches nic1's group is %v, want it alone", g.Devices)
	}
	if _, ok := iommu.GroupOf(iommu.Groups(s), "nosuch"); ok {
		t.Error("GroupOf found a device that does not exist")
	}
}

// TestProfiles: every profile the platform format names has a parameter
// set a unit accepts, with a source for each number, and 4 levels (the
// depth of a Domain's tables).
func TestProfiles(t *testing.T) {
	want := []string{platform.IOMMUAMDVi, platform.IOMMUSMMUv3, platform.IOMMUVTd}
	if got := iommu.Profiles(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Profiles() = %v, want %v", got, want)
	}
	for _, name := range want {
		p, err := iommu.LookupProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != name || p.Levels != 4 || p.Format == "" {
			t.Errorf("%s: %+v", name, p)
		}
		for _, f := range []string{"IOTLBEntries", "IOTLBWays", "HitCost", "WalkReadCost", "InvalidateCost", "FlushQueue"} {
			if p.Sources[f] == "" {
				t.Errorf("%s: no source for %s", name, f)
			}
		}
		if _, err := iommu.NewUnit(name, nil, nil, 0, iommu.Strict, p.Params); err != nil {
			t.Errorf("%s: NewUnit: %v", name, err)
		}
	}
	if _, err := iommu.LookupProfile("dmar"); !errors.Is(err, mem.ErrInvalid) {
		t.Errorf("unknown profile: %v", err)
	}
}

package iommu_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
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
		{"h200-pcie", nil, [][]string{{"gpu0"}, {"cap0"}}},
		// The SoC's video devices, each its own stream ID on the SMMU.
		{"jetson-orin", nil, [][]string{{"gpu0"}, {"vi0"}, {"isp0"}, {"dc0"}}},
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

// TestGroupsMultifunction: the functions of one multifunction device
// without ACS share a group (get_pci_function_alias_group), with ACS each
// is alone, a DMA alias joins functions whatever ACS says; below a switch
// without ACS the switch's group takes them all anyway.
func TestGroupsMultifunction(t *testing.T) {
	type fn struct {
		acs     bool
		aliases []int
	}
	tests := []struct {
		name   string
		parent string     // rc0 or sw0
		swACS  bool       // sw0's ACS
		fns    []fn       // functions 0, 1, ... of slot mf
		want   [][]string // the groups with a function of slot mf
		why    string     // the why of mf0's group, in part
	}{
		{"root port, no ACS", "rc0", false, []fn{{}, {}},
			[][]string{{"mf0", "mf1"}}, "functions of slot mf, which lack ACS"},
		{"root port, ACS", "rc0", false, []fn{{acs: true}, {acs: true}},
			[][]string{{"mf0"}, {"mf1"}}, "function 0 of slot mf, with ACS"},
		{"root port, ACS on one", "rc0", false, []fn{{acs: true}, {}},
			[][]string{{"mf0"}, {"mf1"}}, "function 0 of slot mf, with ACS"},
		{"root port, three, one with ACS", "rc0", false, []fn{{}, {acs: true}, {}},
			[][]string{{"mf0", "mf2"}, {"mf1"}}, "functions of slot mf, which lack ACS"},
		{"root port, ACS and an alias", "rc0", false, []fn{{acs: true, aliases: []int{1}}, {acs: true}},
			[][]string{{"mf0", "mf1"}}, "share requester IDs"},
		{"root port, alias to a phantom function", "rc0", false, []fn{{acs: true, aliases: []int{3}}, {acs: true}},
			[][]string{{"mf0"}, {"mf1"}}, "with ACS"},
		{"switch without ACS, functions with ACS", "sw0", false, []fn{{acs: true}, {acs: true}},
			[][]string{{"gpu0", "gpu1", "nic0", "nic2", "mf0", "mf1"}}, "below sw0, whose ports lack ACS"},
		{"switch with ACS, no ACS", "sw0", true, []fn{{}, {}},
			[][]string{{"mf0", "mf1"}}, "functions of slot mf, which lack ACS"},
		{"switch with ACS, ACS", "sw0", true, []fn{{acs: true}, {acs: true}},
			[][]string{{"mf0"}, {"mf1"}}, "every switch above it has ACS; function 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := platform.Preset("2s-4gpu-pcie")
			if err != nil {
				t.Fatal(err)
			}
			s.Switches[0].ACS = tt.swACS
			nic := s.Devices[0]
			for i, f := range tt.fns {
				d := nic
				d.Name, d.Parent, d.Slot, d.Function, d.ACS, d.DMAAliases = "mf"+string(rune('0'+i)), tt.parent, "mf", i, f.acs, f.aliases
				s.Devices = append(s.Devices, d)
			}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			var got [][]string
			var why string
			for _, g := range iommu.Groups(s) {
				if slices.ContainsFunc(g.Devices, func(n string) bool { return strings.HasPrefix(n, "mf") }) {
					got = append(got, g.Devices)
				}
				if slices.Contains(g.Devices, "mf0") {
					why = g.Why
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("groups %v, want %v", got, tt.want)
			}
			if !strings.Contains(why, tt.why) {
				t.Errorf("mf0's group: why %q, want it to say %q", why, tt.why)
			}
		})
	}
}

package topo

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// iommuTree describes a machine's IOMMU for fakeIOMMU.
type iommuTree struct {
	units   []string          // under sys/class/iommu; nil: no such directory
	vendor  string            // "intel-iommu" or "amd-iommu": the units' driver directory
	types   []string          // group i's type file; "" leaves it out
	vfio    map[int]string    // group → a device bound to vfio-pci in it
	cmdline string            // proc/cmdline; empty: no file
	release string            // proc/sys/kernel/osrelease; empty: no file
	extra   map[string]string // more files
}

func fakeIOMMU(t *testing.T, it iommuTree) *fakeTree {
	f := newFakeTree(t)
	f.dir("sys")
	if it.units != nil {
		f.dir("sys/class/iommu")
	}
	for _, u := range it.units {
		f.dir("sys/class/iommu/" + u + "/devices")
		if it.vendor != "" {
			f.file("sys/class/iommu/"+u+"/"+it.vendor+"/cap", "1\n")
		}
	}
	for g, typ := range it.types {
		bdf := fmt.Sprintf("0000:%02x:00.0", g+1)
		d := fakeDev{class: "0x020000", vendor: "0x8086", device: "0x1593", group: g}
		if dev, ok := it.vfio[g]; ok {
			bdf, d.driver = dev, "vfio-pci"
		}
		f.pci(fmt.Sprintf("pci0000:00/0000:00:%02x.0/%s", g+1, bdf), d)
		if typ != "" {
			f.file(fmt.Sprintf("sys/kernel/iommu_groups/%d/type", g), typ+"\n")
		}
	}
	if it.cmdline != "" {
		f.file("proc/cmdline", it.cmdline+"\n")
	}
	if it.release != "" {
		f.file("proc/sys/kernel/osrelease", it.release+"\n")
	}
	for p, c := range it.extra {
		f.file(p, c)
	}
	return f
}

// TestIOMMUMode: the machine's mode and its evidence from the units, the
// groups' domain types, the command line and the kernel release.
func TestIOMMUMode(t *testing.T) {
	dmar := []string{"dmar0", "dmar1"}
	tests := []struct {
		name    string
		tree    iommuTree
		mode    string
		cmdline string   // CmdlineMode
		why     []string // each in some line of ModeWhy
	}{
		{"no sysfs", iommuTree{}, IOMMUUnknown, "", []string{"sysfs shows nothing"}},
		// The lent H100 and H200 machines (firecracker VMs, 2026-11-25):
		// an empty /sys/class/iommu, no groups, no IOMMU word.
		{"no IOMMU", iommuTree{units: []string{}, cmdline: "console=ttyS0 quiet swiotlb=noforce pci=realloc=off -- --firecracker-init"}, IOMMUOff, "",
			[]string{"no IOMMU unit in /sys/class/iommu", "the firmware has no DMAR/IVRS/IORT table"}},
		{"turned off", iommuTree{units: []string{}, cmdline: "intel_iommu=off"}, IOMMUOff, IOMMUOff,
			[]string{"no IOMMU unit", "the command line (intel_iommu=off) asks for off"}},
		{"VT-d lazy", iommuTree{units: dmar, vendor: "intel-iommu", types: []string{"DMA-FQ", "DMA-FQ", "DMA-FQ"}, cmdline: "intel_iommu=on", release: "6.8.0"},
			IOMMULazy, "", []string{"3 group(s) DMA-FQ: translated, lazy", "the command line (intel_iommu=on) does not choose a mode"}},
		{"VT-d lazy by default", iommuTree{units: dmar, types: []string{"DMA-FQ"}, cmdline: "quiet"},
			IOMMULazy, "", []string{"1 group(s) DMA-FQ", "the kernel's built-in default"}},
		{"pt", iommuTree{units: dmar, types: []string{"identity", "identity"}, cmdline: "intel_iommu=on iommu=pt"},
			IOMMUPassthrough, IOMMUPassthrough, []string{"2 group(s) identity: passthrough", "asks for passthrough"}},
		{"pt by iommu.passthrough", iommuTree{units: []string{"ivhd0"}, vendor: "amd-iommu", types: []string{"identity"}, cmdline: "iommu.passthrough=1"},
			IOMMUPassthrough, IOMMUPassthrough, []string{"identity"}},
		{"strict", iommuTree{units: dmar, types: []string{"DMA", "DMA"}, cmdline: "iommu.strict=1", release: "6.1.0-13-amd64"},
			IOMMUStrict, IOMMUStrict, []string{"2 group(s) DMA: translated, strict", "asks for strict"}},
		{"strict, old alias", iommuTree{units: dmar, types: []string{"DMA"}, cmdline: "intel_iommu=on,strict", release: "6.1.0"},
			IOMMUStrict, IOMMUStrict, []string{"asks for strict"}},
		{"old kernel, DMA", iommuTree{units: dmar, types: []string{"DMA"}, release: "5.4.0-150-generic"},
			IOMMUTranslated, "", []string{"kernel 5.4.0-150-generic is older than 5.15"}},
		{"old kernel, DMA, lazy asked", iommuTree{units: dmar, types: []string{"DMA"}, cmdline: "iommu.strict=0", release: "5.10.0"},
			IOMMULazy, IOMMULazy, []string{"older than 5.15", "asks for lazy"}},
		{"mixed with a VFIO group", iommuTree{units: dmar, types: []string{"DMA-FQ", "DMA-FQ", "unmanaged"}, vfio: map[int]string{2: "0000:17:00.0"}, cmdline: "intel_iommu=on"},
			IOMMUMixed, "", []string{"2 group(s) DMA-FQ", "1 group(s) unmanaged: owned by a user such as VFIO (user space maps its IOVAs"}},
		{"mixed, a group set to identity", iommuTree{units: dmar, types: []string{"DMA", "identity"}, release: "6.8.0"},
			IOMMUMixed, "", []string{"1 group(s) DMA:", "1 group(s) identity"}},
		{"asked pt, got lazy", iommuTree{units: dmar, types: []string{"DMA-FQ"}, cmdline: "iommu=pt iommu=nopt iommu.strict=0"},
			IOMMULazy, IOMMULazy, nil},
		{"groups disagree with the command line", iommuTree{units: dmar, types: []string{"DMA-FQ"}, cmdline: "iommu=pt"},
			IOMMULazy, IOMMUPassthrough, []string{"asks for passthrough, but the groups say otherwise"}},
		{"only VFIO groups", iommuTree{units: dmar, types: []string{"unmanaged"}, cmdline: "iommu.strict=1"},
			IOMMUStrict, IOMMUStrict, []string{"taken from the command line"}},
		{"only VFIO groups, silent command line", iommuTree{units: dmar, types: []string{"unmanaged"}},
			IOMMUUnknown, "", []string{"the command line does not say"}},
		{"blocked group", iommuTree{units: dmar, types: []string{"DMA-FQ", "blocked"}},
			IOMMULazy, "", []string{"1 group(s) blocked: DMA blocked (no DMA"}},
		{"untyped groups", iommuTree{units: dmar, types: []string{"", ""}, cmdline: "iommu=pt"},
			IOMMUPassthrough, IOMMUPassthrough, []string{"2 group(s) without a type file"}},
		{"units, no groups", iommuTree{units: dmar}, IOMMUOff, "", []string{"no device is behind them"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top, err := Read(fakeIOMMU(t, tt.tree).root)
			if err != nil {
				t.Fatal(err)
			}
			m := top.IOMMU
			if m.Mode != tt.mode || m.CmdlineMode != tt.cmdline {
				t.Errorf("mode %q, command line's %q; want %q and %q\nwhy: %q", m.Mode, m.CmdlineMode, tt.mode, tt.cmdline, m.ModeWhy)
			}
			for _, w := range tt.why {
				if !slices.ContainsFunc(m.ModeWhy, func(l string) bool { return strings.Contains(l, w) }) {
					t.Errorf("no reason says %q: %q", w, m.ModeWhy)
				}
			}
			var text strings.Builder
			if err := Format(&text, top); err != nil {
				t.Fatal(err)
			}
			if line := fmt.Sprintf("  mode: %s (%s)\n", tt.mode, ModeMeaning(tt.mode)); !strings.Contains(text.String(), line) {
				t.Errorf("Format lacks %q:\n%s", line, text.String())
			}
			if alone, err := ReadIOMMU(fakeIOMMU(t, tt.tree).root); err != nil || alone.Mode != m.Mode || !slices.Equal(alone.ModeWhy, m.ModeWhy) {
				t.Errorf("ReadIOMMU: mode %q, why %q, err %v; Read's %q", alone.Mode, alone.ModeWhy, err, m.Mode)
			}
		})
	}
}

// TestIOMMUUnitsAndGroups: unit kinds from the driver's directory or the
// name, and a VFIO group's devices.
func TestIOMMUUnitsAndGroups(t *testing.T) {
	for _, tt := range []struct {
		units  []string
		vendor string
		kinds  []string
	}{
		{[]string{"dmar0"}, "intel-iommu", []string{"vtd"}},
		{[]string{"ivhd0", "ivhd1"}, "amd-iommu", []string{"amd-vi", "amd-vi"}},
		{[]string{"other", "smmu.0x40000", "smmu3.0x0000000012000000", "virtio0"}, "", []string{"", "smmu", "smmuv3", "virtio"}},
		{[]string{"dmar1", "ivhd2"}, "", []string{"vtd", "amd-vi"}},
	} {
		t.Run(strings.Join(tt.units, ","), func(t *testing.T) {
			top, err := Read(fakeIOMMU(t, iommuTree{units: tt.units, vendor: tt.vendor, types: []string{"DMA-FQ", "unmanaged"}, vfio: map[int]string{1: "0000:17:00.0"}}).root)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, u := range top.IOMMU.UnitList {
				kinds = append(kinds, u.Kind)
				if u.Devices != 0 {
					t.Errorf("%s: %d devices, want 0 (an empty devices directory)", u.Name, u.Devices)
				}
				if tt.vendor != "" && u.Cap != "1" {
					t.Errorf("%s: cap %q, want the %s/cap file's 1", u.Name, u.Cap, tt.vendor)
				}
			}
			if !slices.Equal(kinds, tt.kinds) {
				t.Errorf("kinds %q, want %q", kinds, tt.kinds)
			}
			g := top.IOMMU.GroupList
			if len(g) != 2 || g[1].Type != "unmanaged" || !slices.Equal(g[1].Devices, []string{"0000:17:00.0"}) {
				t.Errorf("groups %+v, want group 1 unmanaged with 0000:17:00.0", g)
			}
			if d := top.Device("0000:17:00.0"); d == nil || d.Driver != "vfio-pci" || d.IOMMUGroup != 1 {
				t.Errorf("VFIO device %+v", d)
			}
		})
	}
}

func TestCmdlineMode(t *testing.T) {
	for _, tt := range []struct {
		words string
		want  string
	}{
		{"", ""},
		{"intel_iommu=on", ""},
		{"intel_iommu=off", IOMMUOff},
		{"amd_iommu=off", IOMMUOff},
		{"iommu=off", IOMMUOff},
		{"intel_iommu=off intel_iommu=on", ""},
		{"iommu=pt", IOMMUPassthrough},
		{"iommu=pt iommu=nopt", IOMMUTranslated},
		{"iommu.passthrough=y", IOMMUPassthrough},
		{"iommu.passthrough=on", IOMMUPassthrough},
		{"iommu.passthrough=0", IOMMUTranslated},
		{"iommu.passthrough=maybe", ""},
		{"iommu.strict=1", IOMMUStrict},
		{"iommu.strict=0", IOMMULazy},
		{"iommu.strict=1 iommu.strict=0", IOMMULazy},
		{"amd_iommu=fullflush", IOMMUStrict},
		{"intel_iommu=on,sm_on,strict", IOMMUStrict},
		{"iommu=pt iommu.strict=1", IOMMUPassthrough},
		{"iommu.forcedac=1", ""},
	} {
		if got := cmdlineMode(strings.Fields(tt.words)); got != tt.want {
			t.Errorf("cmdlineMode(%q) = %q, want %q", tt.words, got, tt.want)
		}
	}
}

func TestReleaseBefore(t *testing.T) {
	for _, tt := range []struct {
		release string
		want    bool
	}{
		{"5.4.0-150-generic", true},
		{"5.14.21-150400.24-default", true},
		{"5.15.0-91-generic", false},
		{"6.8.0", false},
		{"4.18.0-553.el8_10.x86_64", true},
		{"5.10rc1", true},
		{"", false},
		{"weird", false},
	} {
		if got := releaseBefore(tt.release, fqRelease); got != tt.want {
			t.Errorf("releaseBefore(%q) = %v, want %v", tt.release, got, tt.want)
		}
	}
}

func TestReadIOMMUMissingRoot(t *testing.T) {
	if _, err := ReadIOMMU("/nonexistent/dmalab"); err == nil {
		t.Error("ReadIOMMU of a missing root: no error")
	}
}

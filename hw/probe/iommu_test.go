package probe

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestMachineIOMMU: the machine section records the IOMMU mode and units
// that hw/topo reads, for each mode a copied tree can show.
func TestMachineIOMMU(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  MachineIOMMU
	}{
		{"no IOMMU", map[string]string{"sys/class/iommu/": ""},
			MachineIOMMU{Mode: "off", Units: []string{}, Kinds: []string{}, Cmdline: []string{}}},
		{"VT-d lazy", map[string]string{
			"sys/class/iommu/dmar0/intel-iommu/version": "1:0\n",
			"sys/kernel/iommu_groups/0/type":            "DMA-FQ\n",
			"proc/cmdline":                              "intel_iommu=on\n",
		}, MachineIOMMU{Mode: "lazy", Units: []string{"dmar0"}, Kinds: []string{"vtd"}, DefaultDomain: "DMA-FQ", Cmdline: []string{"intel_iommu=on"}}},
		{"pt", map[string]string{
			"sys/class/iommu/ivhd0/amd-iommu/cap": "0x1\n",
			"sys/kernel/iommu_groups/0/type":      "identity\n",
			"proc/cmdline":                        "iommu=pt\n",
		}, MachineIOMMU{Mode: "passthrough", Units: []string{"ivhd0"}, Kinds: []string{"amd-vi"}, DefaultDomain: "identity", Cmdline: []string{"iommu=pt"}}},
		{"mixed", map[string]string{
			"sys/class/iommu/dmar0/intel-iommu/version": "1:0\n",
			"sys/kernel/iommu_groups/0/type":            "DMA\n",
			"sys/kernel/iommu_groups/1/type":            "unmanaged\n",
		}, MachineIOMMU{Mode: "mixed", Units: []string{"dmar0"}, Kinds: []string{"vtd"}, DefaultDomain: "DMA", Cmdline: []string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tt.files {
				dir := strings.HasSuffix(p, "/") // an empty directory
				p = filepath.Join(root, p)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if dir {
					if err := os.MkdirAll(p, 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got := readMachineIOMMU(root)
			if got == nil || len(got.Why) == 0 {
				t.Fatalf("readMachineIOMMU = %+v, want a mode with its evidence", got)
			}
			got.Why = nil
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
	if readMachineIOMMU(filepath.Join(t.TempDir(), "missing")) != nil {
		t.Error("a root that cannot be read gave an IOMMU")
	}
}

// TestMachineIOMMUReport: a report with the IOMMU writes it to JSON and
// the table, and reads back equal; one without it (every report written
// before) has no iommu field.
func TestMachineIOMMUReport(t *testing.T) {
	io := &MachineIOMMU{Mode: "lazy", Why: []string{"1 group(s) DMA-FQ"}, Units: []string{"dmar0", "dmar1"},
		Kinds: []string{"vtd", "vtd"}, DefaultDomain: "DMA-FQ", Cmdline: []string{"intel_iommu=on"}}
	for _, tt := range []struct {
		name  string
		io    *MachineIOMMU
		json  string
		table string
	}{
		{"recorded", io, `"iommu": {
      "mode": "lazy",`, "IOMMU lazy (dmar0, dmar1), default domain DMA-FQ, command line intel_iommu=on\n"},
		{"absent", nil, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFake(FakeConfig{Machine: Machine{Hostname: "h", IOMMU: tt.io}})
			rep, err := run(t, f, Options{Sizes: []int64{4096}, SmallSizes: []int64{8}, Families: []string{FamilyCE}})
			if err != nil {
				t.Fatal(err)
			}
			var js, table bytes.Buffer
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			if tt.io == nil {
				if strings.Contains(js.String(), `"iommu"`) || strings.Contains(table.String(), "IOMMU") {
					t.Errorf("a report without the IOMMU mentions it:\n%s", js.String())
				}
			} else if !strings.Contains(js.String(), tt.json) || !strings.Contains(table.String(), "\n"+tt.table) {
				t.Errorf("JSON lacks %q or table lacks %q:\n%s\n%s", tt.json, tt.table, js.String(), table.String())
			}
			back, err := ReadJSON(&js)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Machine, rep.Machine) {
				t.Errorf("machine after a JSON round trip %+v, want %+v", back.Machine, rep.Machine)
			}
		})
	}
}

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dmalab/dmalab/hw/nvml"
)

func TestCountNVLinks(t *testing.T) {
	link := func(remote string, n int) []nvml.NVLink {
		var out []nvml.NVLink
		for i := range n {
			out = append(out, nvml.NVLink{Link: i, RemoteBusID: remote})
		}
		return out
	}
	// Two H200s joined directly by 18 links (the lent h200-x2 machine).
	a, b := link("00000000:07:00.0", 18), link("00000000:06:00.0", 18)
	if got, sw := countNVLinks(a, b, "0000:07:00.0"); got != 18 || sw {
		t.Errorf("direct NV18: got %d, switched %v", got, sw)
	}
	// GPUs whose links all end at NVSwitches (DGX H100): 18 links into
	// switches the peer reaches too.
	var sw1, sw2 []nvml.NVLink
	for i, bus := range []string{"00000000:A1:00.0", "00000000:A2:00.0", "00000000:A3:00.0"} {
		for j := range 6 {
			sw1 = append(sw1, nvml.NVLink{Link: i*6 + j, RemoteBusID: bus})
			sw2 = append(sw2, nvml.NVLink{Link: i*6 + j, RemoteBusID: bus})
		}
	}
	if got, sw := countNVLinks(sw1, sw2, "0000:1b:00.0"); got != 18 || !sw {
		t.Errorf("through NVSwitch: got %d, switched %v, want 18 and switched", got, sw)
	}
	if got, sw := countNVLinks(a, nil, "0000:09:00.0"); got != 0 || sw {
		t.Errorf("unrelated GPU: got %d, switched %v", got, sw)
	}
	if normBusID("00000000:1A:00.0") != normBusID("0000:1a:00.0") {
		t.Error("bus IDs of different domain width or case differ")
	}
}

// TestTopoIOMMU: topo --root on a copied tree prints the IOMMU mode with
// its evidence, and --json has it with the groups and their devices.
func TestTopoIOMMU(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"sys/class/iommu/dmar0/intel-iommu/version": "1:0\n",
		"sys/kernel/iommu_groups/0/type":            "DMA-FQ\n",
		"sys/kernel/iommu_groups/1/type":            "unmanaged\n",
		"proc/cmdline":                              "BOOT_IMAGE=/vmlinuz intel_iommu=on\n",
	}
	for p, c := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for g, bdf := range []string{"0000:17:00.0", "0000:65:00.0"} {
		if err := os.MkdirAll(filepath.Join(root, "sys/kernel/iommu_groups", strconv.Itoa(g), "devices", bdf), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := dmalab(t, "topo", "--root", root)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, s := range []string{"  mode: mixed (groups differ)\n", "    1 group(s) unmanaged: owned by a user such as VFIO",
		"    dmar0  Intel VT-d  1:0", "    1      unmanaged  0000:65:00.0\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("topo lacks %q:\n%s", s, out)
		}
	}
	code, out, errs = dmalab(t, "topo", "--root", root, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		IOMMU struct {
			Mode      string   `json:"mode"`
			ModeWhy   []string `json:"mode_why"`
			GroupList []struct {
				ID      int      `json:"id"`
				Type    string   `json:"type"`
				Devices []string `json:"devices"`
			} `json:"group_list"`
		} `json:"iommu"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.IOMMU
	if m.Mode != "mixed" || len(m.ModeWhy) == 0 || len(m.GroupList) != 2 || m.GroupList[1].Type != "unmanaged" ||
		!reflect.DeepEqual(m.GroupList[0].Devices, []string{"0000:17:00.0"}) {
		t.Errorf("iommu in JSON: %+v", m)
	}
}

// TestTopoNumactl: topo prints a copied tree's NUMA nodes as numactl -H.
func TestTopoNumactl(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"sys/devices/system/node/node0/cpulist":  "0-1\n",
		"sys/devices/system/node/node1/cpulist":  "2-3\n",
		"sys/devices/system/node/node0/meminfo":  "Node 0 MemTotal: 2097152 kB\nNode 0 MemFree: 1048576 kB\n",
		"sys/devices/system/node/node1/meminfo":  "Node 1 MemTotal: 2097152 kB\nNode 1 MemFree: 2097152 kB\n",
		"sys/devices/system/node/node0/distance": "10 32\n",
		"sys/devices/system/node/node1/distance": "32 10\n",
	}
	for p, c := range files {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := dmalab(t, "topo", "--root", root)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := `  available: 2 nodes (0-1)
  node 0 cpus: 0 1
  node 0 size: 2048 MB
  node 0 free: 1024 MB
  node 1 cpus: 2 3
  node 1 size: 2048 MB
  node 1 free: 2048 MB
  node distances:
  node   0   1
    0:  10  32
    1:  32  10
`
	if !strings.Contains(out, want) {
		t.Errorf("topo lacks the numactl -H view\n%s\nin:\n%s", want, out)
	}
}

package topo

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	for _, c := range []struct {
		in, want string
		count    int
		bad      bool
	}{
		{"", "", 0, false},
		{"0", "0", 1, false},
		{"0-47,96-143", "0-47,96-143", 96, false},
		{"3,1,2,2", "1-3", 3, false},
		{"0-1,2-3", "0-3", 4, false},
		{"3-1", "", 0, true},
		{"a", "", 0, true},
		{"-1", "", 0, true},
		{"0-", "", 0, true},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, n, err := parseCPUList(c.in)
			if (err != nil) != c.bad || got != c.want || n != c.count {
				t.Errorf("parseCPUList(%q) = %q, %d, %v; want %q, %d, error %v", c.in, got, n, err, c.want, c.count, c.bad)
			}
		})
	}
}

func TestParseLinkSpeed(t *testing.T) {
	for _, c := range []struct {
		in   string
		want LinkSpeed
		bad  bool
	}{
		{"16.0 GT/s PCIe", 16, false},
		{"2.5 GT/s PCIe", 2.5, false},
		{"8 GT/s", 8, false},
		{"64.0 GT/s PCIe", 64, false},
		{"Unknown", 0, false},
		{"Unknown speed", 0, false},
		{"16.0", 0, true},
		{"x GT/s", 0, true},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseLinkSpeed(c.in)
			if (err != nil) != c.bad || got != c.want {
				t.Errorf("parseLinkSpeed(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.bad)
			}
		})
	}
}

func TestParseResource(t *testing.T) {
	// A GPU's resource file as Linux writes it: BAR0 32-bit, BAR1 and
	// BAR3 64-bit prefetchable (their upper halves are the zero lines 2
	// and 4), BAR5 I/O, then a ROM line that is not a BAR.
	in := `0x00000000fa000000 0x00000000faffffff 0x0000000000040200
0x0000380000000000 0x0000381fffffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x0000382000000000 0x0000382001ffffff 0x000000000014220c
0x0000000000000000 0x0000000000000000 0x0000000000000000
0x000000000000e000 0x000000000000e07f 0x0000000000040101
0x00000000fb000000 0x00000000fb07ffff 0x0000000000046200
`
	bars, err := parseResource(strings.TrimSpace(in))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(bars)
	want := "[{0 16MiB false false false} {1 128GiB false true true} {3 32MiB false true true} {5 128B true false false}]"
	if got != want {
		t.Errorf("parseResource = %s\nwant %s", got, want)
	}
	for _, bad := range []string{"0x1 0x2", "0x10 0x1 0x200", "zz 0x1 0x0", "0x0 0xffffffffffffffff 0x200"} {
		if _, err := parseResource(bad); err == nil {
			t.Errorf("parseResource(%q) = nil error", bad)
		}
	}
}

func TestParsePCIIDs(t *testing.T) {
	db := "# comment\n1af4  Red Hat, Inc.\n\t1041  Virtio network device\n10de  NVIDIA Corporation\n\t2330  Fake GPU\n\t\t10de 16c1  Fake subsystem\n\t2331  Other\nbad line\nC 03  Display controller\n\t02  3D controller\n"
	n := parsePCIIDs(strings.NewReader(db), map[[2]PCIID]bool{{0x10de, 0x2330}: true, {0x1234, 0x1111}: true})
	if n.vendors[0x10de] != "NVIDIA Corporation" || n.devices[[2]PCIID{0x10de, 0x2330}] != "Fake GPU" {
		t.Errorf("names = %+v", n)
	}
	if len(n.vendors) != 1 || len(n.devices) != 1 {
		t.Errorf("kept names not asked for: %+v", n)
	}
}

func TestClassAndVendorNames(t *testing.T) {
	for c, want := range map[ClassCode]string{
		0x030200: "3D controller", 0x030000: "VGA controller", 0x020000: "Ethernet controller",
		0x020700: "InfiniBand controller", 0x010802: "NVMe controller", 0x060400: "PCI bridge",
		0x120000: "processing accelerator", 0x038000: "display controller", 0xffff00: "unassigned class",
		0x0c8000: "serial bus controller", 0x770000: "class 770000",
	} {
		if got := ClassName(c); got != want {
			t.Errorf("ClassName(%06x) = %q, want %q", uint32(c), got, want)
		}
	}
	if VendorName(0x10de) != "NVIDIA" || VendorName(0x1af4) != "virtio" || VendorName(0xabcd) != "" {
		t.Error("VendorName")
	}
}

func TestBytesString(t *testing.T) {
	for b, want := range map[Bytes]string{
		0: "0B", 1023: "1023B", 1024: "1KiB", 16 << 20: "16MiB", 128 << 30: "128GiB",
		3 << 29: "1.5GiB", 3718467584: "3.5GiB", 1 << 60: "1EiB",
	} {
		if got := b.String(); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", uint64(b), got, want)
		}
	}
}

func TestBDF(t *testing.T) {
	for s, want := range map[string]bool{
		"0000:17:00.0": true, "10000:01:00.7": true, "0000:17:00.8": false, "pci0000:00": false,
		"0000:17:0.0": false, "000:17:00.0": false, "0000:zz:00.0": false,
	} {
		if got := isBDF(s); got != want {
			t.Errorf("isBDF(%q) = %v", s, got)
		}
	}
	if c := compareBDF("10000:00:00.0", "0000:ff:00.0"); c <= 0 {
		t.Errorf("domain 10000 sorts before 0000")
	}
}

func TestIDsText(t *testing.T) {
	var c ClassCode
	var id PCIID
	for _, s := range []string{`"0x1000000"`, `"0xzz"`} {
		if err := json.Unmarshal([]byte(s), &c); err == nil {
			t.Errorf("ClassCode accepted %s", s)
		}
	}
	if err := json.Unmarshal([]byte(`"0x10000"`), &id); err == nil {
		t.Error("PCIID accepted 0x10000")
	}
	if err := json.Unmarshal([]byte(`"10de"`), &id); err != nil || id != VendorNVIDIA {
		t.Errorf("PCIID from 10de = %v, %v", id, err)
	}
}

func ExampleBDF_NVMLBusID() {
	fmt.Println(BDF("0000:17:00.0").NVMLBusID())
	// Output: 00000000:17:00.0
}

func ExampleTopology_Relation() {
	t := &Topology{
		Nodes:       []Node{{ID: 0}, {ID: 1}},
		HostBridges: []string{"pci0000:00", "pci0000:80"},
		Devices: []PCIDevice{
			{BDF: "0000:00:01.0", HostBridge: "pci0000:00", Class: 0x060400, NUMANode: 0},
			{BDF: "0000:01:00.0", HostBridge: "pci0000:00", Parent: "0000:00:01.0", Class: 0x030200, Vendor: VendorNVIDIA, NUMANode: 0},
			{BDF: "0000:01:00.1", HostBridge: "pci0000:00", Parent: "0000:00:01.0", Class: 0x020700, Vendor: VendorMellanox, NUMANode: 0},
			{BDF: "0000:81:00.0", HostBridge: "pci0000:80", Class: 0x030200, Vendor: VendorNVIDIA, NUMANode: 1},
		},
	}
	fmt.Println(t.Relation("0000:01:00.0", "0000:01:00.1"))
	fmt.Println(t.Relation("0000:01:00.0", "0000:81:00.0"))
	// Output:
	// PIX
	// SYS
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"", "0", "0-47,96-143", "3,1,2", "1-0", "0-1048577"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, n, err := parseCPUList(s)
		if err != nil {
			return
		}
		again, m, err := parseCPUList(list)
		if err != nil || again != list || m != n {
			t.Errorf("canonical %q of %q reparses as %q, %d, %v (had %d)", list, s, again, m, err, n)
		}
	})
}

func FuzzParseResource(f *testing.F) {
	f.Add("0x00000000fa000000 0x00000000faffffff 0x0000000000040200\n0x0 0x0 0x0")
	f.Add("0x1 0x0 0x0")
	f.Fuzz(func(t *testing.T, s string) {
		bars, _ := parseResource(s)
		for _, b := range bars {
			if b.Size == 0 || b.Index < 0 || b.Index > 5 {
				t.Errorf("parseResource(%q) gave %+v", s, b)
			}
		}
	})
}

func FuzzParseLinkSpeed(f *testing.F) {
	for _, s := range []string{"16.0 GT/s PCIe", "Unknown", "8 GT/s", "NaN GT/s", "-1 GT/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseLinkSpeed(s)
		if err == nil && (v < 0 || v > 1e4 || v != v) {
			t.Errorf("parseLinkSpeed(%q) = %v", s, v)
		}
	})
}

func FuzzParsePCIIDs(f *testing.F) {
	f.Add("10de  NVIDIA Corporation\n\t2330  Fake GPU\n")
	f.Add("\t\t\n10de\n\t2330\nC 03\n")
	f.Fuzz(func(t *testing.T, s string) {
		n := parsePCIIDs(strings.NewReader(s), map[[2]PCIID]bool{{0x10de, 0x2330}: true})
		if len(n.devices) > 1 || len(n.vendors) > 1 {
			t.Errorf("kept names not asked for: %+v", n)
		}
	})
}

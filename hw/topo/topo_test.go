package topo

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func readFake(t *testing.T) (*Topology, *fakeTree) {
	t.Helper()
	f := twoSocket(t)
	top, err := Read(f.root)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return top, f
}

func TestReadNUMA(t *testing.T) {
	top, _ := readFake(t)
	want := []Node{
		{ID: 0, CPUList: "0-3,8-11", CPUs: 8, MemTotal: 16 << 30, MemFree: 8 << 30, Distance: []int{10, 21}},
		{ID: 1, CPUList: "4-7,12-15", CPUs: 8, MemTotal: 16 << 30, MemFree: 15872 << 20, Distance: []int{21, 10}},
	}
	if !reflect.DeepEqual(top.Nodes, want) {
		t.Errorf("Nodes = %+v\nwant %+v", top.Nodes, want)
	}
	if top.NUMABalancing != 1 {
		t.Errorf("NUMABalancing = %d, want 1", top.NUMABalancing)
	}
	if len(top.Warnings) != 0 {
		t.Errorf("Warnings = %q, want none", top.Warnings)
	}
}

func TestReadIOMMU(t *testing.T) {
	top, _ := readFake(t)
	unit := func(name string, devices int) IOMMUUnit {
		return IOMMUUnit{Name: name, Kind: "vtd", Version: "1:0", Cap: "d2008c40660462", ECap: "f050da", Devices: devices}
	}
	lazy := DomainTypeMeaning("DMA-FQ")
	want := IOMMU{
		Known: true, Present: true, Units: []string{"dmar0", "dmar1"},
		Groups: 11, GroupTypes: map[string]int{"DMA-FQ": 10, "identity": 1}, DefaultDomain: "DMA-FQ",
		Cmdline:  []string{"intel_iommu=on", "iommu=pt"},
		UnitList: []IOMMUUnit{unit("dmar0", 1), unit("dmar1", 0)},
		GroupList: []IOMMUGroup{
			{0, "DMA-FQ", lazy, []string{"0000:00:00.0"}},
			{1, "DMA-FQ", lazy, []string{"0000:00:01.0", "0000:00:02.0", "0000:00:03.0"}},
			{2, "DMA-FQ", lazy, []string{"0000:01:00.0", "0000:02:00.0", "0000:02:01.0", "0000:02:02.0", "0000:07:00.0", "0000:08:00.0"}},
			{3, "DMA-FQ", lazy, []string{"0000:03:00.0"}},
			{4, "DMA-FQ", lazy, []string{"0000:04:00.0"}},
			{5, "DMA-FQ", lazy, []string{"0000:09:00.0"}},
			{6, "DMA-FQ", lazy, []string{"0000:06:00.0"}},
			{7, "DMA-FQ", lazy, []string{"0000:40:01.0"}},
			{8, "identity", DomainTypeMeaning("identity"), []string{"0000:41:00.0"}},
			{9, "DMA-FQ", lazy, []string{"0000:80:01.0"}},
			{10, "DMA-FQ", lazy, []string{"0000:81:00.0"}},
		},
		KernelRelease: "6.8.0-45-generic",
		CmdlineMode:   IOMMUPassthrough,
		Mode:          IOMMUMixed,
		ModeWhy: []string{
			"10 group(s) DMA-FQ: translated, lazy invalidation (flush queue)",
			"1 group(s) identity: passthrough (IOVA = physical address)",
			"the command line (intel_iommu=on iommu=pt) asks for passthrough",
		},
	}
	if !reflect.DeepEqual(top.IOMMU, want) {
		t.Errorf("IOMMU = %+v\nwant %+v", top.IOMMU, want)
	}
}

func TestReadPCITree(t *testing.T) {
	top, _ := readFake(t)
	if want := []string{"pci0000:00", "pci0000:40", "pci0000:80"}; !slices.Equal(top.HostBridges, want) {
		t.Errorf("HostBridges = %q, want %q", top.HostBridges, want)
	}
	// BDF: parent, host bridge, port role.
	want := map[BDF][3]string{
		"0000:00:00.0": {"", "pci0000:00", ""},
		"0000:00:01.0": {"", "pci0000:00", "root_port"},
		"0000:01:00.0": {"0000:00:01.0", "pci0000:00", "switch_upstream"},
		"0000:02:00.0": {"0000:01:00.0", "pci0000:00", "switch_downstream"},
		"0000:02:01.0": {"0000:01:00.0", "pci0000:00", "switch_downstream"},
		"0000:02:02.0": {"0000:01:00.0", "pci0000:00", "switch_downstream"},
		"0000:03:00.0": {"0000:02:00.0", "pci0000:00", ""},
		"0000:04:00.0": {"0000:02:01.0", "pci0000:00", ""},
		"0000:07:00.0": {"0000:02:02.0", "pci0000:00", "switch_upstream"},
		"0000:08:00.0": {"0000:07:00.0", "pci0000:00", "switch_downstream"},
		"0000:09:00.0": {"0000:08:00.0", "pci0000:00", ""},
		"0000:00:02.0": {"", "pci0000:00", "root_port"},
		"0000:05:00.0": {"0000:00:02.0", "pci0000:00", ""},
		"0000:00:03.0": {"", "pci0000:00", "root_port"},
		"0000:06:00.0": {"0000:00:03.0", "pci0000:00", ""},
		"0000:40:01.0": {"", "pci0000:40", "root_port"},
		"0000:41:00.0": {"0000:40:01.0", "pci0000:40", ""},
		"0000:80:01.0": {"", "pci0000:80", "root_port"},
		"0000:81:00.0": {"0000:80:01.0", "pci0000:80", ""},
	}
	if len(top.Devices) != len(want) {
		t.Errorf("%d devices, want %d", len(top.Devices), len(want))
	}
	var order []BDF
	for _, d := range top.Devices {
		order = append(order, d.BDF)
		w, ok := want[d.BDF]
		if !ok {
			t.Errorf("unexpected device %s", d.BDF)
			continue
		}
		if got := [3]string{string(d.Parent), d.HostBridge, d.Port}; got != w {
			t.Errorf("%s: parent, host bridge, port = %q, want %q", d.BDF, got, w)
		}
	}
	if !slices.IsSortedFunc(order, compareBDF) {
		t.Errorf("devices not in BDF order: %v", order)
	}
	var kids []BDF
	for _, d := range top.Children("", "0000:01:00.0") {
		kids = append(kids, d.BDF)
	}
	if want := []BDF{"0000:02:00.0", "0000:02:01.0", "0000:02:02.0"}; !slices.Equal(kids, want) {
		t.Errorf("Children of the switch = %v, want %v", kids, want)
	}
}

func TestReadPCIAttributes(t *testing.T) {
	top, _ := readFake(t)
	gpu := top.Device("0000:03:00.0")
	if gpu == nil {
		t.Fatal("no GPU at 0000:03:00.0")
	}
	wantBARs := []BAR{
		{Index: 0, Size: gpuBAR0},
		{Index: 1, Size: gpuBAR1, Mem64: true, Prefetchable: true},
		{Index: 3, Size: gpuBAR3, Mem64: true, Prefetchable: true},
	}
	if !reflect.DeepEqual(gpu.BARs, wantBARs) {
		t.Errorf("GPU BARs = %+v, want %+v", gpu.BARs, wantBARs)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"class", gpu.Class, ClassCode(0x030200)},
		{"class name", gpu.ClassName, "3D controller"},
		{"vendor", gpu.Vendor, VendorNVIDIA},
		{"vendor name", gpu.VendorName, "NVIDIA"},
		{"device", gpu.Device, PCIID(0x2330)},
		{"device name from pci.ids", gpu.DeviceName, "Fake GPU [Test 80GB]"},
		{"driver", gpu.Driver, "nvidia"},
		{"current speed", gpu.CurLinkSpeed, LinkSpeed(2.5)},
		{"max speed", gpu.MaxLinkSpeed, LinkSpeed(32)},
		{"max gen", gpu.MaxLinkSpeed.Gen(), 5},
		{"current width", gpu.CurLinkWidth, 16},
		{"max width", gpu.MaxLinkWidth, 16},
		{"numa", gpu.NUMANode, 0},
		{"iommu group", gpu.IOMMUGroup, 3},
		{"local cpus", gpu.LocalCPUList, "0-3,8-11"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("GPU %s = %v, want %v", c.name, c.got, c.want)
		}
	}
	ib := top.Device("0000:04:00.0")
	if ib.ClassName != "InfiniBand controller" || ib.VendorName != "Mellanox/NVIDIA" || !ib.IsNIC() {
		t.Errorf("InfiniBand NIC = %s by %s, IsNIC %v", ib.ClassName, ib.VendorName, ib.IsNIC())
	}
	if want := []string{"ibp4s0", "mlx5_0"}; !slices.Equal(ib.Interfaces, want) {
		t.Errorf("NIC interfaces = %q, want %q", ib.Interfaces, want)
	}
}

func TestReadUnknowns(t *testing.T) {
	top, _ := readFake(t)
	nvme := top.Device("0000:05:00.0")
	if nvme == nil {
		t.Fatal("no NVMe at 0000:05:00.0")
	}
	if nvme.NUMANode != Unknown || nvme.IOMMUGroup != Unknown {
		t.Errorf("NVMe NUMA %d, group %d, want both Unknown", nvme.NUMANode, nvme.IOMMUGroup)
	}
	if nvme.CurLinkSpeed != 0 || nvme.MaxLinkSpeed != 0 || nvme.CurLinkWidth != 0 || nvme.MaxLinkWidth != 0 {
		t.Errorf("NVMe link = %v x%d / %v x%d, want all unknown", nvme.CurLinkSpeed, nvme.CurLinkWidth, nvme.MaxLinkSpeed, nvme.MaxLinkWidth)
	}
	if len(nvme.BARs) != 0 || nvme.Driver != "" || nvme.ClassName != "NVMe controller" || nvme.VendorName != "Samsung" {
		t.Errorf("NVMe = %+v", nvme)
	}
	host := top.Device("0000:00:00.0")
	if host.ClassName != "host bridge" || host.Port != "" || host.IsBridge() {
		t.Errorf("host bridge function = %+v", host)
	}
}

func TestReadGPUs(t *testing.T) {
	top, _ := readFake(t)
	want := []GPU{
		{Index: 0, BDF: "0000:03:00.0", Name: "NVIDIA Fake GPU [Test 80GB]", NUMANode: 0, CPUList: "0-3,8-11", BAR1: gpuBAR1, Source: "sysfs"},
		{Index: 1, BDF: "0000:81:00.0", Name: "NVIDIA Fake GPU [Test 80GB]", NUMANode: 1, CPUList: "4-7,12-15", BAR1: gpuBAR1, Source: "sysfs"},
	}
	if !reflect.DeepEqual(top.GPUs, want) {
		t.Errorf("GPUs = %+v\nwant %+v", top.GPUs, want)
	}
	if top.NVML {
		t.Error("NVML = true without a GPUInfo")
	}
}

func TestRelation(t *testing.T) {
	top, _ := readFake(t)
	for _, c := range []struct {
		name string
		a, b BDF
		want Relation
	}{
		{"self", "0000:03:00.0", "0000:03:00.0", RelSelf},
		{"one switch", "0000:03:00.0", "0000:04:00.0", RelPIX},
		{"one switch, reversed", "0000:04:00.0", "0000:03:00.0", RelPIX},
		{"nested switches", "0000:03:00.0", "0000:09:00.0", RelPXB},
		{"nested switches from the InfiniBand NIC", "0000:04:00.0", "0000:09:00.0", RelPXB},
		{"root ports of one host bridge", "0000:03:00.0", "0000:06:00.0", RelPHB},
		{"host bridges of one node", "0000:03:00.0", "0000:41:00.0", RelNODE},
		{"across sockets", "0000:03:00.0", "0000:81:00.0", RelSYS},
		{"NIC across sockets", "0000:81:00.0", "0000:41:00.0", RelSYS},
		{"device and its own downstream port", "0000:03:00.0", "0000:02:00.0", RelPIX},
		{"not a device", "0000:03:00.0", "0000:ff:00.0", RelNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := top.Relation(c.a, c.b); got != c.want {
				t.Errorf("Relation(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
			}
		})
	}
}

func TestMatrix(t *testing.T) {
	top, _ := readFake(t)
	want := []struct {
		label string
		bdf   BDF
		name  string
		numa  int
		cpus  string
		links string
	}{
		{"GPU0", "0000:03:00.0", "NVIDIA Fake GPU [Test 80GB]", 0, "0-3,8-11", "X SYS PIX PHB PXB NODE"},
		{"GPU1", "0000:81:00.0", "NVIDIA Fake GPU [Test 80GB]", 1, "4-7,12-15", "SYS X SYS SYS SYS SYS"},
		{"NIC0", "0000:04:00.0", "ibp4s0,mlx5_0", 0, "0-3,8-11", "PIX SYS X PHB PXB NODE"},
		{"NIC1", "0000:06:00.0", "eth0", 0, "0-3,8-11", "PHB SYS PHB X PHB NODE"},
		{"NIC2", "0000:09:00.0", "eth1", 0, "0-3,8-11", "PXB SYS PXB PHB X NODE"},
		{"NIC3", "0000:41:00.0", "eth2", 0, "0-3,8-11", "NODE SYS NODE NODE NODE X"},
	}
	if len(top.Matrix) != len(want) {
		t.Fatalf("matrix has %d rows, want %d: %+v", len(top.Matrix), len(want), top.Matrix)
	}
	for i, w := range want {
		r := top.Matrix[i]
		var links []string
		for _, l := range r.Links {
			links = append(links, string(l))
		}
		got := strings.Join(links, " ")
		if r.Label != w.label || r.BDF != w.bdf || r.Name != w.name || r.NUMANode != w.numa || r.CPUList != w.cpus || got != w.links {
			t.Errorf("row %d = %s %s %q numa %d cpus %s [%s]\nwant %s %s %q numa %d cpus %s [%s]",
				i, r.Label, r.BDF, r.Name, r.NUMANode, r.CPUList, got, w.label, w.bdf, w.name, w.numa, w.cpus, w.links)
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	top, _ := readFake(t)
	b, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	var back Topology
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("decode: %v\n%s", err, b)
	}
	if !reflect.DeepEqual(&back, top) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", &back, top)
	}
	// Field names and value forms that readers of the JSON rely on.
	for _, s := range []string{`"numa_nodes":[{"id":0,"cpulist":"0-3,8-11","cpus":8,`, `"numa_balancing":1`,
		`"default_domain":"DMA-FQ"`, `"bdf":"0000:03:00.0","parent":"0000:02:00.0","host_bridge":"pci0000:00"`,
		`"class":"0x030200"`, `"vendor":"0x10de"`, `"cur_link_speed":2.5`, `"max_link_width":16`,
		`"bar1_total":137438953472`, `"links":["X","SYS","PIX","PHB","PXB","NODE"]`, `"iommu_group":-1`,
		`"mode":"mixed"`, `"cmdline_mode":"passthrough"`, `{"id":3,"type":"DMA-FQ","meaning":"translated, lazy invalidation (flush queue)","devices":["0000:03:00.0"]}`,
		`{"name":"dmar0","kind":"vtd","version":"1:0","cap":"d2008c40660462","ecap":"f050da","devices":1}`} {
		if !bytes.Contains(b, []byte(s)) {
			t.Errorf("JSON lacks %s", s)
		}
	}
}

// TestFormat compares Format's output on the fake machine with
// testdata/two_socket.golden; go test -update rewrites it.
func TestFormat(t *testing.T) {
	top, f := readFake(t)
	var buf bytes.Buffer
	if err := Format(&buf, top); err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(buf.String(), f.root, "ROOT")
	golden := filepath.Join("testdata", "two_socket.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Format differs from %s (go test -update rewrites it):\n%s", golden, got)
	}
}

// fakeNVML answers as the NVML binding will.
type fakeNVML map[string]GPUDetails

func (f fakeNVML) GPU(busID string) (GPUDetails, bool) {
	d, ok := f[busID]
	return d, ok
}

func (f fakeNVML) NVLinks(a, b string) int {
	if _, ok := f[a]; ok {
		if _, ok := f[b]; ok {
			return 18
		}
	}
	return 0
}

func TestGPUInfo(t *testing.T) {
	f := twoSocket(t)
	top, err := ReadWith(f.root, Options{GPUInfo: fakeNVML{
		"0000:03:00.0": {Name: "NVIDIA H100 80GB HBM3", BAR1Total: 128 << 30, BAR1Used: 5 << 20},
		"0000:81:00.0": {Name: "NVIDIA H100 80GB HBM3", BAR1Total: 128 << 30, BAR1Used: 3 << 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !top.NVML {
		t.Error("NVML = false with a GPUInfo that answered")
	}
	g := top.GPUs[0]
	if g.Name != "NVIDIA H100 80GB HBM3" || g.BAR1Used != 5<<20 || g.Source != "nvml" {
		t.Errorf("GPU0 = %+v", g)
	}
	if got := top.Relation("0000:03:00.0", "0000:81:00.0"); got != "NV18" {
		t.Errorf("GPU0-GPU1 = %s, want NV18", got)
	}
	if got := top.Matrix[1].Links[0]; got != "NV18" {
		t.Errorf("matrix GPU1-GPU0 = %s, want NV18", got)
	}
	if got := top.Relation("0000:03:00.0", "0000:04:00.0"); got != RelPIX {
		t.Errorf("GPU0-NIC0 = %s, want PIX (NVLinks join GPUs only)", got)
	}
}

func TestReadEmptyRoot(t *testing.T) {
	top, err := Read(t.TempDir())
	if err != nil {
		t.Fatalf("Read of an empty root: %v", err)
	}
	if len(top.Nodes) != 0 || len(top.Devices) != 0 || len(top.GPUs) != 0 || len(top.Matrix) != 0 {
		t.Errorf("empty root gave %+v", top)
	}
	if top.NUMABalancing != Unknown || top.IOMMU.Known || top.IOMMU.Present {
		t.Errorf("numa_balancing %d, IOMMU %+v: want unknown", top.NUMABalancing, top.IOMMU)
	}
	if len(top.Warnings) != 1 || !strings.Contains(top.Warnings[0], "no sys directory") {
		t.Errorf("Warnings = %q", top.Warnings)
	}
	var buf bytes.Buffer
	if err := Format(&buf, top); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"NVML not available", "no NUMA information", "IOMMU: unknown", "no PCI devices", "GPUs: none", "no GPUs or NICs"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("Format of an empty root lacks %q:\n%s", s, buf.String())
		}
	}
}

func TestReadUnreadableRoot(t *testing.T) {
	_, err := Read(filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing root: %v, want ErrNotExist", err)
	}
}

func TestReadBadContent(t *testing.T) {
	f := newFakeTree(t)
	f.file("sys/devices/system/node/node0/cpulist", "0-x\n")
	f.file("sys/devices/system/node/node0/distance", "10 twenty\n")
	f.file("proc/sys/kernel/numa_balancing", "yes\n")
	f.pci("pci0000:00/0000:00:01.0", fakeDev{class: "0xzz", vendor: "0x10de", device: "0x2330", group: -1,
		curSpeed: "fast", resource: "0x1000 0x0fff 0x200\n"})
	top, err := Read(f.root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`sys/devices/system/node/node0/cpulist: cpulist "0-x": bad range "0-x"`,
		`sys/devices/system/node/node0/distance: not a number: "twenty"`,
		`proc/sys/kernel/numa_balancing: strconv.Atoi: parsing "yes": invalid syntax`,
		`sys/devices/pci0000:00/0000:00:01.0/class: PCI class "0xzz": strconv.ParseUint: parsing "zz": invalid syntax`,
		`sys/devices/pci0000:00/0000:00:01.0/current_link_speed: link speed "fast": want "N GT/s"`,
		`sys/devices/pci0000:00/0000:00:01.0/resource: resource line 0: bad range 0x1000-0xfff`,
	}
	if !slices.Equal(top.Warnings, want) {
		t.Errorf("Warnings =\n%s\nwant\n%s", strings.Join(top.Warnings, "\n"), strings.Join(want, "\n"))
	}
	if top.NUMABalancing != Unknown || top.Devices[0].CurLinkSpeed != 0 {
		t.Errorf("bad values kept: numa_balancing %d, link %v", top.NUMABalancing, top.Devices[0].CurLinkSpeed)
	}
}

// A /sys copied with absolute links (cp -rP of a tree made by hand)
// still resolves inside the root.
func TestReadAbsoluteBusLinks(t *testing.T) {
	f := newFakeTree(t)
	f.file("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/class", "0x020000\n")
	f.file("sys/devices/pci0000:00/0000:00:01.0/class", "0x060400\n")
	f.dir("sys/bus/pci/devices")
	for _, p := range []string{"pci0000:00/0000:00:01.0", "pci0000:00/0000:00:01.0/0000:01:00.0"} {
		if err := os.Symlink("/sys/devices/"+p, filepath.Join(f.root, "sys/bus/pci/devices", filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	top, err := Read(f.root)
	if err != nil {
		t.Fatal(err)
	}
	nic := top.Device("0000:01:00.0")
	if nic == nil || nic.Parent != "0000:00:01.0" || nic.HostBridge != "pci0000:00" || !nic.IsNIC() {
		t.Errorf("NIC = %+v", nic)
	}
}

// TestReadThisMachine reads the real machine: whatever it has, Read and
// Format must not fail.
func TestReadThisMachine(t *testing.T) {
	if _, err := os.Stat("/sys/devices"); err != nil {
		t.Skipf("no /sys here: %v", err)
	}
	top, err := Read("/")
	if err != nil {
		t.Fatalf("Read(/): %v", err)
	}
	if err := Format(&bytes.Buffer{}, top); err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(top); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d NUMA nodes, %d PCI devices, %d GPUs, %d warnings %q", len(top.Nodes), len(top.Devices), len(top.GPUs), len(top.Warnings), top.Warnings)
}

// TestNVIDIABAR1 finds BAR1 whether BAR0 is a 32-bit BAR (BAR1 at
// resource index 1) or a 64-bit one (index 2, as on the lent H200).
func TestNVIDIABAR1(t *testing.T) {
	cases := []struct {
		name string
		bars []BAR
		want Bytes
	}{
		{"32-bit BAR0", []BAR{{Index: 0, Size: 16 << 20}, {Index: 1, Size: 256 << 30, Mem64: true}, {Index: 3, Size: 32 << 20, Mem64: true}}, 256 << 30},
		{"64-bit BAR0 (H200)", []BAR{{Index: 0, Size: 16 << 20, Mem64: true}, {Index: 2, Size: 256 << 30, Mem64: true}, {Index: 4, Size: 32 << 20, Mem64: true}}, 256 << 30},
		{"I/O BAR skipped", []BAR{{Index: 0, Size: 16 << 20}, {Index: 1, Size: 128, IO: true}, {Index: 2, Size: 8 << 30}}, 8 << 30},
		{"expansion ROM is not a BAR", []BAR{{Index: 0, Size: 16 << 20}, {Index: 6, Size: 512 << 10}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, ok := nvidiaBAR1(&PCIDevice{BARs: c.bars})
			if got := b.Size; got != c.want || ok != (c.want != 0) {
				t.Errorf("BAR1 = %v (found %v), want %v", got, ok, c.want)
			}
		})
	}
}

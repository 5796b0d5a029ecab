package topo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTree builds a sysfs/procfs tree in a temporary directory, with the
// relative symlinks the kernel makes.
type fakeTree struct {
	t    *testing.T
	root string
}

func newFakeTree(t *testing.T) *fakeTree {
	t.Helper()
	return &fakeTree{t: t, root: t.TempDir()}
}

// file writes content at rel (slash-separated, under the root).
func (f *fakeTree) file(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeTree) dir(rel string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Join(f.root, filepath.FromSlash(rel)), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

// symlink makes rel a link to target (both under the root), written
// relative as sysfs writes it ("../../../devices/pci0000:00/...").
func (f *fakeTree) symlink(rel, target string) {
	f.t.Helper()
	p := filepath.Join(f.root, filepath.FromSlash(rel))
	f.dir(filepath.ToSlash(filepath.Dir(filepath.FromSlash(rel))))
	to, err := filepath.Rel(filepath.Dir(p), filepath.Join(f.root, filepath.FromSlash(target)))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink(to, p); err != nil {
		f.t.Fatal(err)
	}
}

// fakeDev is one PCI function's attribute files; empty strings and
// negative numbers leave their files out.
type fakeDev struct {
	class, vendor, device string
	numa                  string
	curSpeed, maxSpeed    string
	curWidth, maxWidth    string
	localCPUs             string
	group                 int
	driver                string
	ifaces                []string // "net/eth0", "infiniband/mlx5_0"
	resource              string
}

// pci adds a device at path under sys/devices ("pci0000:00/0000:00:01.0")
// with its sys/bus/pci/devices link.
func (f *fakeTree) pci(path string, d fakeDev) {
	f.t.Helper()
	dev := "sys/devices/" + path
	bdf := path[strings.LastIndexByte(path, '/')+1:]
	f.symlink("sys/bus/pci/devices/"+bdf, dev)
	for name, v := range map[string]string{
		"class": d.class, "vendor": d.vendor, "device": d.device, "numa_node": d.numa,
		"current_link_speed": d.curSpeed, "max_link_speed": d.maxSpeed,
		"current_link_width": d.curWidth, "max_link_width": d.maxWidth,
		"local_cpulist": d.localCPUs, "resource": d.resource,
	} {
		if v != "" {
			f.file(dev+"/"+name, v+"\n")
		}
	}
	if d.group >= 0 {
		g := fmt.Sprintf("sys/kernel/iommu_groups/%d", d.group)
		f.symlink(g+"/devices/"+bdf, dev)
		f.symlink(dev+"/iommu_group", g)
	}
	if d.driver != "" {
		f.dir("sys/bus/pci/drivers/" + d.driver)
		f.symlink(dev+"/driver", "sys/bus/pci/drivers/"+d.driver)
	}
	for _, i := range d.ifaces {
		f.dir(dev + "/" + i)
	}
}

// resource writes a resource file with the given BARs (index to size and
// flags) at made-up addresses, and the ROM and bridge lines all zero.
func resource(bars map[int][2]uint64) string {
	var sb strings.Builder
	addr := uint64(0x380000000000)
	for i := range 13 {
		b, ok := bars[i]
		if !ok {
			sb.WriteString("0x0000000000000000 0x0000000000000000 0x0000000000000000\n")
			continue
		}
		fmt.Fprintf(&sb, "0x%016x 0x%016x 0x%016x\n", addr, addr+b[0]-1, b[1])
		addr += b[0]
	}
	return sb.String()
}

// Resource flags as the kernel writes them for typical BARs.
const (
	flagMem32     = 0x00040200
	flagMem64Pref = 0x0014220c
	flagIO        = 0x00040101
)

// Sizes of the fake GPU's BARs.
const (
	gpuBAR0 = 16 << 20
	gpuBAR1 = 128 << 30
	gpuBAR3 = 32 << 20
)

// twoSocket builds a fake two-socket machine:
//
//	pci0000:00 (node 0)
//	  00:00.0 host bridge
//	  00:01.0 root port
//	    01:00.0 switch upstream
//	      02:00.0 downstream -> 03:00.0 GPU0
//	      02:01.0 downstream -> 04:00.0 InfiniBand NIC (PIX to GPU0)
//	      02:02.0 downstream -> 07:00.0 upstream -> 08:00.0 downstream -> 09:00.0 NIC (PXB)
//	  00:02.0 root port -> 05:00.0 NVMe, with most files missing
//	  00:03.0 root port -> 06:00.0 NIC (PHB to GPU0)
//	pci0000:40 (node 0): 40:01.0 root port -> 41:00.0 NIC (NODE to GPU0)
//	pci0000:80 (node 1): 80:01.0 root port -> 81:00.0 GPU1 (SYS to GPU0)
func twoSocket(t *testing.T) *fakeTree {
	f := newFakeTree(t)
	f.file("sys/devices/system/node/node0/cpulist", "0-3,8-11\n")
	f.file("sys/devices/system/node/node1/cpulist", "4-7,12-15\n")
	f.file("sys/devices/system/node/node0/meminfo", "Node 0 MemTotal:       16777216 kB\nNode 0 MemFree:         8388608 kB\nNode 0 MemUsed:         8388608 kB\n")
	f.file("sys/devices/system/node/node1/meminfo", "Node 1 MemTotal:       16777216 kB\nNode 1 MemFree:        16252928 kB\n")
	f.file("sys/devices/system/node/node0/distance", "10 21\n")
	f.file("sys/devices/system/node/node1/distance", "21 10\n")
	f.file("sys/devices/system/node/online", "0-1\n")
	f.file("proc/sys/kernel/numa_balancing", "1\n")
	f.file("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt quiet -- iommu=off\n")
	f.file("proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
	for _, u := range []string{"dmar0", "dmar1"} {
		f.file("sys/class/iommu/"+u+"/intel-iommu/version", "1:0\n")
		f.file("sys/class/iommu/"+u+"/intel-iommu/cap", "d2008c40660462\n")
		f.file("sys/class/iommu/"+u+"/intel-iommu/ecap", "f050da\n")
		f.dir("sys/class/iommu/" + u + "/devices")
	}
	f.symlink("sys/class/iommu/dmar0/devices/0000:03:00.0", "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0")
	f.file("usr/share/misc/pci.ids", "# test database\n10de  NVIDIA Corporation\n\t2330  Fake GPU [Test 80GB]\n\t\t10de 16c1  subsystem, ignored\n15b3  Mellanox Technologies\n\t1021  Fake NIC\nC 02  Network controller\n\t00  Ethernet controller\n")

	gpu := fakeDev{class: "0x030200", vendor: "0x10de", device: "0x2330", driver: "nvidia",
		curSpeed: "2.5 GT/s PCIe", maxSpeed: "32.0 GT/s PCIe", curWidth: "16", maxWidth: "16",
		resource: resource(map[int][2]uint64{0: {gpuBAR0, flagMem32}, 1: {gpuBAR1, flagMem64Pref}, 3: {gpuBAR3, flagMem64Pref}})}
	bridge := func(numa string, group int) fakeDev {
		return fakeDev{class: "0x060400", vendor: "0x8086", device: "0x347a", numa: numa, group: group,
			curSpeed: "16.0 GT/s PCIe", maxSpeed: "16.0 GT/s PCIe", curWidth: "16", maxWidth: "16", driver: "pcieport"}
	}
	sw := func(group int) fakeDev {
		d := bridge("0", group)
		d.vendor, d.device = "0x10b5", "0xc030"
		return d
	}
	nic := func(vendor, device, numa string, group int, iface string) fakeDev {
		return fakeDev{class: "0x020000", vendor: vendor, device: device, numa: numa, group: group,
			curSpeed: "16.0 GT/s PCIe", maxSpeed: "16.0 GT/s PCIe", curWidth: "8", maxWidth: "16",
			driver: "ice", ifaces: []string{"net/" + iface},
			resource: resource(map[int][2]uint64{0: {32 << 20, flagMem64Pref}, 3: {64 << 10, flagMem64Pref}})}
	}

	const s = "pci0000:00/0000:00:01.0/0000:01:00.0"
	f.pci("pci0000:00/0000:00:00.0", fakeDev{class: "0x060000", vendor: "0x8086", device: "0x09a2", numa: "0", group: 0})
	f.pci("pci0000:00/0000:00:01.0", bridge("0", 1))
	f.pci(s, sw(2))
	f.pci(s+"/0000:02:00.0", sw(2))
	f.pci(s+"/0000:02:01.0", sw(2))
	f.pci(s+"/0000:02:02.0", sw(2))
	g0 := gpu
	g0.numa, g0.group, g0.localCPUs = "0", 3, "0-3,8-11"
	f.pci(s+"/0000:02:00.0/0000:03:00.0", g0)
	ib := fakeDev{class: "0x020700", vendor: "0x15b3", device: "0x1021", numa: "0", group: 4, driver: "mlx5_core",
		curSpeed: "32.0 GT/s PCIe", maxSpeed: "32.0 GT/s PCIe", curWidth: "16", maxWidth: "16",
		ifaces:   []string{"infiniband/mlx5_0", "net/ibp4s0"},
		resource: resource(map[int][2]uint64{0: {32 << 20, flagMem64Pref}})}
	f.pci(s+"/0000:02:01.0/0000:04:00.0", ib)
	f.pci(s+"/0000:02:02.0/0000:07:00.0", sw(2))
	f.pci(s+"/0000:02:02.0/0000:07:00.0/0000:08:00.0", sw(2))
	f.pci(s+"/0000:02:02.0/0000:07:00.0/0000:08:00.0/0000:09:00.0", nic("0x8086", "0x1593", "0", 5, "eth1"))
	f.pci("pci0000:00/0000:00:02.0", bridge("0", 1))
	// An NVMe drive under a virtual-machine-like port: no link, NUMA,
	// IOMMU group or resource files.
	f.pci("pci0000:00/0000:00:02.0/0000:05:00.0", fakeDev{class: "0x010802", vendor: "0x144d", device: "0xa80a", group: -1, ifaces: []string{"nvme/nvme0"}})
	f.pci("pci0000:00/0000:00:03.0", bridge("0", 1))
	f.pci("pci0000:00/0000:00:03.0/0000:06:00.0", nic("0x8086", "0x1592", "0", 6, "eth0"))
	f.pci("pci0000:40/0000:40:01.0", bridge("0", 7))
	f.pci("pci0000:40/0000:40:01.0/0000:41:00.0", nic("0x14e4", "0x16d7", "0", 8, "eth2"))
	f.pci("pci0000:80/0000:80:01.0", bridge("1", 9))
	g1 := gpu
	g1.numa, g1.group = "1", 10
	f.pci("pci0000:80/0000:80:01.0/0000:81:00.0", g1)

	for g := range 11 {
		typ := "DMA-FQ"
		if g == 8 {
			typ = "identity"
		}
		f.file(fmt.Sprintf("sys/kernel/iommu_groups/%d/type", g), typ+"\n")
	}
	return f
}

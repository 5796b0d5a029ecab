package topo

import (
	"fmt"
	"strconv"
	"strings"
)

// Unknown is the value of an integer field whose sysfs file is missing or
// says there is no answer, as the kernel's own numa_node = -1 does.
const Unknown = -1

// Topology is one machine as sysfs and procfs describe it. Slices are in
// a fixed order (nodes by ID, devices by BDF) so two reads of the same
// tree compare equal and print identically. The JSON field names are
// stable; they are listed on each field. Lists and maps read from a tree
// are empty rather than null in JSON, except Node.Distance, which is null
// when unknown.
type Topology struct {
	// Root is the directory the tree was read from ("/" for this machine).
	Root string `json:"root"`
	// NVML reports whether a GPUInfo answered for at least one GPU.
	NVML bool `json:"nvml"`

	// Nodes are the online NUMA nodes by ID; empty when the kernel shows
	// none (no CONFIG_NUMA, or no sysfs).
	Nodes []Node `json:"numa_nodes"`
	// NUMABalancing is /proc/sys/kernel/numa_balancing: 0 off, 1
	// NUMA_BALANCING_NORMAL (automatic page migration), 2 memory tiering,
	// 3 both; Unknown when absent.
	NUMABalancing int `json:"numa_balancing"`

	IOMMU IOMMU `json:"iommu"`

	// HostBridges are the PCI host bridges (root complexes) by name, as
	// sysfs names their directories ("pci0000:00").
	HostBridges []string `json:"host_bridges"`
	// Devices are all PCI functions, sorted by BDF; Parent links make the
	// tree.
	Devices []PCIDevice `json:"pci_devices"`

	// GPUs are the NVIDIA display and 3D controllers, in BDF order (the
	// order of nvidia-smi, and of CUDA with CUDA_DEVICE_ORDER=PCI_BUS_ID).
	GPUs []GPU `json:"gpus"`
	// NVLinks are the GPU pairs that GPUInfo reported NVLinks between.
	NVLinks []NVLink `json:"nvlinks"`
	// Matrix relates every GPU and NIC to every other, as
	// "nvidia-smi topo -m" does: GPUs first, then NICs, each in BDF order.
	Matrix []MatrixRow `json:"matrix"`

	// Warnings name files that were present but could not be parsed.
	Warnings []string `json:"warnings"`
}

// Node is one NUMA node: /sys/devices/system/node/nodeN.
type Node struct {
	ID int `json:"id"`
	// CPUList is the node's CPUs in the kernel's cpulist form ("0-47,96-143");
	// empty for a memory-only node (CXL, HBM).
	CPUList string `json:"cpulist"`
	// CPUs is how many CPUs CPUList names.
	CPUs int `json:"cpus"`
	// MemTotal and MemFree are from the node's meminfo; zero when unknown.
	MemTotal Bytes `json:"mem_total"`
	MemFree  Bytes `json:"mem_free"`
	// Distance is the node's row of the ACPI SLIT, one entry per node of
	// Topology.Nodes in the same order (10 = local); nil when unknown.
	Distance []int `json:"distance"`
}

// BDF is a PCI function's address, domain:bus:device.function, exactly as
// sysfs names it ("0000:17:00.0"). NVML's bus IDs have an 8-digit domain
// ("00000000:17:00.0"); convert with NVMLBusID.
type BDF string

// NVMLBusID returns the bus ID in NVML's form, with an 8-digit domain.
func (b BDF) NVMLBusID() string {
	dom, rest, ok := strings.Cut(string(b), ":")
	if !ok || len(dom) >= 8 {
		return string(b)
	}
	return strings.Repeat("0", 8-len(dom)) + dom + ":" + rest
}

// PCIID is a vendor or device ID.
type PCIID uint16

// MarshalText writes the ID as sysfs does: "0x10de".
func (id PCIID) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "0x%04x", uint16(id)), nil }

// UnmarshalText reads "0x10de" (or "10de").
func (id *PCIID) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(strings.TrimPrefix(string(b), "0x"), 16, 16)
	if err != nil {
		return fmt.Errorf("PCI ID %q: %w", b, err)
	}
	*id = PCIID(v)
	return nil
}

// ClassCode is a PCI class code: base class, subclass and programming
// interface, 0xBBSSPP ("0x030200" is a 3D controller).
type ClassCode uint32

// Base returns the base class (0x03 for display controllers).
func (c ClassCode) Base() uint8 { return uint8(c >> 16) }

// Sub returns base class and subclass, 0xBBSS (0x0302).
func (c ClassCode) Sub() uint16 { return uint16(c >> 8) }

// MarshalText writes the class as sysfs does: "0x030200".
func (c ClassCode) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "0x%06x", uint32(c)), nil }

// UnmarshalText reads "0x030200" (or "030200").
func (c *ClassCode) UnmarshalText(b []byte) error {
	v, err := strconv.ParseUint(strings.TrimPrefix(string(b), "0x"), 16, 24)
	if err != nil {
		return fmt.Errorf("PCI class %q: %w", b, err)
	}
	*c = ClassCode(v)
	return nil
}

// Classes that the matrix and GPU list select on.
const (
	classDisplay   = 0x03   // base class: VGA, 3D and other display controllers
	classNetwork   = 0x02   // base class: Ethernet, InfiniBand, other NICs
	classPCIBridge = 0x0604 // subclass: PCI-to-PCI bridge (root and switch ports)
)

// Well-known vendor IDs.
const (
	VendorNVIDIA   PCIID = 0x10de
	VendorMellanox PCIID = 0x15b3
)

// PCIDevice is one PCI function: /sys/bus/pci/devices/BDF, a link into
// /sys/devices/pciDDDD:BB/... whose path is the device's place in the tree.
type PCIDevice struct {
	BDF BDF `json:"bdf"`
	// Parent is the bridge above the device; empty when the device sits
	// directly on its host bridge.
	Parent BDF `json:"parent"`
	// HostBridge is the root complex the device is under ("pci0000:00").
	HostBridge string `json:"host_bridge"`
	// Port says which PCIe port a bridge is, inferred from its place in
	// the tree: "root_port" (on the host bridge), "switch_upstream" (below
	// a root or downstream port), "switch_downstream" (below an upstream
	// port); empty for endpoints.
	Port string `json:"port"`

	Class      ClassCode `json:"class"`
	ClassName  string    `json:"class_name"`
	Vendor     PCIID     `json:"vendor"`
	VendorName string    `json:"vendor_name"`
	Device     PCIID     `json:"device"`
	// DeviceName comes from the PCI ID database (pci.ids) under the root;
	// empty without one. GPU.Name has the driver's name for a GPU.
	DeviceName string `json:"device_name"`
	// Driver is the bound driver ("nvidia", "mlx5_core", "vfio-pci").
	Driver string `json:"driver"`
	// Interfaces are the kernel objects the driver made: network
	// interfaces, InfiniBand devices, NVMe controllers ("mlx5_0", "eth0").
	Interfaces []string `json:"interfaces"`

	// Link speeds are in GT/s per lane and widths in lanes; zero when
	// unknown (no PCIe capability, a virtual device, or link down).
	CurLinkSpeed LinkSpeed `json:"cur_link_speed"`
	CurLinkWidth int       `json:"cur_link_width"`
	MaxLinkSpeed LinkSpeed `json:"max_link_speed"`
	MaxLinkWidth int       `json:"max_link_width"`

	// NUMANode is the device's node; Unknown when firmware gave none.
	NUMANode int `json:"numa_node"`
	// LocalCPUList is the CPUs near the device (local_cpulist).
	LocalCPUList string `json:"local_cpulist"`
	// IOMMUGroup is the device's group number; Unknown when it has none.
	IOMMUGroup int `json:"iommu_group"`

	// BARs are the implemented base address registers 0-5, by index. A
	// 64-bit BAR uses two registers and appears once, at the lower index.
	BARs []BAR `json:"bars"`
}

// IsBridge reports whether the device is a PCI-to-PCI bridge.
func (d *PCIDevice) IsBridge() bool { return d.Class.Sub() == classPCIBridge }

// IsGPU reports whether the device is an NVIDIA display or 3D controller.
func (d *PCIDevice) IsGPU() bool { return d.Class.Base() == classDisplay && d.Vendor == VendorNVIDIA }

// IsNIC reports whether the device is a network controller.
func (d *PCIDevice) IsNIC() bool { return d.Class.Base() == classNetwork }

// BAR returns the BAR with the given index, or false.
func (d *PCIDevice) BAR(index int) (BAR, bool) {
	for _, b := range d.BARs {
		if b.Index == index {
			return b, true
		}
	}
	return BAR{}, false
}

// BAR is one line of a device's sysfs "resource" file.
type BAR struct {
	Index int   `json:"index"`
	Size  Bytes `json:"size"`
	// IO is set for an I/O-port BAR; otherwise it is memory.
	IO bool `json:"io"`
	// Mem64 is set for a 64-bit memory BAR.
	Mem64 bool `json:"mem64"`
	// Prefetchable is set for a prefetchable memory BAR (a GPU's BAR1).
	Prefetchable bool `json:"prefetchable"`
}

// Kernel resource flags (include/linux/ioport.h) in the third column of
// the resource file.
const (
	ioresourceIO       = 0x00000100
	ioresourcePrefetch = 0x00002000
	ioresourceMem64    = 0x00100000
)

// LinkSpeed is a PCIe link's transfer rate per lane in GT/s (16 for Gen4).
type LinkSpeed float64

// Gen returns the PCIe generation the rate belongs to, or 0.
func (s LinkSpeed) Gen() int {
	switch s {
	case 2.5:
		return 1
	case 5:
		return 2
	case 8:
		return 3
	case 16:
		return 4
	case 32:
		return 5
	case 64:
		return 6
	}
	return 0
}

func (s LinkSpeed) String() string {
	if s == 0 {
		return "?"
	}
	return strconv.FormatFloat(float64(s), 'f', -1, 64) + "GT/s"
}

// GPU is an NVIDIA GPU found on the PCI bus.
type GPU struct {
	// Index is the GPU's place in BDF order ("GPU0").
	Index int `json:"index"`
	BDF   BDF `json:"bdf"`
	// Name is from GPUInfo, or from pci.ids, or "NVIDIA 0x2330".
	Name string `json:"name"`
	// NUMANode and CPUList are the GPU's affinity.
	NUMANode int    `json:"numa_node"`
	CPUList  string `json:"cpu_affinity"`
	// BAR1 is the aperture through which peers and the CPU reach GPU
	// memory: from GPUInfo, else the size of sysfs BAR1; zero when unknown.
	BAR1 Bytes `json:"bar1_total"`
	// BAR1Used is how much of BAR1 is mapped; meaningful only when
	// Source is "nvml".
	BAR1Used Bytes `json:"bar1_used"`
	// Source says where Name and BAR1 came from: "nvml" or "sysfs".
	Source string `json:"source"`
}

// NVLink is a number of NVLinks between two GPUs.
type NVLink struct {
	A     BDF `json:"a"`
	B     BDF `json:"b"`
	Links int `json:"links"`
	// NVSwitch: the links go from each GPU to NVSwitches both attach to,
	// not from one GPU to the other (an HGX baseboard): a GPU's links
	// then carry its traffic to every peer together.
	NVSwitch bool `json:"nvswitch,omitempty"`
}

// NVSwitchInfo is what a GPUInfo that knows where each NVLink ends
// also says: whether the links it counts between two GPUs go through
// NVSwitches.
type NVSwitchInfo interface {
	NVLinksSwitched(a, b string) bool
}

// GPUInfo is what a GPU driver (NVML) knows that sysfs does not. Bus IDs
// are in sysfs form ("0000:17:00.0"); BDF.NVMLBusID converts.
type GPUInfo interface {
	// GPU returns what the driver knows about the GPU, or ok = false.
	GPU(pciBusID string) (d GPUDetails, ok bool)
	// NVLinks returns how many active NVLinks join two GPUs; 0 for none.
	NVLinks(a, b string) int
}

// GPUDetails is GPUInfo's answer for one GPU.
type GPUDetails struct {
	Name      string
	BAR1Total Bytes
	BAR1Used  Bytes
}

// Options are Read's optional inputs.
type Options struct {
	// GPUInfo, when not nil, names GPUs and reports BAR1 and NVLinks.
	GPUInfo GPUInfo
}

// Relation is how two devices are connected, in the vocabulary of
// "nvidia-smi topo -m".
type Relation string

// Relations, from closest to farthest; NV# ("NV4") is a number of NVLinks
// and only GPUInfo can report it.
const (
	RelSelf Relation = "X"    // the device itself
	RelPIX  Relation = "PIX"  // at most one bridge, or one PCIe switch
	RelPXB  Relation = "PXB"  // several bridges, no host bridge
	RelPHB  Relation = "PHB"  // through a host bridge (root complex)
	RelNODE Relation = "NODE" // between host bridges of one NUMA node
	RelSYS  Relation = "SYS"  // across NUMA nodes (UPI, xGMI)
	RelNone Relation = "?"    // a device that is not in the topology
)

// MatrixRow is one GPU or NIC of the connection matrix.
type MatrixRow struct {
	// Label is "GPU0" or "NIC0".
	Label string `json:"label"`
	BDF   BDF    `json:"bdf"`
	// Name is the GPU's name or the NIC's interfaces ("mlx5_0").
	Name string `json:"name"`
	// NUMANode and CPUList are the device's NUMA and CPU affinity.
	NUMANode int    `json:"numa_affinity"`
	CPUList  string `json:"cpu_affinity"`
	// Links[i] is the relation to row i of the matrix.
	Links []Relation `json:"links"`
}

// Device returns the PCI device with the given address, or nil.
func (t *Topology) Device(b BDF) *PCIDevice {
	for i := range t.Devices {
		if t.Devices[i].BDF == b {
			return &t.Devices[i]
		}
	}
	return nil
}

// Children returns the devices directly below a bridge, or directly on a
// host bridge when b is empty and hostBridge is set, in BDF order.
func (t *Topology) Children(hostBridge string, b BDF) []*PCIDevice {
	var out []*PCIDevice
	for i := range t.Devices {
		d := &t.Devices[i]
		if d.Parent == b && (b != "" || d.HostBridge == hostBridge) {
			out = append(out, d)
		}
	}
	return out
}

// Node returns the NUMA node with the given ID, or nil.
func (t *Topology) Node(id int) *Node {
	for i := range t.Nodes {
		if t.Nodes[i].ID == id {
			return &t.Nodes[i]
		}
	}
	return nil
}

// Bytes is a size in bytes (memory, BAR apertures).
type Bytes uint64

// String writes the size in binary units, as lspci and numactl do:
// "16MiB", "1.5GiB" (one decimal at most).
func (b Bytes) String() string {
	const units = "KMGTPE"
	if b < 1024 {
		return strconv.FormatUint(uint64(b), 10) + "B"
	}
	v, i := float64(b)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + string(units[i]) + "iB"
}

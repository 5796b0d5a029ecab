package topo

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// vendorNames are short names for the vendors found in DMA-heavy
// machines; pci.ids, when the root has it, names the rest.
var vendorNames = map[PCIID]string{
	0x10de: "NVIDIA",
	0x15b3: "Mellanox/NVIDIA",
	0x8086: "Intel",
	0x1022: "AMD",
	0x1002: "AMD/ATI",
	0x1af4: "virtio",
	0x1b36: "Red Hat (QEMU)",
	0x1d0f: "Amazon",
	0x1000: "Broadcom/LSI",
	0x14e4: "Broadcom",
	0x10b5: "Broadcom/PLX",
	0x11f8: "Microchip/PMC-Sierra",
	0x144d: "Samsung",
	0x1344: "Micron",
	0x1c5c: "SK hynix",
	0x1e0f: "KIOXIA",
	0x15ad: "VMware",
	0x1414: "Microsoft",
	0x19e5: "Huawei",
	0x1924: "Solarflare/AMD",
	0x1077: "QLogic",
	0x8087: "Intel",
}

// subclassNames name classes by base class and subclass (0xBBSS).
var subclassNames = map[uint16]string{
	0x0100: "SCSI controller",
	0x0101: "IDE controller",
	0x0104: "RAID controller",
	0x0106: "SATA controller",
	0x0107: "SAS controller",
	0x0108: "NVMe controller",
	0x0180: "storage controller",
	0x0200: "Ethernet controller",
	0x0207: "InfiniBand controller",
	0x0280: "network controller",
	0x0300: "VGA controller",
	0x0302: "3D controller",
	0x0380: "display controller",
	0x0403: "audio device",
	0x0500: "RAM controller",
	0x0580: "memory controller",
	0x0600: "host bridge",
	0x0601: "ISA bridge",
	0x0604: "PCI bridge",
	0x0680: "bridge",
	0x0700: "serial controller",
	0x0800: "interrupt controller",
	0x0805: "SD host controller",
	0x0806: "IOMMU",
	0x0880: "system peripheral",
	0x0c03: "USB controller",
	0x0c05: "SMBus controller",
	0x1080: "encryption controller",
	0x1101: "performance counters",
	0x1180: "signal processing controller",
	0x1200: "processing accelerator",
	0x1300: "non-essential instrumentation",
}

// baseClassNames name classes whose subclass is not in subclassNames.
var baseClassNames = map[uint8]string{
	0x00: "unclassified device",
	0x01: "storage controller",
	0x02: "network controller",
	0x03: "display controller",
	0x04: "multimedia controller",
	0x05: "memory controller",
	0x06: "bridge",
	0x07: "communication controller",
	0x08: "system peripheral",
	0x09: "input device",
	0x0b: "processor",
	0x0c: "serial bus controller",
	0x0d: "wireless controller",
	0x10: "encryption controller",
	0x11: "signal processing controller",
	0x12: "processing accelerator",
	0x13: "non-essential instrumentation",
	0x40: "coprocessor",
	0xff: "unassigned class",
}

// ClassName names a class code ("3D controller").
func ClassName(c ClassCode) string {
	if n, ok := subclassNames[c.Sub()]; ok {
		return n
	}
	if n, ok := baseClassNames[c.Base()]; ok {
		return n
	}
	return "class " + strconv.FormatUint(uint64(c), 16)
}

// VendorName names a vendor ID, or returns "" when this package does not
// know it.
func VendorName(v PCIID) string { return vendorNames[v] }

// pciIDPaths are where distributions keep the PCI ID database, relative
// to the root; lspci reads the same files.
var pciIDPaths = []string{
	"usr/share/misc/pci.ids",
	"usr/share/hwdata/pci.ids",
	"var/lib/pciutils/pci.ids",
}

// pciNames are the names pci.ids gives the vendors and devices asked for.
type pciNames struct {
	vendors map[PCIID]string
	devices map[[2]PCIID]string
}

// parsePCIIDs reads a pci.ids database and keeps the names of the wanted
// vendor:device pairs and of their vendors. Vendor lines start at column
// 0 ("10de  NVIDIA Corporation"), device lines with one tab, subsystem
// lines with two; the class section ("C 03  Display controller") ends
// the vendor list. Lines that do not fit are skipped.
func parsePCIIDs(r io.Reader, want map[[2]PCIID]bool) pciNames {
	n := pciNames{vendors: map[PCIID]string{}, devices: map[[2]PCIID]string{}}
	wantVendor := map[PCIID]bool{}
	for k := range want {
		wantVendor[k[0]] = true
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	var vendor PCIID
	inVendor := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "C ") {
			break
		}
		if strings.HasPrefix(line, "\t\t") {
			continue
		}
		tab := line[0] == '\t'
		id, name, ok := parseIDLine(strings.TrimPrefix(line, "\t"))
		if !ok {
			continue
		}
		switch {
		case !tab:
			vendor, inVendor = id, wantVendor[id]
			if inVendor {
				n.vendors[id] = name
			}
		case inVendor && want[[2]PCIID{vendor, id}]:
			n.devices[[2]PCIID{vendor, id}] = name
		}
	}
	return n
}

// parseIDLine splits "10de  NVIDIA Corporation" into 0x10de and the name.
func parseIDLine(s string) (PCIID, string, bool) {
	if len(s) < 6 || s[4] != ' ' {
		return 0, "", false
	}
	v, err := strconv.ParseUint(s[:4], 16, 16)
	if err != nil {
		return 0, "", false
	}
	name := strings.TrimSpace(s[4:])
	if name == "" {
		return 0, "", false
	}
	return PCIID(v), name, true
}

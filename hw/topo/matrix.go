package topo

import (
	"fmt"
	"slices"
	"strings"
)

// Relation returns how devices a and b are connected, as
// "nvidia-smi topo -m" would say:
//
//   - NV# when the GPUs share # NVLinks (only with a GPUInfo);
//   - PIX when the path crosses at most one bridge on each side of the
//     nearest common bridge: one PCIe switch (upstream port and its
//     downstream ports), or one root port;
//   - PXB when it crosses more bridges but no host bridge (nested
//     switches);
//   - PHB when the devices share a host bridge but no bridge below it;
//   - NODE when they are under different host bridges of one NUMA node;
//   - SYS when they are on different NUMA nodes, or on a machine of
//     several nodes where either device's node is unknown.
//
// On a machine with one NUMA node or none, different host bridges are
// NODE whatever the devices' numa_node says.
func (t *Topology) Relation(a, b BDF) Relation {
	if a == b {
		return RelSelf
	}
	da, db := t.Device(a), t.Device(b)
	if da == nil || db == nil {
		return RelNone
	}
	for _, l := range t.NVLinks {
		if l.A == a && l.B == b || l.A == b && l.B == a {
			return Relation(fmt.Sprintf("NV%d", l.Links))
		}
	}
	if da.HostBridge != db.HostBridge || da.HostBridge == "" {
		if len(t.Nodes) <= 1 || da.NUMANode != Unknown && da.NUMANode == db.NUMANode {
			return RelNODE
		}
		return RelSYS
	}
	ca, cb := t.chain(da), t.chain(db)
	for i, x := range ca {
		j := slices.Index(cb, x)
		if j < 0 {
			continue
		}
		// ca[0] and cb[0] are the devices themselves, so i-1 and j-1
		// bridges lie strictly between each device and the common one.
		if i <= 2 && j <= 2 {
			return RelPIX
		}
		return RelPXB
	}
	return RelPHB
}

// chain returns the device and the bridges above it, nearest first.
func (t *Topology) chain(d *PCIDevice) []BDF {
	c := []BDF{d.BDF}
	for d.Parent != "" && len(c) <= 64 {
		p := t.Device(d.Parent)
		if p == nil {
			break
		}
		c = append(c, p.BDF)
		d = p
	}
	return c
}

// buildMatrix relates the GPUs and NICs to one another.
func (t *Topology) buildMatrix() []MatrixRow {
	rows := []MatrixRow{}
	for _, g := range t.GPUs {
		rows = append(rows, MatrixRow{
			Label:    fmt.Sprintf("GPU%d", g.Index),
			BDF:      g.BDF,
			Name:     g.Name,
			NUMANode: g.NUMANode,
			CPUList:  g.CPUList,
		})
	}
	nics := 0
	for i := range t.Devices {
		d := &t.Devices[i]
		if !d.IsNIC() {
			continue
		}
		name := strings.Join(d.Interfaces, ",")
		if name == "" {
			name = strings.TrimSpace(d.VendorName + " " + d.ClassName)
		}
		rows = append(rows, MatrixRow{
			Label:    fmt.Sprintf("NIC%d", nics),
			BDF:      d.BDF,
			Name:     name,
			NUMANode: d.NUMANode,
			CPUList:  t.cpuAffinity(d),
		})
		nics++
	}
	for i := range rows {
		rows[i].Links = make([]Relation, len(rows))
		for j := range rows {
			rows[i].Links[j] = t.Relation(rows[i].BDF, rows[j].BDF)
		}
	}
	return rows
}

// Package numactl writes the "numactl --hardware" (-H) view of a machine's
// NUMA nodes: how many nodes are available, each node's CPUs, memory size
// and free memory, and the SLIT distance table. It imports nothing of
// dmalab, so the real machine (hw/topo, from sysfs) and a model platform
// (package platform) print through the same code and look alike.
//
// The layout is that of numactl's hardware() and print_distances() in
// numactl.c (github.com/numactl/numactl): "available: N nodes (0-1)",
// "node I cpus: ...", "node I size: X MB", "node I free: Y MB" with sizes
// in MiB as numactl's fmt_mem shifts them, and the distance table with
// each cell printed "% 3d ". Trailing spaces are dropped.
//
// Parse reads numactl's placement options (--interleave, --preferred,
// --preferred-many, --weighted-interleave, --membind, --localalloc,
// --cpunodebind, --physcpubind, long and short) with node and CPU lists
// as libnuma's numa_parse_nodestring takes them ("0,2-3", "all", "+1",
// "!0", "same"), resolved against a Topology; a refused word is an
// *ArgError naming it. The front door turns the result into the policy
// and CPUs every process of a run inherits (dmalab --numactl).
package numactl

package gpu

import (
	"fmt"

	"github.com/dmalab/dmalab/fabric"
	"github.com/dmalab/dmalab/machine"
	"github.com/dmalab/dmalab/mem"
)

// Integrated GPUs (Tegra: Jetson TX2, Xavier, Orin; platform.GPU's
// Integrated). The iGPU has no VRAM, no BAR1 and no PCIe link: "device
// memory, host memory, and unified memory are allocated on the same
// physical SoC DRAM" (NVIDIA, CUDA for Tegra application note, Memory
// Management, Table 1: device memory is "not directly accessible" by the
// CPU and cached on the iGPU). So on an integrated GPU:
//
//   - Alloc (cuMemAlloc) takes 2 MiB-aligned pages of the GPU's node's
//     DRAM from the page allocator (mem.AllocPagesAligned, ZONE_NORMAL),
//     with the same chunking as VRAM (whole 2 MiB pages for large
//     allocations, 512 B steps in shared chunks for small ones), and maps
//     them in the GPU's window as device memory. Each chunk is physically
//     contiguous (the real driver maps scattered pages through the
//     SMMU; the model's allocation can fail on a fragmented node where
//     the real one would not).
//   - Kernels reach that memory over the GPU's port into the memory
//     controller (machine's "<gpu>.mc" link, the GPU's memory bandwidth
//     cap) and the node's DRAM bus, which they share with the CPUs and
//     every other agent: the route of host memory on the GPU's node
//     (LocalRoute). Copies between device and host memory are
//     DRAM-to-DRAM copies by the copy engine: read and write both cross
//     the DRAM bus (machine routes them so).
//   - MemGetInfo reports the node's DRAM as total and the node's free
//     pages (mem.NodeFree) as free: cuMemGetInfo's "free memory ...
//     according to the OS" (CUDA driver API), which on Tegra counts what
//     the CPU allocated too (pinned and pageable memory, managed memory)
//     and no swap (the application note's "Estimating Total Allocatable
//     Device Memory on an Integrated GPU Device"). The model has no
//     firmware carve-outs: total is all of the node's DRAM, where
//     deviceQuery on a real module reports a little less.
//   - There is no BAR1: the Aperture is empty and Map and Unmap are
//     ErrNotSupported.
//   - Peer access is ErrNotSupported ("CUDA Features Not Supported on
//     Tegra": peer-to-peer communication calls).
//   - Managed memory (AllocManaged) is "one allocation in shared DRAM"
//     (NVIDIA's "How does NVIDIA implement unified memory on PCIe GPUs
//     and Tegra platforms?"): its range is backed by pages of the GPU's
//     node from the start, so that the CPU and the kernels reach the
//     same bytes and mem follows their versions (managedBacking).

// deviceMemory is the memory g allocates from: its VRAM, or for an
// integrated GPU its node's DRAM.
func deviceMemory(m *machine.Machine, g *machine.GPU) (uint64, error) {
	if g.Spec.Integrated {
		_, size := m.Mem.NodeRange(g.Node)
		if size == 0 {
			return 0, fmt.Errorf("%s: integrated on node %d, which has no DRAM", g.Name, g.Node)
		}
		return size, nil
	}
	_, size, ok := m.Mem.DeviceRange(g.Name)
	if !ok {
		return 0, fmt.Errorf("%s has no device memory", g.Name)
	}
	return size, nil
}

// Integrated reports whether the GPU is integrated (Tegra): its device
// memory is its node's DRAM (cudaDeviceProp::integrated).
func (d *Device) Integrated() bool { return d.integrated }

// Coherent reports whether the GPU's accesses to host memory snoop the
// CPU caches: x86 PCIe, and Tegra from Xavier on (I/O coherence); not
// Tegra before Xavier.
func (d *Device) Coherent() bool { return d.coherent }

// allocBacking takes n bytes (whole 2 MiB pages) of device memory.
func (d *Device) allocBacking(n uint64) (mem.PhysAddr, error) {
	if d.integrated {
		return d.sys.m.Mem.AllocPagesAligned(d.GPU.Node, n, LargePageSize, mem.ZoneNormal)
	}
	return d.sys.m.Mem.AllocDevice(d.Name, n, LargePageSize)
}

// freeBacking returns what allocBacking gave.
func (d *Device) freeBacking(pa mem.PhysAddr, n uint64) error {
	if d.integrated {
		return d.sys.m.Mem.FreePages(pa, n)
	}
	return d.sys.m.Mem.FreeDevice(pa, n)
}

// integratedMemInfo is cuMemGetInfo on an integrated GPU: the node's
// free DRAM and all of it.
func (d *Device) integratedMemInfo() (free, total uint64) {
	lo, hi := d.sys.m.Mem.NodeFree(d.GPU.Node)
	return lo + hi, d.total
}

// noAperture is an integrated GPU's BAR1: none. It takes no physical
// address space.
func noAperture(d *Device, base uint64) *Aperture {
	return &Aperture{dev: d, none: true, base: mem.PhysAddr(base), end: base}
}

// LocalRoute is the path of the GPU's kernels' loads from (write false)
// or stores to its own memory, starting or ending at its SMs: the VRAM
// bus of a discrete GPU; for an integrated GPU the node's DRAM bus and
// the GPU's port into the memory controller, as for host memory.
func (d *Device) LocalRoute(write bool) (fabric.Route, error) {
	if !d.integrated {
		dir := fabric.BtoA
		if write {
			dir = fabric.AtoB
		}
		return fabric.Route{Hops: []fabric.Hop{{Link: d.GPU.VRAM, Dir: dir, Weight: 1}}}, nil
	}
	host, err := d.sys.m.HostMemory(d.GPU.Node)
	if err != nil {
		return fabric.Route{}, err
	}
	return d.routeFrom(host, write)
}

// routeFrom is the path of the GPU's kernels' accesses to memory at far:
// the machine's route between far and the GPU's memory without the hop
// of the GPU's own memory bus at the GPU's end (the SMs sit at the GPU's
// port). For an integrated GPU that hop is its node's DRAM bus, which
// the far end crosses already when the memory is host memory.
func (d *Device) routeFrom(far machine.Endpoint, write bool) (fabric.Route, error) {
	var r fabric.Route
	var err error
	// The SMs issue the loads and stores: requests of one L2 line
	// (machine.GPU.SMs), which cost more of a PCIe link than a copy
	// engine's full-size TLPs.
	if write {
		r, err = d.sys.m.DMARoute(d.GPU.Memory(), far, d.GPU.SMs())
	} else {
		r, err = d.sys.m.DMARoute(far, d.GPU.Memory(), d.GPU.SMs())
	}
	if err != nil {
		return fabric.Route{}, err
	}
	hops := r.Hops
	// Route puts the GPU's memory bus first (stores) or last (loads).
	switch {
	case write && len(hops) > 0 && hops[0].Link == d.GPU.VRAM:
		hops = hops[1:]
	case !write && len(hops) > 0 && hops[len(hops)-1].Link == d.GPU.VRAM:
		hops = hops[:len(hops)-1]
	}
	return fabric.Route{Hops: append([]fabric.Hop(nil), hops...)}, nil
}

// integratedGPU is the system's integrated GPU, nil if it has none.
// Managed memory lives in its node's DRAM.
func (s *System) integratedGPU() *Device {
	for _, d := range s.Devices {
		if d.integrated {
			return d
		}
	}
	return nil
}

// managedBacking allocates the DRAM behind n bytes (whole 2 MiB pages)
// of managed memory on a system with an integrated GPU: pages of its
// node, 2 MiB aligned. ok is false when the system has no integrated
// GPU (managed pages move, and package uvm knows where).
func (s *System) managedBacking(n uint64) (pa mem.PhysAddr, ok bool, err error) {
	d := s.integratedGPU()
	if d == nil {
		return 0, false, nil
	}
	pa, err = s.m.Mem.AllocPagesAligned(d.GPU.Node, n, LargePageSize, mem.ZoneNormal)
	return pa, true, err
}

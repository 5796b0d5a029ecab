package cuda

import (
	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
	"github.com/dmalab/dmalab/uvm"
)

// Integrated GPUs (Tegra). The façade follows NVIDIA's CUDA for Tegra
// application note (Memory Management, Table 1 "Characteristics of
// Different Memory Types in a Tegra System"; I/O Coherency; Porting
// Considerations) and NVIDIA's "How does NVIDIA implement unified memory
// on PCIe GPUs and Tegra platforms?":
//
//   - Device memory (MemAlloc) is pages of the SoC's DRAM (package gpu);
//     the CPU cannot touch it ("not directly accessible": CPUAccess is a
//     SIGSEGV, cpu-deref-device-pointer); copies to and from it are
//     DRAM-to-DRAM copies by the copy engine.
//   - Pinned memory (MemHostAlloc, MemAllocHost) is uncached on the CPU
//     "where compute capability is less than 7.2" (before Xavier: no I/O
//     coherence), cached from Xavier on (uvm.PinnedCacheability with the
//     platform's coherence): uncached memory is mem.Remap'ed Uncached, so
//     CPU loads cost the node's uncached rate. Stores gather (arm64
//     Normal Non-cacheable; the presets' uncached_rate source), so they
//     are charged the memcpy rate, as write-combined stores are.
//   - MemHostRegister "is supported only on I/O coherent platforms"
//     (CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED): before Xavier it is
//     CUDA_ERROR_NOT_SUPPORTED.
//   - Managed memory is one allocation in DRAM (package gpu backs it with
//     the node's pages), cached on the CPU and the iGPU, never migrated
//     (uvm's Tegra generation). uvm asks for CPU cache maintenance at
//     kernel launch (clean what the CPU wrote) and completion (invalidate
//     what the GPU wrote) through Env.CacheMaintenance; without I/O
//     coherence this environment does it in mem (mem.Clean and
//     mem.Invalidate over the pages written since, so the GPU reads the
//     CPU's latest bytes and the CPU the GPU's) and charges the CPU's
//     per-line cost of the node for uvm's byte count. With I/O coherence
//     (Xavier on) the GPU snoops the CPU caches and its writes invalidate
//     them, which "removes the need to perform CPU cache management
//     operations" (the note's I/O Coherency section): nothing is done
//     and nothing charged. The GPU's own cache maintenance, which "the
//     CUDA driver internally performs" in both cases, is not modelled
//     (the model has no GPU L2).
//   - The CPU may not touch managed memory while the GPU is active
//     (concurrentManagedAccess is 0): CPUAccess is a SIGSEGV, reported as
//     managed-access-rule. cuMemPrefetchAsync "is not supported ...
//     since the iGPU does not yet support unified memory with concurrent
//     access" (the note's "CUDA Features Not Supported on Tegra"; the
//     driver API requires CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS
//     of the stream's device): CUDA_ERROR_INVALID_DEVICE, the "invalid
//     device ordinal" programs on Jetson report.
//   - dma-buf export is CUDA_ERROR_NOT_SUPPORTED, peer access
//     CUDA_ERROR_NOT_SUPPORTED.
//
// Not modelled: cuStreamAttachMemAsync (the note's prefetch hint on
// Tegra), copies of managed memory (CUDA_ERROR_NOT_SUPPORTED, as on
// other GPUs without concurrent managed access), the GPU's own caches.

// tegraState is the managed memory written since the last cache
// maintenance of each kind, as ranges of DRAM rounded out to pages (uvm
// counts the same pages; the façade keeps where they are).
type tegraState struct {
	cpuDirty, gpuDirty []mem.PhysRange
}

// integrated reports whether GPU i is integrated.
func (d *Driver) integrated(i int) bool { return d.sys.Devices[i].Integrated() }

// pinnedUncached says whether pinned memory the driver allocates for GPU
// i is uncached on the CPU: on an integrated GPU without I/O coherence.
func (d *Driver) pinnedUncached(i int) bool {
	if !d.integrated(i) {
		return false
	}
	cpuCached, _ := uvm.PinnedCacheability(uvm.Tegra, d.coherent[i])
	return !cpuCached
}

// managedPhys is the DRAM behind [addr, addr+size) of managed memory on
// an integrated GPU, nil elsewhere.
func (d *Driver) managedPhys(addr mem.GPUAddr, size uint64) []mem.PhysRange {
	_, phys, err := d.sys.Resolve(addr, size)
	if err != nil {
		return nil
	}
	return phys
}

// markDirty records that the CPU (gpuSide false) or a GPU wrote
// managed memory backed by phys, for the next maintenance.
func (d *Driver) markDirty(phys []mem.PhysRange, gpuSide bool) {
	list := &d.tegra.cpuDirty
	if gpuSide {
		list = &d.tegra.gpuDirty
	}
	for _, r := range phys {
		s := uint64(r.Start) &^ (mem.PageSize - 1)
		e := (uint64(r.Start) + r.Size + mem.PageSize - 1) &^ (mem.PageSize - 1)
		if n := len(*list); n > 0 {
			last := &(*list)[n-1]
			if ls, le := uint64(last.Start), uint64(last.Start)+last.Size; s <= le && e >= ls {
				ns, ne := min(s, ls), max(e, le)
				*last = mem.PhysRange{Start: mem.PhysAddr(ns), Size: ne - ns}
				continue
			}
		}
		*list = append(*list, mem.PhysRange{Start: mem.PhysAddr(s), Size: e - s})
	}
}

// forgetDirty drops pending maintenance of memory being freed, which
// may belong to someone else by the time maintenance would run.
func (d *Driver) forgetDirty(phys []mem.PhysRange) {
	for _, list := range []*[]mem.PhysRange{&d.tegra.cpuDirty, &d.tegra.gpuDirty} {
		var keep []mem.PhysRange
		for _, r := range *list {
			keep = append(keep, cut(r, phys)...)
		}
		*list = keep
	}
}

// cut is r without the ranges of out.
func cut(r mem.PhysRange, out []mem.PhysRange) []mem.PhysRange {
	pieces := []mem.PhysRange{r}
	for _, o := range out {
		os, oe := uint64(o.Start), uint64(o.Start)+o.Size
		var next []mem.PhysRange
		for _, p := range pieces {
			ps, pe := uint64(p.Start), uint64(p.Start)+p.Size
			if oe <= ps || os >= pe {
				next = append(next, p)
				continue
			}
			if ps < os {
				next = append(next, mem.PhysRange{Start: p.Start, Size: os - ps})
			}
			if oe < pe {
				next = append(next, mem.PhysRange{Start: mem.PhysAddr(oe), Size: pe - oe})
			}
		}
		pieces = next
	}
	return pieces
}

// tegraMaintain is uvm's cache maintenance of bytes of managed memory on
// the integrated GPU: in mem over the pages written since the last one
// (no time: mem's per-line charge is replaced by uvm's count), then the
// node's per-line cost of the operation for bytes. An I/O-coherent GPU
// needs none.
func (d *Driver) tegraMaintain(p *sim.Proc, op uvm.CacheOp, bytes int64) {
	g := d.m.GPUs[0]
	list := &d.tegra.cpuDirty
	if op == uvm.CacheInvalidate {
		list = &d.tegra.gpuDirty
	}
	ranges := *list
	*list = nil
	if d.coherent[0] {
		return
	}
	m := d.m.Mem
	for _, r := range ranges {
		if op == uvm.CacheInvalidate {
			m.Invalidate(nil, r.Start, r.Size)
		} else {
			m.Clean(nil, r.Start, r.Size)
		}
	}
	n := d.m.Spec.Nodes[g.Node]
	line := int64(n.Cache.Line())
	lines := (bytes + line - 1) / line
	cost := n.Cache.WritebackCost.V
	if op == uvm.CacheInvalidate {
		cost = n.Cache.InvalidateCost.V
	}
	p.Sleep(sim.Time(lines) * cost)
}

package iommu

import (
	"fmt"
	"math/bits"
	"slices"
	"syscall"

	"github.com/dmalab/dmalab/mem"
)

// IOVADomain is struct iova_domain (drivers/iommu/iova.c): the IOVAs a
// DMA domain has handed out, in granules of 4 KiB. Allocation is
// top-down below a limit, each range aligned to its size rounded up to a
// power of two (alloc_iova with size_aligned); freed ranges of up to
// 128 KiB go to per-CPU caches first (the rcache) and are handed out
// again from there without touching the tree.
type IOVADomain struct {
	// startPFN is the lowest granule allocated: IOVA 0 is never handed
	// out (iommu_dma_init_domain's base_pfn is at least 1).
	startPFN uint64
	// ranges are the allocated ranges sorted by lo (the rbtree); cached
	// ranges stay in it, as in Linux.
	ranges []pfnRange
	// cpus[c][order] is CPU c's pair of magazines; depot[order] the full
	// magazines shared by every CPU.
	cpus  [][rcacheOrders]cpuRcache
	depot [rcacheOrders][][]uint64
	stats IOVAStats
}

// IOVAStats counts allocations.
type IOVAStats struct {
	// Allocs and Frees are calls; CacheHits the allocations the rcache
	// served; Ranges the ranges in the tree now.
	Allocs, Frees, CacheHits uint64
	Ranges                   int
}

type pfnRange struct{ lo, hi uint64 } // inclusive

type cpuRcache struct{ loaded, prev []uint64 }

// NewIOVADomain is init_iova_domain with a 4 KiB granule and start
// pfn 1, with a cache for each of cpus CPUs.
func NewIOVADomain(cpus int) *IOVADomain {
	return &IOVADomain{startPFN: 1, cpus: make([][rcacheOrders]cpuRcache, max(cpus, 1))}
}

// Stats are the allocator's counts.
func (v *IOVADomain) Stats() IOVAStats {
	s := v.stats
	s.Ranges = len(v.ranges)
	return s
}

// granules is the range's length in granules as iommu_dma_alloc_iova
// sizes it: rounded up to a power of two below the rcache's largest
// size, so that freed ranges fit the cache's buckets.
func granules(size uint64) uint64 {
	n := (size + Granule - 1) / Granule
	if n < 1<<(rcacheOrders-1) {
		n = 1 << bits.Len64(n-1)
	}
	return n
}

// order is order_base_2(n).
func order(n uint64) int { return bits.Len64(n - 1) }

// Alloc is alloc_iova_fast: size bytes of IOVA ending at or below limit
// (the last address usable, a DMA mask), for CPU cpu. A range the cache
// holds is reused; otherwise the highest free range that fits is taken.
// No room is ENOMEM.
func (v *IOVADomain) Alloc(cpu int, size uint64, limit mem.DMAAddr) (mem.DMAAddr, error) {
	if size == 0 {
		return 0, fmt.Errorf("alloc_iova(%#x, limit %v): %w", size, limit, syscall.EINVAL)
	}
	n := granules(size)
	limitPFN := uint64(limit) / Granule
	v.stats.Allocs++
	if o := order(n); o < rcacheOrders {
		if pfn, ok := v.rcacheGet(cpu, o, n, limitPFN); ok {
			v.stats.CacheHits++
			return mem.DMAAddr(pfn * Granule), nil
		}
	}
	pfn, ok := v.allocRange(n, limitPFN)
	if !ok {
		return 0, fmt.Errorf("alloc_iova(%#x, limit %v): %w", size, limit, syscall.ENOMEM)
	}
	return mem.DMAAddr(pfn * Granule), nil
}

// allocRange is __alloc_and_insert_iova_range: top-down, aligned to the
// size's power of two.
func (v *IOVADomain) allocRange(n, limitPFN uint64) (uint64, bool) {
	align := ^uint64(0) << bits.Len64(n-1)
	i, _ := slices.BinarySearchFunc(v.ranges, limitPFN+1, func(r pfnRange, x uint64) int {
		switch {
		case r.lo < x:
			return -1
		case r.lo > x:
			return 1
		}
		return 0
	})
	hi := limitPFN + 1 // exclusive
	for ; ; i-- {
		low := v.startPFN
		if i > 0 {
			low = v.ranges[i-1].hi + 1
		}
		if hi >= n+low {
			if c := (hi - n) & align; c >= low {
				v.ranges = slices.Insert(v.ranges, i, pfnRange{c, c + n - 1})
				return c, true
			}
		}
		if i == 0 {
			return 0, false
		}
		hi = min(hi, v.ranges[i-1].lo)
	}
}

// Free is free_iova_fast: the range at iova of size bytes (as given to
// Alloc) goes back, to CPU cpu's cache when it is small enough.
func (v *IOVADomain) Free(cpu int, iova mem.DMAAddr, size uint64) error {
	n := granules(size)
	pfn := uint64(iova) / Granule
	v.stats.Frees++
	if o := order(n); o < rcacheOrders && v.rcachePut(cpu, o, pfn) {
		return nil
	}
	return v.freeRange(pfn)
}

func (v *IOVADomain) freeRange(pfn uint64) error {
	i, ok := slices.BinarySearchFunc(v.ranges, pfn, func(r pfnRange, x uint64) int {
		switch {
		case r.lo < x:
			return -1
		case r.lo > x:
			return 1
		}
		return 0
	})
	if !ok {
		return fmt.Errorf("free_iova(%v): not allocated: %w", mem.DMAAddr(pfn*Granule), syscall.EINVAL)
	}
	v.ranges = slices.Delete(v.ranges, i, i+1)
	return nil
}

// rcacheGet is iova_rcache_get: the loaded magazine, else the previous
// one, else a full one from the depot; a range ending above the limit
// is not taken.
func (v *IOVADomain) rcacheGet(cpu, o int, n, limitPFN uint64) (uint64, bool) {
	c := &v.cpus[cpu%len(v.cpus)][o]
	if len(c.loaded) == 0 {
		switch {
		case len(c.prev) > 0:
			c.loaded, c.prev = c.prev, c.loaded
		case len(v.depot[o]) > 0:
			d := v.depot[o]
			c.loaded = d[len(d)-1]
			v.depot[o] = d[:len(d)-1]
		default:
			return 0, false
		}
	}
	for i := len(c.loaded) - 1; i >= 0; i-- {
		if pfn := c.loaded[i]; pfn+n-1 <= limitPFN {
			c.loaded = slices.Delete(c.loaded, i, i+1)
			return pfn, true
		}
	}
	return 0, false
}

// rcachePut is iova_rcache_insert: false when every magazine and the
// depot are full (then the range goes back to the tree, as
// iova_magazine_free_pfns does for a whole magazine).
func (v *IOVADomain) rcachePut(cpu, o int, pfn uint64) bool {
	c := &v.cpus[cpu%len(v.cpus)][o]
	if len(c.loaded) == magSize {
		switch {
		case len(c.prev) < magSize:
			c.loaded, c.prev = c.prev, c.loaded
		case len(v.depot[o]) < maxGlobalMags:
			v.depot[o] = append(v.depot[o], c.loaded)
			c.loaded = make([]uint64, 0, magSize)
		default:
			return false
		}
	}
	if c.loaded == nil {
		c.loaded = make([]uint64, 0, magSize)
	}
	c.loaded = append(c.loaded, pfn)
	return true
}

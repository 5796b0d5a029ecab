package uvm

import (
	"fmt"
	"math/bits"

	"github.com/dmalab/dmalab/mem"
)

// Geometry of managed memory, as UVM lays it out (uvm_va_block.h,
// uvm_pmm_gpu.h).
const (
	// PageSize is the CPU page size, the unit of residency and mapping
	// (PAGE_SIZE on x86-64 and on 4 KiB-page arm64 kernels).
	PageSize = 4 << 10
	// BigPageSize is the GPU big page, the leaf granularity the
	// prefetcher grows faults to (UVM_PAGE_SIZE_64K; uvm_perf_prefetch.c
	// assumes 64 KiB for the CPU too).
	BigPageSize = 64 << 10
	// BlockSize is a VA block (UVM_VA_BLOCK_SIZE) and a GPU root chunk
	// (UVM_CHUNK_SIZE_MAX), the unit of eviction.
	BlockSize = 2 << 20
	// PagesPerBlock is PAGES_PER_UVM_VA_BLOCK.
	PagesPerBlock = BlockSize / PageSize
	// pagesPerBigPage is the number of 4 KiB pages in a big page.
	pagesPerBigPage = BigPageSize / PageSize
)

// Addr is a managed (unified) virtual address: the same number is the
// CPU's user virtual address and the GPU's CUdeviceptr, which is the
// point of cuMemAllocManaged.
type Addr uint64

func (a Addr) String() string { return fmt.Sprintf("uvm:%#x", uint64(a)) }

// VirtAddr is a as the CPU sees it.
func (a Addr) VirtAddr() mem.VirtAddr { return mem.VirtAddr(a) }

// GPUAddr is a as a GPU sees it.
func (a Addr) GPUAddr() mem.GPUAddr { return mem.GPUAddr(a) }

// Add is a+n, and false if that wraps.
func (a Addr) Add(n uint64) (Addr, bool) {
	s, c := bits.Add64(uint64(a), n, 0)
	return Addr(s), c == 0
}

// PageMask has one bit per 4 KiB page of a 2 MiB VA block, bit i for
// page i (uvm_page_mask_t).
type PageMask [PagesPerBlock / 64]uint64

// Set sets page i.
func (m *PageMask) Set(i int) { m[i>>6] |= 1 << (i & 63) }

// Clear clears page i.
func (m *PageMask) Clear(i int) { m[i>>6] &^= 1 << (i & 63) }

// Test reports page i.
func (m PageMask) Test(i int) bool { return m[i>>6]&(1<<(i&63)) != 0 }

// SetRange sets pages [first, end).
func (m *PageMask) SetRange(first, end int) {
	for w := first >> 6; first < end; w++ {
		lo, hi := first&63, min(end-w<<6, 64)
		m[w] |= rangeBits(lo, hi)
		first = (w + 1) << 6
	}
}

// CountRange counts the pages set in [first, end).
func (m PageMask) CountRange(first, end int) int {
	n := 0
	for w := first >> 6; first < end; w++ {
		lo, hi := first&63, min(end-w<<6, 64)
		n += bits.OnesCount64(m[w] & rangeBits(lo, hi))
		first = (w + 1) << 6
	}
	return n
}

// rangeBits has bits [lo, hi) of a word set, 0 <= lo < hi <= 64.
func rangeBits(lo, hi int) uint64 {
	if hi-lo == 64 {
		return ^uint64(0)
	}
	return (1<<(hi-lo) - 1) << lo
}

// Count is the number of pages set.
func (m PageMask) Count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}

// Empty reports whether no page is set. It ors the words: comparing the
// array with a zero one calls memequal, which the fault service's many
// tests of 64-byte masks feel.
func (m PageMask) Empty() bool {
	var x uint64
	for _, w := range m {
		x |= w
	}
	return x == 0
}

// Or sets the pages of o.
func (m *PageMask) Or(o *PageMask) {
	for i := range m {
		m[i] |= o[i]
	}
}

// And keeps the pages also in o.
func (m *PageMask) And(o *PageMask) {
	for i := range m {
		m[i] &= o[i]
	}
}

// AndNot clears the pages of o.
func (m *PageMask) AndNot(o *PageMask) {
	for i := range m {
		m[i] &^= o[i]
	}
}

// First is the lowest page set, or -1.
func (m PageMask) First() int {
	for i, w := range m {
		if w != 0 {
			return i<<6 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

// Next is the lowest page set at or above i, or -1.
func (m PageMask) Next(i int) int {
	for w := i >> 6; w < len(m); w++ {
		word := m[w]
		if w == i>>6 {
			word &^= 1<<(i&63) - 1
		}
		if word != 0 {
			return w<<6 + bits.TrailingZeros64(word)
		}
	}
	return -1
}

// NextClear is the lowest page clear at or above i, or PagesPerBlock.
func (m PageMask) NextClear(i int) int {
	for w := i >> 6; w < len(m); w++ {
		word := ^m[w]
		if w == i>>6 {
			word &^= 1<<(i&63) - 1
		}
		if word != 0 {
			return w<<6 + bits.TrailingZeros64(word)
		}
	}
	return PagesPerBlock
}

// Pages lists the pages set, in ascending order.
func (m PageMask) Pages() []int {
	var out []int
	for i := m.First(); i >= 0; i = m.Next(i + 1) {
		out = append(out, i)
	}
	return out
}

// rangeMask is the mask of pages [first, end).
func rangeMask(first, end int) PageMask {
	var m PageMask
	m.SetRange(first, end)
	return m
}

func and(a, b PageMask) PageMask    { a.And(&b); return a }
func andNot(a, b PageMask) PageMask { a.AndNot(&b); return a }
func or(a, b PageMask) PageMask     { a.Or(&b); return a }

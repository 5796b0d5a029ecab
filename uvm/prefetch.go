package uvm

// PrefetchInput is what the tree prefetcher (uvm_perf_prefetch.c) looks
// at when faults of one VA block are about to migrate to one processor.
type PrefetchInput struct {
	// Pages is the number of 4 KiB pages of the block: PagesPerBlock for
	// a whole 2 MiB block, fewer for the last block of an allocation
	// whose size is not a multiple of 2 MiB.
	Pages int
	// Resident are the pages already resident on the destination.
	Resident PageMask
	// Faulted are the pages that migrate to the destination because they
	// faulted.
	Faulted PageMask
	// Thrashing are the pages the thrashing detector flags: their big
	// pages do not grow and they are never prefetched.
	Thrashing PageMask
	// Threshold is uvm_perf_prefetch_threshold, percent.
	Threshold int
	// FirstTouchPreferred: no page of the block is resident anywhere and
	// the destination is the block's preferred location; the driver then
	// populates the whole block.
	FirstTouchPreferred bool
}

// PrefetchPages is the tree prefetcher's decision: the pages to migrate
// to the destination besides the faulted ones. It is a pure function of
// its input, the driver's algorithm in these steps:
//
//  1. The tree's leaves are the block's 4 KiB pages; a page counts when
//     it is resident on the destination or faulted.
//  2. Faults grow to big pages: every 64 KiB big page holding a faulted
//     page counts whole, unless one of its pages is thrashing (a
//     trailing part of a partial block that is no whole big page grows
//     as one piece).
//  3. For each faulted page that is not thrashing, in address order,
//     walk the subtrees that contain it from the leaf up (1, 2, 4, ...
//     pages, aligned, cut at the block's end); the largest whose counted
//     pages times 100 exceed its size times Threshold is prefetched.
//     The walk stops early once a region reaches the end of the block.
//  4. Faulted, already resident and thrashing pages are not prefetched.
//
// With the 51 % threshold, step 2 makes subtrees of 64 KiB and smaller
// full, so the tree effectively has 32 leaves of 64 KiB, and a region
// grows to the next level once more than half of it is there: touching a
// 2 MiB block resident elsewhere page by page faults at pages 0, 16, 32,
// 64, 128 and 256, migrating 64 KiB, 64, 128, 256, 512 KiB and 1 MiB.
func PrefetchPages(in PrefetchInput) PageMask {
	n := min(max(in.Pages, 0), PagesPerBlock)
	var out PageMask
	if n == 0 {
		return out
	}
	block := rangeMask(0, n)
	faulted := and(in.Faulted, block)
	if in.FirstTouchPreferred {
		out = block
	} else {
		tree := or(and(in.Resident, block), faulted)
		growBigPages(&tree, &faulted, &in.Thrashing, n)
		migrate := andNot(faulted, in.Thrashing)
		for pg := migrate.First(); pg >= 0; {
			first, end := prefetchRegion(&tree, n, pg, in.Threshold)
			out.SetRange(first, end)
			if end == n {
				break
			}
			// The faulted pages inside the region have the same larger
			// subtrees, none of which qualified, so the region is theirs
			// too: skip them (a block faulted whole costs a walk per
			// region, not per page).
			pg = migrate.Next(max(end, pg+1))
		}
	}
	out.AndNot(&faulted)
	out.AndNot(&in.Resident)
	out.AndNot(&in.Thrashing)
	return out
}

// growBigPages counts whole every big page (and the trailing partial
// one) that holds a faulted page and no thrashing page
// (grow_fault_granularity). A big page is a 16-bit lane of a mask word,
// so the test is two ands a lane.
func growBigPages(tree, faulted, thrashing *PageMask, n int) {
	block := rangeMask(0, n)
	for w, f := range faulted {
		if f == 0 {
			continue
		}
		t := thrashing[w] & block[w]
		for s := 0; s < 64; s += pagesPerBigPage {
			lane := (uint64(1)<<pagesPerBigPage - 1) << s
			if f&lane != 0 && t&lane == 0 {
				tree[w] |= lane & block[w]
			}
		}
	}
}

// prefetchRegion is the largest aligned subtree [first, end) containing
// page pg whose share of counted pages exceeds threshold percent
// (compute_prefetch_region); at least the leaf itself when it counts.
// Subtrees are cut at n, and the share is of the pages that exist.
func prefetchRegion(tree *PageMask, n, pg, threshold int) (first, end int) {
	first, end = pg, pg
	for size := 1; ; size <<= 1 {
		lo := pg &^ (size - 1)
		hi := min(lo+size, n)
		if tree.CountRange(lo, hi)*100 > (hi-lo)*threshold {
			first, end = lo, hi
		}
		if lo == 0 && hi == n {
			return first, end
		}
	}
}

// prefetchMemo keeps the last few PrefetchPages decisions: the function
// is pure, and a sweep asks the same few questions again and again (a
// batch faults half a block, of which the other half is on the GPU or
// not), while a walk of the tree costs a few hundred nanoseconds.
type prefetchMemo struct {
	in   [prefetchMemoSize]PrefetchInput
	out  [prefetchMemoSize]PageMask
	n    int // entries filled
	next int // the entry the next miss replaces
}

const prefetchMemoSize = 4

// prefetch is PrefetchPages(in), from the memo when it holds in.
func (m *prefetchMemo) prefetch(in PrefetchInput) PageMask {
	for i := range m.n {
		if m.in[i] == in {
			return m.out[i]
		}
	}
	out := PrefetchPages(in)
	m.in[m.next], m.out[m.next] = in, out
	m.next = (m.next + 1) % prefetchMemoSize
	if m.n < prefetchMemoSize {
		m.n++
	}
	return out
}

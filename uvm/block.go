package uvm

import (
	"fmt"
	"slices"
	"sort"

	"github.com/dmalab/dmalab/sim"
)

// Allocation is one managed allocation (cuMemAllocManaged): a UVM VA
// range (uvm_va_range_t of type MANAGED) split into 2 MiB VA blocks. Its
// policies (cuMemAdvise) are kept as spans of pages.
type Allocation struct {
	// Base is the first address, aligned to BlockSize; Size the bytes
	// asked for.
	Base Addr
	Size int64
	// Home is where a pre-Pascal GPU keeps it: the device current at
	// allocation (GPU(Device)), or the CPU when the GPUs cannot all peer
	// (CUDA then places managed memory in system memory). Unused by other
	// generations.
	Home Processor

	d        *Driver
	policies []policySpan
	freed    bool
	// blocks are the touched blocks by number from Base's, in leaves of
	// leafBlocks made at the first touch of one of theirs (setBlock):
	// the driver's only index of its blocks.
	blocks []*blockLeaf
}

// leafBlocks is the blocks of a leaf of Allocation.blocks (1 GiB): an
// allocation of 1 TiB touched in a few places costs a few leaves of
// 4 KiB and an 8 KiB list.
const leafBlocks = 512

type blockLeaf [leafBlocks]*vaBlock

// blockCount is the number of VA blocks a spans.
func (a *Allocation) blockCount() int { return int((uint64(a.Size) + BlockSize - 1) / BlockSize) }

// setBlock replaces old, block number num's entry in a.blocks, by b.
func (a *Allocation) setBlock(num uint64, old, b *vaBlock) {
	k := num - uint64(a.Base)/BlockSize
	if k >= uint64(a.blockCount()) {
		return
	}
	if a.blocks == nil {
		a.blocks = make([]*blockLeaf, (a.blockCount()+leafBlocks-1)/leafBlocks)
	}
	leaf := a.blocks[k/leafBlocks]
	if leaf == nil {
		leaf = new(blockLeaf)
		a.blocks[k/leafBlocks] = leaf
	}
	if leaf[k%leafBlocks] == old {
		leaf[k%leafBlocks] = b
	}
}

// eachBlock calls f with each touched block of a, in address order.
func (a *Allocation) eachBlock(f func(*vaBlock)) {
	for _, leaf := range a.blocks {
		if leaf == nil {
			continue
		}
		for _, b := range leaf {
			if b != nil {
				f(b)
			}
		}
	}
}

// End is the first address after the allocation.
func (a *Allocation) End() Addr { return a.Base + Addr(a.Size) }

func (a *Allocation) String() string { return fmt.Sprintf("managed[%v +%#x]", a.Base, a.Size) }

// policySpan is the policy (uvm_va_policy_t) of pages [start, end).
type policySpan struct {
	start, end Addr
	policy
}

// policy is what cuMemAdvise set on a range.
type policy struct {
	readMostly bool
	preferred  Processor
	accessedBy ProcSet
}

var defaultPolicy = policy{preferred: NoProcessor}

// policyAt is the policy of the page at addr.
func (a *Allocation) policyAt(addr Addr) *policy {
	i := sort.Search(len(a.policies), func(i int) bool { return a.policies[i].end > addr })
	return &a.policies[i].policy
}

// readMostly are the pages of b whose policy is ReadMostly.
func (b *vaBlock) readMostly() PageMask {
	var m PageMask
	a := b.alloc
	lo, hi := b.start, b.addr(b.pages)
	i := sort.Search(len(a.policies), func(i int) bool { return a.policies[i].end > lo })
	for ; i < len(a.policies) && a.policies[i].start < hi; i++ {
		if s := &a.policies[i]; s.readMostly {
			first, end := b.pageSpan(s.start, s.end)
			m.SetRange(first, end)
		}
	}
	return m
}

// anyReadMostly reports whether some page of a is ReadMostly.
func (a *Allocation) anyReadMostly() bool {
	for i := range a.policies {
		if a.policies[i].readMostly {
			return true
		}
	}
	return false
}

// splitAt makes addr a span boundary.
func (a *Allocation) splitAt(addr Addr) {
	if addr <= a.Base || addr >= a.End() {
		return
	}
	i := sort.Search(len(a.policies), func(i int) bool { return a.policies[i].end > addr })
	s := a.policies[i]
	if s.start == addr {
		return
	}
	left, right := s, s
	left.end, right.start = addr, addr
	a.policies[i] = right
	a.policies = slices.Insert(a.policies, i, left)
}

// updatePolicy applies f to the policies of [start, end) and merges
// neighbours left equal.
func (a *Allocation) updatePolicy(start, end Addr, f func(*policy)) {
	a.splitAt(start)
	a.splitAt(end)
	for i := range a.policies {
		if s := &a.policies[i]; s.start >= start && s.end <= end {
			f(&s.policy)
		}
	}
	out := a.policies[:1]
	for _, s := range a.policies[1:] {
		if last := &out[len(out)-1]; last.policy == s.policy {
			last.end = s.end
		} else {
			out = append(out, s)
		}
	}
	a.policies = out
}

// vaBlock is one 2 MiB VA block of managed memory (uvm_va_block_t),
// created when first touched: untouched memory costs nothing.
type vaBlock struct {
	num   uint64 // block number: start / BlockSize
	start Addr
	pages int
	alloc *Allocation

	// resident[p] are the pages with a valid copy on processor p (nil:
	// none). Several processors hold a page only when it is
	// read-duplicated, and then every copy is mapped read-only.
	resident []*PageMask
	// remote[p] are the pages processor p maps in another processor's
	// memory (nil: none). A remote mapping targets the page's single
	// resident copy; it is dropped whenever that copy moves or gets a
	// duplicate.
	remote []*PageMask
	// chunk[i] is GPU i's root chunk backing the block, nil if none.
	chunk []*chunk
	// small backs resident, remote and chunk on a machine of one GPU,
	// sparing three allocations per block.
	small struct {
		resident, remote [2]*PageMask
		chunk            [1]*chunk
	}

	// cpuDirty and gpuDirty: pages the CPU or a GPU wrote since the last
	// kernel launch or completion (pre-Pascal and Tegra only).
	cpuDirty, gpuDirty *PageMask

	thrash *blockThrashing

	// locked is the VA block lock, held across a service and its
	// migrations; waiters wait on cond, made at first contention.
	locked bool
	cond   *sim.Cond
	dead   bool
	// pinTimer: an unpin timer was armed on the block, which may still
	// fire after a Free (recycle).
	pinTimer bool
}

func (b *vaBlock) addr(page int) Addr { return b.start + Addr(page)*PageSize }

func (b *vaBlock) residentOn(p Processor) PageMask {
	if m := b.resident[p]; m != nil {
		return *m
	}
	return PageMask{}
}

func (b *vaBlock) remoteOn(p Processor) PageMask {
	if m := b.remote[p]; m != nil {
		return *m
	}
	return PageMask{}
}

// residentMask returns p's residency mask, allocating it.
func (b *vaBlock) residentMask(p Processor) *PageMask {
	if b.resident[p] == nil {
		b.resident[p] = new(PageMask)
	}
	return b.resident[p]
}

// residentMask is b.residentMask(p), a new mask taken from the masks
// of freed blocks or those evictions dropped when there are some.
func (d *Driver) residentMask(b *vaBlock, p Processor) *PageMask {
	if b.resident[p] == nil {
		if n := len(d.freeMasks); n > 0 {
			m := d.freeMasks[n-1]
			d.freeMasks[n-1] = nil
			d.freeMasks = d.freeMasks[:n-1]
			*m = PageMask{}
			b.resident[p] = m
		} else if n := len(d.spareMasks); n > 0 {
			m := d.spareMasks[n-1]
			d.spareMasks[n-1] = nil
			d.spareMasks = d.spareMasks[:n-1]
			*m = PageMask{}
			b.resident[p] = m
		} else {
			b.resident[p] = new(PageMask)
		}
	}
	return b.resident[p]
}

// maxSpareMasks bounds Driver.spareMasks: an oversubscribed GPU evicts
// a block per block it takes in, so a few suffice.
const maxSpareMasks = 64

func (b *vaBlock) remoteMask(p Processor) *PageMask {
	if b.remote[p] == nil {
		b.remote[p] = new(PageMask)
	}
	return b.remote[p]
}

// anyResident are the pages resident somewhere.
func (b *vaBlock) anyResident() PageMask {
	var m PageMask
	for _, r := range b.resident {
		if r != nil {
			m.Or(r)
		}
	}
	return m
}

// shared are the pages resident on more than one processor.
func (b *vaBlock) shared() PageMask {
	if len(b.resident) == 2 {
		// One GPU: the pages both it and the CPU hold.
		if b.resident[0] == nil || b.resident[1] == nil {
			return PageMask{}
		}
		return and(*b.resident[0], *b.resident[1])
	}
	var once, twice PageMask
	for _, r := range b.resident {
		if r == nil {
			continue
		}
		t := and(once, *r)
		twice.Or(&t)
		once.Or(r)
	}
	return twice
}

// soleHolder is the one processor holding pages of m, or NoProcessor
// when none or several do.
func (b *vaBlock) soleHolder(m PageMask) Processor {
	who := NoProcessor
	for p, r := range b.resident {
		if r == nil {
			continue
		}
		if x := and(*r, m); !x.Empty() {
			if who != NoProcessor {
				return NoProcessor
			}
			who = Processor(p)
		}
	}
	return who
}

// holders is the set of processors holding page pg.
func (b *vaBlock) holders(pg int) ProcSet {
	var s ProcSet
	for p, r := range b.resident {
		if r != nil && r.Test(pg) {
			s = s.With(Processor(p))
		}
	}
	return s
}

// accessible are the pages processor p may access without a fault: its
// own copies (only those it holds alone, for a write) and its remote
// mappings.
func (b *vaBlock) accessible(p Processor, write bool) PageMask {
	m := b.residentOn(p)
	if write {
		s := b.shared()
		m.AndNot(&s)
	}
	r := b.remoteOn(p)
	m.Or(&r)
	return m
}

// access is accessible(p, false) and accessible(p, true), with the
// block's masks read once.
func (b *vaBlock) access(p Processor) (readable, writable PageMask) {
	readable = b.residentOn(p)
	writable = readable
	s := b.shared()
	writable.AndNot(&s)
	r := b.remoteOn(p)
	readable.Or(&r)
	writable.Or(&r)
	return readable, writable
}

// dropRemote removes every remote mapping of the pages in m.
func (b *vaBlock) dropRemote(m *PageMask) {
	for _, r := range b.remote {
		if r != nil {
			r.AndNot(m)
		}
	}
}

// footprint is the bytes of per-page state the block holds.
func (b *vaBlock) footprint() int64 {
	const mask = int64(len(PageMask{}) * 8)
	n := int64(192) // the struct, small included
	if &b.resident[0] != &b.small.resident[0] {
		n += int64(len(b.resident)+len(b.remote)+len(b.chunk)) * 8
	}
	for _, r := range b.resident {
		if r != nil {
			n += mask
		}
	}
	for _, r := range b.remote {
		if r != nil {
			n += mask
		}
	}
	for _, c := range b.chunk {
		if c != nil {
			n += 48
		}
	}
	if b.cpuDirty != nil {
		n += mask
	}
	if b.gpuDirty != nil {
		n += mask
	}
	if b.thrash != nil {
		n += 3*mask + 64 + int64(len(b.thrash.pages))*48
	}
	return n
}

package regcache

import (
	"container/list"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Range is [Addr, Addr+Len) of a virtual address space (a process's
// host addresses, or device addresses under unified addressing).
type Range struct {
	Addr, Len uint64
}

// End is the first address past the range.
func (r Range) End() uint64 { return r.Addr + r.Len }

func (r Range) String() string { return fmt.Sprintf("[%#x, %#x)", r.Addr, r.End()) }

func (r Range) overlaps(o Range) bool { return r.Addr < o.End() && o.Addr < r.End() }

// touches is overlap or adjacency: the ranges can merge into one.
func (r Range) touches(o Range) bool { return r.Addr <= o.End() && o.Addr <= r.End() }

func (r Range) contains(o Range) bool { return r.Addr <= o.Addr && o.End() <= r.End() }

// Traits are what the cache must know of a Pinner's pins.
type Traits struct {
	// PageSize is the pin granularity: 64 KiB for nvidia_p2p, the CPU
	// page for host memory. Requests are aligned out to it.
	PageSize uint64
	// BufferIDs: check CU_POINTER_ATTRIBUTE_BUFFER_ID on every hit and
	// merge only regions of one buffer (GPU memory, whose address may
	// be freed and allocated again behind the cache's back).
	BufferIDs bool
	// Exclusive: pins may not overlap (cuMemHostRegister refuses a
	// range already registered), so regions merged into a new one are
	// unpinned before it is pinned, and a request overlapping a region
	// in use that does not contain it fails with ErrInUse.
	Exclusive bool
}

// A Pinner pins and unpins memory for the cache. ctx is opaque to the
// cache: whatever the caller passed to Get, Put or Flush (the model's
// Pinners take the *sim.Proc of the calling thread).
type Pinner interface {
	Traits() Traits
	// Pin pins r (aligned to the page size) and returns a handle for
	// Unpin. inval is the cache's Invalidate, for a pinning mechanism
	// that tells of freed memory by callback (nvidia_p2p's free
	// callback); it may be called from any thread, the freeing one
	// included. A failure for want of resources wraps ErrNoSpace.
	Pin(ctx any, r Range, inval func(Range)) (handle any, err error)
	// Unpin undoes Pin. It is never called from inside inval.
	Unpin(ctx any, r Range, handle any) error
	// BufferID is the buffer ID of the allocation holding addr (only
	// asked when Traits().BufferIDs).
	BufferID(ctx any, addr uint64) (uint64, error)
}

var (
	// ErrNoSpace is a pin refused for want of resources (BAR1
	// exhausted, RLIMIT_MEMLOCK reached): the cache evicts unused
	// regions and tries again.
	ErrNoSpace = errors.New("regcache: no resources to pin")
	// ErrStale is a registration whose memory changed (was freed, or
	// freed and allocated again) while it was being pinned.
	ErrStale = errors.New("regcache: memory changed during the pin")
	// ErrInUse is a request that overlaps a region in use, with a
	// Pinner whose pins may not overlap.
	ErrInUse = errors.New("regcache: overlaps a region in use")
)

// Config bounds the cache.
type Config struct {
	// MaxUnused and MaxUnusedBytes bound the LRU of unused regions (0:
	// 1024 regions, no byte bound).
	MaxUnused      int
	MaxUnusedBytes uint64
	// MaxQueue bounds the invalidation queue in ranges (0: 64).
	MaxQueue int
}

// Region is a pinned range the cache hands out. Its exported fields do
// not change after Get returns it.
type Region struct {
	Range
	// BufferID is the buffer ID of the memory when it was pinned (0
	// without Traits.BufferIDs).
	BufferID uint64
	// Handle is what the Pinner's Pin returned.
	Handle any

	refs  int
	valid bool // in the index: may be served
	elem  *list.Element
}

// Stats counts the cache's work since New.
type Stats struct {
	Gets, HitsFast, HitsSlow, Misses uint64
	// Merges counts regions merged into a new one.
	Merges uint64
	// Evictions counts unused regions unpinned for the LRU's bounds or
	// for a pin that failed with ErrNoSpace.
	Evictions uint64
	// Invalidations counts regions invalidated by Invalidate or by a
	// changed buffer ID; Stale the latter.
	Invalidations, Stale uint64
	Pins, Unpins         uint64
	// QueueOverflows counts the times the invalidation queue widened
	// to one range to stay within MaxQueue.
	QueueOverflows uint64
	// Now: regions served, pinned regions (served or not), pinned
	// bytes, unused regions on the LRU, ranges queued.
	Regions, Pinned, Unused, Queued int
	PinnedBytes                     uint64
}

// Cache is a registration cache over one Pinner. It is safe for
// concurrent use.
type Cache struct {
	p   Pinner
	tr  Traits
	cfg Config

	mu      sync.Mutex
	index   []*Region // valid regions, by Addr; they may overlap
	maxLen  uint64    // bound on the backward scan of the index
	lru     list.List // unused valid regions, most recent first
	dead    []*Region // invalid and unused: to unpin outside the lock
	pending []*pendingPin
	pinned  map[*Region]struct{}
	bytes   uint64
	st      Stats

	// qmu guards the invalidation queue alone, so that a callback that
	// cannot take mu never waits on the cache's work.
	qmu   sync.Mutex
	queue []Range // sorted, merged
}

// pendingPin is a pin in progress, outside the lock: an invalidation
// of its range dooms it.
type pendingPin struct {
	r      Range
	doomed bool
}

// New is a cache over p.
func New(p Pinner, cfg Config) (*Cache, error) {
	tr := p.Traits()
	if tr.PageSize == 0 || tr.PageSize&(tr.PageSize-1) != 0 {
		return nil, fmt.Errorf("regcache: new: page size %d is not a power of two", tr.PageSize)
	}
	if cfg.MaxUnused <= 0 {
		cfg.MaxUnused = 1024
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 64
	}
	return &Cache{p: p, tr: tr, cfg: cfg, pinned: map[*Region]struct{}{}}, nil
}

// align is r widened to whole pages.
func (c *Cache) align(r Range) Range {
	ps := c.tr.PageSize
	a := r.Addr &^ (ps - 1)
	e := (r.End() + ps - 1) &^ (ps - 1)
	return Range{a, e - a}
}

// Get returns a pinned region that contains [addr, addr+length), with a
// reference the caller gives back with Put: a region that contains the
// request (a hit), or a new one pinned for the request merged with the
// regions it touches (a miss).
func (c *Cache) Get(ctx any, addr, length uint64) (*Region, error) {
	req := Range{addr, length}
	if length == 0 || req.End() < addr {
		return nil, fmt.Errorf("regcache: get %v: empty or wrapping range", req)
	}
	var bid uint64
	if c.tr.BufferIDs {
		var err error
		if bid, err = c.p.BufferID(ctx, addr); err != nil {
			return nil, fmt.Errorf("regcache: get %v: buffer ID: %w", req, err)
		}
	}
	c.mu.Lock()
	c.st.Gets++
	drained := c.drainLocked()
	var early error
	if c.tr.Exclusive && len(c.dead) > 0 {
		// A pin may not overlap one still held: an invalidated region
		// (memory unmapped and mapped again at the same address, as
		// malloc does) is unpinned before the request can be pinned.
		c.mu.Unlock()
		early = c.reap(ctx)
		c.mu.Lock()
		drained = c.drainLocked() || drained
	}
	if r := c.lookupLocked(req, bid); r != nil {
		if drained {
			c.st.HitsSlow++
		} else {
			c.st.HitsFast++
		}
		c.holdLocked(r)
		c.mu.Unlock()
		return r, errors.Join(early, c.reap(ctx))
	}
	c.st.Misses++
	r, err := c.miss(ctx, req, bid)
	if rerr := errors.Join(early, c.reap(ctx)); err == nil && rerr != nil {
		// The region is good; the unpin of another is what failed.
		return r, rerr
	}
	if err != nil {
		return nil, fmt.Errorf("regcache: get %v: %w", req, err)
	}
	return r, nil
}

// miss pins a new region for req; mu is held on entry, not on return.
func (c *Cache) miss(ctx any, req Range, bid uint64) (*Region, error) {
	want := c.align(req)
	union := want
	var merged []*Region
	for grew := true; grew; {
		grew = false
		for _, r := range c.index {
			if !r.touches(union) || containsPtr(merged, r) || (c.tr.BufferIDs && r.BufferID != bid) {
				continue
			}
			if c.tr.Exclusive && r.refs > 0 {
				if r.overlaps(union) {
					c.mu.Unlock()
					return nil, fmt.Errorf("%w %v", ErrInUse, r.Range)
				}
				continue // adjacent: it stays as it is
			}
			merged = append(merged, r)
			lo, hi := min(union.Addr, r.Addr), max(union.End(), r.End())
			union = Range{lo, hi - lo}
			grew = true
		}
	}
	var before []*Region
	if c.tr.Exclusive {
		// The merged regions are unused: unpin them first, since the
		// union may not overlap them.
		for _, r := range merged {
			c.removeLocked(r)
			c.st.Merges++
			before = append(before, r)
		}
		merged = nil
	}
	pp := &pendingPin{r: union}
	c.pending = append(c.pending, pp)
	c.mu.Unlock()

	var errs []error
	for _, r := range before {
		if err := c.unpin(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	h, err := c.pinRetry(ctx, union)
	if err != nil && union != want && !errors.Is(err, ErrNoSpace) {
		// The union may span what one pin cannot (two allocations):
		// pin the request alone.
		union, merged = want, nil
		pp.r = want
		h, err = c.pinRetry(ctx, union)
	}
	if err != nil {
		c.mu.Lock()
		c.dropPending(pp)
		c.mu.Unlock()
		return nil, errors.Join(append(errs, err)...)
	}
	nr := &Region{Range: union, BufferID: bid, Handle: h}
	stale := false
	if c.tr.BufferIDs {
		// The memory may have been freed and allocated again while it
		// was pinned: the pin would then hold the old pages.
		now, berr := c.p.BufferID(ctx, req.Addr)
		stale = berr != nil || now != bid
	}
	c.mu.Lock()
	c.drainLocked()
	c.dropPending(pp)
	c.pinned[nr] = struct{}{}
	c.bytes += nr.Len
	if stale || pp.doomed {
		c.dead = append(c.dead, nr)
		c.mu.Unlock()
		return nil, errors.Join(append(errs, fmt.Errorf("%w: %v", ErrStale, union))...)
	}
	for _, r := range merged {
		if !r.valid {
			continue // invalidated meanwhile: already dealt with
		}
		c.st.Merges++
		c.removeLocked(r)
		if r.refs == 0 {
			c.dead = append(c.dead, r)
		}
	}
	c.insertLocked(nr)
	nr.refs = 1
	c.mu.Unlock()
	return nr, errors.Join(errs...)
}

func containsPtr(rs []*Region, r *Region) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// pinRetry pins r, evicting the least recently used unused region and
// trying again while the Pinner says ErrNoSpace.
func (c *Cache) pinRetry(ctx any, r Range) (any, error) {
	for {
		h, err := c.p.Pin(ctx, r, c.Invalidate)
		if err == nil {
			c.mu.Lock()
			c.st.Pins++
			c.mu.Unlock()
			return h, nil
		}
		if !errors.Is(err, ErrNoSpace) {
			return nil, err
		}
		c.mu.Lock()
		e := c.lru.Back()
		if e == nil {
			c.mu.Unlock()
			return nil, err
		}
		v := e.Value.(*Region)
		c.removeLocked(v)
		c.st.Evictions++
		c.mu.Unlock()
		if uerr := c.unpin(ctx, v); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
	}
}

// Put gives back a reference Get gave. The last one puts a valid
// region on the LRU (evicting past the bounds) and unpins an
// invalidated one.
func (c *Cache) Put(ctx any, r *Region) error {
	c.mu.Lock()
	if r.refs <= 0 {
		c.mu.Unlock()
		return fmt.Errorf("regcache: put %v: not held", r.Range)
	}
	r.refs--
	if r.refs == 0 {
		if r.valid {
			r.elem = c.lru.PushFront(r)
			c.trimLocked()
		} else {
			c.dead = append(c.dead, r)
		}
	}
	c.mu.Unlock()
	return c.reap(ctx)
}

// Invalidate says that [r.Addr, r.End()) no longer holds the memory it
// held (freed, unmapped): no region overlapping it is served again.
// It is for memory events and free callbacks: it never pins or unpins
// and never waits on the cache's work. When the cache's lock is free
// it marks the regions at once; otherwise it queues the range for the
// next operation. Unused regions are unpinned by the next operation.
func (c *Cache) Invalidate(r Range) {
	if c.mu.TryLock() {
		c.drainLocked()
		c.invalidateLocked(r)
		c.mu.Unlock()
		return
	}
	c.enqueue(r)
}

// enqueue adds r to the queue, merging it with the ranges it touches;
// past MaxQueue ranges the queue becomes the one range covering them.
func (c *Cache) enqueue(r Range) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	i := sort.Search(len(c.queue), func(i int) bool { return c.queue[i].End() >= r.Addr })
	j := i
	for j < len(c.queue) && c.queue[j].touches(r) {
		lo, hi := min(r.Addr, c.queue[j].Addr), max(r.End(), c.queue[j].End())
		r = Range{lo, hi - lo}
		j++
	}
	c.queue = append(c.queue[:i], append([]Range{r}, c.queue[j:]...)...)
	if len(c.queue) > c.cfg.MaxQueue {
		lo, hi := c.queue[0].Addr, c.queue[len(c.queue)-1].End()
		c.queue = append(c.queue[:0], Range{lo, hi - lo})
		c.st.QueueOverflows++ // under qmu: read only under both locks
	}
}

// drainLocked applies the queued invalidations; it says whether there
// were any.
func (c *Cache) drainLocked() bool {
	c.qmu.Lock()
	q := c.queue
	c.queue = nil
	c.qmu.Unlock()
	for _, r := range q {
		c.invalidateLocked(r)
	}
	return len(q) > 0
}

func (c *Cache) invalidateLocked(r Range) {
	for _, pp := range c.pending {
		if pp.r.overlaps(r) {
			pp.doomed = true
		}
	}
	var hit []*Region
	for _, x := range c.index {
		if x.overlaps(r) {
			hit = append(hit, x)
		}
	}
	for _, x := range hit {
		c.st.Invalidations++
		c.removeLocked(x)
		if x.refs == 0 {
			c.dead = append(c.dead, x)
		}
	}
}

// lookupLocked finds a valid region containing req; a region of
// another buffer is stale and is invalidated on the way.
func (c *Cache) lookupLocked(req Range, bid uint64) *Region {
	i := sort.Search(len(c.index), func(i int) bool { return c.index[i].Addr > req.Addr })
	var stale []*Region
	var found *Region
	for i--; i >= 0 && c.index[i].Addr+c.maxLen > req.Addr; i-- {
		r := c.index[i]
		if !r.contains(req) {
			continue
		}
		if c.tr.BufferIDs && r.BufferID != bid {
			stale = append(stale, r)
			continue
		}
		found = r
		break
	}
	for _, r := range stale {
		c.st.Stale++
		c.st.Invalidations++
		c.removeLocked(r)
		if r.refs == 0 {
			c.dead = append(c.dead, r)
		}
	}
	return found
}

func (c *Cache) holdLocked(r *Region) {
	if r.refs == 0 && r.elem != nil {
		c.lru.Remove(r.elem)
		r.elem = nil
	}
	r.refs++
}

func (c *Cache) insertLocked(r *Region) {
	i := sort.Search(len(c.index), func(i int) bool { return c.index[i].Addr > r.Addr })
	c.index = append(c.index, nil)
	copy(c.index[i+1:], c.index[i:])
	c.index[i] = r
	r.valid = true
	c.maxLen = max(c.maxLen, r.Len)
}

// removeLocked takes r out of the index and the LRU: it is no longer
// served. Its pin is the caller's business.
func (c *Cache) removeLocked(r *Region) {
	if r.elem != nil {
		c.lru.Remove(r.elem)
		r.elem = nil
	}
	if !r.valid {
		return
	}
	r.valid = false
	for i, x := range c.index {
		if x == r {
			c.index = append(c.index[:i], c.index[i+1:]...)
			break
		}
	}
}

func (c *Cache) dropPending(pp *pendingPin) {
	for i, x := range c.pending {
		if x == pp {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return
		}
	}
}

// trimLocked evicts the least recently used unused regions past the
// bounds.
func (c *Cache) trimLocked() {
	var unusedBytes uint64
	for e := c.lru.Front(); e != nil; e = e.Next() {
		unusedBytes += e.Value.(*Region).Len
	}
	for c.lru.Len() > c.cfg.MaxUnused || (c.cfg.MaxUnusedBytes > 0 && unusedBytes > c.cfg.MaxUnusedBytes) {
		v := c.lru.Back().Value.(*Region)
		unusedBytes -= v.Len
		c.removeLocked(v)
		c.st.Evictions++
		c.dead = append(c.dead, v)
	}
}

// reap unpins the dead regions, outside the lock.
func (c *Cache) reap(ctx any) error {
	c.mu.Lock()
	d := c.dead
	c.dead = nil
	c.mu.Unlock()
	var errs []error
	for _, r := range d {
		if err := c.unpin(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cache) unpin(ctx any, r *Region) error {
	err := c.p.Unpin(ctx, r.Range, r.Handle)
	c.mu.Lock()
	if _, ok := c.pinned[r]; ok {
		delete(c.pinned, r)
		c.bytes -= r.Len
	}
	c.st.Unpins++
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("regcache: unpin %v: %w", r.Range, err)
	}
	return nil
}

// Flush applies queued invalidations and unpins every unused region.
// Regions in use stay.
func (c *Cache) Flush(ctx any) error {
	c.mu.Lock()
	c.drainLocked()
	for e := c.lru.Back(); e != nil; e = c.lru.Back() {
		v := e.Value.(*Region)
		c.removeLocked(v)
		c.st.Evictions++
		c.dead = append(c.dead, v)
	}
	c.mu.Unlock()
	return c.reap(ctx)
}

// Stats is a snapshot of the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.qmu.Lock()
	defer c.qmu.Unlock()
	s := c.st
	s.Regions, s.Pinned, s.Unused, s.Queued = len(c.index), len(c.pinned), c.lru.Len(), len(c.queue)
	s.PinnedBytes = c.bytes
	return s
}

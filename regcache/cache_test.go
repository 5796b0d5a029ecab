package regcache

import (
	"errors"
	"math/rand"
	"sync"
	"testing"
)

func newCache(t *testing.T, f *fakePinner, cfg Config) *Cache {
	t.Helper()
	c, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func get(t *testing.T, c *Cache, addr, length uint64) *Region {
	t.Helper()
	r, err := c.Get(nil, addr, length)
	if err != nil {
		t.Fatalf("get %#x+%#x: %v", addr, length, err)
	}
	return r
}

func put(t *testing.T, c *Cache, r *Region) {
	t.Helper()
	if err := c.Put(nil, r); err != nil {
		t.Fatal(err)
	}
}

func TestContainmentHit(t *testing.T) {
	f := newFake(4096)
	c := newCache(t, f, Config{})
	a := get(t, c, 0x10000, 0x4000)
	b := get(t, c, 0x11000, 0x100)
	if a != b {
		t.Fatalf("request inside %v got another region %v", a.Range, b.Range)
	}
	put(t, c, a)
	d := get(t, c, 0x13f00, 0x100) // unused region, still a hit
	put(t, c, b)
	put(t, c, d)
	s := c.Stats()
	if s.Misses != 1 || s.HitsFast != 2 || s.Pins != 1 || f.pins != 1 {
		t.Fatalf("stats %+v, fake pins %d: want 1 miss, 2 fast hits, 1 pin", s, f.pins)
	}
}

func TestMergeIntoOneRegion(t *testing.T) {
	f := newFake(4096)
	c := newCache(t, f, Config{})
	a := get(t, c, 0x0, 0x2000)
	b := get(t, c, 0x1000, 0x3000) // overlaps a: one region [0, 0x4000)
	if b.Range != (Range{0, 0x4000}) {
		t.Fatalf("merged region %v, want [0, 0x4000)", b.Range)
	}
	// a is in use: it survives, pinned, until its release.
	if n := f.liveCount(); n != 2 {
		t.Fatalf("%d live pins while the merged-away region is in use, want 2", n)
	}
	put(t, c, a)
	if n := f.liveCount(); n != 1 {
		t.Fatalf("%d live pins after the merged-away region's release, want 1", n)
	}
	if r := get(t, c, 0x0, 0x1000); r != b {
		t.Fatalf("lookup after merge served %v, want the merged region", r.Range)
	}
	s := c.Stats()
	if s.Merges != 1 || s.Regions != 1 {
		t.Fatalf("stats %+v: want 1 merge, 1 region", s)
	}
}

func TestAlignedMerge(t *testing.T) {
	const gp = 64 << 10
	for _, tc := range []struct {
		name  string
		reqs  [][2]uint64
		want  Range
		merge uint64
	}{
		{"aligned out", [][2]uint64{{gp + 0x100, 0x100}}, Range{gp, gp}, 0},
		{"adjacent pages merge", [][2]uint64{{gp + 5, 10}, {2*gp + 5, 10}}, Range{gp, 2 * gp}, 1},
		{"same page is a hit", [][2]uint64{{gp + 5, 10}, {gp + 0x8000, 10}}, Range{gp, gp}, 0},
		{"gap of a page stays apart", [][2]uint64{{gp, 10}, {3 * gp, 10}}, Range{3 * gp, gp}, 0},
		{"bridge merges both sides", [][2]uint64{{0, 10}, {2 * gp, 10}, {gp, 10}}, Range{0, 3 * gp}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(gp)
			c := newCache(t, f, Config{})
			var last *Region
			for _, q := range tc.reqs {
				last = get(t, c, q[0], q[1])
				put(t, c, last)
			}
			if last.Range != tc.want {
				t.Fatalf("region %v, want %v", last.Range, tc.want)
			}
			if s := c.Stats(); s.Merges != tc.merge {
				t.Fatalf("%d merges, want %d", s.Merges, tc.merge)
			}
		})
	}
}

func TestLRUCountLimit(t *testing.T) {
	f := newFake(4096)
	c := newCache(t, f, Config{MaxUnused: 2})
	A, B, C := uint64(0x10000), uint64(0x20000), uint64(0x30000)
	put(t, c, get(t, c, A, 1))
	put(t, c, get(t, c, B, 1))
	put(t, c, get(t, c, A, 1)) // A is now the most recent
	put(t, c, get(t, c, C, 1)) // over the count: B, the oldest, goes
	if len(f.unpinned) != 1 || f.unpinned[0].Addr != B {
		t.Fatalf("unpinned %v, want B only", f.unpinned)
	}
	put(t, c, get(t, c, 0x40000, 1)) // then A
	if len(f.unpinned) != 2 || f.unpinned[1].Addr != A {
		t.Fatalf("unpinned %v, want B then A", f.unpinned)
	}
	if s := c.Stats(); s.Evictions != 2 || s.Unused != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestLRUSizeLimit(t *testing.T) {
	f := newFake(4096)
	c := newCache(t, f, Config{MaxUnusedBytes: 5 * 4096})
	put(t, c, get(t, c, 0x10000, 2*4096)) // 2 pages
	put(t, c, get(t, c, 0x20000, 2*4096)) // 4
	put(t, c, get(t, c, 0x30000, 1))      // 5: fits
	if len(f.unpinned) != 0 {
		t.Fatalf("unpinned %v within the bound", f.unpinned)
	}
	put(t, c, get(t, c, 0x40000, 3*4096)) // 8: the two oldest go
	if len(f.unpinned) != 2 || f.unpinned[0].Addr != 0x10000 || f.unpinned[1].Addr != 0x20000 {
		t.Fatalf("unpinned %v, want the two oldest", f.unpinned)
	}
}

func TestInUseNeverEvicted(t *testing.T) {
	f := newFake(4096)
	c := newCache(t, f, Config{MaxUnused: 1, MaxUnusedBytes: 4096})
	held := get(t, c, 0x10000, 4*4096) // bigger than the byte bound
	for i := uint64(1); i <= 5; i++ {
		put(t, c, get(t, c, 0x10000+i*0x100000, 1))
	}
	if err := c.Flush(nil); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	_, ok := f.live[1]
	f.mu.Unlock()
	if !ok || f.liveCount() != 1 {
		t.Fatalf("the region in use was unpinned (live %v)", f.live)
	}
	// Evict-and-retry does not take it either.
	f.budget = 4 * 4096
	if _, err := c.Get(nil, 0x900000, 1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("pin with nothing evictable: %v, want ErrNoSpace", err)
	}
	if f.liveCount() != 1 {
		t.Fatal("evict-and-retry unpinned a region in use")
	}
	put(t, c, held)
}

func TestEvictAndRetry(t *testing.T) {
	f := newFake(4096)
	f.budget = 3 * 4096 // three pages: "BAR1"
	c := newCache(t, f, Config{})
	put(t, c, get(t, c, 0x10000, 1))
	put(t, c, get(t, c, 0x20000, 1))
	held := get(t, c, 0x30000, 1)
	r := get(t, c, 0x40000, 2*4096) // needs two: both unused regions go, oldest first
	if len(f.unpinned) != 2 || f.unpinned[0].Addr != 0x10000 || f.unpinned[1].Addr != 0x20000 {
		t.Fatalf("unpinned %v, want the two unused regions, oldest first", f.unpinned)
	}
	if s := c.Stats(); s.Evictions != 2 || s.Pins != 4 {
		t.Fatalf("stats %+v: want 2 evictions, 4 pins", s)
	}
	put(t, c, r)
	put(t, c, held)
}

// A free callback calls Invalidate: it must not unpin there; the next
// operation does.
func TestInvalidationDeferredOutOfCallback(t *testing.T) {
	for _, locked := range []bool{false, true} {
		name := "lock free"
		if locked {
			name = "lock held: queued"
		}
		t.Run(name, func(t *testing.T) {
			f := newFake(4096)
			c := newCache(t, f, Config{})
			put(t, c, get(t, c, 0x10000, 0x1000))
			f.mu.Lock()
			f.inCB = true
			f.mu.Unlock()
			if locked {
				c.mu.Lock() // another thread is inside the cache
			}
			c.Invalidate(Range{0x10000, 0x1000})
			if locked {
				if n := len(c.queue); n != 1 {
					t.Errorf("queue holds %d ranges, want 1", n)
				}
				c.mu.Unlock()
			}
			f.mu.Lock()
			f.inCB = false
			cb := f.cbUnpin
			f.mu.Unlock()
			if cb != 0 {
				t.Fatalf("%d unpins inside the callback", cb)
			}
			if f.liveCount() != 1 {
				t.Fatal("unpinned before the next operation")
			}
			r := get(t, c, 0x10000, 0x1000)
			if f.pins != 2 || f.liveCount() != 1 {
				t.Fatalf("pins %d live %d: the invalidated region was served or kept", f.pins, f.liveCount())
			}
			put(t, c, r)
			if s := c.Stats(); s.Invalidations != 1 || s.Misses != 2 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

func TestInUseSurvivesInvalidation(t *testing.T) {
	f := newFake(4096)
	c := newCache(t, f, Config{})
	a := get(t, c, 0x10000, 0x1000)
	b := get(t, c, 0x10000, 0x1000)
	c.Invalidate(Range{0x10000, 1})
	if err := c.Flush(nil); err != nil {
		t.Fatal(err)
	}
	if f.liveCount() != 1 {
		t.Fatal("a region in use was unpinned by invalidation")
	}
	n := get(t, c, 0x10000, 0x1000)
	if n == a {
		t.Fatal("an invalidated region was served")
	}
	put(t, c, a)
	if f.liveCount() != 2 {
		t.Fatal("unpinned before its last release")
	}
	put(t, c, b)
	if f.liveCount() != 1 {
		t.Fatal("not unpinned at its last release")
	}
	put(t, c, n)
}

// 40,000 cycles of free and re-allocation at a few addresses, half of
// whose invalidations come while the cache is busy: the queue stays
// within its bound, nothing stale is served, and pins do not pile up.
func TestQueueBoundedUnderChurn(t *testing.T) {
	f := newFake(4096)
	f.tr.BufferIDs = true
	ids := map[uint64]uint64{}
	f.bid = func(a uint64) uint64 { return ids[a&^0xfffff] }
	const maxQ = 16
	c := newCache(t, f, Config{MaxQueue: maxQ, MaxUnused: 8})
	maxSeen, next := 0, uint64(1)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 40000; i++ {
		base := uint64(rng.Intn(64)) << 20
		f.mu.Lock()
		next++
		ids[base] = next // cuMemAlloc: a new buffer ID
		f.mu.Unlock()
		r := get(t, c, base+uint64(rng.Intn(4))*4096, 4096)
		if r.BufferID != next {
			t.Fatalf("cycle %d: served buffer %d, allocation is %d", i, r.BufferID, next)
		}
		put(t, c, r)
		// cuMemFree: the free callback.
		if i%2 == 0 {
			c.mu.Lock()
			for k := rng.Intn(30); k > 0; k-- { // scattered events pile up
				c.Invalidate(Range{uint64(rng.Intn(1<<16)) << 20, 4096})
			}
			c.Invalidate(Range{base, 1 << 20})
			maxSeen = max(maxSeen, len(c.queue))
			c.mu.Unlock()
		} else {
			c.Invalidate(Range{base, 1 << 20})
		}
	}
	if maxSeen > maxQ || maxSeen == 0 {
		t.Fatalf("queue reached %d ranges, bound %d", maxSeen, maxQ)
	}
	if err := c.Flush(nil); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if f.liveCount() != 0 || s.Pinned != 0 || s.Pins != s.Unpins || s.QueueOverflows == 0 {
		t.Fatalf("after 40,000 cycles: live %d, stats %+v", f.liveCount(), s)
	}
}

func TestStaleBufferIDNeverServed(t *testing.T) {
	f := newFake(64 << 10)
	f.tr.BufferIDs = true
	id := uint64(907)
	f.bid = func(uint64) uint64 { return id }
	c := newCache(t, f, Config{})
	a := get(t, c, 0x100000, 0x10000)
	put(t, c, a)
	// Freed and allocated again at the same address; no event reached
	// the cache.
	f.mu.Lock()
	id = 913
	f.mu.Unlock()
	b := get(t, c, 0x100000, 0x10000)
	if b == a || b.BufferID != 913 {
		t.Fatalf("served buffer %d, want a new region of buffer 913", b.BufferID)
	}
	// Nor is a stale region merged into the new one.
	if s := c.Stats(); s.Stale != 1 || s.Merges != 0 || f.liveCount() != 1 {
		t.Fatalf("stats %+v live %d", s, f.liveCount())
	}
	put(t, c, b)
}

func TestNoPinLeakedOnRegistrationError(t *testing.T) {
	t.Run("buffer changed during the pin", func(t *testing.T) {
		f := newFake(4096)
		f.tr.BufferIDs = true
		id := uint64(1)
		f.bid = func(uint64) uint64 { return id }
		f.onPin = func(Range) { f.mu.Lock(); id = 2; f.mu.Unlock() }
		c := newCache(t, f, Config{})
		if _, err := c.Get(nil, 0x1000, 1); !errors.Is(err, ErrStale) {
			t.Fatalf("got %v, want ErrStale", err)
		}
		if f.liveCount() != 0 || c.Stats().Pinned != 0 {
			t.Fatal("the stale pin leaked")
		}
	})
	t.Run("freed during the pin", func(t *testing.T) {
		f := newFake(4096)
		c := newCache(t, f, Config{})
		f.onPin = func(r Range) { c.Invalidate(r) }
		if _, err := c.Get(nil, 0x1000, 1); !errors.Is(err, ErrStale) {
			t.Fatalf("got %v, want ErrStale", err)
		}
		if f.liveCount() != 0 {
			t.Fatal("the doomed pin leaked")
		}
	})
	t.Run("pin refused", func(t *testing.T) {
		f := newFake(4096)
		c := newCache(t, f, Config{})
		put(t, c, get(t, c, 0x1000, 1))
		f.failWith = errors.New("EINVAL")
		if _, err := c.Get(nil, 0x2000, 1); err == nil {
			t.Fatal("no error")
		}
		if f.liveCount() != 1 || c.Stats().Pinned != 1 {
			t.Fatal("a failed registration left a pin, or dropped the good one")
		}
	})
	t.Run("exhausted after evicting everything", func(t *testing.T) {
		f := newFake(4096)
		f.budget = 2 * 4096
		c := newCache(t, f, Config{})
		put(t, c, get(t, c, 0x1000, 1))
		if _, err := c.Get(nil, 0x10000, 3*4096); !errors.Is(err, ErrNoSpace) {
			t.Fatalf("got %v, want ErrNoSpace", err)
		}
		if f.liveCount() != 0 || c.Stats().Pinned != 0 {
			t.Fatal("pins left after a failed registration")
		}
	})
}

func TestExclusiveMergeUnpinsFirst(t *testing.T) {
	f := newFake(4096)
	f.tr.Exclusive = true
	c := newCache(t, f, Config{})
	put(t, c, get(t, c, 0x0, 0x1000))
	r := get(t, c, 0x1000, 0x1000) // adjacent, unused: merged
	if r.Range != (Range{0, 0x2000}) || f.liveCount() != 1 {
		t.Fatalf("region %v, live %d", r.Range, f.liveCount())
	}
	if _, err := c.Get(nil, 0x1800, 0x1000); !errors.Is(err, ErrInUse) {
		t.Fatalf("overlap of a region in use: %v, want ErrInUse", err)
	}
	put(t, c, r)
}

func TestConcurrentUse(t *testing.T) {
	f := newFake(4096)
	f.tr.BufferIDs = true
	f.budget = 64 * 4096
	c := newCache(t, f, Config{MaxUnused: 16, MaxQueue: 8})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed))
			var held []*Region
			for i := 0; i < 3000; i++ {
				switch op := rng.Intn(10); {
				case op < 5:
					addr := uint64(rng.Intn(256)) * 4096
					r, err := c.Get(nil, addr, uint64(1+rng.Intn(3*4096)))
					if err == nil {
						if !r.contains(Range{addr, 1}) {
							t.Errorf("region %v does not contain %#x", r.Range, addr)
						}
						held = append(held, r)
					} else if !errors.Is(err, ErrNoSpace) && !errors.Is(err, ErrStale) {
						t.Error(err)
					}
				case op < 9 && len(held) > 0:
					k := rng.Intn(len(held))
					if err := c.Put(nil, held[k]); err != nil {
						t.Error(err)
					}
					held = append(held[:k], held[k+1:]...)
				default:
					c.Invalidate(Range{uint64(rng.Intn(256)) * 4096, 4096})
				}
			}
			for _, r := range held {
				if err := c.Put(nil, r); err != nil {
					t.Error(err)
				}
			}
		}(int64(g))
	}
	wg.Wait()
	if err := c.Flush(nil); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if f.liveCount() != 0 || s.Pinned != 0 || s.Pins != s.Unpins || s.Gets == 0 {
		t.Fatalf("after the goroutines: live %d, stats %+v", f.liveCount(), s)
	}
}

// A hit that first had to apply queued invalidations is a slow hit;
// the queued range's region is gone, the other one served.
func TestSlowHitAfterQueuedInvalidation(t *testing.T) {
	f := newFake(4096)
	c := newCache(t, f, Config{})
	put(t, c, get(t, c, 0x10000, 1))
	put(t, c, get(t, c, 0x20000, 1))
	c.mu.Lock()
	c.Invalidate(Range{0x20000, 1}) // queued: the lock is taken
	c.mu.Unlock()
	put(t, c, get(t, c, 0x10000, 1))
	s := c.Stats()
	if s.HitsSlow != 1 || s.HitsFast != 0 || s.Invalidations != 1 || s.Regions != 1 || f.liveCount() != 1 {
		t.Fatalf("stats %+v, live %d", s, f.liveCount())
	}
	if _, err := c.Get(nil, 0x1000, 0); err == nil {
		t.Fatal("an empty request was accepted")
	}
}

package rcachecheck_test

import (
	"testing"

	"github.com/dmalab/dmalab/check"
	"github.com/dmalab/dmalab/check/rcachecheck"
	"github.com/dmalab/dmalab/regcache"
)

// fake pins nothing; bids names the buffer ID at each address.
type fake struct {
	bids map[uint64]uint64
	next int
}

func (f *fake) Traits() regcache.Traits {
	return regcache.Traits{PageSize: 0x1000, BufferIDs: true}
}
func (f *fake) Pin(any, regcache.Range, func(regcache.Range)) (any, error) {
	f.next++
	return f.next, nil
}
func (f *fake) Unpin(any, regcache.Range, any) error { return nil }
func (f *fake) BufferID(_ any, addr uint64) (uint64, error) {
	return f.bids[addr], nil
}

func setup(t *testing.T) (*check.Checker, *rcachecheck.Pack, regcache.Pinner, *regcache.Cache, *fake) {
	t.Helper()
	chk := check.New(check.Options{})
	f := &fake{bids: map[uint64]uint64{0x10000: 1}}
	x, w := rcachecheck.Attach(chk, f)
	c, err := regcache.New(w, regcache.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return chk, x, w, c, f
}

func get(t *testing.T, c *regcache.Cache, x *rcachecheck.Pack) *regcache.Region {
	t.Helper()
	r, err := c.Get(nil, 0x10000, 0x1000)
	if err != nil {
		t.Fatal(err)
	}
	x.Got(nil, r)
	return r
}

func TestRules(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, x *rcachecheck.Pack, w regcache.Pinner, c *regcache.Cache, f *fake)
		want map[string]int
	}{
		{"stale served by a buggy cache", func(t *testing.T, x *rcachecheck.Pack, _ regcache.Pinner, c *regcache.Cache, f *fake) {
			r := get(t, c, x)
			f.bids[0x10000] = 2 // freed and allocated again behind the cache
			x.Got(nil, r)       // a cache without the check would serve r again
		}, map[string]int{rcachecheck.StaleRegion: 1}},
		{"re-allocation handled by the cache", func(t *testing.T, x *rcachecheck.Pack, _ regcache.Pinner, c *regcache.Cache, f *fake) {
			r := get(t, c, x)
			c.Put(nil, r)
			x.Put(r)
			f.bids[0x10000] = 2
			r2 := get(t, c, x)
			if r2.BufferID != 2 {
				t.Errorf("cache served buffer %d, want 2", r2.BufferID)
			}
		}, map[string]int{}},
		{"use after free", func(t *testing.T, x *rcachecheck.Pack, _ regcache.Pinner, c *regcache.Cache, _ *fake) {
			r := get(t, c, x)
			x.Freed(nil, regcache.Range{Addr: 0x10000, Len: 0x1000}, "free")
			x.Used(nil, r)
		}, map[string]int{rcachecheck.StaleRegion: 1, rcachecheck.FreedPinned: 1}},
		{"unpin in use", func(t *testing.T, x *rcachecheck.Pack, w regcache.Pinner, c *regcache.Cache, _ *fake) {
			r := get(t, c, x)
			_ = w.Unpin(nil, r.Range, r.Handle) // a buggy caller unpins behind the cache
		}, map[string]int{rcachecheck.UnpinInUse: 1}},
		{"put then flush", func(t *testing.T, x *rcachecheck.Pack, _ regcache.Pinner, c *regcache.Cache, _ *fake) {
			r := get(t, c, x)
			x.Used(nil, r)
			c.Put(nil, r)
			x.Put(r)
			if err := c.Flush(nil); err != nil {
				t.Fatal(err)
			}
		}, map[string]int{}},
		{"freed while pinned", func(t *testing.T, x *rcachecheck.Pack, _ regcache.Pinner, c *regcache.Cache, _ *fake) {
			r := get(t, c, x)
			c.Put(nil, r)
			x.Put(r)
			x.Freed(nil, regcache.Range{Addr: 0x10000, Len: 0x1000}, "free") // no Invalidate: the pin lingers
		}, map[string]int{rcachecheck.FreedPinned: 1}},
		{"freed and invalidated", func(t *testing.T, x *rcachecheck.Pack, _ regcache.Pinner, c *regcache.Cache, _ *fake) {
			r := get(t, c, x)
			c.Put(nil, r)
			x.Put(r)
			rg := regcache.Range{Addr: 0x10000, Len: 0x1000}
			x.Freed(nil, rg, "free")
			c.Invalidate(rg)
			if err := c.Flush(nil); err != nil {
				t.Fatal(err)
			}
		}, map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chk, x, w, c, f := setup(t)
			tt.run(t, x, w, c, f)
			chk.Finish(0)
			for _, code := range []string{rcachecheck.StaleRegion, rcachecheck.UnpinInUse, rcachecheck.FreedPinned} {
				if got := chk.Count(code); got != tt.want[code] {
					t.Errorf("%s: %d, want %d (%v)", code, got, tt.want[code], chk.Diagnostics())
				}
			}
		})
	}
}

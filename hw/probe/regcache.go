package probe

import (
	"errors"
	"fmt"

	"github.com/dmalab/dmalab/regcache"
)

// RegcacheCheck is what the regcache family's invalidation path found
// (Measurement.Regcache, on its "stale_get" measurement).
type RegcacheCheck struct {
	// SameAddress: the host memory freed (munmap) and allocated again
	// (mmap of the same size) came back at the same address, so the
	// stale region covered the new memory.
	SameAddress bool `json:"same_address"`
	// Reregistered: every Get after the free and re-allocation was a
	// miss that pinned again (the stale region was not served).
	Reregistered bool `json:"reregistered"`
	// Hits, Misses, Pins, Unpins and Invalidations are the cache's
	// statistics over all samples of the size.
	Hits          uint64 `json:"hits"`
	Misses        uint64 `json:"misses"`
	Pins          uint64 `json:"pins"`
	Unpins        uint64 `json:"unpins"`
	Invalidations uint64 `json:"invalidations"`
}

// Operations of the regcache family (Measurement.Operation).
const (
	RegcacheMiss          = "miss"            // Get of the first half: cuMemHostRegister
	RegcacheHit           = "hit"             // Get of a range inside it
	RegcacheMergeMiss     = "merge_miss"      // Get of the adjacent second half: unregister, register the whole
	RegcacheHitAfterMerge = "hit_after_merge" // Get of the whole buffer
	RegcacheInvalidate    = "invalidate"      // Invalidate and Flush: cuMemHostUnregister
	RegcacheStaleGet      = "stale_get"       // Get after munmap and mmap: registers again
)

var regcacheOps = []string{RegcacheMiss, RegcacheHit, RegcacheMergeMiss, RegcacheHitAfterMerge, RegcacheInvalidate, RegcacheStaleGet}

// rangePinner is a regcache.Pinner over a Device's PinRange: the cache's
// ranges are virtual addresses inside one pageable buffer (cur, which the
// family replaces when it frees and allocates the memory again).
type rangePinner struct {
	d   Device
	cur *Buffer
}

// hostPageSize is the pin granularity of cuMemHostRegister: the CPU page.
const hostPageSize = 4096

func (p *rangePinner) Traits() regcache.Traits {
	// cuMemHostRegister refuses a range that overlaps a registered one.
	return regcache.Traits{PageSize: hostPageSize, Exclusive: true}
}

func (p *rangePinner) offset(r regcache.Range) (int64, error) {
	base := hostAddr(p.cur.Host)
	if r.Addr < base || r.End() > base+uint64(p.cur.Size) {
		return 0, fmt.Errorf("range %v outside %v at %#x", r, p.cur, base)
	}
	return int64(r.Addr - base), nil
}

func (p *rangePinner) Pin(_ any, r regcache.Range, _ func(regcache.Range)) (any, error) {
	off, err := p.offset(r)
	if err != nil {
		return nil, err
	}
	return p.cur, p.d.PinRange(p.cur, off, int64(r.Len))
}

func (p *rangePinner) Unpin(_ any, r regcache.Range, h any) error {
	b := h.(*Buffer)
	off := int64(r.Addr - hostAddr(b.Host))
	return p.d.UnpinRange(b, off, int64(r.Len))
}

func (p *rangePinner) BufferID(any, uint64) (uint64, error) { return 0, nil }

// regcacheSizes are the sizes of the regcache family that do not exceed the
// largest of Options.Sizes (that size itself when none fits).
func (m *meter) regcacheSizes() []int64 {
	var out []int64
	for _, s := range []int64{64 << 10, 1 << 20, 16 << 20, 256 << 20} {
		if s <= m.o.headline() {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = []int64{m.o.headline()}
	}
	return out
}

// regcacheFamily measures the regcache package over cuMemHostRegister of
// resident pageable memory: per sample, a fresh cache; a miss for the first
// half of the buffer, a hit inside it, a miss for the second half that
// merges the two, a hit of the whole; then the path of freed memory: the
// memory hook's Invalidate and the unregister (Flush), munmap and mmap of
// the same size, and a Get of the new memory, which must register again.
func (m *meter) regcacheFamily(g *GPUReport) error {
	c := collector{g: g}
	for _, size := range m.regcacheSizes() {
		if size < 2*hostPageSize {
			continue
		}
		if err := m.regcacheSize(&c, size); err != nil {
			c.fail(fmt.Errorf("%s size %d: %w", FamilyRegcache, size, err))
		}
	}
	return c.err()
}

func (m *meter) regcacheSize(c *collector, size int64) (err error) {
	buf, err := m.d.Alloc(MemPageable, size)
	if err != nil {
		return err
	}
	p := &rangePinner{d: m.d}
	defer func() {
		if p.cur != nil {
			err = errors.Join(err, m.d.Free(p.cur))
		}
	}()
	p.cur = buf
	m.src.fill(buf.Host)
	vals := make([][]float64, len(regcacheOps))
	chk := &RegcacheCheck{SameAddress: true, Reregistered: true}
	half := uint64(size / 2)
	for range m.o.Samples {
		if err = m.ctx.Err(); err != nil {
			return err
		}
		rc, err := regcache.New(p, regcache.Config{})
		if err != nil {
			return err
		}
		base := hostAddr(p.cur.Host)
		var t [6]float64
		step := func(i int, op func() error) error {
			t0 := m.d.Now()
			err := op()
			t[i] = (m.d.Now() - t0).Seconds() * 1e6
			return err
		}
		get := func(addr, n uint64) func() error {
			return func() error {
				r, err := rc.Get(nil, addr, n)
				if err != nil {
					return err
				}
				return rc.Put(nil, r)
			}
		}
		ops := []func() error{
			get(base, half),
			get(base+half/4, half/4),
			get(base+half, uint64(size)-half),
			get(base, uint64(size)),
			func() error {
				rc.Invalidate(regcache.Range{Addr: base, Len: uint64(size)})
				return rc.Flush(nil)
			},
		}
		for i, op := range ops {
			if err := step(i, op); err != nil {
				// Unregister what the cache holds before the buffer is
				// unmapped.
				return errors.Join(fmt.Errorf("%s: %w", regcacheOps[i], err), rc.Flush(nil))
			}
		}
		// Free the memory and allocate it again, as an application's
		// free and malloc of a large block do (munmap, mmap).
		if err := m.d.Free(p.cur); err != nil {
			p.cur = nil
			return err
		}
		p.cur = nil
		nb, err := m.d.Alloc(MemPageable, size)
		if err != nil {
			return err
		}
		p.cur = nb
		m.src.fill(nb.Host)
		nbase := hostAddr(nb.Host)
		chk.SameAddress = chk.SameAddress && nbase == base
		before := rc.Stats()
		if err := step(5, get(nbase, uint64(size))); err != nil {
			return errors.Join(fmt.Errorf("%s: %w", RegcacheStaleGet, err), rc.Flush(nil))
		}
		after := rc.Stats()
		chk.Reregistered = chk.Reregistered && after.Misses == before.Misses+1 && after.Pins == before.Pins+1
		if err := rc.Flush(nil); err != nil {
			return err
		}
		st := rc.Stats()
		chk.Hits += st.HitsFast + st.HitsSlow
		chk.Misses += st.Misses
		chk.Pins += st.Pins
		chk.Unpins += st.Unpins
		chk.Invalidations += st.Invalidations
		for i := range regcacheOps {
			vals[i] = append(vals[i], t[i])
		}
	}
	for i, op := range regcacheOps {
		meas := Measurement{Family: FamilyRegcache, Path: MemPageable.String(), Operation: op, SizeBytes: size,
			Repetitions: 1, Unit: UnitUs, Method: MethodHostTimer, Samples: m.o.Samples, Values: vals[i]}
		meas.Stat = summarize(meas.Values)
		if op == RegcacheStaleGet {
			meas.Regcache = chk
		}
		m.progress(&meas)
		c.add(meas, nil)
	}
	return nil
}

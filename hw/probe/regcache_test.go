package probe

import (
	"bytes"
	"strings"
	"testing"
)

// The regcache family over the fake: a miss registers (the fake charges
// the pin) and a hit does not, so every miss is slower than every hit; the
// Get after free and re-allocation registers again; the JSON and table
// carry the family.
func TestRegcacheFamily(t *testing.T) {
	opts := Options{Sizes: []int64{1 << 20}, Families: []string{FamilyRegcache}}
	rep, err := run(t, NewFake(FakeConfig{}), opts)
	if err != nil {
		t.Fatal(err)
	}
	g := rep.GPUs[0]
	byOp := map[string]map[int64]Measurement{}
	for _, m := range g.Measurements {
		if m.Family != FamilyRegcache {
			t.Fatalf("measurement of family %q", m.Family)
		}
		if byOp[m.Operation] == nil {
			byOp[m.Operation] = map[int64]Measurement{}
		}
		byOp[m.Operation][m.SizeBytes] = m
	}
	for _, size := range []int64{64 << 10, 1 << 20} {
		for _, op := range regcacheOps {
			m, ok := byOp[op][size]
			if !ok {
				t.Fatalf("no %s measurement at %d B", op, size)
			}
			if len(m.Values) != m.Samples || m.Unit != UnitUs {
				t.Errorf("%s %d: %d values of %d samples, unit %s", op, size, len(m.Values), m.Samples, m.Unit)
			}
		}
		for _, miss := range []string{RegcacheMiss, RegcacheMergeMiss, RegcacheStaleGet} {
			for _, hit := range []string{RegcacheHit, RegcacheHitAfterMerge} {
				if byOp[miss][size].Min <= byOp[hit][size].Max {
					t.Errorf("%d B: %s min %v not above %s max %v", size, miss, byOp[miss][size].Min, hit, byOp[hit][size].Max)
				}
			}
		}
		chk := byOp[RegcacheStaleGet][size].Regcache
		if chk == nil || !chk.Reregistered {
			t.Fatalf("%d B: stale check %+v, want re-registered", size, chk)
		}
		n := uint64(byOp[RegcacheMiss][size].Samples)
		// Per sample: misses for the first half, the second half and the
		// new memory; hits for the part and the whole; pins for those
		// three misses; unpins of the first half (merge), the whole
		// (invalidate) and the new memory (flush).
		if chk.Misses != 3*n || chk.Hits != 2*n || chk.Pins != 3*n || chk.Unpins != 3*n || chk.Invalidations < n {
			t.Errorf("%d B: stats %+v over %d samples", size, *chk, n)
		}
	}
	var js, table bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"regcache"`, `"same_address"`, `"reregistered"`, `"operation": "stale_get"`} {
		if !strings.Contains(js.String(), f) {
			t.Errorf("JSON lacks %s", f)
		}
	}
	if !strings.Contains(table.String(), "regcache") {
		t.Errorf("table lacks the family:\n%s", table.String())
	}
}

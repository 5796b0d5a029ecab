package uvm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dmalab/dmalab/sim"
)

// TestEvictionOrder: with room for three 2 MiB chunks, a fourth block
// evicts the least recently used chunk. The driver orders chunks by when
// it last made pages resident in them (PMM's va_block_used list), never
// by GPU accesses, which it does not see.
func TestEvictionOrder(t *testing.T) {
	cases := []struct {
		name string
		// touches are (block, page) GPU reads after blocks 0, 1, 2 each
		// had page 0 read; readMostly duplicates instead of migrating.
		touches    [][2]int
		readMostly bool
		evicted    []string // block:bytes, in order
	}{{
		// Block 0 read again hits: its chunk stays least recent.
		name:    "hits do not count",
		touches: [][2]int{{0, 0}, {3, 0}},
		evicted: []string{"0:65536"},
	}, {
		// A fault migrating page 16 of block 0 moves its chunk to the
		// tail: 1, 2, 0. Then 3 evicts 1, 4 evicts 2, and 1 comes back
		// evicting 0 with its two big pages.
		name:    "migrations count",
		touches: [][2]int{{0, 16}, {3, 0}, {4, 0}, {1, 0}},
		evicted: []string{"1:65536", "2:65536", "0:131072"},
	}, {
		// Read-duplicated pages have a copy in system memory: evicting
		// them copies nothing.
		name:       "duplicates drop without a copy",
		touches:    [][2]int{{3, 0}},
		readMostly: true,
		evicted:    []string{"0:0"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, env := newDriver(t, oneGPU(3*BlockSize))
			a := mustAlloc(t, d, 5*BlockSize)
			onHost(t, d, env, a, 5*BlockSize)
			evs := record(d, KindEviction)
			d.Hooks.Hook(func(e *Event) {
				if r := d.Residency(e.Addr); e.Kind == KindEviction && (!r.Has(CPU) || r.Has(GPU(0))) {
					t.Errorf("evicted page at %v resident on %v", e.Addr, r)
				}
			})
			run(t, env, func(p *sim.Proc) {
				if c.readMostly {
					must(t, d.Advise(p, a.Base, 5*BlockSize, AdviseSetReadMostly, NoProcessor))
				}
				for _, tc := range append([][2]int{{0, 0}, {1, 0}, {2, 0}}, c.touches...) {
					ok(t)(d.GPUAccess(p, 0, a.Base+Addr(tc[0]*BlockSize+tc[1]*PageSize), 4, false))
				}
			})
			var got []string
			for _, e := range *evs {
				got = append(got, fmt.Sprintf("%d:%d", (e.Addr-a.Base)/BlockSize, e.Bytes))
			}
			if !slices.Equal(got, c.evicted) {
				t.Errorf("evicted %v, want %v", got, c.evicted)
			}
			if n := d.ChunksUsed(0); n != 3 {
				t.Errorf("%d chunks used, want 3", n)
			}
			for _, m := range env.moves {
				if c.readMostly && m == "gpu0->cpu 65536" {
					t.Errorf("eviction of duplicates moved data: %v", env.moves)
				}
			}
		})
	}
}

// TestNoManagedMemory: a GPU without managed memory gets nothing: its
// faults map system memory instead (zero-copy).
func TestNoManagedMemory(t *testing.T) {
	d, env := newDriver(t, oneGPU(0))
	a := mustAlloc(t, d, BlockSize)
	var acc Access
	run(t, env, func(p *sim.Proc) {
		acc = ok(t)(d.GPUAccess(p, 0, a.Base, 4096, true))
	})
	if acc.Where != CPU || acc.RemoteBytes != 4096 || !d.MapsRemotely(GPU(0), a.Base) {
		t.Errorf("access %+v", acc)
	}
	if d.ChunksUsed(0) != 0 || len(env.moves) != 0 {
		t.Errorf("chunks %d, moves %v", d.ChunksUsed(0), env.moves)
	}
}

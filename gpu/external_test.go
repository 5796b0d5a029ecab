package gpu

import (
	"errors"
	"testing"

	"github.com/dmalab/dmalab/mem"
	"github.com/dmalab/dmalab/sim"
)

// TestMapExternal: imported pages enter the map as device memory at a
// new address, resolving to those pages; their use costs no device
// memory, Free gives back the address and leaves the pages to their
// owner; an empty range or too few pages is refused.
func TestMapExternal(t *testing.T) {
	for _, name := range []string{"h200-pcie", "jetson-orin"} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, preset(t, name), false)
			pa, err := r.m.Mem.AllocPages(0, 3*mem.PageSize, mem.ZoneNormal)
			if err != nil {
				t.Fatal(err)
			}
			phys := []mem.PhysRange{{Start: pa + 2*mem.PageSize, Size: mem.PageSize}, {Start: pa, Size: 2 * mem.PageSize}}
			tests := []struct {
				phys []mem.PhysRange
				size uint64
				err  error
			}{
				{phys, 3 * mem.PageSize, nil},
				{phys, 0, ErrInvalidValue},
				{phys[:1], 2 * mem.PageSize, ErrInvalidValue},
			}
			r.run(func(p *sim.Proc) {
				for _, tt := range tests {
					free0, _ := r.d.MemGetInfo()
					a, err := r.d.MapExternal(tt.phys, tt.size)
					if !errors.Is(err, tt.err) {
						t.Fatalf("MapExternal(%v, %#x): %v, want %v", tt.phys, tt.size, err, tt.err)
					}
					if err != nil {
						continue
					}
					if free, _ := r.d.MemGetInfo(); free != free0 || a.Type != MemoryDevice || a.Device != 0 {
						t.Errorf("mapping took device memory (%d → %d) or is %v of %d", free0, free, a.Type, a.Device)
					}
					_, got, err := r.sys.Resolve(a.Addr+mem.GPUAddr(mem.PageSize), 2*mem.PageSize)
					if err != nil || len(got) != 1 || got[0].Start != pa || got[0].Size != 2*mem.PageSize {
						t.Errorf("resolve of the 2nd page on: %v, %v; want the second range", got, err)
					}
					if err := r.sys.Free(p, a.Addr); err != nil {
						t.Fatal(err)
					}
					if _, _, err := r.sys.Resolve(a.Addr, 1); err == nil {
						t.Error("still mapped after Free")
					}
					// The address range came back: the next mapping reuses it.
					b, err := r.d.MapExternal(tt.phys, tt.size)
					if err != nil || b.Addr != a.Addr {
						t.Errorf("remap at %v (%v), want %v again", b.Addr, err, a.Addr)
					}
					if err := r.sys.Free(p, b.Addr); err != nil {
						t.Fatal(err)
					}
				}
			})
			if err := r.m.Mem.FreePages(pa, 3*mem.PageSize); err != nil {
				t.Errorf("the pages were not left to their owner: %v", err)
			}
		})
	}
}
